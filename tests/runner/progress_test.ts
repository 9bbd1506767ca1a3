/**
 * Per-job progress: `ctx.progress()` reported by a handler, written to the
 * running job at most once a second, shown by `queue.counts()`, on every
 * store. Writes are counted by a trigger the test adds on `UPDATE OF
 * progress`, in each store's own syntax.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { join } from "node:path";
import {
  defineJob,
  type JobContext,
  type Queue,
  type QueueEventMap,
  type RunningJob,
} from "../../mod.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { ManualClock, nextEvent, storedCounts } from "../_helpers.ts";
import { type StoreContext, storeTest } from "../_stores.ts";
import { openGate, openTables, progressing } from "../fixtures/batch/jobs.ts";

const WW_JOBS = new URL("../fixtures/batch/jobs.ts", import.meta.url).href;

/** The statements that log every non-null progress written to `jobs`, with the time in ms. */
const PROGRESS_LOG_SQL = {
  sqlite: [
    "CREATE TABLE progress_log (id INTEGER PRIMARY KEY, job_id INTEGER, progress REAL, at_ms REAL)",
    `CREATE TRIGGER progress_written AFTER UPDATE OF progress ON jobs
      WHEN NEW.progress IS NOT NULL
      BEGIN
        INSERT INTO progress_log (job_id, progress, at_ms)
          VALUES (NEW.id, NEW.progress, julianday('now') * 86400000.0);
      END`,
  ],
  postgres: [
    `CREATE TABLE progress_log (id serial PRIMARY KEY, job_id bigint, progress double precision,
      at_ms double precision)`,
    `CREATE FUNCTION log_progress() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO progress_log (job_id, progress, at_ms)
          VALUES (NEW.id, NEW.progress, extract(epoch FROM clock_timestamp()) * 1000);
        RETURN NEW;
      END $$`,
    `CREATE TRIGGER progress_written AFTER UPDATE OF progress ON jobs
      FOR EACH ROW WHEN (NEW.progress IS NOT NULL) EXECUTE FUNCTION log_progress()`,
  ],
};

/** Logs every non-null progress written to `jobs`, with the time of the write in ms. */
async function logProgressWrites(db: StoreContext): Promise<void> {
  for (const statement of db.pick(PROGRESS_LOG_SQL)) await db.query(statement);
}

async function progressWrites(
  db: StoreContext,
): Promise<{ jobId: number; progress: number; atMs: number }[]> {
  const rows = await db.query<{ job_id: number; progress: number; at_ms: number }>(
    "SELECT job_id, progress, at_ms FROM progress_log ORDER BY id",
  );
  return rows.map((row) => ({ jobId: row.job_id, progress: row.progress, atMs: row.at_ms }));
}

