/**
 * Job control in one process: outputs stored with the settle and read back,
 * the kept history and its pruning, waiting for a job, cancelling jobs that
 * wait and jobs that run, pausing queues, inline mode, and the refusals.
 * Every test runs on every store; what no API shows is read through the
 * test's own access to the database (`db.stored`, `db.waitingJobs`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import {
  defineJob,
  JobCancelledError,
  JobWaitTimeoutError,
  PermanentError,
  previousOutput,
  Queue,
  type QueueEventMap,
  ValidationError,
} from "../../mod.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import {
  cipherOf,
  failedCount,
  ManualClock,
  nextEvent,
  unfinishedCount,
  waitUntil,
  within,
} from "../_helpers.ts";
import { type StoreContext, storeTest } from "../_stores.ts";
import * as moduleJobs from "../fixtures/job_control/jobs.ts";

const TEST_KEY = btoa(String.fromCharCode(...new Uint8Array(32).fill(7)));
const FOREIGN_KEY = btoa(String.fromCharCode(...new Uint8Array(32).fill(9)));

/** How long kept job `id` is kept after it finished, as stored: `keep_until - finished_at`. */
async function keptForMs(db: StoreContext, id: number): Promise<number> {
  const keepUntil = await db.stored("completed_jobs", id, "keep_until");
  const finishedAt = await db.stored("completed_jobs", id, "finished_at");
  assert.ok(keepUntil !== null && finishedAt !== null, `job ${id} is not kept`);
  return Number(keepUntil) - Number(finishedAt);
}

function controlJobs() {
  const started = Promise.withResolvers<number>();
  const add = defineJob({
    name: "add",
    schema: z.object({ a: z.number(), b: z.number() }),
    output: z.object({ sum: z.number() }),
    handle: ({ a, b }) => ({ sum: a + b }),
  });
  const wrongOutput = defineJob({
    name: "wrong-output",
    schema: z.null(),
    maxAttempts: 1,
    output: z.object({ sum: z.number() }),
    // deno-lint-ignore no-explicit-any
    handle: () => ({ sum: "three" }) as any,
  });
  const bigOutput = defineJob({
    name: "big-output",
    schema: z.null(),
    maxAttempts: 1,
    maxOutputBytes: 100,
    output: z.string(),
    handle: () => "x".repeat(200),
  });
  const noOutput = defineJob({
    name: "no-output",
    schema: z.null(),
    keepFinishedMs: 0,
    handle: () => "ignored",
  });
  const secret = defineJob({
    name: "secret",
    schema: z.object({ pin: z.string() }),
    encrypted: true,
    output: z.object({ token: z.string() }),
    handle: ({ pin }) => ({ token: `t-${pin}` }),
  });
  const broken = defineJob({
    name: "broken",
    schema: z.null(),
    handle() {
      throw new PermanentError("it broke");
    },
  });
  const failedHookRuns: number[] = [];
  const slow = defineJob({
    name: "slow",
    schema: z.null(),
    maxAttempts: 3,
    async handle(_payload, ctx) {
      started.resolve(ctx.id);
      await new Promise<void>((resolve, reject) => {
        ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason), { once: true });
        setTimeout(resolve, 60_000);
      });
    },
    failed(_payload, _error, ctx) {
      failedHookRuns.push(ctx.id);
    },
  });
  const unique = defineJob({
    name: "unique",
    schema: z.object({ key: z.string() }),
    uniqueForMs: 60_000,
    uniqueId: ({ key }) => key,
    handle() {},
  });
  const doubled: number[] = [];
  const double = defineJob({
    name: "double",
    schema: z.object({ sum: z.number() }),
    output: z.object({ sum: z.number() }),
    handle({ sum }) {
      doubled.push(sum * 2);
      return { sum: sum * 2 };
    },
  });
  const log: string[] = [];
  const step = defineJob({
    name: "step",
    schema: z.object({ n: z.number() }),
    queue: "steps",
    handle({ n }) {
      log.push(`step ${n}`);
    },
  });
  return {
    jobs: [add, wrongOutput, bigOutput, noOutput, secret, broken, slow, unique, step, double],
    double,
    doubled,
    add,
    wrongOutput,
    bigOutput,
    noOutput,
    secret,
    broken,
    slow,
    unique,
    step,
    log,
    started: started.promise,
    failedHookRuns,
  };
}

