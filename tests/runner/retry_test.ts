/**
 * Retries: backoff, attempts, retryUntil, release, the failed hook and R09's
 * spread of retries, on every store.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { PermanentError } from "../../src/errors.ts";
import type { QueueEventMap } from "../../src/events.ts";
import { defineJob, type FailedJobContext, type JobContext } from "../../src/job.ts";
import { Queue } from "../../src/queue.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { ManualClock, nextEvent, storedCounts, unfinishedCount } from "../_helpers.ts";
import { record, seededRandom } from "../fixtures/runner/harness.ts";
import { orQueueError, storeTest } from "../_stores.ts";

type Detail<K extends keyof QueueEventMap> = QueueEventMap[K];

const counts = (pending: number, delayed: number, failed: number) => ({
  default: { pending, delayed, reserved: 0, failed, running: [] },
});

/** A job that always throws, with the given retry settings. */
function failing(
  settings: { maxAttempts?: number; backoff?: number[] | ((attempt: number) => number) } = {},
) {
  return defineJob({
    name: "failing",
    schema: z.object({ n: z.number() }),
    jitter: 0,
    ...settings,
    handle({ n }, ctx) {
      throw new Error(`boom ${n} attempt ${ctx.attempt}`);
    },
  });
}

storeTest("a failed attempt waits exactly its backoff before the next one", async (db) => {
  const job = failing({ maxAttempts: 3, backoff: [1_000, 5_000] });
  const clock = new ManualClock();
  await using queue = await db.open({ jobs: [job], clock });
  await queue.dispatch(job, { n: 1 });
  const retries = record<Detail<"job:retry">>(queue, "job:retry");

  assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 0, retried: 1 });
  assert.deepEqual(await queue.counts(), counts(0, 1, 0));
  assert.equal(retries[0]!.delayMs, 1_000);
  assert.equal(retries[0]!.error?.message, "boom 1 attempt 1");

  clock.advance(999);
  assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 0, retried: 0 });
  clock.advance(1);
  assert.deepEqual(await queue.counts(), counts(1, 0, 0));
  assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 0, retried: 1 });
  assert.equal(retries[1]!.delayMs, 5_000);

  clock.advance(4_999);
  assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 0, retried: 0 });
  clock.advance(1);
  assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 1, retried: 0 });
  assert.deepEqual(await queue.counts(), counts(0, 0, 1));
});

storeTest(
  "an array backoff repeats its last delay; a function gets the failed attempt",
  async (db) => {
    const seen: number[] = [];
    const cases = [
      { backoff: [100, 300], expected: [100, 300, 300, 300] },
      {
        backoff: (attempt: number) => {
          seen.push(attempt);
          return attempt * 250;
        },
        expected: [250, 500, 750, 1_000],
      },
    ];
    for (const { backoff, expected } of cases) {
      const job = failing({ maxAttempts: 5, backoff });
      const clock = new ManualClock();
      await using queue = await db.open({ jobs: [job], clock });
      await queue.dispatch(job, { n: 1 });
      const retries = record<Detail<"job:retry">>(queue, "job:retry");
      for (let attempt = 1; attempt <= 5; attempt++) {
        await workUntilEmpty(queue);
        clock.advance(retries.at(-1)?.delayMs ?? 0);
      }
      assert.deepEqual(retries.map((retry) => retry.delayMs), expected);
      assert.equal((await queue.failed()).length, 1);
      await queue.flushFailed(); // the next case opens its queue on the same database
    }
    assert.deepEqual(seen, [1, 2, 3, 4]);
  },
);

storeTest("without a backoff a job waits 10 s times the attempt that failed", async (db) => {
  const job = failing({ maxAttempts: 3 });
  const clock = new ManualClock();
  await using queue = await db.open({ jobs: [job], clock });
  await queue.dispatch(job, { n: 1 });
  const retries = record<Detail<"job:retry">>(queue, "job:retry");
  await workUntilEmpty(queue);
  clock.advance(10_000);
  await workUntilEmpty(queue);
  assert.deepEqual(retries.map((retry) => retry.delayMs), [10_000, 20_000]);
  clock.advance(19_999);
  assert.equal((await workUntilEmpty(queue)).failed, 0);
});

