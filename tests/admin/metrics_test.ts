/**
 * The metrics a queue reads from its rollup: the p95 estimate, the window,
 * the sums, and what a worker's settles record (runs, retries, failures,
 * runtimes, waits).
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, PermanentError, Queue } from "../../mod.ts";
import { estimateQuantile, metricsWindow, summarizeMetrics } from "../../src/admin/metrics.ts";
import { type MetricsRow, RUNTIME_BUCKETS_MS, runtimeBucket } from "../../src/stores/store.ts";
import { ManualClock } from "../_helpers.ts";
import { storeTest } from "../_stores.ts";

const NOON = Date.UTC(2026, 0, 1, 12, 0, 0);
const MINUTE = 60_000;

/** A histogram with `counts` at the given bucket indexes. */
function buckets(counts: Record<number, number>): number[] {
  return Array.from({ length: RUNTIME_BUCKETS_MS.length + 1 }, (_, index) => counts[index] ?? 0);
}

Deno.test("runtimeBucket() puts a run in the first bucket whose bound it does not exceed", () => {
  assert.deepEqual(
    [0, 1, 1.01, 2, 50, 51, 300_000, 300_001, Infinity].map(runtimeBucket),
    [0, 0, 1, 1, 5, 6, 15, 16, 16],
  );
  assert.equal(RUNTIME_BUCKETS_MS.length, 16);
});

Deno.test("estimateQuantile() places the rank linearly within its bucket; the last bucket reads as the last bound", () => {
  assert.equal(estimateQuantile(buckets({}), 0.95), null);
  assert.equal(estimateQuantile(buckets({ 0: 100 }), 0.95), 0.95); // rank 95 of 100 in [0, 1]
  assert.equal(estimateQuantile(buckets({ 5: 19, 9: 1 }), 0.95), 50); // rank 19: the last in (20, 50]
  assert.equal(estimateQuantile(buckets({ 5: 10, 9: 10 }), 0.95), 500 + 500 * 9 / 10); // rank 19
  assert.equal(estimateQuantile(buckets({ 16: 3 }), 0.95), 300_000);
  assert.equal(estimateQuantile(buckets({ 2: 1 }), 0.5), 5); // rank 1 of 1 in (2, 5]
});

Deno.test("metricsWindow() covers whole minutes ending with the current one, 1 minute to 7 days", () => {
  assert.deepEqual(metricsWindow(NOON + 30_000, {}), {
    since: NOON + MINUTE - 60 * MINUTE,
    until: NOON + MINUTE,
    carried: false,
  });
  assert.deepEqual(metricsWindow(NOON, { windowMs: 90_000 }), {
    since: NOON + MINUTE - 2 * MINUTE,
    until: NOON + MINUTE,
    carried: false,
  });
  // Everything counted: the minutes of the last 7 days, and the totals carried from pruned ones.
  assert.deepEqual(metricsWindow(NOON, { windowMs: Infinity }), {
    since: NOON + MINUTE - 7 * 24 * 60 * MINUTE,
    until: NOON + MINUTE,
    carried: true,
  });
  for (const windowMs of [0, 59_999, 7 * 24 * 60 * MINUTE + 1, Number.NaN, -Infinity]) {
    assert.throws(
      () => metricsWindow(NOON, { windowMs }),
      (error) =>
        error instanceof RangeError &&
        error.message ===
          `metrics: windowMs must be a number of ms from 60000 (1 minute) to 604800000 (7 days), or Infinity for everything counted: got ${windowMs}`,
    );
  }
});

Deno.test("summarizeMetrics() fills every minute, and adds up per queue and per job type", () => {
  const row = (minute: number, queue: string, name: string, fields: Partial<MetricsRow>) => ({
    minute,
    queue,
    name,
    completed: 0,
    failed: 0,
    retried: 0,
    expired: 0,
    runtimeMs: 0,
    waitMs: 0,
    runtimeBuckets: buckets({}),
    ...fields,
  });
  const window = { since: NOON - 2 * MINUTE, until: NOON + MINUTE, carried: false };
  const summary = summarizeMetrics([
    row(NOON - 2 * MINUTE, "mail", "send", {
      completed: 2,
      runtimeMs: 30,
      waitMs: 100,
      runtimeBuckets: buckets({ 3: 2 }),
    }),
    row(NOON, "mail", "send", {
      failed: 1,
      runtimeMs: 70,
      waitMs: 0,
      runtimeBuckets: buckets({ 6: 1 }),
    }),
    row(NOON, "a", "z", { retried: 4 }),
  ], window);
  assert.deepEqual(
    summary.perMinute.map((m) => [m.minute.getTime() - NOON, m.completed, m.failed, m.retried]),
    [
      [-2 * MINUTE, 2, 0, 0],
      [-MINUTE, 0, 0, 0],
      [0, 0, 1, 4],
    ],
  );
  assert.deepEqual(summary.byQueue, {
    a: {
      completed: 0,
      failed: 0,
      retried: 4,
      expired: 0,
      runs: 0,
      averageRuntimeMs: null,
      p95RuntimeMs: null,
      averageWaitMs: null,
    },
    mail: {
      completed: 2,
      failed: 1,
      retried: 0,
      expired: 0,
      runs: 3,
      averageRuntimeMs: 100 / 3,
      p95RuntimeMs: 100, // rank 3 of 3: the one run in (50, 100]
      averageWaitMs: 100 / 3,
    },
  });
  assert.deepEqual(summary.byJob.map((type) => `${type.queue}/${type.name}`), ["a/z", "mail/send"]);
  assert.deepEqual([summary.since.getTime(), summary.until.getTime()], [
    window.since,
    window.until,
  ]);
});