storeTest("a job's output is stored with its settle and read back by result()", async (db) => {
  const { jobs, add } = controlJobs();
  const queue = await db.open({ appKey: TEST_KEY, jobs });
  const id = await queue.dispatch(add, { a: 2, b: 3 });
  assert.deepEqual(await queue.result(id), { state: "pending", attempts: 0 });
  await workUntilEmpty(queue, { executor: "isolate" });
  assert.deepEqual(await queue.result(id), { state: "completed", attempts: 1, output: { sum: 5 } });
  const kept = await queue.finishedJob(id);
  assert.deepEqual(
    { state: kept?.state, output: kept?.output, payload: kept?.payload },
    { state: "completed", output: '{"sum":5}', payload: '{"a":2,"b":3}' },
  );
  assert.equal(await unfinishedCount(queue), 0);
  const [listed] = await queue.finished({ name: "add" });
  assert.equal(listed?.id, id);
  assert.equal(listed?.attempts, 1);
  assert.ok(listed!.durationMs !== null && listed!.durationMs >= 0);
  assert.ok(listed!.startedAt!.getTime() <= listed!.finishedAt.getTime());
  assert.deepEqual(await queue.finished({ name: "other" }), []);
  assert.deepEqual(await queue.finished({ queue: "elsewhere" }), []);
  assert.equal(await queue.result(999_999), null);
});

storeTest(
  "an output that fails its schema or its cap fails the attempt, naming the job",
  async (db) => {
    const { jobs, wrongOutput, bigOutput } = controlJobs();
    const queue = await db.open({ appKey: TEST_KEY, jobs });
    const wrong = await queue.dispatch(wrongOutput, null);
    const big = await queue.dispatch(bigOutput, null);
    await workUntilEmpty(queue, { executor: "isolate" });
    const wrongResult = await queue.result(wrong);
    assert.equal(wrongResult?.state, "failed");
    assert.match(
      wrongResult!.error!,
      /^ValidationError: Cannot store the output of "wrong-output": output\.sum: /,
    );
    const bigResult = await queue.result(big);
    assert.equal(bigResult?.state, "failed");
    assert.match(bigResult!.error!, /output is 202 bytes of JSON: over the cap of 100 bytes/);
    assert.deepEqual(await queue.finished(), []);
  },
);

storeTest(
  "keepFinishedMs 0 keeps nothing; the default keeps the job until pruned",
  async (db) => {
    const clock = new ManualClock(1_000_000);
    const { jobs, noOutput, add } = controlJobs();
    const queue = await db.open({ appKey: TEST_KEY, jobs, clock });
    const dropped = await queue.dispatch(noOutput, null);
    const kept = await queue.dispatch(add, { a: 1, b: 1 });
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.equal(await queue.result(dropped), null);
    assert.equal((await queue.result(kept))?.state, "completed");
    assert.equal(await keptForMs(db, kept), 24 * 60 * 60 * 1_000);
    clock.advance(60_000);
    assert.equal(await queue.pruneFinished({ olderThanMs: 120_000 }), 0);
    assert.equal(await queue.pruneFinished({ olderThanMs: 30_000 }), 1);
    assert.equal(await queue.result(kept), null);
  },
);

storeTest("a settle prunes kept jobs past their time, at most once a minute", async (db) => {
  const clock = new ManualClock(1_000_000);
  const { jobs, add } = controlJobs();
  const queue = await db.open({ appKey: TEST_KEY, jobs, clock, keepFinishedMs: 1_000 });
  const first = await queue.dispatch(add, { a: 1, b: 1 });
  await workUntilEmpty(queue, { executor: "isolate" });
  clock.advance(61_000);
  const second = await queue.dispatch(add, { a: 1, b: 2 });
  await workUntilEmpty(queue, { executor: "isolate" });
  assert.equal(await queue.result(first), null, "pruned by the next settle, a minute later");
  assert.equal((await queue.result(second))?.state, "completed");
});

