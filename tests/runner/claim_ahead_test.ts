import assert from "node:assert/strict";
import { DatabaseSync, type StatementSync } from "node:sqlite";
import { z } from "zod";
import type { QueueEventMap } from "../../src/events.ts";
import { defineJob } from "../../src/job.ts";
import { Queue } from "../../src/queue.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { gate, record } from "../fixtures/runner/harness.ts";
import { storeTest } from "../_stores.ts";
import { tempDir, waitUntil, within } from "../_helpers.ts";
import { ClaimAhead } from "../../src/runner/claim_ahead.ts";
import type { ClaimedJob } from "../../src/stores/store.ts";

const JOBS = 20;
/** Enough quick jobs that the running mean forgets a slow first one (JIT, a loaded machine). */
const MANY_JOBS = 300;

storeTest(
  "a worker at concurrency 1 claims quick jobs ahead, leased, and runs each once in order",
  async (db) => {
    const order: number[] = [];
    const reservedSeen: number[] = [];
    const opened: { queue?: { counts(): Promise<Record<string, { reserved: number }>> } } = {};
    const job = defineJob({
      name: "quick",
      schema: z.number(),
      async handle(n) {
        order.push(n);
        if (n >= MANY_JOBS / 2 && n % 10 === 0) {
          reservedSeen.push((await opened.queue!.counts()).default!.reserved);
        }
      },
    });
    await using queue = await db.open({ jobs: [job] });
    opened.queue = queue;
    await queue.dispatchMany(job, Array.from({ length: MANY_JOBS }, (_, n) => n));
    const stats = await workUntilEmpty(queue, { concurrency: 1, timeoutMs: 60_000 });
    assert.equal(stats.completed, MANY_JOBS);
    assert.deepEqual(order, Array.from({ length: MANY_JOBS }, (_, n) => n));
    // Those jobs ran while jobs after them were already claimed: leased, not yet started.
    const most = Math.max(...reservedSeen);
    assert.ok(most > 1, `reserved while they ran: ${reservedSeen.join(", ")}`);
    const left = (await queue.counts()).default;
    assert.deepEqual([left?.pending, left?.reserved, left?.failed], [0, 0, 0]);
  },
);

/** How long the last job claimed ahead waits to see the next group claimed while it runs. */
const NEXT_GROUP_WAIT_MS = 5_000;