let releasedOnce = false;
let flakyOnce = false;
const jobs = [
  defineJob({
    name: "quick",
    schema: z.null(),
    async handle() {
      await new Promise((resolve) => setTimeout(resolve, 20));
    },
  }),
  defineJob({
    name: "flaky",
    schema: z.null(),
    backoff: [0],
    handle() {
      if (!flakyOnce) {
        flakyOnce = true;
        throw new Error("first try fails");
      }
    },
  }),
  defineJob({
    name: "released",
    schema: z.null(),
    handle(_, ctx) {
      if (!releasedOnce) {
        releasedOnce = true;
        ctx.release(0);
      }
    },
  }),
  defineJob({
    name: "doomed",
    schema: z.null(),
    handle() {
      throw new PermanentError("no");
    },
  }),
] as const;

Deno.test("a worker's settles record completions, retries after errors and failures with their runtime and wait; releases and put-backs count nothing", async () => {
  const clock = new ManualClock(NOON);
  await using queue = await Queue.open({ path: ":memory:", jobs: [...jobs], clock });
  for (const job of jobs) await queue.dispatch(job, null);
  clock.advance(750); // every job has waited 750 ms when the worker claims it
  await queue.work({ executor: "isolate", concurrency: 4, stopWhenEmpty: true, pollMs: 5 }).done;

  const metrics = await queue.metrics({ windowMs: MINUTE });
  assert.deepEqual(
    metrics.perMinute.map((m) => [m.minute.getTime(), m.completed, m.failed, m.retried]),
    [[NOON, 3, 1, 1]],
  );
  const byName = Object.fromEntries(metrics.byJob.map((type) => [type.name, type]));
  const counts = (name: string) => {
    const { completed, failed, retried, runs } = byName[name]!;
    return { completed, failed, retried, runs };
  };
  assert.deepEqual(counts("quick"), { completed: 1, failed: 0, retried: 0, runs: 1 });
  assert.deepEqual(counts("flaky"), { completed: 1, failed: 0, retried: 1, runs: 2 });
  assert.deepEqual(counts("released"), { completed: 1, failed: 0, retried: 0, runs: 1 });
  assert.deepEqual(counts("doomed"), { completed: 0, failed: 1, retried: 0, runs: 1 });
  assert.equal(byName.quick!.averageWaitMs, 750);
  assert.equal(byName.doomed!.averageWaitMs, 750);
  assert.equal(byName.flaky!.averageWaitMs, 750 / 2, "its retry was claimed the moment it was due");
  const quick = byName.quick!.averageRuntimeMs!;
  assert.ok(quick >= 15, `quick ran ${quick} ms`);
  assert.ok(byName.quick!.p95RuntimeMs! > 10);
  assert.deepEqual(Object.keys(metrics.byQueue), ["default"]);
  assert.equal(metrics.byQueue.default!.runs, 5);
  await assert.rejects(queue.metrics({ windowMs: 10 }), RangeError);
});

storeTest.sql(
  "worker processes settle into rows of their own shard, and the metrics read adds the shards up",
  async (db) => {
    const clock = new ManualClock(NOON);
    const quick = jobs[0];
    // Four queues are four stores, each drawing its shard: all four alike is one chance in 1024³.
    const queues = await Promise.all([1, 2, 3, 4].map(() => db.open({ jobs: [quick], clock })));
    for (const [index, queue] of queues.entries()) {
      await queue.dispatchMany(quick, Array.from({ length: index + 1 }, () => null));
      await queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 5 }).done;
    }
    const rows = await db.query<{ shard: number; completed: number }>(
      "SELECT shard, completed FROM job_metrics",
    );
    const shards = new Set(rows.map((row) => Number(row.shard)));
    assert.equal(shards.size, rows.length, "one row per shard of the minute, queue and name");
    assert.ok(rows.length > 1, `the four stores added to ${rows.length} row(s)`);
    assert.equal(rows.reduce((sum, row) => sum + Number(row.completed), 0), 10);
    const metrics = await queues[0]!.metrics({ windowMs: MINUTE });
    assert.deepEqual(metrics.perMinute.map((m) => [m.minute.getTime(), m.completed]), [[NOON, 10]]);
    assert.equal(metrics.byJob.length, 1);
    assert.equal(metrics.byJob[0]!.completed, 10);
    assert.equal(metrics.byJob[0]!.runs, 10);
  },
);