storeTest(
  "a job that spends maxAttempts moves to the failed jobs with its attempts and error",
  async (db) => {
    const job = failing({ maxAttempts: 2, backoff: [1_000] });
    const clock = new ManualClock();
    await using queue = await db.open({ jobs: [job], clock });
    const createdAt = clock.now();
    const id = await queue.dispatch(job, { n: 4 }, { queue: "mail" });
    await workUntilEmpty(queue, { queues: ["mail"] });
    clock.advance(1_000);
    await workUntilEmpty(queue, { queues: ["mail"] });
    const failed = await queue.failedJob(id);
    assert.ok(failed !== null);
    assert.equal(failed.queue, "mail");
    assert.equal(failed.name, "failing");
    assert.equal(failed.payload, '{"n":4}');
    assert.equal(failed.attempts, 2);
    assert.equal(failed.crashes, 0);
    assert.equal(failed.error, "Error: boom 4 attempt 2");
    assert.match(failed.stack ?? "", /boom 4 attempt 2/);
    assert.equal(failed.createdAt.getTime(), createdAt);
    assert.equal(failed.failedAt.getTime(), clock.now());
    assert.deepEqual(await storedCounts(queue), {
      mail: { pending: 0, delayed: 0, reserved: 0, failed: 1, running: [] },
    });
  },
);

storeTest("a PermanentError fails the job at once, attempts left or not", async (db) => {
  let starts = 0;
  const job = defineJob({
    name: "declined",
    schema: z.null(),
    maxAttempts: 5,
    handle() {
      starts++;
      throw new PermanentError("card declined");
    },
  });
  await using queue = await db.open({ jobs: [job] });
  await queue.dispatch(job, null);
  assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 1, retried: 0 });
  const [failed] = await queue.failed();
  assert.equal(starts, 1);
  assert.equal(failed?.attempts, 1);
  assert.equal(failed?.error, "PermanentError: card declined");
});

storeTest("once retryUntil has passed a failure is final, even with attempts left", async (db) => {
  const clock = new ManualClock();
  let starts = 0;
  const job = defineJob({
    name: "deadline",
    schema: z.null(),
    maxAttempts: 10,
    backoff: [1_000],
    jitter: 0,
    retryUntil: (dispatchedAt) => new Date(dispatchedAt.getTime() + 5_000),
    handle(_payload, ctx) {
      starts++;
      if (ctx.attempt === 2) clock.advance(4_000); // this attempt ends past the deadline
      throw new Error(`late attempt ${ctx.attempt}`);
    },
  });
  await using queue = await db.open({ jobs: [job], clock });
  await queue.dispatch(job, null);
  await workUntilEmpty(queue);
  clock.advance(1_000);
  await workUntilEmpty(queue);
  const [failed] = await queue.failed();
  assert.equal(starts, 2);
  assert.equal(failed?.attempts, 2);
  assert.equal(failed?.error, "Error: late attempt 2");
});

storeTest("a retry due after retryUntil fails at pickup without running", async (db) => {
  const clock = new ManualClock();
  let starts = 0;
  const job = defineJob({
    name: "deadline-pickup",
    schema: z.null(),
    maxAttempts: 10,
    backoff: [10_000],
    jitter: 0,
    retryUntil: (dispatchedAt) => new Date(dispatchedAt.getTime() + 5_000),
    handle() {
      starts++;
      throw new Error("down");
    },
  });
  await using queue = await db.open({ jobs: [job], clock });
  await queue.dispatch(job, null);
  await workUntilEmpty(queue);
  clock.advance(10_000);
  assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 1, retried: 0 });
  const [failed] = await queue.failed();
  assert.equal(starts, 1);
  assert.equal(failed?.attempts, 1);
  assert.match(failed?.error ?? "", /retry deadline passed at 2026-01-01T00:00:05\.000Z$/);
});