storeTest(
  "an encrypted job's output is stored encrypted and read back in clear",
  async (db) => {
    const { jobs, secret } = controlJobs();
    const queue = await db.open({ appKey: TEST_KEY, jobs });
    const id = await queue.dispatch(secret, { pin: "4242" });
    await workUntilEmpty(queue, { executor: "isolate" });
    const row = await queue.finishedJob(id);
    assert.ok(row?.output && !row.output.includes("4242") && !row.payload.includes("4242"));
    assert.deepEqual((await queue.result(id))?.output, { token: "t-4242" });
  },
);

storeTest(
  "result() without APP_KEY gives an encrypted job's state and says why its output is withheld; with a key that is not the job's, or on a changed output, it throws PayloadIntegrityError (docs/results.md)",
  async (db) => {
    const { jobs, secret } = controlJobs();
    const queue = await db.open({ appKey: TEST_KEY, jobs });
    const id = await queue.dispatch(secret, { pin: "4242" });
    await workUntilEmpty(queue, { executor: "isolate" });
    const keyless = await db.open({ jobs: [], mode: "external" });
    assert.deepEqual(await keyless.result(id), {
      state: "completed",
      attempts: 1,
      outputWithheld: "encrypted, and this process has no APP_KEY to open it",
    });
    assert.deepEqual(await queue.result(id), {
      state: "completed",
      attempts: 1,
      output: { token: "t-4242" },
    });
    // A well-formed key that is not the job's (another app's sharing the queue) opens nothing:
    // documented to throw naming the key the output was sealed with, not to withhold it.
    const keyId = (await cipherOf(TEST_KEY)).keyId!;
    const foreign = await db.open({ appKey: FOREIGN_KEY, jobs: [], mode: "external" });
    await assert.rejects(
      foreign.result(id),
      new RegExp(
        `^PayloadIntegrityError: Stored output of "secret" cannot be used: it was encrypted with key ${keyId}, which is neither appKey nor in `,
      ),
    );
    // A changed sealed output does not open, and the error says "output".
    const output = await db.stored("completed_jobs", id, "output");
    assert.ok(output !== null);
    const changed = output.slice(0, -6) + (output.at(-6) === "A" ? "B" : "A") + output.slice(-5);
    await db.setStored("completed_jobs", id, "output", changed);
    await assert.rejects(
      queue.result(id),
      /^PayloadIntegrityError: Stored output of "secret" cannot be used: the encrypted output failed authentication/,
    );
  },
);

storeTest(
  "dispatchAndWait() resolves with the typed output, rejects with the final error",
  async (db) => {
    const { jobs, add, broken } = controlJobs();
    const queue = await db.open({ appKey: TEST_KEY, jobs });
    const worker = queue.work({ executor: "isolate", pollMs: 60_000 });
    try {
      const output: { sum: number } = await within(
        queue.dispatchAndWait(add, { a: 20, b: 22 }),
        30_000,
        "the awaited job",
      );
      assert.deepEqual(output, { sum: 42 });
      await assert.rejects(
        queue.dispatchAndWait(broken, null, { timeoutMs: 30_000 }),
        (error: Error) => error.name === "PermanentError" && error.message === "it broke",
      );
    } finally {
      await worker.stop();
    }
  },
);

storeTest(
  "dispatchAndWait() times out or aborts while the job keeps its course",
  async (db) => {
    const { jobs, add } = controlJobs();
    const queue = await db.open({ appKey: TEST_KEY, jobs });
    await assert.rejects(
      queue.dispatchAndWait(add, { a: 1, b: 1 }, { timeoutMs: 50 }),
      (error: Error) =>
        error instanceof JobWaitTimeoutError &&
        /job \d+ after 50 ms: the job is not cancelled and keeps its course \(queued, delayed or running\)/
          .test(error.message),
    );
    const controller = new AbortController();
    const waiting = queue.dispatchAndWait(add, { a: 1, b: 2 }, { signal: controller.signal });
    controller.abort(new Error("no longer needed"));
    await assert.rejects(waiting, /no longer needed/);
    // The abort rejects at once, as fetch() does: the dispatch it cut short may still be storing.
    await waitUntil(async () => await unfinishedCount(queue) === 2, {
      what: "both jobs queued, the aborted wait's too",
    });
    await assert.rejects(
      queue.dispatchAndWait(add, { a: 1, b: 1 }, { timeoutMs: -1 }),
      /timeoutMs must be a positive number/,
    );
    assert.equal(await unfinishedCount(queue), 2, "a bad option stores nothing");
  },
);

