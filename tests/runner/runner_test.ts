/**
 * The runner: queue order, priority, concurrency, settling together, stop
 * conditions and wake-ups, on every store.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import type { QueueEventMap } from "../../src/events.ts";
import { defineJob } from "../../src/job.ts";
import { Queue } from "../../src/queue.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { ManualClock, nextEvent, tempDir, unfinishedCount, waitUntil } from "../_helpers.ts";
import { deafTimesOut, deafToCancel } from "../fixtures/web_workers/jobs.ts";
import { openReader } from "../fixtures/reliability/harness.ts";
import { readLedger } from "../fixtures/reliability/ledger.ts";
import { events, gate } from "../fixtures/runner/harness.ts";
import { storeTest } from "../_stores.ts";

type Detail<K extends keyof QueueEventMap> = QueueEventMap[K];

/** A job that records its payload's label in `order` when it runs. */
function labelJob(name: string, order: string[], queue = "default") {
  return defineJob({
    name,
    queue,
    schema: z.object({ label: z.string() }),
    handle({ label }) {
      order.push(label);
    },
  });
}

storeTest(
  "work() over [high, default] runs every due high job before any default job",
  async (db) => {
    const order: string[] = [];
    const job = labelJob("step", order);
    await using queue = await db.open({ jobs: [job] });
    for (const n of [1, 2, 3]) {
      await queue.dispatch(job, { label: `default-${n}` });
      await queue.dispatch(job, { label: `high-${n}` }, { queue: "high" });
    }
    await workUntilEmpty(queue, { queues: ["high", "default"], concurrency: 1 });
    assert.deepEqual(order, ["high-1", "high-2", "high-3", "default-1", "default-2", "default-3"]);
  },
);

storeTest("one claim of several jobs takes every due high job before a default one", async (db) => {
  const release = gate();
  const job = defineJob({
    name: "batched",
    schema: z.object({ label: z.string() }),
    async handle() {
      await release.promise;
    },
  });
  await using queue = await db.open({ jobs: [job] });
  for (const n of [1, 2, 3]) await queue.dispatch(job, { label: `default-${n}` });
  for (const n of [1, 2]) await queue.dispatch(job, { label: `high-${n}` }, { queue: "high" });
  const worker = queue.work({ queues: ["high", "default"], concurrency: 3, pollMs: 5 });
  const firstClaim = await events<Detail<"job:start">>(worker, "job:start", 3);
  release.resolve();
  await worker.stop();
  assert.deepEqual(firstClaim.map((start) => start.queue).sort(), ["default", "high", "high"]);
});

storeTest("within a queue a higher priority runs first, then the earlier due time", async (db) => {
  const order: string[] = [];
  const job = labelJob("ranked", order);
  const urgent = defineJob({
    name: "urgent",
    schema: z.object({ label: z.string() }),
    priority: 3,
    handle({ label }) {
      order.push(label);
    },
  });
  const clock = new ManualClock();
  await using queue = await db.open({ jobs: [job, urgent], clock });
  await queue.dispatch(job, { label: "due+300" }, { delayMs: 300 });
  await queue.dispatch(job, { label: "due+100" }, { delayMs: 100 });
  await queue.dispatch(job, { label: "priority-5" }, { delayMs: 200, priority: 5 });
  await queue.dispatch(urgent, { label: "job-priority-3" }, { delayMs: 250 });
  clock.advance(50);
  await queue.dispatch(job, { label: "due+50" });
  clock.advance(1_000);
  await workUntilEmpty(queue, { concurrency: 1 });
  assert.deepEqual(order, ["priority-5", "job-priority-3", "due+50", "due+100", "due+300"]);
});

storeTest("a high job dispatched while default jobs are being worked goes next", async (db) => {
  const order: string[] = [];
  const job = defineJob({
    name: "chatty",
    schema: z.object({ label: z.string(), spawn: z.boolean() }),
    async handle({ label, spawn }, ctx) {
      order.push(label);
      if (spawn) await ctx.queue.dispatch(job, { label: "high", spawn: false }, { queue: "high" });
    },
  });
  await using queue = await db.open({ jobs: [job] });
  await queue.dispatch(job, { label: "default-1", spawn: true });
  await queue.dispatch(job, { label: "default-2", spawn: false });
  await queue.dispatch(job, { label: "default-3", spawn: false });
  await workUntilEmpty(queue, { queues: ["high", "default"], concurrency: 1 });
  assert.deepEqual(order, ["default-1", "high", "default-2", "default-3"]);
});