storeTest(
  "ctx.release(delayMs) puts the job back without failing it and counts an attempt",
  async (db) => {
    const attempts: number[] = [];
    const job = defineJob({
      name: "later",
      schema: z.null(),
      handle(_payload, ctx) {
        attempts.push(ctx.attempt);
        if (ctx.attempt === 1) ctx.release(2_000);
      },
    });
    const clock = new ManualClock();
    await using queue = await db.open({ jobs: [job], clock });
    const id = await queue.dispatch(job, null);
    const retries = record<Detail<"job:retry">>(queue, "job:retry");
    assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 0, retried: 1 });
    assert.deepEqual(retries, [{
      id,
      name: "later",
      queue: "default",
      attempt: 1,
      error: null,
      delayMs: 2_000,
    }]);
    assert.deepEqual(await queue.counts(), counts(0, 1, 0));
    clock.advance(1_999);
    assert.equal((await workUntilEmpty(queue)).completed, 0);
    clock.advance(1);
    assert.equal((await workUntilEmpty(queue)).completed, 1);
    assert.deepEqual(attempts, [1, 2]);
  },
);

storeTest(
  "after maxAttempts releases the next pickup fails the job without running it",
  async (db) => {
    let starts = 0;
    const failures: string[] = [];
    const job = defineJob({
      name: "always-later",
      schema: z.null(),
      maxAttempts: 3,
      handle(_payload, ctx) {
        starts++;
        ctx.release(0);
      },
      failed(_payload, error) {
        failures.push(error.message);
      },
    });
    await using queue = await db.open({ jobs: [job] });
    await queue.dispatch(job, null);
    assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 1, retried: 3 });
    const [failed] = await queue.failed();
    assert.equal(starts, 3);
    assert.equal(failed?.attempts, 3);
    assert.match(failed?.error ?? "", /attempts spent: released 3 times$/);
    assert.deepEqual(failures, ["attempts spent: released 3 times"]);
  },
);

storeTest(
  "an error thrown after ctx.release() keeps the release and goes into the job's log; a PermanentError after it fails the job",
  async (db) => {
    const job = defineJob({
      name: "released-then-threw",
      schema: z.object({ permanent: z.boolean() }),
      handle({ permanent }, ctx) {
        if (ctx.attempt > 1) return;
        ctx.release(0);
        if (permanent) throw new PermanentError("no point retrying");
        throw new Error("boom after release");
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const kept = await queue.dispatch(job, { permanent: false });
    const failed = await queue.dispatch(job, { permanent: true });
    assert.deepEqual(await workUntilEmpty(queue), { completed: 1, failed: 1, retried: 1 });
    assert.equal((await queue.result(kept))?.state, "completed");
    const lines = await queue.logs(kept);
    assert.deepEqual(lines.map((line) => [line.attempt, line.level]), [[1, "error"]]);
    assert.match(lines[0]!.message, /^released, then threw: Error: boom after release\n/);
    const [record] = await queue.failed();
    assert.equal(record?.id, failed);
    assert.match(record?.error ?? "", /PermanentError: no point retrying/);
  },
);

storeTest("the failed hook runs once, with the payload, the error and the attempts", async (db) => {
  const calls: { payload: unknown; error: string; ctx: FailedJobContext }[] = [];
  const job = defineJob({
    name: "hooked",
    schema: z.object({ orderId: z.number() }),
    maxAttempts: 1,
    handle({ orderId }) {
      throw new Error(`order ${orderId} failed`);
    },
    failed(payload, error, ctx) {
      calls.push({ payload, error: error.message, ctx });
    },
  });
  await using queue = await db.open({ jobs: [job] });
  const id = await queue.dispatch(job, { orderId: 7 }, { queue: "orders" });
  await workUntilEmpty(queue, { queues: ["orders"] });
  assert.equal(calls.length, 1);
  const [call] = calls;
  assert.deepEqual(call?.payload, { orderId: 7 });
  assert.equal(call?.error, "order 7 failed");
  assert.equal(call?.ctx.id, id);
  assert.equal(call?.ctx.name, "hooked");
  assert.equal(call?.ctx.queueName, "orders");
  assert.equal(call?.ctx.attempts, 1);
  assert.equal(typeof call?.ctx.queue.dispatch, "function", "the hook can dispatch follow-ups");
});

storeTest("the failed hook runs exactly once per job when many fail in one settle", async (db) => {
  const hooked: number[] = [];
  const job = defineJob({
    name: "mass-failure",
    schema: z.number(),
    maxAttempts: 1,
    handle(n) {
      throw new Error(`fail ${n}`);
    },
    failed(n) {
      hooked.push(n);
    },
  });
  await using queue = await db.open({ jobs: [job] });
  const payloads = Array.from({ length: 40 }, (_, i) => i);
  await queue.dispatchMany(job, payloads);
  assert.deepEqual(await workUntilEmpty(queue, { concurrency: 40 }), {
    completed: 0,
    failed: 40,
    retried: 0,
  });
  assert.deepEqual(hooked.toSorted((a, b) => a - b), payloads);
});

storeTest(
  "the failed hook runs once when attempts are spent over several runs of workUntilEmpty()",
  async (db) => {
    let hookCalls = 0;
    const job = defineJob({
      name: "slow-death",
      schema: z.null(),
      maxAttempts: 3,
      backoff: [1_000],
      jitter: 0,
      handle() {
        throw new Error("nope");
      },
      failed() {
        hookCalls++;
      },
    });
    const clock = new ManualClock();
    await using queue = await db.open({ jobs: [job], clock });
    await queue.dispatch(job, null);
    for (let round = 1; round <= 5; round++) {
      await workUntilEmpty(queue);
      assert.equal(hookCalls, round < 3 ? 0 : 1, `after drain ${round}`);
      clock.advance(1_000);
    }
  },
);

storeTest(
  "a failed hook that throws becomes a queue:error and never brings the job back",
  async (db) => {
    let hookCalls = 0;
    let starts = 0;
    const job = defineJob({
      name: "bad-hook",
      schema: z.null(),
      maxAttempts: 1,
      handle() {
        starts++;
        throw new Error("handler failed");
      },
      failed() {
        hookCalls++;
        throw new Error("hook failed too");
      },
    });
    await using queue = await db.open({ jobs: [job] });
    await queue.dispatch(job, null);
    const reported = nextEvent<Detail<"queue:error">>(queue, "queue:error");
    assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 1, retried: 0 });
    const { error, during } = await reported;
    assert.equal(during, "failed hook of bad-hook");
    assert.equal(error.message, "hook failed too");
    assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 0, retried: 0 });
    assert.equal(hookCalls, 1);
    assert.equal(starts, 1);
    assert.deepEqual(await queue.counts(), counts(0, 0, 1));
  },
);

