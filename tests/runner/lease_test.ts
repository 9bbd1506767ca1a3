import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { z } from "zod";
import type { QueueEventMap } from "../../src/events.ts";
import { defineJob, type JobContext } from "../../src/job.ts";
import { Queue } from "../../src/queue.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { ManualClock, nextEvent, storedCounts, tempDir, waitUntil } from "../_helpers.ts";
import { gate, record } from "../fixtures/runner/harness.ts";

type Detail<K extends keyof QueueEventMap> = QueueEventMap[K];

/**
 * A worker that plays dead: its lease is long in real time, so it never
 * renews during a test, while the shared manual clock is moved past it.
 */
const DEAD_WORKER = { leaseMs: 60_000, pollMs: 10 } as const;

/**
 * Waits until the worker holding the jobs of `dbPath` has recorded that
 * their handlers began: only then does its death charge them a crash.
 */
async function handlersBegun(dbPath: string): Promise<void> {
  const db = new DatabaseSync(dbPath);
  try {
    await waitUntil(() => {
      const row = db.prepare(
        `SELECT COUNT(*) AS leased, SUM(begun) AS begun FROM jobs
        WHERE token IS NOT NULL AND claimed_ahead = 0`,
      ).get() as { leased: number; begun: number | null };
      return Promise.resolve(row.leased > 0 && row.begun === row.leased);
    }, { what: "the handlers' begin marks" });
  } finally {
    db.close();
  }
}

/** Every job event a queue handle sends, as `type id`. */
function jobEvents(queue: Queue): string[] {
  const seen: string[] = [];
  for (const type of ["job:complete", "job:retry", "job:failed"]) {
    queue.addEventListener(type, (event) => {
      seen.push(`${type} ${(event as CustomEvent<Detail<"job:start">>).detail.id}`);
    });
  }
  return seen;
}

Deno.test("a job whose worker died is recovered after its lease, and the dead worker's late settle is fenced", async () => {
  await using dir = await tempDir();
  const clock = new ManualClock();
  const firstAttempt = gate();
  const attempts: number[] = [];
  const job = defineJob({
    name: "recoverable",
    schema: z.null(),
    async handle(_payload, ctx) {
      attempts.push(ctx.attempt);
      if (ctx.attempt === 1) await firstAttempt.promise;
    },
  });
  await using queueA = await Queue.open({ path: dir.dbPath, jobs: [job], clock });
  await using queueB = await Queue.open({ path: dir.dbPath, jobs: [job], clock });
  const fromA = jobEvents(queueA);
  const fromB = jobEvents(queueB);
  const id = await queueA.dispatch(job, null);

  const workerA = queueA.work(DEAD_WORKER);
  await nextEvent(workerA, "job:start");
  await handlersBegun(dir.dbPath);
  assert.deepEqual((await queueB.counts()).default?.reserved, 1);

  clock.advance(DEAD_WORKER.leaseMs); // A's lease runs out: A counts as dead
  const workerB = queueB.work(DEAD_WORKER);
  const startB = await nextEvent<Detail<"job:start">>(workerB, "job:start");
  assert.deepEqual(startB, { id, name: "recoverable", queue: "default", attempt: 2 });
  await nextEvent(workerB, "job:complete");

  firstAttempt.resolve(); // A's handler finally returns
  await workerA.stop();
  await workerB.stop();

  assert.deepEqual(attempts, [1, 2]);
  assert.deepEqual(fromB, [`job:complete ${id}`]);
  assert.deepEqual(fromA, []);
  assert.deepEqual(workerA.stats, { completed: 0, failed: 0, retried: 0 });
  assert.deepEqual(workerB.stats, { completed: 1, failed: 0, retried: 0 });
  assert.deepEqual(await storedCounts(queueA), {});
  assert.deepEqual(await queueA.failed(), []);
});