storeTest(
  "a worker given no queues works the registered jobs' queues, default first",
  async (db) => {
    const order: string[] = [];
    await using queue = await db.open({
      jobs: [
        labelJob("z-mail", order, "mail"),
        labelJob("a-plain", order),
        labelJob("b", order, "b"),
      ],
    });
    const worker = queue.work({ pollMs: 5 });
    assert.deepEqual(worker.options.queues, ["default", "b", "mail"]);
    await worker.stop();
  },
);

storeTest("a worker never runs more handlers at once than its concurrency", async (db) => {
  let inFlight = 0;
  let peak = 0;
  const job = defineJob({
    name: "tracked",
    schema: z.number(),
    async handle() {
      peak = Math.max(peak, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, 10));
      inFlight--;
    },
  });
  await using queue = await db.open({ jobs: [job] });
  await queue.dispatchMany(job, Array.from({ length: 15 }, (_, i) => i));
  const stats = await workUntilEmpty(queue, { concurrency: 3 });
  assert.equal(stats.completed, 15);
  assert.equal(peak, 3);
});

const WEB_WORKER_JOBS = new URL("../fixtures/web_workers/jobs.ts", import.meta.url).href;

storeTest(
  "Web Workers: an attempt that timed out or was cancelled keeps its slot until its handler, deaf to its signal, stopped: neither its job's retry nor the next job starts beside it",
  async (db) => {
    await using tmp = await tempDir();
    await using queue = await db.open({ jobs: WEB_WORKER_JOBS });
    using ledger = openReader(tmp.dbPath);
    // A grace near the longest a timer takes: the hold's cap past it must not overflow and fire at
    // once. The handlers end on their own, so no Web Worker is ever terminated here.
    const work = {
      executor: "workers",
      workers: 1,
      concurrency: 1,
      graceMs: 2_147_483_000,
    } as const;
    /** The handlers' runs as the ledger has them: each starts after the one before it ended. */
    const assertOneAtATime = (what: string) => {
      const rows = readLedger(ledger);
      for (const [i, row] of rows.entries()) {
        if (row.outcome !== "start" || i === 0) continue;
        const before = rows[i - 1]!;
        assert.equal(
          before.outcome,
          "success",
          `${what}: job ${row.job_id} attempt ${row.attempt} started while job ${before.job_id} attempt ${before.attempt} ran`,
        );
      }
      return rows;
    };

    // A timeout: the retry, due at once, waits for the first attempt's handler.
    const late = await queue.dispatch(deafTimesOut, { db: tmp.dbPath, ms: 60_000, deafMs: 300 });
    assert.deepEqual(await workUntilEmpty(queue, work), { completed: 0, failed: 1, retried: 1 });
    const afterTimeout = assertOneAtATime("after a timeout");
    assert.deepEqual(
      afterTimeout.map(({ job_id, attempt, outcome }) => [job_id, attempt, outcome]),
      [
        [late, 1, "start"],
        [late, 1, "aborted"],
        [late, 1, "success"],
        [late, 2, "start"],
        [late, 2, "aborted"],
        [late, 2, "success"],
      ],
    );

    // A cancel: the next job waits for the cancelled one's handler, which settles after it ended.
    ledger.exec("DELETE FROM ledger");
    const first = await queue.dispatch(deafToCancel, { db: tmp.dbPath, ms: 60_000, deafMs: 300 });
    const next = await queue.dispatch(deafToCancel, { db: tmp.dbPath, ms: 10, deafMs: 0 });
    const worker = queue.work({ ...work, pollMs: 20 });
    try {
      await waitUntil(() => Promise.resolve(readLedger(ledger).length === 1), {
        what: "the first run",
      });
      assert.equal(await queue.cancel(first), "cancelling");
      await waitUntil(async () => (await queue.result(next))?.state === "completed", {
        what: "the next job to complete",
      });
    } finally {
      await worker.stop();
    }
    const afterCancel = assertOneAtATime("after a cancel");
    assert.deepEqual(afterCancel.map(({ job_id }) => job_id), [first, first, first, next, next]);
    assert.equal((await queue.result(first))?.state, "cancelled");
  },
);

