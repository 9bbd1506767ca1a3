import assert from "node:assert/strict";
import { z } from "zod";
import { JobTimeoutError, PayloadIntegrityError } from "../../src/errors.ts";
import type { QueueEventMap } from "../../src/events.ts";
import { defineJob } from "../../src/job.ts";
import { Queue } from "../../src/queue.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { tempDir, unfinishedCount } from "../_helpers.ts";
import { gate, record } from "../fixtures/runner/harness.ts";
import { orQueueError, storeTest } from "../_stores.ts";

type Detail<K extends keyof QueueEventMap> = QueueEventMap[K];

Deno.test("a handler that ignores its signal past timeoutMs fails the attempt with JobTimeoutError", async () => {
  const held: PromiseWithResolvers<void>[] = [];
  const signals: AbortSignal[] = [];
  const stuck = defineJob({
    name: "stuck",
    schema: z.null(),
    timeoutMs: 200,
    maxAttempts: 2,
    backoff: [0],
    async handle(_payload, ctx) {
      signals.push(ctx.signal);
      const release = gate();
      held.push(release);
      await release.promise; // ignores ctx.signal on purpose
    },
  });
  const quick = defineJob({ name: "quick", schema: z.number(), handle() {} });
  await using queue = await Queue.open({ path: ":memory:", jobs: [stuck, quick] });
  const stuckId = await queue.dispatch(stuck, null);
  await queue.dispatchMany(quick, [1, 2, 3, 4, 5]);
  const timeline: string[] = [];
  const starts = record<Detail<"job:start">>(queue, "job:start");
  queue.addEventListener("job:complete", (event) => timeline.push(`complete ${event.detail.name}`));
  const retries = record<Detail<"job:retry">>(queue, "job:retry");
  queue.addEventListener("job:retry", () => timeline.push("retry stuck"));
  const stuckTimes: number[] = []; // start, retry, start, failed
  for (const type of ["job:start", "job:retry", "job:failed"]) {
    queue.addEventListener(type, (event) => {
      if ((event as CustomEvent<Detail<"job:start">>).detail.id === stuckId) {
        stuckTimes.push(performance.now());
      }
    });
  }
  let stats;
  try {
    stats = await workUntilEmpty(queue, { concurrency: 2 });
  } finally {
    for (const release of held) release.resolve();
  }

  assert.deepEqual(stats, { completed: 5, failed: 1, retried: 1 });
  assert.equal(starts.filter((start) => start.name === "stuck").length, 2);
  // The other jobs flowed while the stuck one held its slot.
  assert.deepEqual(timeline.slice(0, 6), [...Array(5).fill("complete quick"), "retry stuck"]);

  assert.equal(retries.length, 1);
  assert.ok(retries[0]!.error instanceof JobTimeoutError);
  assert.equal(retries[0]!.error.timeoutMs, 200);
  assert.equal(retries[0]!.delayMs, 0);

  assert.equal(signals.length, 2);
  for (const signal of signals) {
    assert.ok(signal.aborted);
    assert.ok(signal.reason instanceof JobTimeoutError);
  }
  const failed = await queue.failedJob(stuckId);
  assert.equal(failed?.attempts, 2);
  assert.equal(failed?.error, 'JobTimeoutError: Job "stuck" timed out: ran past 200 ms');
  assert.equal(stuckTimes.length, 4);
  const overshoots = [stuckTimes[1]! - stuckTimes[0]!, stuckTimes[3]! - stuckTimes[2]!]
    .map((ms) => Math.round(ms - 200));
  console.log(`R07 (isolate executor, timeoutMs 200): overshoot ${overshoots.join(", ")} ms`);
});

Deno.test("a handler that honours its signal ends at the timeout with the JobTimeoutError reason", async () => {
  let reason: unknown;
  const polite = defineJob({
    name: "polite",
    schema: z.null(),
    timeoutMs: 100,
    maxAttempts: 1,
    async handle(_payload, ctx) {
      await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve()));
      reason = ctx.signal.reason;
      ctx.signal.throwIfAborted();
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [polite] });
  await queue.dispatch(polite, null);
  const startedAt = performance.now();
  assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 1, retried: 0 });
  const tookMs = performance.now() - startedAt;
  assert.ok(reason instanceof JobTimeoutError);
  assert.ok(tookMs >= 95, `took ${tookMs} ms`);
  const [failed] = await queue.failed();
  assert.match(failed?.error ?? "", /^JobTimeoutError: /);
});

