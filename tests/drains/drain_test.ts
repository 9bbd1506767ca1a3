import assert from "node:assert/strict";
import { z } from "zod";
import { PermanentError, QueueClosedError } from "../../src/errors.ts";
import { defineJob } from "../../src/job.ts";
import { Queue } from "../../src/queue.ts";
import { NO_CRON_MESSAGE } from "../../src/drains/serverless.ts";
import { nextEvent, tempDir, unfinishedCount, within } from "../_helpers.ts";
import { storeTest } from "../_stores.ts";

const ok = defineJob({ name: "ok", schema: z.number(), handle() {} });
const broken = defineJob({
  name: "broken",
  schema: z.null(),
  handle() {
    throw new PermanentError("no such customer");
  },
});
const flaky = defineJob({
  name: "flaky",
  schema: z.null(),
  maxAttempts: 3,
  backoff: [60_000],
  handle() {
    throw new Error("upstream answered 503");
  },
});

/** A job whose first attempt runs until its signal aborts; later attempts return at once. */
function blockingJob() {
  const attempts: number[] = [];
  const started = Promise.withResolvers<void>();
  const job = defineJob({
    name: "blocking",
    schema: z.null(),
    async handle(_payload, ctx) {
      attempts.push(ctx.attempt);
      if (attempts.length > 1) return;
      started.resolve();
      await new Promise((_, reject) =>
        ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason), { once: true })
      );
    },
  });
  return { job, attempts, started: started.promise };
}

storeTest(
  "drain() runs every due job in this isolate and stops once nothing is due, leaving delayed jobs",
  async (db) => {
    const queue = await db.open({ jobs: [ok, broken, flaky] });
    await queue.dispatchMany(ok, [1, 2, 3, 4, 5]);
    await queue.dispatch(broken, null);
    await queue.dispatch(flaky, null);
    await queue.dispatch(ok, 6, { delayMs: 60_000 });

    const result = await queue.drain({ maxTimeMs: 30_000, concurrency: 3 });

    assert.deepEqual(result, { completed: 5, failed: 1, retried: 1, stoppedBecause: "empty" });
    const counts = (await queue.counts()).default!;
    assert.equal(counts.pending, 0);
    assert.equal(counts.delayed, 2, "the delayed job and the retry after its backoff wait");
    assert.equal(counts.failed, 1);
    assert.equal(await unfinishedCount(queue), 2);
    assert.deepEqual(await queue.drain(), {
      completed: 0,
      failed: 0,
      retried: 0,
      stoppedBecause: "empty",
    });
  },
);

storeTest(
  "drain({ maxJobs }) claims that many jobs and says it stopped for the job budget",
  async (db) => {
    const queue = await db.open({ jobs: [ok] });
    await queue.dispatchMany(ok, [1, 2, 3, 4, 5]);

    const result = await queue.drain({ maxJobs: 2, concurrency: 4, maxTimeMs: 30_000 });

    assert.deepEqual(result, { completed: 2, failed: 0, retried: 0, stoppedBecause: "jobs" });
    assert.equal(await unfinishedCount(queue), 3);
  },
);

storeTest(
  "drain({ maxMs }) puts a job still running at the end of the budget back without using an attempt, and its worker:stop says time",
  async (db) => {
    const { job, attempts, started } = blockingJob();
    const queue = await db.open({ jobs: [job, ok] });
    const id = await queue.dispatch(job, null);
    const retries: unknown[] = [];
    queue.addEventListener("job:retry", (event) => retries.push((event as CustomEvent).detail));
    const stops: string[] = [];
    queue.addEventListener("worker:stop", (event) => stops.push(event.detail.reason));

    // Long enough that a loaded machine still claims the job within it.
    const drained = queue.drain({ maxTimeMs: 3_000 });
    await within(started, 10_000, "the blocking job started");
    await queue.dispatch(ok, 1); // due meanwhile: whether it runs in time is not promised
    const result = await within(drained, 10_000, "the drain ended");

    assert.equal(result.stoppedBecause, "time");
    assert.deepEqual(stops, ["time"], "worker:stop says what the drain resolves with");
    assert.equal(result.retried, 1, "the put-back counts as released to run again");
    assert.equal(result.failed, 0);
    assert.equal(
      await db.stored("jobs", id, "attempts"),
      "0",
      "the put-back gave its attempt back",
    );
    assert.equal(await db.stored("jobs", id, "token"), null, "the job is no longer reserved");
    assert.equal(retries.length >= 1, true);

    const next = await queue.drain({ maxTimeMs: 30_000 });
    assert.equal(next.stoppedBecause, "empty");
    assert.deepEqual(attempts, [1, 1], "the next drain ran it as attempt 1 again");
    assert.equal(await unfinishedCount(queue), 0);
  },
);