storeTest(
  "Web Workers: a stop whose grace ran out ends an attempt held for its deaf handler at once, whatever the worker's graceMs",
  async (db) => {
    await using tmp = await tempDir();
    await using queue = await db.open({ jobs: WEB_WORKER_JOBS });
    using ledger = openReader(tmp.dbPath);
    const id = await queue.dispatch(deafTimesOut, { db: tmp.dbPath, ms: 60_000, deafMs: 60_000 });
    const worker = queue.work({ executor: "workers", workers: 1, concurrency: 1, graceMs: 60_000 });
    await waitUntil(
      () => Promise.resolve(readLedger(ledger).some((row) => row.outcome === "aborted")),
      { what: "the timeout's abort" },
    );
    // Held for its handler, which stays deaf for a minute: the worker's grace would wait as long.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stopped = await Promise.race([
      worker.stop({ graceMs: 0 }).then(() => true),
      new Promise<false>((resolve) => timer = setTimeout(() => resolve(false), 20_000)),
    ]);
    clearTimeout(timer);
    assert.ok(stopped, "stop({ graceMs: 0 }) still waited for the held attempt after 20 s");
    assert.equal(readLedger(ledger, "outcome = 'start'").length, 1, "its retry never started");
    assert.equal((await queue.result(id))?.state, "pending", "its retry is queued");
  },
);

storeTest("jobs that finish together are settled together, in one transaction", async (db) => {
  const release = gate();
  const job = defineJob({
    name: "grouped",
    schema: z.number(),
    async handle() {
      await release.promise;
    },
  });
  await using queue = await db.open({ jobs: [job] });
  await queue.dispatchMany(job, [1, 2, 3, 4]);
  const worker = queue.work({ concurrency: 4, pollMs: 5 });
  await events(worker, "job:start", 4);
  let leftAtFirstComplete: Promise<number> | undefined;
  let completesAtFirst = -1;
  const completes: number[] = [];
  worker.addEventListener("job:complete", (event) => {
    completes.push(event.detail.id);
    if (completes.length > 1) return;
    // Events are sent after the commit: another connection sees the whole settle.
    leftAtFirstComplete = unfinishedCount(queue);
    queueMicrotask(() => completesAtFirst = completes.length);
  });
  const allDone = events(worker, "job:complete", 4);
  release.resolve();
  await allDone;
  await worker.stop();
  assert.equal(await leftAtFirstComplete, 0);
  assert.equal(completesAtFirst, 4);
});

storeTest(
  "stopWhenEmpty stops once nothing is due now; delayed jobs do not keep it alive",
  async (db) => {
    const order: string[] = [];
    const job = labelJob("soon", order);
    const clock = new ManualClock();
    await using queue = await db.open({ jobs: [job], clock });
    await queue.dispatch(job, { label: "now-1" });
    await queue.dispatch(job, { label: "now-2" });
    await queue.dispatch(job, { label: "later" }, { delayMs: 60_000 });
    const worker = queue.work({ stopWhenEmpty: true, pollMs: 5 });
    await worker.done;
    assert.deepEqual(order, ["now-1", "now-2"]);
    assert.deepEqual(worker.stats, { completed: 2, failed: 0, retried: 0 });
    assert.deepEqual(await queue.counts(), {
      default: { pending: 0, delayed: 1, reserved: 0, failed: 0, running: [] },
    });
  },
);

storeTest(
  "maxJobs starts exactly that many handlers even with concurrency above it",
  async (db) => {
    for (const [maxJobs, concurrency] of [[2, 5], [1, 4]] as const) {
      let starts = 0;
      const job = defineJob({
        name: "limited",
        schema: z.number(),
        async handle() {
          starts++;
          await new Promise((resolve) => setTimeout(resolve, 5));
        },
      });
      await using queue = await db.open({ jobs: [job] });
      await queue.dispatchMany(job, [1, 2, 3, 4, 5, 6]);
      const worker = queue.work({ maxJobs, concurrency, pollMs: 5 });
      await worker.done;
      assert.equal(starts, maxJobs, `maxJobs ${maxJobs}, concurrency ${concurrency}`);
      assert.equal(worker.stats.completed, maxJobs);
      assert.equal((await queue.counts()).default?.pending, 6 - maxJobs);
      await queue.clear(); // the next case opens its queue on the same database
    }
  },
);