Deno.test("a dead worker's late failure does not overwrite the job another worker reclaimed", async () => {
  await using dir = await tempDir();
  const clock = new ManualClock();
  const firstAttempt = gate();
  const secondAttempt = gate();
  const handle = async (_payload: null, ctx: JobContext) => {
    if (ctx.attempt === 1) {
      await firstAttempt.promise;
      throw new Error("stale worker failed");
    }
    await secondAttempt.promise;
  };
  // A fails its attempt for good; B's definition of the same job leaves room for a second one.
  const job = defineJob({ name: "late-failure", schema: z.null(), maxAttempts: 1, handle });
  const roomy = defineJob({ name: "late-failure", schema: z.null(), maxAttempts: 3, handle });
  await using queueA = await Queue.open({ path: dir.dbPath, jobs: [job], clock });
  await using queueB = await Queue.open({ path: dir.dbPath, jobs: [roomy], clock });
  const fromA = jobEvents(queueA);
  await queueA.dispatch(job, null);
  const workerA = queueA.work(DEAD_WORKER);
  await nextEvent(workerA, "job:start");
  await handlersBegun(dir.dbPath);
  clock.advance(DEAD_WORKER.leaseMs);
  const workerB = queueB.work(DEAD_WORKER);
  await nextEvent(workerB, "job:start");

  firstAttempt.resolve(); // A fails late, while B holds the job
  await workerA.stop();
  assert.deepEqual(fromA, []);
  assert.deepEqual(await queueB.failed(), []);
  assert.equal((await queueB.counts()).default?.reserved, 1);

  secondAttempt.resolve();
  await workerB.stop();
  assert.deepEqual(workerB.stats, { completed: 1, failed: 0, retried: 0 });
  assert.deepEqual(await storedCounts(queueB), {});
});

Deno.test("a live worker that finds its lease taken aborts its handler and reports a queue:error", async () => {
  await using dir = await tempDir();
  const clock = new ManualClock();
  let firstSignal: AbortSignal | undefined;
  const job = defineJob({
    name: "taken",
    schema: z.null(),
    async handle(_payload, ctx) {
      if (ctx.attempt > 1) return;
      firstSignal = ctx.signal;
      await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
    },
  });
  await using queueA = await Queue.open({ path: dir.dbPath, jobs: [job], clock });
  await using queueB = await Queue.open({ path: dir.dbPath, jobs: [job], clock });
  const fromA = jobEvents(queueA);
  const id = await queueA.dispatch(job, null);
  const workerA = queueA.work({ leaseMs: 300, pollMs: 10 }); // renews every 100 ms
  await nextEvent(workerA, "job:start");
  await handlersBegun(dir.dbPath);
  const lost = nextEvent<Detail<"queue:error">>(queueA, "queue:error");
  clock.advance(60_000);
  const workerB = queueB.work({ leaseMs: 60_000, pollMs: 10 }); // claims before A's next renewal
  await nextEvent(workerB, "job:complete");
  const { error, during } = await lost;
  await workerA.stop();
  await workerB.stop();
  assert.equal(during, "lease renewal");
  assert.match(error.message, new RegExp(`Lost the lease of job ${id}`));
  assert.ok(firstSignal?.aborted);
  assert.equal(firstSignal.reason, error);
  assert.deepEqual(fromA, []);
  assert.deepEqual(workerA.stats, { completed: 0, failed: 0, retried: 0 });
  assert.deepEqual(await storedCounts(queueA), {});
});

Deno.test("after maxCrashes recoveries the job fails without running, saying its worker crashed", async () => {
  await using dir = await tempDir();
  const clock = new ManualClock();
  const held: PromiseWithResolvers<void>[] = [];
  let starts = 0;
  const job = defineJob({
    name: "crashy",
    schema: z.null(),
    async handle() {
      starts++;
      const release = gate();
      held.push(release);
      await release.promise;
    },
  });
  await using queueA = await Queue.open({ path: dir.dbPath, jobs: [job], clock });
  await using queueB = await Queue.open({ path: dir.dbPath, jobs: [job], clock });
  const id = await queueA.dispatch(job, null);

  const workerA = queueA.work(DEAD_WORKER);
  await nextEvent(workerA, "job:start");
  await handlersBegun(dir.dbPath);
  clock.advance(DEAD_WORKER.leaseMs);
  const workerB = queueB.work(DEAD_WORKER);
  await nextEvent(workerB, "job:start");
  await handlersBegun(dir.dbPath);
  clock.advance(DEAD_WORKER.leaseMs);

  const failures = record<Detail<"job:failed">>(queueA, "job:failed");
  const stats = await workUntilEmpty(queueA);
  for (const release of held) release.resolve();
  await workerA.stop();
  await workerB.stop();

  assert.deepEqual(stats, { completed: 0, failed: 1, retried: 0 });
  assert.equal(starts, 2);
  assert.equal(failures[0]?.id, id);
  const failed = await queueA.failedJob(id);
  assert.match(failed?.error ?? "", /worker crashed while running it: 2 of 2 crashes allowed$/);
  assert.equal(failed?.crashes, 2);
  assert.equal(failed?.attempts, 2);
  assert.deepEqual(workerA.stats, { completed: 0, failed: 0, retried: 0 });
  assert.deepEqual(workerB.stats, { completed: 0, failed: 0, retried: 0 });
});