storeTest(
  "R09: 1,000 jobs failing at once with a 60 s backoff come back spread, no 1 s bucket over 5 %",
  async (db) => {
    const job = defineJob({
      name: "herd",
      schema: z.number(),
      maxAttempts: 2,
      backoff: [60_000], // jitter left at its default
      handle() {
        throw new Error("upstream down");
      },
    });
    const clock = new ManualClock();
    await using queue = await db.open({ jobs: [job], clock });
    await queue.dispatchMany(job, Array.from({ length: 1_000 }, (_, i) => i));
    const retries = record<Detail<"job:retry">>(queue, "job:retry");
    // Seeded so that the figure is reproducible; the runner reads Math.random when it starts.
    const original = Math.random;
    Math.random = seededRandom(20_260_101);
    let stats;
    try {
      stats = await workUntilEmpty(queue, { concurrency: 1_000 });
    } finally {
      Math.random = original;
    }
    assert.equal(stats.retried, 1_000);
    const failedAt = clock.now();
    const rows = (await queue.jobs({ limit: 1_000 })).jobs.map((job) => ({
      available_at: job.availableAt.getTime(),
    }));
    assert.equal(rows.length, 1_000);
    assert.deepEqual(
      rows.map((row) => row.available_at - failedAt).sort((a, b) => a - b),
      retries.map((retry) => retry.delayMs).sort((a, b) => a - b),
    );
    const buckets = new Map<number, number>();
    for (const { available_at } of rows) {
      const second = Math.floor(available_at / 1_000);
      buckets.set(second, (buckets.get(second) ?? 0) + 1);
    }
    const peakPercent = Math.max(...buckets.values()) / 10;
    const delays = rows.map((row) => row.available_at - failedAt);
    console.log(
      `R09: 1000 retries over ${buckets.size} one-second buckets ` +
        `(${Math.min(...delays)}..${Math.max(...delays)} ms): peak bucket ${peakPercent} %`,
    );
    assert.ok(peakPercent <= 5, `peak bucket holds ${peakPercent} % of the retries (limit 5 %)`);
  },
);

const noop = defineJob({ name: "noop", schema: z.number(), handle() {} });