storeTest(
  "drain() refuses bad budgets by name and changes nothing; after close it rejects",
  async (db) => {
    const queue = await db.open({ jobs: [ok] });
    await queue.dispatch(ok, 1);
    await assert.rejects(queue.drain({ maxTimeMs: -1 }), /^RangeError: drain: maxTimeMs must be/);
    const jobsRange = /drain: maxJobs must be an integer from 1 to 2\^53 - 1, or Infinity: got /;
    await assert.rejects(queue.drain({ maxJobs: 0 }), jobsRange);
    await assert.rejects(queue.drain({ maxJobs: 2 ** 53 }), jobsRange);
    await assert.rejects(queue.drain({ concurrency: 1.5 }), /drain: concurrency must be/);
    await assert.rejects(queue.drain({ queues: [] }), /^TypeError: drain: queues/);
    assert.equal(await unfinishedCount(queue), 1);
    await queue.close();
    await assert.rejects(queue.drain(), QueueClosedError);
  },
);

/** A job that says when it started (`started`) and then runs until `release` resolves. */
function heldJob() {
  const release = Promise.withResolvers<void>();
  const started = Promise.withResolvers<void>();
  const slow = defineJob({
    name: "slow",
    schema: z.null(),
    async handle() {
      started.resolve();
      await release.promise;
    },
  });
  return { slow, started, release };
}

storeTest(
  "drain() that is running when the queue closes lets its job finish and says closed, in its result and its worker:stop",
  async (db) => {
    const { slow, started, release } = heldJob();
    const queue = await db.open({ jobs: [slow] });
    await queue.dispatchMany(slow, [null, null]);
    const stops: string[] = [];
    queue.addEventListener("worker:stop", (event) => stops.push(event.detail.reason));
    const drained = queue.drain({ maxTimeMs: 60_000 });
    await within(started.promise, 10_000, "the slow job started");
    const closing = queue.close();
    release.resolve();
    await closing;
    assert.deepEqual(await drained, {
      completed: 1,
      failed: 0,
      retried: 0,
      stoppedBecause: "closed",
    });
    assert.deepEqual(stops, ["closed"]);
  },
);

storeTest(
  "drainAfter() returns the response as it is and runs the job once the response was sent",
  async (db) => {
    const queue = await db.open({ jobs: [ok] });
    await queue.dispatch(ok, 1);
    const sent = Promise.withResolvers<void>();
    const response = new Response("ordered", { status: 202 });

    const completed = nextEvent(queue, "job:complete", () => true, 10_000);
    const returned = queue.drainAfter(response, { after: sent.promise, maxTimeMs: 10_000 });

    assert.equal(returned, response);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(await unfinishedCount(queue), 1, "nothing ran before the response was sent");
    sent.resolve();
    await completed;
    assert.equal(await unfinishedCount(queue), 0);
  },
);

storeTest(
  "drainAfter() runs one drain at a time, and one more for a job dispatched while it ran",
  async (db) => {
    const { slow, started, release } = heldJob();
    const queue = await db.open({ jobs: [slow, ok] });
    const drains: string[] = [];
    queue.addEventListener("worker:stop", () => drains.push("stop"));
    await queue.dispatch(slow, null);
    queue.drainAfter(new Response(), { maxTimeMs: 30_000 });
    await within(started.promise, 10_000, "the first drain started the slow job");
    // The drain's worker row is written with its first heartbeat, which may follow the job's start.
    await within(
      (async () => {
        while ((await queue.workers()).length === 0) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      })(),
      10_000,
      "the first drain's worker row",
    );
    const seen = (await queue.workers()).length;

    await queue.dispatch(ok, 1);
    queue.drainAfter(new Response(), { maxTimeMs: 30_000 });
    queue.drainAfter(new Response(), { maxTimeMs: 30_000 });
    assert.equal((await queue.workers()).length, seen, "a second drain started beside the first");
    const okDone = nextEvent(
      queue,
      "job:complete",
      (detail: { name: string }) => detail.name === "ok",
      10_000,
    );
    release.resolve();
    await okDone;
    await within(
      (async () => {
        while (drains.length < 2) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      })(),
      10_000,
      "the drains ended",
    );
    assert.equal(await unfinishedCount(queue), 0);
    assert.ok(drains.length <= 3, `ran ${drains.length} drains for three requests`);
  },
);