storeTest("cancel() removes a waiting job and records it as cancelled", async (db) => {
  const { jobs, add, unique } = controlJobs();
  const queue = await db.open({ appKey: TEST_KEY, jobs });
  const id = await queue.dispatch(add, { a: 1, b: 1 }, { delayMs: 60_000 });
  assert.equal(await queue.cancel(id, { reason: "not needed" }), "cancelled");
  assert.equal(await unfinishedCount(queue), 0);
  assert.deepEqual(await queue.result(id), {
    state: "cancelled",
    attempts: 0,
    error: "not needed",
  });
  assert.equal(await queue.cancel(id), "finished");
  assert.equal(await queue.cancel(123_456), "not-found");
  // Its unique key is released: the same job can be dispatched again.
  const held = await queue.dispatch(unique, { key: "k" });
  assert.equal(await queue.dispatch(unique, { key: "k" }), held);
  assert.equal(await queue.cancel(held), "cancelled");
  assert.notEqual(await queue.dispatch(unique, { key: "k" }), held);
  await assert.rejects(queue.cancel(0), /must be a positive integer/);
  await assert.rejects(queue.cancel(id, { reason: "" }), /reason must be a string of 1 to 255/);
});

storeTest(
  "a cancelled batch job counts as skipped; a chain stops at a cancelled link",
  async (db) => {
    const { jobs, step, log } = controlJobs();
    const queue = await db.open({ appKey: TEST_KEY, jobs });
    await queue.pause("steps");
    const batchId = await queue.batch("import")
      .push(step, { n: 1 })
      .push(step, { n: 2 })
      .finally(step, { n: 99 })
      .allowFailures()
      .dispatch();
    // Its members are stored as jobs; its callback waits for the batch to end.
    const members = (await queue.jobs({ queue: "steps" })).jobs
      .filter((job) => job.batchId === batchId).map((job) => job.id);
    assert.equal(members.length, 2);
    assert.equal(await queue.cancel(Math.min(...members)), "cancelled");
    const status = await queue.batchStatus(batchId);
    assert.equal(status?.skipped, 1);
    assert.equal(status?.pending, 1);

    const chainId = await queue.chain()
      .then(step, { n: 10 })
      .then(step, { n: 11 })
      .catch(step, { n: 12 })
      .dispatch();
    const heldBy = async (chain: number) =>
      (await db.waitingJobs()).filter((job) => job.chainId === chain)
        .map(({ role, payload }) => [role, payload]);
    assert.deepEqual(await heldBy(chainId), [["link", '{"n":11}'], ["chain-catch", '{"n":12}']]);
    assert.equal(await queue.cancel(chainId), "cancelled");
    assert.deepEqual(await heldBy(chainId), []);
    await queue.resume("steps");
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(log.sort(), ["step 12", "step 2", "step 99"]);
    assert.equal((await queue.batchStatus(batchId))?.finished, true);
  },
);