Deno.test("a job whose last attempt died with its worker fails at pickup: worker died during its last attempt", async () => {
  await using dir = await tempDir();
  const clock = new ManualClock();
  const held = gate();
  let starts = 0;
  const job = defineJob({
    name: "one-shot",
    schema: z.null(),
    maxAttempts: 1,
    async handle() {
      starts++;
      await held.promise;
    },
  });
  await using queueA = await Queue.open({ path: dir.dbPath, jobs: [job], clock });
  await using queueB = await Queue.open({ path: dir.dbPath, jobs: [job], clock });
  const id = await queueA.dispatch(job, null);
  const workerA = queueA.work(DEAD_WORKER);
  await nextEvent(workerA, "job:start");
  await handlersBegun(dir.dbPath);
  clock.advance(DEAD_WORKER.leaseMs);
  const stats = await workUntilEmpty(queueB);
  held.resolve();
  await workerA.stop();
  assert.deepEqual(stats, { completed: 0, failed: 1, retried: 0 });
  assert.equal(starts, 1);
  const failed = await queueB.failedJob(id);
  assert.match(failed?.error ?? "", /attempts spent: worker died during its last attempt$/);
  assert.equal(failed?.attempts, 1);
  assert.equal(failed?.crashes, 1);
});

Deno.test("R06: a job running past its lease is not reclaimed while its worker lives (lease renewed)", async () => {
  await using dir = await tempDir();
  const leaseMs = 300;
  const jobMs = 1_000;
  const job = defineJob({
    name: "long",
    schema: z.null(),
    timeoutMs: 5_000,
    async handle() {
      await new Promise((resolve) => setTimeout(resolve, jobMs)); // the work itself
    },
  });
  await using queueA = await Queue.open({ path: dir.dbPath, jobs: [job] });
  await using queueB = await Queue.open({ path: dir.dbPath, jobs: [job] });
  const starts: Detail<"job:start">[] = [];
  queueB.addEventListener("job:start", (event) => starts.push(event.detail));
  queueA.addEventListener("job:start", (event) => starts.push(event.detail));
  const id = await queueA.dispatch(job, null);

  const workerA = queueA.work({ leaseMs, pollMs: 10 });
  const workerB = queueB.work({ leaseMs, pollMs: 10 });
  // Either worker may claim it first; the other must not take it over while it runs.
  const completed = new Promise<void>((resolve) => {
    workerA.addEventListener("job:complete", () => resolve(), { once: true });
    workerB.addEventListener("job:complete", () => resolve(), { once: true });
  });

  // Watch the lease from a third connection while the job runs.
  const watcher = new DatabaseSync(dir.dbPath);
  const leaseOf = watcher.prepare("SELECT available_at FROM jobs WHERE id = ?");
  let lastLease = 0;
  let lastChange = performance.now();
  let maxGapMs = 0;
  let minHeadroomMs = Infinity;
  let renewals = -1;
  const sampler = setInterval(() => {
    const row = leaseOf.get(id) as { available_at: number } | undefined;
    if (row === undefined) return;
    minHeadroomMs = Math.min(minHeadroomMs, row.available_at - Date.now());
    if (row.available_at !== lastLease) {
      const now = performance.now();
      if (renewals >= 0) maxGapMs = Math.max(maxGapMs, now - lastChange);
      lastLease = row.available_at;
      lastChange = now;
      renewals++;
    }
  }, 10);
  try {
    await completed;
  } finally {
    clearInterval(sampler);
    watcher.close();
    await workerA.stop();
    await workerB.stop();
  }
  console.log(
    `R06: ${jobMs} ms job, ${leaseMs} ms lease: ${starts.length} start(s) across 2 workers, ` +
      `${renewals} renewals seen, max renewal gap ${Math.round(maxGapMs)} ms, ` +
      `min lease headroom ${Math.round(minHeadroomMs)} ms`,
  );
  assert.equal(starts.length, 1);
  const stats = [workerA.stats, workerB.stats];
  assert.deepEqual(
    stats.map(({ completed, failed, retried }) => completed + failed + retried).sort(),
    [0, 1],
    "one worker ran it once, the other never",
  );
  assert.equal(stats[0]!.completed + stats[1]!.completed, 1);
  assert.ok(renewals >= 2, `only ${renewals} renewals seen`);
  assert.ok(minHeadroomMs > 0, `the lease ran out: headroom ${minHeadroomMs} ms`);
});