storeTest(
  "drainAfter() asked for other queues while a drain runs drains each of them after it, not only the last one asked",
  async (db) => {
    const { slow, started, release } = heldJob();
    const queue = await db.open({ jobs: [slow, ok] });
    await queue.dispatch(slow, null);
    queue.drainAfter(new Response(), { maxTimeMs: 30_000 });
    await within(started.promise, 10_000, "the first drain started the slow job");
    const onB = await queue.dispatch(ok, 1, { queue: "b" });
    const onC = await queue.dispatch(ok, 2, { queue: "c" });
    queue.drainAfter(new Response(), { maxTimeMs: 30_000, queues: ["b"] });
    queue.drainAfter(new Response(), { maxTimeMs: 30_000, queues: ["c"] });
    queue.drainAfter(new Response(), { maxTimeMs: 30_000, queues: ["c"] }); // once is enough
    release.resolve();
    for (const [id, on] of [[onB, "b"], [onC, "c"]] as const) {
      await within(
        (async () => {
          while ((await queue.result(id))?.state !== "completed") {
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
        })(),
        10_000,
        `the job on queue ${on} drained`,
      );
    }
    assert.throws(
      () => queue.drainAfter(new Response(), { after: 5 as never }),
      /^TypeError: drainAfter: after must be a promise \(or thenable\): got 5$/,
    );
    await queue.close();
  },
);

storeTest(
  "drainAfter() refuses a bad option at once, and drains nothing after close",
  async (db) => {
    const queue = await db.open({ jobs: [ok] });
    assert.throws(
      () => queue.drainAfter(new Response(), { maxTimeMs: Number.NaN }),
      /drain: maxTimeMs/,
    );
    await queue.dispatch(ok, 1);
    await queue.close();
    const response = new Response("bye");
    assert.equal(queue.drainAfter(response), response);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const reader = await db.open({ jobs: [ok] });
    assert.equal((await reader.counts()).default!.pending, 1);
  },
);

storeTest(
  "drain() and drainAfter() still take the deprecated maxMs, and maxTimeMs wins over it",
  async (db) => {
    await using queue = await db.open({ jobs: [ok] });
    await queue.dispatchMany(ok, [1, 2]);
    await assert.rejects(queue.drain({ maxMs: -1 }), /^RangeError: drain: maxTimeMs must be/);
    assert.throws(() => queue.drainAfter(new Response(), { maxMs: Number.NaN }), /maxTimeMs/);
    const result = await queue.drain({ maxTimeMs: 30_000, maxMs: -1 });
    assert.deepEqual(result, { completed: 2, failed: 0, retried: 0, stoppedBecause: "empty" });
  },
);

storeTest(
  "drainAfter() and serverless() on a queue that does not work jobs refuse at the call, as drain() does",
  async (db) => {
    const external = await db.open({ jobs: [ok], mode: "external" });
    const inline = await Queue.open({ jobs: [ok], mode: "inline" });
    try {
      for (const [mode, queue] of [["external", external], ["inline", inline]] as const) {
        const errors: unknown[] = [];
        queue.addEventListener("queue:error", (event) => errors.push(event.detail.error));
        const refusal = new RegExp(
          `^TypeError: Cannot work jobs in this process: this queue was opened with mode "${mode}" .*; open it with mode "worker" to work jobs here$`,
        );
        await assert.rejects(queue.drain(), refusal);
        assert.throws(() => queue.drainAfter(new Response()), refusal);
        assert.throws(
          () => queue.drainAfter(new Response(), { after: Promise.resolve() }),
          refusal,
        );
        assert.throws(() => queue.serverless(), refusal);
        await new Promise((resolve) => setTimeout(resolve, 20));
        assert.deepEqual(errors, []);
      }
    } finally {
      await inline.close();
    }
  },
);

Deno.test({
  name: "serverless() without Deno.cron says which flag or deno.json setting turns it on",
  ignore: typeof (Deno as { cron?: unknown }).cron === "function",
  async fn() {
    await using queue = await Queue.open({ path: ":memory:", jobs: [ok] });
    assert.throws(() => queue.serverless(), (error: Error) => error.message === NO_CRON_MESSAGE);
    assert.match(NO_CRON_MESSAGE, /--unstable-cron/);
    assert.match(NO_CRON_MESSAGE, /"unstable": \["cron"\]/);
    assert.throws(() => queue.serverless({ maxTimeMs: -5 }), /serverless: maxTimeMs must be/);
    assert.throws(() => queue.serverless({ drainMs: -5 }), /serverless: maxTimeMs must be/);
    assert.throws(() => queue.serverless({ cron: "" }), /serverless: cron must be/);
  },
});

Deno.test("without Worker in the isolate, work() runs jobs given by URL in the isolate, and so does drain()", async () => {
  const worker = Object.getOwnPropertyDescriptor(globalThis, "Worker")!;
  await using tmp = await tempDir();
  const jobs = new URL("../fixtures/deploy/sqlite_jobs.ts", import.meta.url).href;
  await using queue = await Queue.open({ path: tmp.dbPath, jobs });
  delete (globalThis as { Worker?: unknown }).Worker;
  try {
    const { note } = await import("../fixtures/deploy/sqlite_jobs.ts");
    await queue.dispatchMany(note, [1, 2]);
    const runner = queue.work({ stopWhenEmpty: true, pollMs: 10 });
    assert.equal(runner.options.executor, "isolate");
    await runner.done;
    assert.equal(runner.stats.completed, 2);
    await queue.dispatch(note, 3);
    assert.equal((await queue.drain()).completed, 1);
    assert.throws(() => queue.work({ executor: "workers" }), /needs Web Workers/);
  } finally {
    Object.defineProperty(globalThis, "Worker", worker);
  }
});