for (const executor of ["isolate", "workers"] as const) {
  storeTest(
    `cancel() stops a running job (${executor}): signal aborted, not retried, no failed hook`,
    async (db) => {
      const { jobs, slow, started, failedHookRuns } = controlJobs();
      const queue = await db.open({
        appKey: TEST_KEY,
        jobs: executor === "workers"
          ? new URL("../fixtures/job_control/jobs.ts", import.meta.url).href
          : jobs,
      });
      const id = await queue.dispatch(executor === "workers" ? moduleJobs.slow : slow, null);
      const worker = queue.work({ executor, graceMs: 200 });
      try {
        if (executor === "isolate") await within(started, 30_000, "the job's start");
        else await nextEvent(queue, "job:start", () => true, 30_000);
        const cancelled = nextEvent<QueueEventMap["job:cancelled"]>(
          queue,
          "job:cancelled",
          (detail) => detail.id === id,
          30_000,
        );
        assert.equal(await queue.cancel(id, { reason: "user asked" }), "cancelling");
        // Still running, unless the worker, woken once the cancel committed, stopped it already.
        assert.ok(["running", "cancelled"].includes((await queue.result(id))?.state ?? "gone"));
        assert.equal((await cancelled).reason, "user asked");
        const result = await queue.result(id);
        assert.deepEqual(result, { state: "cancelled", attempts: 1, error: "user asked" });
        assert.deepEqual(failedHookRuns, []);
        assert.equal(await unfinishedCount(queue), 0);
        assert.equal(await failedCount(queue), 0);
      } finally {
        await worker.stop();
      }
      assert.equal(worker.stats.failed, 0);
      assert.equal(worker.stats.retried, 0);
    },
  );
}

storeTest(
  "a cancel asked while an attempt ran that then failed ends the job at its next claim, unstarted: job:cancelled and result() count the one start",
  async (db) => {
    const opened: { asker?: Queue } = {};
    const starts: number[] = [];
    const failsOnce = defineJob({
      name: "fails-once",
      schema: z.null(),
      maxAttempts: 3,
      backoff: [0, 0],
      async handle(_, ctx) {
        starts.push(ctx.attempt);
        // Asked from another handle, so this worker sees it only after the attempt failed.
        assert.equal(await opened.asker!.cancel(ctx.id, { reason: "asked" }), "cancelling");
        throw new Error("attempt 1 fails");
      },
    });
    const queue = await db.open({ jobs: [failsOnce] });
    opened.asker = await db.open({ jobs: [failsOnce] });
    const id = await queue.dispatch(failsOnce, null);
    const events: string[] = [];
    queue.addEventListener("job:start", (event) => events.push(`start ${event.detail.attempt}`));
    queue.addEventListener("job:retry", (event) => events.push(`retry ${event.detail.attempt}`));
    const cancelled = nextEvent<QueueEventMap["job:cancelled"]>(
      queue,
      "job:cancelled",
      (detail) => detail.id === id,
      30_000,
    );
    const worker = queue.work({ executor: "isolate" });
    try {
      const { attempt, reason } = await cancelled;
      assert.deepEqual(starts, [1]);
      assert.deepEqual(events, ["start 1", "retry 1"], "the next claim did not start it");
      assert.deepEqual({ attempt, reason }, { attempt: 1, reason: "asked" }, "its one start");
      assert.deepEqual(await queue.result(id), { state: "cancelled", attempts: 1, error: "asked" });
      assert.equal((await queue.finishedJob(id))?.attempts, 1);
    } finally {
      await worker.stop();
    }
  },
);

storeTest(
  "dispatchAndWait() of a job cancelled meanwhile rejects with JobCancelledError",
  async (db) => {
    const { jobs, add } = controlJobs();
    const queue = await db.open({ appKey: TEST_KEY, jobs });
    const waiting = queue.dispatchAndWait(add, { a: 1, b: 1 }, { delayMs: 60_000 });
    // Handled as soon as it rejects, whenever that is.
    const ended = waiting.then(() => null, (error: Error) => error);
    // Cancelled once the wait has marked it awaited, so the wait hears of it from the store.
    const id = await waitUntil(async () => {
      const job = (await queue.jobs({ limit: 1 })).jobs[0];
      return job && await db.stored("jobs", job.id, "awaited") === "1" && job.id;
    }, { what: "the job is stored and awaited" });
    assert.equal(await queue.cancel(id, { reason: "changed my mind" }), "cancelled");
    const error = await within(ended, 30_000, "the wait");
    assert.ok(error instanceof JobCancelledError, String(error));
    assert.equal(error.reason, "changed my mind");
  },
);