Deno.test("a stored payload that no longer matches its schema fails for good with PayloadIntegrityError", async () => {
  await using dir = await tempDir();
  const before = defineJob({
    name: "receipt",
    schema: z.object({ orderId: z.number() }),
    handle() {},
  });
  let runs = 0;
  let hookCalls = 0;
  const after = defineJob({
    name: "receipt",
    schema: z.object({ email: z.string() }),
    maxAttempts: 5,
    handle() {
      runs++;
    },
    failed() {
      hookCalls++;
    },
  });
  await using old = await Queue.open({ path: dir.dbPath, jobs: [before] });
  const id = await old.dispatch(before, { orderId: 7 });
  await using queue = await Queue.open({ path: dir.dbPath, jobs: [after] });
  const failures = record<Detail<"job:failed">>(queue, "job:failed");
  assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 1, retried: 0 });
  assert.equal(runs, 0);
  assert.equal(failures.length, 1);
  assert.ok(failures[0]!.error instanceof PayloadIntegrityError);
  const failed = await queue.failedJob(id);
  assert.match(
    failed?.error ?? "",
    /^PayloadIntegrityError: Stored payload of "receipt" cannot be used: no longer matches its schema: payload\.email/,
  );
  assert.equal(failed?.payload, '{"orderId":7}');
  // The hook is typed for a valid payload, so it is skipped here by design.
  assert.equal(hookCalls, 0);
});

Deno.test("a job whose name this process does not know is left waiting, unclaimed and unfailed", async () => {
  await using dir = await tempDir();
  let runs = 0;
  const known = defineJob({
    name: "known",
    schema: z.null(),
    handle() {
      runs++;
    },
  });
  const ghost = defineJob({ name: "ghost", schema: z.null(), handle() {} });
  await using producer = await Queue.open({ path: dir.dbPath, jobs: [known, ghost] });
  const ghostId = await producer.dispatch(ghost, null);
  await producer.dispatch(known, null);
  await using worker = await Queue.open({ path: dir.dbPath, jobs: [known] });
  const failures = record<Detail<"job:failed">>(worker, "job:failed");
  assert.deepEqual(await workUntilEmpty(worker, { queues: ["default"] }), {
    completed: 1,
    failed: 0,
    retried: 0,
  });
  assert.equal(runs, 1);
  assert.deepEqual(failures, []);
  assert.equal(await worker.failedJob(ghostId), null);
  const [waiting] = (await worker.jobs()).jobs;
  assert.equal(waiting?.id, ghostId);
  assert.equal(waiting?.attempts, 0);
});

Deno.test("a handler that throws something other than an Error fails with an Error that shows it, an object as its JSON", async () => {
  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  const thrown = [
    "plain string",
    { message: "an object's message", code: 7 },
    { toString: () => "no JSON of its own" },
    cycle,
    { long: "😀".repeat(1_200) },
  ];
  const odd = defineJob({
    name: "odd",
    schema: z.number().int(),
    maxAttempts: 1,
    handle(index) {
      throw thrown[index];
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [odd] });
  await queue.dispatchMany(odd, [0, 1, 2, 3, 4]);
  const failures = record<Detail<"job:failed">>(queue, "job:failed");
  await workUntilEmpty(queue);
  assert.ok(failures[0]?.error instanceof Error);
  const failed = await queue.failed();
  assert.deepEqual(failed.map((job) => job.error).sort(), [
    "Error: Non-error thrown: [object Object]",
    "Error: Non-error thrown: no JSON of its own",
    "Error: Non-error thrown: plain string",
    `Error: Non-error thrown: {"long":"${"😀".repeat(991)}…`,
    'Error: Non-error thrown: {"message":"an object\'s message","code":7}',
  ]);
});

for (
  const [what, backoff, message] of [
    [
      "throws",
      () => {
        throw new Error("backoff bug");
      },
      /^Error: Job "bad-backoff" is not retried: its backoff failed after attempt 1 \(backoff bug\); the attempt failed with Error: handler failure$/,
    ],
    [
      "returns NaN",
      () => NaN,
      /^Error: Job "bad-backoff" is not retried: its backoff failed after attempt 1 \(Backoff for attempt 1 must be .*: got NaN\); the attempt failed with Error: handler failure$/,
    ],
  ] as const
) {
  Deno.test(`a job whose backoff function ${what} fails for good naming that and the attempt's error, with no unhandled rejection`, async () => {
    // Were the error to escape the worker as an unhandled rejection, Deno would fail this test.
    let runs = 0;
    const job = defineJob({
      name: "bad-backoff",
      schema: z.null(),
      maxAttempts: 3,
      backoff,
      handle() {
        runs++;
        throw new Error("handler failure");
      },
    });
    await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
    const id = await queue.dispatch(job, null);
    const failures = record<Detail<"job:failed">>(queue, "job:failed");
    assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 1, retried: 0 });
    assert.equal(runs, 1);
    assert.equal(failures[0]?.id, id);
    const failed = await queue.failedJob(id);
    assert.match(failed?.error ?? "", message);
    assert.equal(failed?.attempts, 1);
    assert.deepEqual(await queue.counts(), {
      default: { pending: 0, delayed: 0, reserved: 0, failed: 1, running: [] },
    });
  });
}