/** The one running job of the default queue once `accept` takes it; fails after `timeoutMs`. */
async function runningJob(
  queue: Queue,
  accept: (job: RunningJob) => boolean,
  timeoutMs = 5_000,
): Promise<RunningJob> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const running = (await queue.counts()).default?.running ?? [];
    if (running.length === 1 && accept(running[0]!)) return running[0]!;
    if (performance.now() > deadline) {
      throw new Error(`No such running job within ${timeoutMs} ms: ${JSON.stringify(running)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A job that runs `steps` in order, each awaited, with the gates the test opens between them. */
function steppedJob(name: string, steps: ((ctx: JobContext) => unknown)[]) {
  return defineJob({
    name,
    schema: z.null(),
    maxAttempts: 3,
    async handle(_payload, ctx) {
      for (const step of steps) await step(ctx);
    },
  });
}

storeTest(
  "ctx.progress() shows in counts().running while the job runs, null until the first write",
  async (db) => {
    const clock = new ManualClock();
    const before = Promise.withResolvers<void>();
    const hold = Promise.withResolvers<void>();
    const job = steppedJob("reporting", [
      () => before.promise,
      (ctx) => ctx.progress(30),
      () => hold.promise,
    ]);
    await using queue = await db.open({ jobs: [job], clock });
    const id = await queue.dispatch(job, null);
    const started = nextEvent<QueueEventMap["job:start"]>(queue, "job:start");
    const worker = queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 10 });
    await started;

    assert.deepEqual((await queue.counts()).default!.running, [{
      id,
      name: "reporting",
      attempt: 1,
      progress: null,
      leasedUntil: new Date(clock.now() + 30_000),
      batchId: null,
    }]);
    before.resolve();
    const reported = await runningJob(queue, (running) => running.progress !== null);
    assert.equal(reported.progress, 30);
    assert.equal(reported.id, id);
    hold.resolve();
    await worker.done;

    assert.deepEqual(await storedCounts(queue), {});
  },
);

storeTest.sql(
  "ctx.progress() is written at most once a second per job, the latest value winning, however often it is reported",
  async (db) => {
    const firstBurstDone = Promise.withResolvers<void>();
    const secondBurst = Promise.withResolvers<void>();
    const finish = Promise.withResolvers<void>();
    const job = steppedJob("chatty", [
      (ctx) => {
        for (let n = 1; n <= 1_000; n++) ctx.progress(n / 10); // ends at 100
      },
      () => firstBurstDone.resolve(),
      () => secondBurst.promise,
      (ctx) => {
        for (let n = 0; n < 1_000; n++) ctx.progress(n / 20);
        ctx.progress(55);
      },
      () => finish.promise,
    ]);
    await using queue = await db.open({ jobs: [job] });
    await logProgressWrites(db);
    const id = await queue.dispatch(job, null);
    const worker = queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 10 });
    await firstBurstDone.promise;

    await runningJob(queue, (running) => running.progress === 100);
    const [first, ...more] = await progressWrites(db);
    assert.deepEqual(more, []);
    assert.deepEqual({ jobId: first!.jobId, progress: first!.progress }, {
      jobId: id,
      progress: 100,
    });

    secondBurst.resolve();
    await runningJob(queue, (running) => running.progress === 55);
    const writes = await progressWrites(db);
    assert.deepEqual(writes.map((write) => write.progress), [100, 55]);
    const gapMs = writes[1]!.atMs - writes[0]!.atMs;
    // The times are the statements' times in the database; the throttle decides on the worker's
    // clock a tick earlier, and a loaded machine delays one tick more than another. A write per
    // report would come within milliseconds, so half the period still tells the two apart.
    assert.ok(gapMs >= 500, `the second write came ${gapMs.toFixed(0)} ms after the first`);

    finish.resolve();
    await worker.done;
    assert.deepEqual((await progressWrites(db)).map((write) => write.progress), [100, 55]);
    assert.deepEqual(await storedCounts(queue), {});
  },
);

storeTest("progress is reset to null when the job is claimed again", async (db) => {
  const firstAttempt = Promise.withResolvers<void>();
  const secondAttempt = Promise.withResolvers<void>();
  const job = steppedJob("twice", [
    async (ctx) => {
      if (ctx.attempt === 1) {
        ctx.progress(70);
        await firstAttempt.promise;
        ctx.release(0);
      } else await secondAttempt.promise;
    },
  ]);
  await using queue = await db.open({ jobs: [job] });
  const id = await queue.dispatch(job, null);
  const worker = queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 10 });
  await runningJob(queue, (running) => running.progress === 70);

  const secondStart = nextEvent<QueueEventMap["job:start"]>(
    queue,
    "job:start",
    (detail) => detail.attempt === 2,
  );
  firstAttempt.resolve();
  await secondStart;

  const [running] = (await queue.counts()).default!.running;
  assert.deepEqual([running!.id, running!.attempt, running!.progress], [id, 2, null]);
  const listed = (await queue.jobs()).jobs.find((job) => job.id === id);
  assert.equal(listed!.progress, null);
  secondAttempt.resolve();
  await worker.done;
  assert.deepEqual(worker.stats, { completed: 1, failed: 0, retried: 1 }); // the release
});

storeTest(
  "ctx.progress() throws a RangeError at once for a value that is not a number from 0 to 100",
  async (db) => {
    const thrown: string[] = [];
    const job = steppedJob("bad reports", [
      (ctx) => {
        for (const value of [-1, 101, NaN, "50", Infinity, null]) {
          assert.throws(() => ctx.progress(value as number), (error: unknown) => {
            thrown.push(`${(error as Error).name}: ${(error as Error).message}`);
            return true;
          });
        }
        ctx.progress(0);
        ctx.progress(100);
      },
    ]);
    await using queue = await db.open({ jobs: [job] });
    await queue.dispatch(job, null);

    assert.deepEqual(await workUntilEmpty(queue, { executor: "isolate" }), {
      completed: 1,
      failed: 0,
      retried: 0,
    });
    const message = "RangeError: ctx.progress: percent must be a number from 0 to 100: got";
    assert.deepEqual(thrown, [
      `${message} -1`,
      `${message} 101`,
      `${message} NaN`,
      `${message} "50"`,
      `${message} Infinity`,
      `${message} null`,
    ]);
  },
);

storeTest.sql(
  "Web Workers: ctx.progress() reported 1 000 times in a Web Worker is written once and shown by counts()",
  async (db) => {
    await using queue = await db.open({ jobs: WW_JOBS });
    const seenPath = join(db.dir, "seen.db");
    using seenDb = openTables(seenPath);
    await logProgressWrites(db);
    const id = await queue.dispatch(progressing, { db: seenPath, label: "p", percent: 42 });
    const worker = queue.work({ workers: 1, stopWhenEmpty: true, pollMs: 10 });

    const running = await runningJob(queue, (job) => job.progress !== null);
    assert.deepEqual([running.id, running.name, running.progress, running.batchId], [
      id,
      "bw.progressing",
      42,
      null,
    ]);
    openGate(seenDb, "p");
    await worker.done;

    assert.equal(worker.options.executor, "workers");
    assert.equal(worker.stats.completed, 1);
    assert.deepEqual((await progressWrites(db)).map((write) => [write.jobId, write.progress]), [
      [id, 42],
    ]);
  },
);