storeTest(
  "a paused queue is not claimed; dispatch still stores; resume wakes workers",
  async (db) => {
    const { jobs, step, add, log } = controlJobs();
    const queue = await db.open({ appKey: TEST_KEY, jobs });
    const paused = nextEvent<QueueEventMap["queue:paused"]>(queue, "queue:paused");
    await queue.pause("steps", { reason: "deploy" });
    assert.equal((await paused).reason, "deploy");
    const [listed] = await queue.paused();
    assert.equal(listed?.queue, "steps");
    assert.equal(listed?.reason, "deploy");
    assert.equal(listed?.until, null);
    await queue.dispatch(step, { n: 1 });
    const other = await queue.dispatch(add, { a: 1, b: 1 });
    await workUntilEmpty(queue, { executor: "isolate", queues: ["steps", "default"] });
    assert.deepEqual(log, [], "the paused queue's job did not run");
    assert.equal((await queue.result(other))?.state, "completed", "other queues drain");
    const worker = queue.work({ executor: "isolate", queues: ["steps"], pollMs: 60_000 });
    try {
      const resumed = nextEvent(queue, "queue:resumed");
      assert.equal(await queue.resume("steps"), true);
      await resumed;
      await nextEvent(queue, "job:complete", () => true, 30_000);
      assert.deepEqual(log, ["step 1"]);
    } finally {
      await worker.stop();
    }
    assert.equal(await queue.resume("steps"), false);
    assert.deepEqual(await queue.paused(), []);
  },
);

storeTest("pause({ forMs }) resumes on its own", async (db) => {
  const clock = new ManualClock(1_000_000);
  const { jobs, step, log } = controlJobs();
  const queue = await db.open({ appKey: TEST_KEY, jobs, clock });
  await queue.pause("steps", { forMs: 10_000 });
  assert.equal((await queue.paused())[0]?.until?.getTime(), 1_010_000);
  await queue.dispatch(step, { n: 1 });
  await workUntilEmpty(queue, { executor: "isolate", queues: ["steps"] });
  assert.deepEqual(log, []);
  clock.advance(10_001);
  assert.deepEqual(await queue.paused(), []);
  await workUntilEmpty(queue, { executor: "isolate", queues: ["steps"] });
  assert.deepEqual(log, ["step 1"]);
});

storeTest("pause() refuses a bad queue name or forMs, changing nothing", async (db) => {
  const { jobs } = controlJobs();
  const queue = await db.open({ appKey: TEST_KEY, jobs });
  await assert.rejects(queue.pause("no spaces"), /queue name "no spaces" is invalid/);
  await assert.rejects(queue.pause("steps", { forMs: 0 }), /forMs must be a positive number/);
  await assert.rejects(queue.pause("steps", { forMs: -5 }), /forMs must be a positive number/);
  await assert.rejects(
    queue.pause("steps", { forMs: 2 ** 41 + 1 }),
    /^RangeError: pause: forMs must be a positive number of ms up to 2\^41: got 2199023255553$/,
  );
  await assert.rejects(queue.resume("x'); DROP TABLE jobs;--"), /is invalid/);
  assert.deepEqual(await queue.paused(), []);
});

Deno.test("defineJob refuses an output that is not a schema, or a bad keepFinishedMs", () => {
  const base = { name: "x", schema: z.null(), handle() {} };
  assert.throws(
    // deno-lint-ignore no-explicit-any
    () => defineJob({ ...base, output: { parse() {} } as any }),
    /Job "x": output must be a zod schema: got object/,
  );
  assert.throws(() => defineJob({ ...base, keepFinishedMs: -1 }), /keepFinishedMs must be/);
  assert.throws(() => defineJob({ ...base, maxOutputBytes: 1 }), /maxOutputBytes must be/);
});

Deno.test("Queue.open refuses a bad mode or keepFinishedMs", async () => {
  const jobs = [defineJob({ name: "x", schema: z.null(), handle() {} })];
  await assert.rejects(
    // deno-lint-ignore no-explicit-any
    Queue.open({ path: ":memory:", jobs, mode: "sync" as any }),
    /mode must be "worker", "external" or "inline": got "sync"/,
  );
  await assert.rejects(
    Queue.open({ path: ":memory:", jobs, keepFinishedMs: 1.5 }),
    /keepFinishedMs must be a whole number/,
  );
  await assert.rejects(
    Queue.open({ path: ":memory:", jobs, keepCompletedMs: -1 }),
    /Queue.open: keepCompletedMs must be a whole number/,
  );
});