storeTest(
  "maxTimeMs stops claiming after that time and lets the running job finish",
  async (db) => {
    const order: string[] = [];
    const held = gate();
    const job = defineJob({
      name: "slow",
      schema: z.object({ label: z.string() }),
      async handle({ label }) {
        order.push(`start ${label}`);
        await held.promise;
        order.push(`end ${label}`);
      },
    });
    await using queue = await db.open({ jobs: [job] });
    await queue.dispatch(job, { label: "a" });
    await queue.dispatch(job, { label: "b" });
    // Long enough that a loaded machine still claims the first job within it.
    const maxTimeMs = 3_000;
    const startedAt = performance.now();
    const worker = queue.work({ maxTimeMs, concurrency: 1, pollMs: 5 });
    await nextEvent(worker, "job:start", () => true, 60_000);
    // The running job outlasts maxTimeMs: when it ends, the worker's time is up.
    const left = startedAt + maxTimeMs + 200 - performance.now();
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, left)));
    held.resolve();
    await worker.done;
    assert.deepEqual(order, ["start a", "end a"]);
    assert.deepEqual(worker.stats, { completed: 1, failed: 0, retried: 0 });
    assert.equal((await queue.counts()).default?.pending, 1);
  },
);

storeTest("maxTimeMs stops an idle worker on its own", async (db) => {
  const job = labelJob("idle", []);
  await using queue = await db.open({ jobs: [job] });
  const worker = queue.work({ maxTimeMs: 50, pollMs: 5 });
  const stopped = await nextEvent<Detail<"worker:stop">>(worker, "worker:stop", () => true, 30_000);
  assert.deepEqual(stopped, { completed: 0, failed: 0, retried: 0, reason: "time" });
  await worker.done;
});

storeTest("a dispatch wakes an idle worker at once instead of at its next poll", async (db) => {
  const order: string[] = [];
  const job = labelJob("woken", order);
  await using queue = await db.open({ jobs: [job] });
  const worker = queue.work({ pollMs: 120_000 });
  // Far within the poll interval: the dispatch, not the poll, woke it.
  const completed = nextEvent(worker, "job:complete", () => true, 60_000);
  await queue.dispatch(job, { label: "x" });
  await completed;
  await worker.stop();
  assert.deepEqual(order, ["x"]);
});

storeTest("a worker's stats count what it completed, failed and retried", async (db) => {
  const job = defineJob({
    name: "mixed",
    schema: z.enum(["ok", "retry", "fail"]),
    maxAttempts: 2,
    backoff: [60_000],
    handle(kind, ctx) {
      if (kind === "retry" && ctx.attempt === 1) throw new Error("once");
      if (kind === "fail") throw new Error("always");
    },
  });
  const clock = new ManualClock();
  await using queue = await db.open({ jobs: [job], clock });
  await queue.dispatchMany(job, ["ok", "ok", "retry", "fail"]);
  const first = await workUntilEmpty(queue, { concurrency: 4 });
  assert.deepEqual(first, { completed: 2, failed: 0, retried: 2 });
  clock.advance(120_000);
  const second = await workUntilEmpty(queue, { concurrency: 4 });
  assert.deepEqual(second, { completed: 1, failed: 1, retried: 0 });
});

const noop = defineJob({ name: "noop", schema: z.number(), handle() {} });

Deno.test("a worker busy with 20,000 due jobs lets timers run", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [noop] });
  const count = 20_000;
  await queue.dispatchMany(noop, Array.from({ length: count }, (_, n) => n));
  let ticks = 0;
  const interval = setInterval(() => ticks++, 5);
  let ticksAtEnd: number;
  const worker = queue.work({
    executor: "isolate",
    concurrency: 32,
    stopWhenEmpty: true,
    pollMs: 5,
  });
  try {
    await worker.done.then(() => {
      ticksAtEnd = ticks;
    });
  } finally {
    clearInterval(interval);
  }
  assert.equal(worker.stats.completed, count);
  assert.equal((await queue.jobs()).total, 0);
  assert.ok(ticksAtEnd! > 0, "the interval ran during the drain");
});