Deno.test("a failed hook that never settles is given up after the job's timeoutMs, and the worker stops", async () => {
  let hookCalls = 0;
  const job = defineJob({
    name: "hung-hook",
    schema: z.null(),
    maxAttempts: 1,
    timeoutMs: 100,
    handle() {
      throw new Error("handler failure");
    },
    failed() {
      hookCalls++;
      return new Promise<void>(() => {}); // never settles
    },
  });
  const queue = await Queue.open({ path: ":memory:", jobs: [job] });
  const errors = record<Detail<"queue:error">>(queue, "queue:error");
  let tookMs: number;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  try {
    await queue.dispatch(job, null);
    const worker = queue.work({ stopWhenEmpty: true, pollMs: 5 });
    const startedAt = performance.now();
    await Promise.race([
      worker.done,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error("worker.done did not settle within 30 s: it waits on the hook")),
          30_000,
        );
      }),
    ]);
    stopped = true;
    tookMs = performance.now() - startedAt;
    assert.deepEqual(worker.stats, { completed: 0, failed: 1, retried: 0 });
  } finally {
    clearTimeout(timer);
    // A worker stuck on the hook would hold close() forever: leave it then, the test has failed.
    if (stopped) await queue.close();
  }
  assert.equal(hookCalls, 1);
  assert.equal(errors.length, 1);
  assert.equal(errors[0]!.during, "failed hook of hung-hook");
  assert.match(errors[0]!.error.message, /failed hook .* ran past 100 ms/);
  assert.ok(tookMs >= 95, `the worker stopped after ${Math.round(tookMs)} ms`);
});

const noop = defineJob({ name: "noop", schema: z.number(), handle() {} });

storeTest(
  "an error message with NUL and a lone surrogate is stored with U+FFFD, and the other jobs of the tick complete",
  async (db) => {
    const poison = defineJob({
      name: "poison",
      schema: z.null(),
      maxAttempts: 1,
      handle() {
        throw new Error("bad\u0000byte \uD800");
      },
    });
    await using queue = await db.open({ jobs: [poison, noop] });
    await queue.dispatchMany(noop, [1, 2, 3, 4, 5]);
    const id = await queue.dispatch(poison, null);
    const worker = queue.work({
      executor: "isolate",
      concurrency: 8,
      stopWhenEmpty: true,
      pollMs: 5,
    });
    await orQueueError(queue, worker.done);
    assert.deepEqual(worker.stats, { completed: 5, failed: 1, retried: 0 });
    assert.equal(await unfinishedCount(queue), 0);
    const failed = await queue.failedJob(id);
    assert.equal(failed?.error, "Error: bad\uFFFDbyte \uFFFD");
    assert.ok(failed?.stack !== null && failed?.stack !== undefined);
    assert.ok(!failed.stack.includes("\u0000") && failed.stack.isWellFormed(), "the stack too");
  },
);

Deno.test("isolate executor: a handler that holds the event loop past timeoutMs and returns fails the attempt with JobTimeoutError", async () => {
  const holds = defineJob({
    name: "holds",
    schema: z.null(),
    timeoutMs: 100,
    maxAttempts: 1,
    handle() {
      const until = performance.now() + 400;
      while (performance.now() < until) {
        // no await: the timeout's timer cannot fire
      }
      return "done";
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [holds] });
  const id = await queue.dispatch(holds, null);
  const stats = await workUntilEmpty(queue, { executor: "isolate" });
  assert.deepEqual(stats, { completed: 0, failed: 1, retried: 0 });
  const [failed] = await queue.failed();
  assert.equal(failed?.id, id);
  assert.equal(failed?.error, 'JobTimeoutError: Job "holds" timed out: ran past 100 ms');
});