storeTest(
  "the deprecated keepCompletedMs, completed(), completedJob() and pruneCompleted() still work",
  async (db) => {
    const clock = new ManualClock(1_000_000);
    const { jobs, add } = controlJobs();
    await using queue = await db.open({ appKey: TEST_KEY, jobs, clock, keepCompletedMs: 1_000 });
    const id = await queue.dispatch(add, { a: 1, b: 2 });
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(await queue.completed(), await queue.finished());
    assert.deepEqual(await queue.completedJob(id), await queue.finishedJob(id));
    assert.equal(await keptForMs(db, id), 1_000);
    clock.advance(60_000);
    assert.equal(await queue.pruneCompleted({ olderThanMs: 30_000 }), 1);
    assert.equal(await queue.finishedJob(id), null);
  },
);

Deno.test("inline mode runs each job at dispatch, chains link by link, batches in order", async () => {
  const { jobs, add, broken, step, log } = controlJobs();
  await using queue = await Queue.open({ mode: "inline", jobs, appKey: TEST_KEY });
  assert.equal(await queue.dispatch(step, { n: 1 }), 0);
  assert.deepEqual(log, ["step 1"]);
  assert.deepEqual(await queue.dispatchAndWait(add, { a: 3, b: 4 }), { sum: 7 });
  await assert.rejects(queue.dispatch(broken, null), /it broke/);
  await assert.rejects(queue.dispatch(step, { n: "x" } as never), ValidationError);
  await assert.rejects(
    queue.chain().then(step, { n: 2 }).then(broken, null).then(step, { n: 3 }).catch(step, {
      n: 4,
    }).dispatch(),
    /it broke/,
  );
  assert.deepEqual(log, ["step 1", "step 2", "step 4"]);
  await queue.batch("b").push(step, { n: 5 }).push(step, { n: 6 }).then(step, { n: 7 })
    .finally(step, { n: 8 }).dispatch();
  assert.deepEqual(log.slice(3), ["step 5", "step 6", "step 7", "step 8"]);
  assert.throws(() => queue.work(), /mode "inline"/);
  assert.equal(await queue.dispatchMany(step, [{ n: 9 }]).then((ids) => ids.length), 1);
});

Deno.test("external mode dispatches and refuses to work", async () => {
  const { jobs, step } = controlJobs();
  await using queue = await Queue.open({
    path: ":memory:",
    mode: "external",
    jobs,
    appKey: TEST_KEY,
  });
  assert.ok((await queue.dispatch(step, { n: 1 })) > 0);
  assert.throws(() => queue.work(), /mode "external" \(another process works its jobs\)/);
  await assert.rejects(queue.drain(), /mode "external"/);
});