Deno.test(
  "SQLite: a worker at concurrency 1 claims the next group while the last job claimed ahead runs, not once it ends",
  async () => {
    await using tmp = await tempDir();
    const alone: number[] = [];
    const opened: { reader?: StatementSync } = {};
    const job = defineJob({
      name: "quick-in-groups",
      schema: z.number(),
      async handle(n, ctx) {
        // The first half teaches the worker that its jobs are quick; one miss is enough to fail.
        if (n < MANY_JOBS / 2 || alone.length > 0) return;
        const deadline = Date.now() + NEXT_GROUP_WAIT_MS;
        for (;;) {
          // Claimed after this one (and not started: one slot), and not claimed at all.
          const { after, unclaimed } = opened.reader!.get(ctx.id) as Record<string, number>;
          if (after! > 0 || unclaimed === 0) return;
          if (Date.now() > deadline) {
            alone.push(n);
            return;
          }
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      },
    });
    await using queue = await Queue.open({ path: tmp.dbPath, jobs: [job] });
    // A connection of its own, read outside any transaction: a cheap look that keeps jobs quick.
    using db = new DatabaseSync(tmp.dbPath, { readOnly: true });
    opened.reader = db.prepare(
      `SELECT COUNT(*) FILTER (WHERE token IS NOT NULL AND id > ?1) AS after,
        COUNT(*) FILTER (WHERE token IS NULL) AS unclaimed FROM jobs`,
    );
    await queue.dispatchMany(job, Array.from({ length: MANY_JOBS }, (_, n) => n));
    const stats = await workUntilEmpty(queue, { concurrency: 1, timeoutMs: 60_000 });
    assert.equal(stats.completed, MANY_JOBS);
    assert.deepEqual(alone, [], "ran as the last job claimed while others waited unclaimed");
  },
);

storeTest(
  "stop() puts jobs claimed ahead back with their attempt given back, and none starts",
  async (db) => {
    const held = gate();
    const third = gate();
    const ran: number[] = [];
    const job = defineJob({
      name: "held-at-3",
      schema: z.number(),
      async handle(n) {
        ran.push(n);
        if (n === 3) {
          third.resolve();
          await held.promise;
        }
      },
    });
    await using queue = await db.open({ jobs: [job] });
    await queue.dispatchMany(job, Array.from({ length: JOBS }, (_, n) => n));
    const worker = queue.work({ concurrency: 1, pollMs: 10, graceMs: 60_000 });
    const started = record<QueueEventMap["job:start"]>(worker, "job:start");
    await third.promise;
    const stopping = worker.stop();
    held.resolve();
    await stopping;
    assert.deepEqual(ran, [0, 1, 2, 3]);
    assert.equal(started.length, 4);
    const counts = (await queue.counts()).default!;
    assert.deepEqual([counts.pending, counts.reserved, counts.failed], [JOBS - 4, 0, 0]);
    // Put back untouched: a later worker runs each at attempt 1.
    const attempts: number[] = [];
    queue.addEventListener("job:start", ({ detail }) => attempts.push(detail.attempt));
    assert.equal(
      (await workUntilEmpty(queue, { concurrency: 1, timeoutMs: 60_000 })).completed,
      JOBS - 4,
    );
    assert.deepEqual([...new Set(attempts)], [1]);
  },
);

storeTest(
  "jobs claimed ahead behind a slow job that outlasts a third of their lease are put back, then each runs once",
  async (db) => {
    const runs = new Map<number, number>();
    const job = defineJob({
      name: "mostly-quick",
      schema: z.number(),
      async handle(n) {
        runs.set(n, (runs.get(n) ?? 0) + 1);
        if (n === 4) await new Promise((resolve) => setTimeout(resolve, 1_500));
      },
    });
    await using queue = await db.open({ jobs: [job] });
    await queue.dispatchMany(job, Array.from({ length: JOBS }, (_, n) => n));
    const failed = record(queue, "job:failed");
    const stats = await workUntilEmpty(queue, {
      concurrency: 1,
      leaseMs: 1_200,
      timeoutMs: 60_000,
    });
    assert.equal(stats.completed, JOBS);
    assert.deepEqual([...runs.values()], Array(JOBS).fill(1), "a job ran twice or not at all");
    assert.deepEqual(failed, []);
  },
);

storeTest(
  "jobs claimed ahead and given back by a stop keep their place: the next worker runs every job in dispatch order",
  async (db) => {
    const order: number[] = [];
    const stopAt = MANY_JOBS / 2;
    const opened: { stop?: () => void } = {};
    const job = defineJob({
      name: "in-order",
      schema: z.number(),
      handle(n) {
        order.push(n);
        if (n === stopAt) opened.stop!();
      },
    });
    await using queue = await db.open({ jobs: [job] });
    await queue.dispatchMany(job, Array.from({ length: MANY_JOBS }, (_, n) => n));
    const first = queue.work({ executor: "isolate", concurrency: 1 });
    const given = record(queue, "job:start");
    opened.stop = () => void first.stop();
    await first.done;
    const ranFirst = order.length;
    // Jobs were held ahead when it stopped, and given back unstarted.
    const heldAhead =
      (await queue.jobs({ limit: 1000 })).jobs.filter((row) =>
        row.lastError?.includes("worker stopped before the attempt began")
      ).length;
    assert.ok(heldAhead > 0, `no job was held ahead at the stop (${given.length} started)`);
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 1, timeoutMs: 60_000 });
    assert.deepEqual(
      order,
      Array.from({ length: MANY_JOBS }, (_, n) => n),
      `the first worker ran ${ranFirst}, ${heldAhead} given back`,
    );
  },
);