Deno.test("ctx.release() past 100 years throws a RangeError inside the handler", async () => {
  const caught: unknown[] = [];
  const releasing = defineJob({
    name: "releasing",
    schema: z.null(),
    handle(_payload, ctx) {
      for (const delay of [1e300, Infinity, -1]) {
        try {
          ctx.release(delay);
        } catch (error) {
          caught.push(error);
        }
      }
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [releasing] });
  await queue.dispatch(releasing, null);
  await orQueueError(
    queue,
    queue.work({ executor: "isolate", concurrency: 8, stopWhenEmpty: true, pollMs: 5 }).done,
  );
  assert.equal(caught.length, 3);
  for (const error of caught) {
    assert.ok(error instanceof RangeError, String(error));
    assert.match(error.message, /^ctx\.release: delayMs .*3153600000000/);
  }
  assert.equal((await queue.jobs()).total, 0, "the handler returned, so the job completed");
});

storeTest("ctx.release(1500.5) puts the job back at a whole-ms time", async (db) => {
  const clock = new ManualClock();
  const start = clock.now();
  let runs = 0;
  const releasing = defineJob({
    name: "releasing",
    schema: z.null(),
    handle(_payload, ctx: JobContext) {
      runs++;
      ctx.release(1500.5);
    },
  });
  await using queue = await db.open({ jobs: [releasing, noop], clock });
  const id = await queue.dispatch(releasing, null);
  await queue.dispatchMany(noop, [1, 2, 3]);
  await orQueueError(
    queue,
    queue.work({ executor: "isolate", concurrency: 8, stopWhenEmpty: true, pollMs: 5 }).done,
  );
  assert.equal(runs, 1);
  const { jobs, total } = await queue.jobs();
  assert.equal(total, 1, "the other jobs of the tick completed");
  assert.equal(jobs[0]!.id, id);
  assert.equal(await db.stored("jobs", id, "token"), null, "released");
  const availableAt = Number(await db.stored("jobs", id, "available_at"));
  assert.ok(Number.isInteger(availableAt), `available_at ${availableAt} is an integer`);
  assert.equal(availableAt, start + 1501);
});

storeTest(
  "a backoff function returning 1e19 fails its job for good with a RangeError, and the other jobs of the tick complete",
  async (db) => {
    const wild = defineJob({
      name: "wild-backoff",
      schema: z.null(),
      maxAttempts: 3,
      backoff: () => 1e19,
      handle() {
        throw new Error("boom");
      },
    });
    await using queue = await db.open({ jobs: [wild, noop] });
    await queue.dispatchMany(noop, [1, 2, 3, 4, 5]);
    const badId = await queue.dispatch(wild, null);
    const worker = queue.work({
      executor: "isolate",
      concurrency: 8,
      stopWhenEmpty: true,
      pollMs: 5,
    });
    await orQueueError(queue, worker.done);
    assert.deepEqual(worker.stats, { completed: 5, failed: 1, retried: 0 });
    assert.equal(await unfinishedCount(queue), 0);
    const failed = await queue.failed();
    assert.deepEqual(failed.map((job) => job.id), [badId]);
    assert.equal(
      failed[0]!.error,
      'Error: Job "wild-backoff" is not retried: its backoff failed after attempt 1 (Backoff for attempt 1 must be a delay from 0 to 3153600000000 ms: got 10000000000000000000); the attempt failed with Error: boom',
    );
    assert.match(failed[0]!.stack ?? "", /\nError: boom\n/, "the attempt's own stack is kept");
    assert.equal(failed[0]!.attempts, 1);
  },
);

storeTest(
  "a backoff function that throws fails its job for good, naming the job and the backoff, and keeps the attempt's own error",
  async (db) => {
    const throwing = defineJob({
      name: "throwing-backoff",
      schema: z.null(),
      maxAttempts: 3,
      backoff: () => {
        throw new Error("no table");
      },
      handle() {
        throw new TypeError("the handler's fault");
      },
    });
    await using queue = await db.open({ jobs: [throwing] });
    const id = await queue.dispatch(throwing, null);
    await orQueueError(queue, queue.work({ executor: "isolate", stopWhenEmpty: true }).done);
    const failed = await queue.failedJob(id);
    assert.equal(
      failed?.error,
      'Error: Job "throwing-backoff" is not retried: its backoff failed after attempt 1 (no table); the attempt failed with TypeError: the handler\'s fault',
    );
  },
);