Deno.test("the claim's pause check is one primary-key lookup inside the claim's one write statement", async () => {
  const { DatabaseSync } = await import("node:sqlite");
  const { SqliteStore } = await import("../../src/stores/sqlite/mod.ts");
  const { sqliteDialect } = await import("../../src/stores/sqlite/dialect.ts");
  const dir = await Deno.makeTempDir();
  try {
    const store = await SqliteStore.open(`${dir}/queue.db`);
    await store.close();
    // The real claim script: a read of each queue's priority levels, then one write.
    const script = sqliteDialect.claim({
      queues: ["high", "default"],
      limit: 4,
      now: 0,
      leaseMs: 1_000,
      token: 1,
    }, false);
    const steps = [];
    let next = script.next();
    while (!next.done) {
      const step = next.value;
      if (typeof step === "symbol") throw new Error("a claim asks for no wake-up");
      steps.push(step);
      next = "each" in step
        ? script.next(step.each.map(() => ({ rows: [{ priority: 0 }], count: 1 })))
        : script.next({ rows: [], count: 0 });
    }
    const writes = steps.filter((step) => /^\s*UPDATE/.test(step.statement.sqlite));
    assert.equal(writes.length, 1);
    const claim = writes[0]!;
    assert.ok("params" in claim);
    const db = new DatabaseSync(`${dir}/queue.db`);
    try {
      const details = db.prepare(`EXPLAIN QUERY PLAN ${claim.statement.sqlite}`)
        .all(...(claim.params as (string | number | null)[]))
        .map((row) => String(row.detail));
      assert.ok(!details.some((d) => d.includes("TEMP B-TREE")), details.join("; "));
      assert.ok(details.some((d) => d.includes("jobs_claim_order")), details.join("; "));
      assert.ok(
        details.some((d) => /SEARCH p USING INDEX sqlite_autoindex_queue_pauses_1/.test(d)),
        details.join("; "),
      );
    } finally {
      db.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

storeTest(
  "a chain link given previousOutput gets the output of the link before",
  async (db) => {
    const { jobs, add, double, doubled, secret, step } = controlJobs();
    const queue = await db.open({ appKey: TEST_KEY, jobs });
    const chainId = await queue.chain()
      .then(add, { a: 2, b: 3 })
      .then(double, previousOutput)
      .then(double, previousOutput)
      .dispatch();
    const [waiting] = (await db.waitingJobs()).filter((job) => job.chainId === chainId);
    assert.equal(waiting?.payload, "<previous output>");
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(doubled, [10, 20]);
    const [last] = await queue.finished({ name: "double", limit: 1 });
    assert.equal(last?.output, '{"sum":20}');
    await assert.rejects(
      queue.chain().then(double, previousOutput).dispatch(),
      /link 1 of a chain: the first link has no previous output/,
    );
    await assert.rejects(
      queue.chain().then(secret, { pin: "1" }).then(double, previousOutput).dispatch(),
      /previousOutput cannot pass an output to or from an encrypted job/,
    );
    // An output that does not fit the next job's schema fails that link for good.
    await queue.chain().then(add, { a: 1, b: 1 }).then(step, previousOutput).dispatch();
    await workUntilEmpty(queue, { executor: "isolate" });
    const [failed] = await queue.failed();
    assert.equal(failed?.name, "step");
    assert.match(failed!.error, /PayloadIntegrityError/);
  },
);

Deno.test("inline mode passes outputs along a chain too", async () => {
  const { jobs, add, double, doubled } = controlJobs();
  await using queue = await Queue.open({ mode: "inline", jobs, appKey: TEST_KEY });
  await queue.chain().then(add, { a: 1, b: 2 }).then(double, previousOutput).dispatch();
  assert.deepEqual(doubled, [6]);
});

storeTest("a running batch job cancelled counts as skipped, and the batch finishes", async (db) => {
  const { jobs, slow, started, step } = controlJobs();
  const queue = await db.open({ appKey: TEST_KEY, jobs });
  const batchId = await queue.batch("long").push(slow, null).finally(step, { n: 1 }).dispatch();
  const worker = queue.work({ executor: "isolate", queues: ["default", "steps"] });
  try {
    const id = await within(started, 30_000, "the batch job's start");
    const cancelled = nextEvent(queue, "job:cancelled", () => true, 30_000);
    assert.equal(await queue.cancel(id), "cancelling");
    await cancelled;
    await nextEvent(queue, "job:complete", () => true, 30_000); // the finally callback
  } finally {
    await worker.stop();
  }
  const status = await queue.batchStatus(batchId);
  assert.equal(status?.skipped, 1);
  assert.equal(status?.failed, 0);
  assert.equal(status?.finished, true);
});

storeTest(
  "a job claimed again with a cancel asked (its last worker ended first) is cancelled, not run",
  async (db) => {
    const { jobs, step, log } = controlJobs();
    const queue = await db.open({ appKey: TEST_KEY, jobs });
    const id = await queue.dispatch(step, { n: 5 });
    await db.setStored("jobs", id, "cancel_requested", "asked while it ran");
    await workUntilEmpty(queue, { executor: "isolate", queues: ["steps"] });
    assert.deepEqual(log, []);
    assert.deepEqual(await queue.result(id), {
      state: "cancelled",
      attempts: 0, // the handler never started: the claim's attempt is given back
      error: "asked while it ran",
    });
  },
);