storeTest(
  "a batch job is never claimed ahead: a cancel from inside a running member skips every member not started",
  async (db) => {
    const ran: number[] = [];
    const opened: { queue?: { cancelBatch(id: number): Promise<boolean> } } = {};
    const job = defineJob({
      name: "member",
      schema: z.number(),
      async handle(n, ctx) {
        ran.push(n);
        if (n === MANY_JOBS / 2) await opened.queue!.cancelBatch(ctx.batchId!);
      },
    });
    await using queue = await db.open({ jobs: [job] });
    opened.queue = queue;
    // Plain jobs first, so the worker has learned its jobs are quick and claims ahead.
    await queue.dispatchMany(job, Array.from({ length: MANY_JOBS / 2 }, (_, n) => -1 - n));
    const batch = queue.batch("cancelled-midway");
    for (let n = 0; n < MANY_JOBS; n++) batch.push(job, n);
    const id = await batch.dispatch();
    await workUntilEmpty(queue, { concurrency: 1, timeoutMs: 60_000 });
    const members = ran.filter((n) => n >= 0);
    assert.equal(new Set(members).size, members.length, "a member ran twice");
    assert.ok(members.includes(MANY_JOBS / 2), "the cancelling member ran");
    const status = (await queue.batchStatus(id))!;
    // Every member not started when the cancel came was skipped; none is left pending.
    assert.deepEqual(
      [status.skipped, status.pending, status.failed],
      [MANY_JOBS - members.length, 0, 0],
    );
  },
);

Deno.test("ClaimAhead hands out jobs in claim order when more are claimed before it runs dry", () => {
  const ahead = new ClaimAhead({ leaseMs: 60_000, concurrency: 4 });
  const claimed = (ids: number[]) => ids.map((id) => ({ id }) as ClaimedJob);
  const taken: number[] = [];
  const take = (count: number) => {
    for (let n = 0; n < count; n++) taken.push(ahead.take()!.job.id);
  };
  ahead.add(claimed([1, 2, 3, 4, 5]));
  take(3); // past half: the taken ones are dropped, the rest kept in order
  ahead.add(claimed([6, 7]));
  take(1);
  assert.equal(ahead.size, 3);
  ahead.add(claimed([8]));
  take(2);
  assert.deepEqual(ahead.takeAll().map(({ id }) => id), [7, 8]);
  assert.deepEqual(taken, [1, 2, 3, 4, 5, 6]);
  assert.equal(ahead.take(), undefined);
});

/** Slow jobs the urgent job may see start after its dispatch: those held ahead within twice the budget. */
const MOST_SLOW_BEFORE_URGENT = 5;

storeTest(
  "a worker whose jobs turn out slow after one quick run puts back the jobs it claimed ahead past its budget: a job of higher priority dispatched meanwhile starts after a few, not after all of them",
  async (db) => {
    const started: string[] = [];
    const firstSlow = Promise.withResolvers<void>();
    const job = defineJob({
      name: "varied",
      schema: z.object({ label: z.string(), ms: z.number() }),
      async handle({ label, ms }) {
        started.push(label);
        if (label === "slow-0") firstSlow.resolve();
        await new Promise((resolve) => setTimeout(resolve, ms));
      },
    });
    await using queue = await db.open({ jobs: [job] });
    // One quick run teaches the worker that its jobs are quick: its next claim takes 30 ahead.
    await queue.dispatch(job, { label: "quick", ms: 0 });
    await queue.dispatchMany(
      job,
      Array.from({ length: 30 }, (_, i) => ({ label: `slow-${i}`, ms: 50 })),
    );
    const worker = queue.work({ executor: "isolate", concurrency: 1, pollMs: 50 });
    try {
      await within(firstSlow.promise, 30_000, "the first slow job's start");
      await queue.dispatch(job, { label: "urgent", ms: 0 }, { priority: 100 });
      await waitUntil(() => started.includes("urgent"), { what: "the urgent job's start" });
      const slowBefore = started.indexOf("urgent") - started.indexOf("slow-0") - 1;
      assert.ok(
        slowBefore <= MOST_SLOW_BEFORE_URGENT,
        `${slowBefore} slow jobs started after the urgent job was dispatched, before it`,
      );
      await waitUntil(() => started.length === 32, { what: "every job's start" });
    } finally {
      await worker.stop();
    }
    assert.equal(new Set(started).size, 32, `a job ran twice: ${started.join(", ")}`);
  },
);
