/**
 * Durable steps in one process, on every store: memos replayed across
 * attempts, numbering, code changes, sleeps and waits without a slot,
 * signals, step timeouts and in-attempt retries, encrypted outputs. The
 * scenarios follow the peers' own tests, named in each (research:
 * workflows.md §1c); process kills and Web Workers are in
 * `tests/faults/steps_faults_test.ts` (run by `deno task test:faults`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { z } from "zod";
import { defineJob, type JobContext, PermanentError, type Queue } from "../../mod.ts";
import { StepMismatchError, StepTimeoutError } from "../../src/errors.ts";
import { generateAppKey } from "../../src/encryption.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { ManualClock, nextEvent, tempDir, waitUntil } from "../_helpers.ts";
import { storeTest } from "../_stores.ts";
import { floatingStep, ledgerWatcher, napper, readLedger } from "../fixtures/steps/jobs.ts";

/** The jobs module of the tests that need Web Workers. */
const STEP_JOBS = new URL("../fixtures/steps/jobs.ts", import.meta.url).href;

const payload = z.object({ n: z.number() });

/** Runs a worker on `queue` until `id` finished (completed or failed); returns its result. */
async function runUntilFinished(queue: Queue, id: number, options: { concurrency?: number } = {}) {
  const worker = queue.work({ pollMs: 20, ...options });
  try {
    return await waitUntil(async () => {
      const result = await queue.result(id);
      return result !== null && (result.state === "completed" || result.state === "failed")
        ? result
        : null;
    }, { what: `job ${id} finished`, timeoutMs: 60_000 });
  } finally {
    await worker.stop();
  }
}

storeTest(
  "a recorded step is not run again on the next attempt (absurd: step result is cached and not re-executed on retry)",
  async (db) => {
    let runs = 0;
    const job = defineJob({
      name: "cached-step",
      schema: payload,
      output: z.number(),
      maxAttempts: 3,
      backoff: [0],
      async handle(_, ctx) {
        const value = await ctx.step("gen", () => {
          runs++;
          return Math.random();
        });
        if (ctx.attempt === 1) throw new Error("fail after the step");
        return value;
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    await workUntilEmpty(queue);
    const result = await queue.result(id);
    assert.equal(result?.state, "completed");
    assert.equal(result?.attempts, 2);
    assert.equal(runs, 1, "the step ran once");
    const [memo] = await queue.steps(id);
    assert.equal(result?.output, memo?.output, "the output is attempt 1's value");
  },
);

storeTest(
  "only the steps not recorded run again (OpenWorkflow: only failed steps re-execute on retry)",
  async (db) => {
    const runs = { a: 0, b: 0, c: 0 };
    const job = defineJob({
      name: "three-steps",
      schema: payload,
      maxAttempts: 3,
      backoff: [0],
      async handle(_, ctx) {
        await ctx.step("a", () => runs.a++);
        await ctx.step("b", () => {
          runs.b++;
          if (ctx.attempt === 1) throw new Error("b fails once");
          return "b";
        });
        await ctx.step("c", () => runs.c++);
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    await workUntilEmpty(queue);
    assert.equal((await queue.result(id))?.state, "completed");
    assert.deepEqual(runs, { a: 1, b: 2, c: 1 });
  },
);

storeTest(
  "a step that throws is not recorded (absurd: failed step does not save checkpoint)",
  async (db) => {
    const job = defineJob({
      name: "step-throws",
      schema: payload,
      maxAttempts: 2,
      backoff: [60_000],
      async handle(_, ctx) {
        await ctx.step("x", () => {
          if (ctx.attempt === 1) throw new Error("not now");
          return 1;
        });
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    await workUntilEmpty(queue);
    assert.equal((await queue.result(id))?.state, "pending");
    assert.deepEqual(await queue.steps(id), []);
  },
);

storeTest(
  "a name used again in one run is numbered, and a retry replays each (absurd: repeated step names work correctly)",
  async (db) => {
    let runs = 0;
    const job = defineJob({
      name: "loop-steps",
      schema: payload,
      output: z.array(z.number()),
      maxAttempts: 2,
      backoff: [0],
      async handle(_, ctx) {
        const values: number[] = [];
        for (let i = 0; i < 3; i++) {
          values.push(
            await ctx.step("loop", () => {
              runs++;
              return i * 10;
            }),
          );
        }
        if (ctx.attempt === 1) throw new Error("again");
        return values;
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    await workUntilEmpty(queue);
    const result = await queue.result(id);
    assert.deepEqual(result?.output, [0, 10, 20]);
    assert.equal(runs, 3);
    const steps = await queue.steps(id);
    assert.deepEqual(steps.map(({ key, seq, kind, state }) => ({ key, seq, kind, state })), [
      { key: "loop", seq: 1, kind: "step", state: "done" },
      { key: "loop#2", seq: 2, kind: "step", state: "done" },
      { key: "loop#3", seq: 3, kind: "step", state: "done" },
    ]);
    assert.equal(steps[0]!.attempt, 1);
  },
);

storeTest(
  "a step name with # is refused, naming it, and nothing is stored (OpenWorkflow: avoids step-name collisions)",
  async (db) => {
    const job = defineJob({
      name: "hash-name",
      schema: payload,
      maxAttempts: 1,
      async handle(_, ctx) {
        await ctx.step("foo#1", () => 1);
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    await workUntilEmpty(queue);
    const [failed] = await queue.failed();
    assert.match(
      failed!.error,
      /TypeError: ctx\.step: the step's name must not contain "#".*"foo#1"/,
    );
    assert.deepEqual(await queue.steps(id), []);
  },
);

storeTest(
  "recorded steps that no longer match the code fail the job for good with StepMismatchError naming both (DBOS: non-deterministic-workflow-step; Rails: unexpected step on resumption)",
  async (db) => {
    let version = 1;
    const job = defineJob({
      name: "changed-code",
      schema: payload,
      maxAttempts: 5,
      backoff: [0],
      async handle(_, ctx) {
        if (version === 1) {
          await ctx.step("a", () => "a");
          throw new Error("v1 fails after a");
        }
        await ctx.step("b", () => "b");
        await ctx.step("a", () => "a");
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    await queue.work({ maxJobs: 1, stopWhenEmpty: true }).done;
    version = 2;
    await workUntilEmpty(queue);
    const result = await queue.result(id);
    assert.equal(result?.state, "failed");
    assert.equal(result?.attempts, 2, "no third attempt");
    const [failed] = await queue.failed();
    assert.match(
      failed!.error,
      /StepMismatchError: .*step "b" at position 1, but step "a" was recorded there/,
    );
    assert.ok(new StepMismatchError("j", 1, "a", "b") instanceof PermanentError);
  },
);

storeTest(
  "a step, sleep or wait called inside a step's function is refused at once, for good, naming both: nothing is recorded that a later run would misplace",
  async (db) => {
    const runs = { outer: 0, inner: 0 };
    const nested = defineJob({
      name: "nested-steps",
      schema: payload,
      maxAttempts: 3,
      backoff: [0],
      async handle({ n }, ctx) {
        await ctx.step("before", () => "recorded");
        await ctx.step("outer", async () => {
          runs.outer++;
          if (n === 1) return 1 + await ctx.step("inner", () => runs.inner++);
          if (n === 2) return await ctx.sleep("nap", 10);
          return await ctx.waitFor("word", { timeoutMs: 10 });
        }, { maxAttempts: 3, backoff: [0] });
        await ctx.step("after", () => "after");
      },
    });
    await using queue = await db.open({ jobs: [nested] });
    const ids = await queue.dispatchMany(nested, [{ n: 1 }, { n: 2 }, { n: 3 }]);
    await workUntilEmpty(queue);
    const inner = ['"inner"', '"nap"', '"word"'];
    for (const [index, id] of ids.entries()) {
      const result = await queue.result(id);
      assert.equal(result?.state, "failed");
      assert.equal(result?.attempts, 1, "a nested call is the code's fault: no retry");
      assert.deepEqual(
        (await queue.steps(id)).map(({ key }) => key),
        ["before"],
        "neither the outer step nor the inner call is recorded",
      );
      const failed = (await queue.failed()).find((job) => job.id === id);
      assert.equal(
        failed?.error,
        `PermanentError: ctx: ${
          inner[index]
        } was called inside step "outer" (its function, or code it started): steps do not nest (a later run reads "outer" back without calling its function, so the inner call would not come again); call it before or after that step`,
      );
    }
    assert.deepEqual(runs, { outer: 3, inner: 0 }, "the outer step's own retries are not spent");
  },
);

storeTest(
  "a sleep frees the slot and is not an attempt; the steps before it are not run again (OpenWorkflow: step.sleep postpones; sleep does not consume the retry budget)",
  async (db) => {
    let firstRuns = 0;
    const order: string[] = [];
    const sleeper = defineJob({
      name: "sleeper",
      schema: payload,
      maxAttempts: 2,
      backoff: [0],
      async handle(_, ctx) {
        await ctx.step("first", () => firstRuns++);
        await ctx.sleep("nap", 300);
        await ctx.sleep("nap", 100); // numbered nap#2
        await ctx.step("after", () => order.push("sleeper"));
      },
    });
    const other = defineJob({
      name: "other",
      schema: payload,
      handle() {
        order.push("other");
      },
    });
    await using queue = await db.open({ jobs: [sleeper, other] });
    const id = await queue.dispatch(sleeper, { n: 1 });
    await queue.dispatch(other, { n: 2 });
    const result = await runUntilFinished(queue, id, { concurrency: 1 });
    assert.equal(result.state, "completed");
    assert.equal(result.attempts, 1, "sleeps are not attempts");
    assert.equal(firstRuns, 1);
    assert.deepEqual(order, ["other", "sleeper"], "the other job ran while it slept");
    const steps = await queue.steps(id);
    assert.deepEqual(steps.map(({ key, kind }) => [key, kind]), [
      ["first", "step"],
      ["nap", "sleep"],
      ["nap#2", "sleep"],
      ["after", "step"],
    ]);
    assert.ok(steps[1]!.until instanceof Date);
  },
);

storeTest(
  "sleeps spend no attempt: maxAttempts 2, three sleeps and a step that throws once still succeed (OpenWorkflow: sleep and lease churn do not consume step retry budget)",
  async (db) => {
    const job = defineJob({
      name: "sleeps-then-flaky",
      schema: payload,
      maxAttempts: 2,
      backoff: [0],
      async handle(_, ctx) {
        for (let i = 0; i < 3; i++) await ctx.sleep("tick", 50);
        await ctx.step("flaky", () => {
          if (ctx.attempt === 1) throw new Error("once");
        });
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    const result = await runUntilFinished(queue, id);
    assert.equal(result.state, "completed");
    assert.equal(result.attempts, 2);
  },
);

storeTest(
  "bad durations and names are refused with a RangeError or TypeError naming them (DBOS: workflow-sleep-fractional-duration; OpenWorkflow: invalid duration)",
  async (db) => {
    const errors: string[] = [];
    let ran = 0;
    const job = defineJob({
      name: "bad-durations",
      schema: payload,
      maxAttempts: 1,
      async handle(_, ctx) {
        for (
          const call of [
            () => ctx.sleep("s", Number.NaN),
            () => ctx.sleep("s", Infinity),
            () => ctx.sleep("s", -1),
            () => ctx.sleepUntil("s", new Date(Number.NaN)),
            () => ctx.waitFor("w", { timeoutMs: -5 }),
            () => ctx.step("", () => 1),
            () => ctx.step("x", "not a function" as unknown as () => number),
            () => ctx.step("x", () => 1, { maxAttempts: 0 }),
            () => ctx.waitFor("w", { timeoutMS: 50 } as unknown as { timeoutMs: number }),
            () => ctx.waitFor("w", 50 as unknown as { timeoutMs: number }),
            () => ctx.step("x", () => 1, { maxAtempts: 3 } as unknown as { maxAttempts: number }),
            () => ctx.step("x", () => ran++, { maxAttempts: 3, backoff: [100, -100] }),
            () => ctx.step("x", () => ran++, { output: {} as unknown as z.ZodNumber }),
            () => ctx.waitFor("w", { schema: { parse: () => 1 } as unknown as z.ZodNumber }),
          ]
        ) {
          try {
            await call();
            errors.push("no error");
          } catch (error) {
            errors.push(`${(error as Error).name}: ${(error as Error).message}`);
          }
        }
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    await workUntilEmpty(queue);
    assert.equal((await queue.result(id))?.state, "completed");
    assert.match(errors[0]!, /RangeError: ctx\.sleep\("s"\): ms must be a number .*got NaN/);
    assert.match(errors[1]!, /RangeError: .*got Infinity/);
    assert.match(errors[2]!, /RangeError: .*got -1/);
    assert.match(errors[3]!, /RangeError: ctx\.sleepUntil\("s"\): until must be a valid Date/);
    assert.match(errors[4]!, /RangeError: ctx\.waitFor\("w"\): timeoutMs must be/);
    assert.match(errors[5]!, /TypeError: ctx\.step: the step's name must be a string of 1 to 255/);
    assert.match(errors[6]!, /TypeError: ctx\.step\("x"\): fn must be a function: got string/);
    assert.match(errors[7]!, /RangeError: ctx\.step\("x"\): maxAttempts must be an integer/);
    assert.equal(
      errors[8],
      'TypeError: ctx.waitFor("w"): unknown option "timeoutMS" (it takes "timeoutMs", "schema")',
    );
    assert.equal(errors[9], 'TypeError: ctx.waitFor("w"): options must be an object: got 50');
    assert.match(
      errors[10]!,
      /^TypeError: ctx\.step\("x"\): unknown option "maxAtempts" \(it takes/,
    );
    assert.match(
      errors[11]!,
      /^RangeError: ctx\.step\("x"\): backoff for retry 2 must be a delay from 0 to \d+ ms: got -100/,
    );
    assert.equal(errors[12], 'TypeError: ctx.step("x"): output must be a zod schema: got object');
    assert.match(errors[13]!, /^TypeError: ctx\.waitFor\("w"\): schema must be a zod schema: got/);
    assert.equal(ran, 0, "a step with a bad backoff list or output schema never ran");
    assert.deepEqual(await queue.steps(id), [], "nothing was recorded");
  },
);

/** A job that waits for a `survey` signal after one step, and returns what came. */
function surveyJob(timeoutMs?: number) {
  return defineJob({
    name: "survey",
    schema: payload,
    output: z.object({ reply: z.unknown(), prepared: z.number() }),
    async handle(_, ctx) {
      const prepared = await ctx.step("prepare", () => 7);
      const reply = await ctx.waitFor("survey", timeoutMs === undefined ? {} : { timeoutMs });
      return { reply, prepared };
    },
  });
}

storeTest(
  "a signal wakes a job parked in waitFor: delivered, and the job completes with its payload (DBOS: simple-workflow-notifications)",
  async (db) => {
    const job = surveyJob();
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    const worker = queue.work({ pollMs: 5_000 }); // a slow poll: the signal must wake it
    try {
      await waitUntil(
        async () => (await queue.steps(id)).some((step) => step.state === "parked"),
        { what: "the job parked in its wait" },
      );
      assert.equal((await queue.result(id))?.state, "pending");
      assert.equal(await queue.signal(id, "survey", { score: 9 }), "delivered");
      const result = await waitUntil(async () => {
        const result = await queue.result(id);
        return result?.state === "completed" ? result : null;
      }, { what: "the job completed" });
      assert.deepEqual(result.output, { reply: { score: 9 }, prepared: 7 });
      assert.equal(result.attempts, 1, "a wait is not an attempt");
    } finally {
      await worker.stop();
    }
    assert.equal(await queue.signal(id, "survey", 1), "finished");
  },
);

storeTest(
  "a signal sent before the wait began is buffered and taken by it (absurd: event emitted before await is cached)",
  async (db) => {
    const job = surveyJob();
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    assert.equal(await queue.signal(id, "survey", "early"), "buffered");
    assert.equal(await queue.signal(id, "other", "ignored"), "buffered");
    await workUntilEmpty(queue);
    const result = await queue.result(id);
    assert.deepEqual(result?.output, { reply: "early", prepared: 7 });
    const steps = await queue.steps(id);
    assert.deepEqual(steps.map(({ key, kind, output }) => [key, kind, output]), [
      ["prepare", "step", 7],
      ["survey", "wait", "early"],
    ]);
  },
);

storeTest(
  "two waits of one name take the signals in the order sent (DBOS: send-idempotency-key, recvTwoOnTopic)",
  async (db) => {
    const job = defineJob({
      name: "two-waits",
      schema: payload,
      output: z.array(z.unknown()),
      async handle(_, ctx) {
        return [await ctx.waitFor("msg"), await ctx.waitFor("msg")];
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    await queue.signal(id, "msg", "a");
    await queue.signal(id, "msg", "b");
    await workUntilEmpty(queue);
    assert.deepEqual((await queue.result(id))?.output, ["a", "b"]);
  },
);

storeTest(
  "a wait times out with null once, and a later attempt does not wait again (OpenWorkflow: waitForSignal returns null on timeout; absurd: awaitEvent timeout does not recreate wait)",
  async (db) => {
    let waits = 0;
    const job = defineJob({
      name: "wait-times-out",
      schema: payload,
      output: z.unknown(),
      maxAttempts: 2,
      backoff: [0],
      async handle(_, ctx) {
        waits++;
        const reply = await ctx.waitFor("never", { timeoutMs: 200 });
        if (ctx.attempt === 1) throw new Error("after the wait");
        return reply;
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    const result = await runUntilFinished(queue, id);
    assert.equal(result.state, "completed");
    assert.equal(result.output, null);
    assert.equal(result.attempts, 2);
    assert.equal(waits, 3, "parked once, woke at the timeout, then replayed on the retry");
  },
);

storeTest(
  "signal answers not-found for no such job and finished for one that ended, storing nothing (DBOS: simple-workflow-notifications)",
  async (db) => {
    const job = defineJob({ name: "plain", schema: payload, handle() {} });
    const failing = defineJob({
      name: "fails",
      schema: payload,
      maxAttempts: 1,
      handle() {
        throw new Error("no");
      },
    });
    await using queue = await db.open({ jobs: [job, failing], keepFinishedMs: 60_000 });
    assert.equal(await queue.signal(999_999, "x", 1), "not-found");
    const done = await queue.dispatch(job, { n: 1 });
    const failed = await queue.dispatch(failing, { n: 2 });
    await workUntilEmpty(queue);
    assert.equal(await queue.signal(done, "x", 1), "finished");
    assert.equal(await queue.signal(failed, "x", 1), "finished");
    await assert.rejects(queue.signal(done, "bad#name", 1), /must not contain "#"/);
    await assert.rejects(queue.signal(done, "x", { at: new Date() }), /does not survive JSON/);
    await assert.rejects(queue.signal(0, "x", 1), /A job id must be a positive integer/);
  },
);

storeTest(
  "a sleeping job cancelled never wakes (absurd: cancel sleeping task transitions run to cancelled)",
  async (db) => {
    let after = 0;
    const job = defineJob({
      name: "long-sleep",
      schema: payload,
      async handle(_, ctx) {
        await ctx.sleep("long", 200);
        after++;
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    const worker = queue.work({ pollMs: 20 });
    try {
      await waitUntil(async () => (await queue.steps(id)).length === 1, { what: "it slept" });
      assert.equal(await queue.cancel(id), "cancelled");
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      await worker.stop();
    }
    assert.equal(after, 0);
    assert.equal((await queue.result(id))?.state, "cancelled");
  },
);

storeTest(
  "a step past its timeoutMs ends the attempt with StepTimeoutError, and the next attempt resumes at that step (DBOS: timeout-attempt-is-retried-then-succeeds)",
  async (db) => {
    const runs = { first: 0, slow: 0 };
    const job = defineJob({
      name: "slow-step",
      schema: payload,
      maxAttempts: 2,
      backoff: [0],
      async handle(_, ctx) {
        await ctx.step("first", () => runs.first++);
        await ctx.step("slow", async (signal) => {
          runs.slow++;
          if (ctx.attempt === 1) {
            await new Promise((resolve) => signal.addEventListener("abort", resolve));
            assert.ok(signal.reason instanceof StepTimeoutError);
          }
        }, { timeoutMs: 100 });
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const retries: string[] = [];
    queue.addEventListener("job:retry", (event) => retries.push(String(event.detail.error)));
    const id = await queue.dispatch(job, { n: 1 });
    const result = await runUntilFinished(queue, id);
    assert.equal(result.state, "completed");
    assert.equal(result.attempts, 2);
    assert.deepEqual(runs, { first: 1, slow: 2 });
    assert.deepEqual(retries, ['StepTimeoutError: Step "slow" timed out after 100 ms']);
  },
);

storeTest(
  "in the isolate, a synchronous step that holds the event loop past its timeoutMs times out all the same: not recorded, and the next attempt runs it again",
  async (db) => {
    const job = defineJob({
      name: "sync-slow-step",
      schema: payload,
      maxAttempts: 2,
      backoff: [0],
      output: z.string(),
      async handle(_, ctx) {
        return await ctx.step("spin", () => {
          const until = performance.now() + (ctx.attempt === 1 ? 600 : 0);
          while (performance.now() < until) { /* synchronous work, past the timeout */ }
          return `spun@${ctx.attempt}`;
        }, { timeoutMs: 250 });
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const retries: string[] = [];
    queue.addEventListener("job:retry", (event) => retries.push(String(event.detail.error)));
    const id = await queue.dispatch(job, { n: 1 });
    await workUntilEmpty(queue, { executor: "isolate" });
    const result = await queue.result(id);
    assert.equal(result?.state, "completed");
    assert.equal(result?.output, "spun@2");
    assert.deepEqual(retries, ['StepTimeoutError: Step "spin" timed out after 250 ms']);
    assert.deepEqual(
      (await queue.steps(id)).map(({ key, attempt }) => ({ key, attempt })),
      [{ key: "spin", attempt: 2 }],
    );
  },
);

for (const executor of ["isolate", "workers"] as const) {
  storeTest(
    `a step its handler did not await, ending after the attempt, is not recorded and ends neither the ${executor} nor a job running beside it`,
    async (db) => {
      await using dir = await tempDir();
      const ledger = join(dir.dir, "ledger");
      await using queue = await db.open({ jobs: STEP_JOBS });
      const floating = await queue.dispatch(floatingStep, { ledger });
      const beside = await queue.dispatch(ledgerWatcher, { ledger, what: "late-ran" });
      const worker = queue.work({ executor, concurrency: 2, workers: 1, pollMs: 20 });
      try {
        await waitUntil(
          () => readLedger(ledger).some((line) => line.id === beside && line.what === "watched"),
          { what: "the job beside saw the floating step end, running", timeoutMs: 60_000 },
        );
        // The floating step's end went through the executor; a job after it still runs.
        const after = await queue.dispatch(napper, { ledger, ms: 0 });
        await waitUntil(async () => (await queue.result(after))?.state === "completed", {
          what: "a job dispatched after the floating step ended completed",
          timeoutMs: 60_000,
        });
      } finally {
        await worker.stop();
      }
      for (const id of [floating, beside]) {
        const result = await queue.result(id);
        assert.deepEqual([result?.state, result?.attempts], ["completed", 1], `job ${id}`);
      }
      assert.deepEqual(await queue.steps(floating), [], "the floating step is not recorded");
    },
  );
}

storeTest(
  "a step's maxAttempts retries it inside the attempt with its backoff; a PermanentError is not retried",
  async (db) => {
    let tries = 0;
    let permanentTries = 0;
    const job = defineJob({
      name: "step-retries",
      schema: payload,
      maxAttempts: 1,
      output: z.number(),
      async handle(_, ctx) {
        const value = await ctx.step("flaky", () => {
          if (++tries < 3) throw new Error(`try ${tries}`);
          return tries;
        }, { maxAttempts: 3, backoff: [10] });
        await ctx.step("permanent", () => {
          permanentTries++;
          if (permanentTries === 1) throw new PermanentError("no");
        }, { maxAttempts: 3, backoff: () => 10 }).catch(() => {});
        return value;
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    await workUntilEmpty(queue);
    const result = await queue.result(id);
    assert.equal(result?.state, "completed");
    assert.equal(result?.output, 3);
    assert.equal(permanentTries, 1);
  },
);

storeTest(
  "an encrypted job's step outputs are sealed: listed as encrypted, replayed opened",
  async (db) => {
    let runs = 0;
    const job = defineJob({
      name: "secret-steps",
      schema: payload,
      encrypted: true,
      output: z.string(),
      maxAttempts: 2,
      backoff: [0],
      async handle(_, ctx) {
        const secret = await ctx.step("secret", () => {
          runs++;
          return "s3cret";
        });
        const reply = await ctx.waitFor("go");
        if (ctx.attempt === 1) throw new Error("again");
        return `${secret}:${reply}`;
      },
    });
    await using queue = await db.open({ jobs: [job], appKey: generateAppKey() });
    const id = await queue.dispatch(job, { n: 1 });
    assert.equal(await queue.signal(id, "go", "yes"), "buffered");
    await workUntilEmpty(queue);
    const result = await queue.result(id);
    assert.equal(result?.output, "s3cret:yes");
    assert.equal(runs, 1);
    const steps = await queue.steps(id);
    assert.deepEqual(steps.map(({ key, encrypted, output }) => [key, encrypted, output]), [
      ["secret", true, undefined],
      ["go", true, undefined],
    ]);
    const store = await db.store();
    const { steps: rows } = await store.jobSteps(id);
    assert.ok(!rows.some((row) => row.output?.includes("s3cret") || row.output?.includes("yes")));
  },
);

storeTest(
  "sleep across a restart: a new queue on the same database wakes the job without running its first step again",
  async (db) => {
    let firstRuns = 0;
    let finished = 0;
    const job = defineJob({
      name: "restart-sleeper",
      schema: payload,
      async handle(_, ctx) {
        await ctx.step("first", () => firstRuns++);
        await ctx.sleep("nap", 300);
        finished++;
      },
    });
    let id: number;
    {
      await using queue = await db.open({ jobs: [job] });
      id = await queue.dispatch(job, { n: 1 });
      const worker = queue.work({ pollMs: 20 });
      await waitUntil(async () => (await queue.steps(id)).length === 2, { what: "it slept" });
      await worker.stop();
    }
    await using queue = await db.open({ jobs: [job] });
    const result = await runUntilFinished(queue, id);
    assert.equal(result.state, "completed");
    assert.deepEqual({ firstRuns, finished }, { firstRuns: 1, finished: 1 });
  },
);

storeTest(
  "steps of a job that failed for good are kept, and retry(id) resumes from them",
  async (db) => {
    let runs = 0;
    let fail = true;
    const job = defineJob({
      name: "resume-after-retry",
      schema: payload,
      maxAttempts: 1,
      async handle(_, ctx) {
        await ctx.step("once", () => runs++);
        if (fail) throw new Error("fails for good");
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    await workUntilEmpty(queue);
    assert.equal((await queue.result(id))?.state, "failed");
    assert.equal((await queue.steps(id)).length, 1);
    fail = false;
    assert.equal(await queue.retry(id), true);
    await workUntilEmpty(queue);
    assert.equal((await queue.result(id))?.state, "completed");
    assert.equal(runs, 1);
  },
);

storeTest("a handler that goes on after a sleep parked it cannot record more steps", async (db) => {
  let ran = false;
  const job = defineJob({
    name: "parallel-after-park",
    schema: payload,
    async handle(_, ctx: JobContext) {
      // The sleep parks the attempt (it never resolves); the handler goes on regardless.
      await Promise.race([ctx.sleep("nap", 60_000), new Promise((r) => setTimeout(r, 50))]);
      // Called once the attempt parked (or, on a machine slow enough that the sleep parked only
      // after the 50 ms, once it ends): never settles, and its function never runs.
      await ctx.step("later", () => ran = true);
    },
  });
  await using queue = await db.open({ jobs: [job] });
  const id = await queue.dispatch(job, { n: 1 });
  const worker = queue.work({ pollMs: 20 });
  try {
    await waitUntil(async () => (await queue.steps(id)).length > 0, { what: "the park" });
    await new Promise((resolve) => setTimeout(resolve, 200));
  } finally {
    await worker.stop();
  }
  assert.equal(ran, false, "the step's function ran after the park");
  assert.equal((await queue.result(id))?.state, "pending");
  assert.deepEqual((await queue.steps(id)).map((step) => step.key), ["nap"], "later not recorded");
});

storeTest(
  "a signal that fails the wait's schema fails the job for good, naming it (OpenWorkflow: waitForSignal fails step when schema validation fails)",
  async (db) => {
    const job = defineJob({
      name: "approve",
      schema: payload,
      maxAttempts: 3,
      async handle(_, ctx) {
        await ctx.waitFor("approved", { schema: z.object({ approved: z.boolean() }) });
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    assert.equal(await queue.signal(id, "approved", { approved: "x" }), "buffered");
    await workUntilEmpty(queue);
    const result = await queue.result(id);
    assert.equal(result?.state, "failed");
    assert.equal(result?.attempts, 1, "not retried");
    const [failed] = await queue.failed();
    assert.match(
      failed!.error,
      /PayloadIntegrityError: .*does not match the wait's schema: signal\.approved/,
    );
  },
);

storeTest(
  "a signal to an encrypted job is sealed, and refused without an app key; to a plain job it is stored as sent",
  async (db) => {
    const secret = defineJob({
      name: "secret-wait",
      schema: payload,
      encrypted: true,
      async handle(_, ctx) {
        await ctx.waitFor("go");
      },
    });
    const plain = defineJob({
      name: "plain-wait",
      schema: payload,
      async handle(_, ctx) {
        await ctx.waitFor("go");
      },
    });
    const appKey = generateAppKey();
    await using keyed = await db.open({ jobs: [secret, plain], appKey });
    const sealedId = await keyed.dispatch(secret, { n: 1 });
    const plainId = await keyed.dispatch(plain, { n: 2 });
    await using keyless = await db.open({ jobs: [] });
    await assert.rejects(
      keyless.signal(sealedId, "go", 1),
      new RegExp(
        `job ${sealedId} is encrypted, and so must its signals be: set APP_KEY`,
      ),
    );
    assert.equal(await keyless.signal(plainId, "go", "hello"), "buffered");
    assert.equal(await keyed.signal(sealedId, "go", "hidden"), "buffered");
    const store = await db.store();
    const [sealed] = (await store.jobSteps(sealedId)).signals;
    assert.ok(sealed !== undefined && !sealed.payload.includes("hidden"));
    assert.deepEqual((await store.jobSteps(plainId)).signals.map((s) => s.payload), ['"hello"']);
    await workUntilEmpty(keyed);
    assert.equal((await keyed.result(sealedId))?.state, "completed");
    assert.equal((await keyed.result(plainId))?.state, "completed");
  },
);

storeTest(
  "a chain's next link waits for the whole job, sleeps and waits included, and a batch counts the job once when it ends",
  async (db) => {
    const order: string[] = [];
    const stepped = defineJob({
      name: "stepped-link",
      schema: payload,
      async handle({ n }, ctx) {
        await ctx.step("before", () => order.push(`before ${n}`));
        await ctx.sleep("nap", 150);
        await ctx.waitFor("go", { timeoutMs: 150 });
        await ctx.step("after", () => order.push(`after ${n}`));
      },
    });
    const next = defineJob({
      name: "next-link",
      schema: payload,
      handle({ n }) {
        order.push(`next ${n}`);
      },
    });
    await using queue = await db.open({ jobs: [stepped, next] });
    await queue.chain().then(stepped, { n: 1 }).then(next, { n: 1 }).dispatch();
    const batchId = await queue.batch("stepped").push(stepped, { n: 2 }).then(next, { n: 2 })
      .dispatch();
    const worker = queue.work({ pollMs: 20 });
    try {
      await waitUntil(
        async () => {
          const status = await queue.batchStatus(batchId);
          assert.ok(
            status !== null && status.succeeded <= 1 && status.pending + status.succeeded === 1,
          );
          return order.includes("next 1") && order.includes("next 2") ? status : null;
        },
        { what: "both follow-ups ran" },
      );
    } finally {
      await worker.stop();
    }
    assert.ok(order.indexOf("next 1") > order.indexOf("after 1"), order.join(", "));
    assert.ok(order.indexOf("next 2") > order.indexOf("after 2"), order.join(", "));
    assert.equal(order.filter((line) => line.startsWith("before")).length, 2, "each ran once");
    const status = (await queue.batchStatus(batchId))!;
    assert.deepEqual([status.total, status.succeeded, status.finished], [1, 1, true]);
  },
);

storeTest(
  "dispatchSync runs a job's steps without recording them, and refuses a sleep or a wait, naming why",
  async (db) => {
    let runs = 0;
    const stepsOnly = defineJob({
      name: "steps-only",
      schema: payload,
      output: z.number(),
      async handle({ n }, ctx) {
        const a = await ctx.step("a", () => ++runs);
        const b = await ctx.step("a", () => ++runs);
        return a + b + n;
      },
    });
    const sleeps = defineJob({
      name: "sleeps-now",
      schema: payload,
      async handle(_, ctx) {
        await ctx.sleep("nap", 10);
      },
    });
    await using queue = await db.open({ jobs: [stepsOnly, sleeps] });
    await queue.dispatchSync(stepsOnly, { n: 10 });
    assert.equal(runs, 2);
    await assert.rejects(
      queue.dispatchSync(sleeps, { n: 1 }),
      /ctx\.sleep\("nap"\): a job run now without being stored \(dispatchSync\) cannot sleep or wait/,
    );
  },
);

storeTest(
  "steps started together are recorded even when a sibling's throw ends the attempt in the same tick",
  async (db) => {
    const runs = { a: 0, b: 0, c: 0 };
    const job = defineJob({
      name: "together",
      schema: payload,
      maxAttempts: 2,
      backoff: [0],
      async handle(_, ctx) {
        await Promise.all([
          ctx.step("a", () => runs.a++),
          ctx.step("b", () => {
            runs.b++;
            if (ctx.attempt === 1) throw new Error("b fails once");
          }),
          ctx.step("c", () => runs.c++),
        ]);
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    await workUntilEmpty(queue);
    assert.equal((await queue.result(id))?.state, "completed");
    assert.deepEqual(runs, { a: 1, b: 2, c: 1 }, "a and c were recorded by attempt 1");
  },
);

storeTest(
  "a worker that lost its job's lease cannot record a step: the store refuses its late step, and the attempt that took the job over records it",
  async (db) => {
    const clock = new ManualClock();
    const late = Promise.withResolvers<void>();
    const current = Promise.withResolvers<void>();
    const refusals: string[] = [];
    let firstRuns = 0;
    const job = defineJob({
      name: "lost-lease",
      schema: payload,
      maxAttempts: 3,
      async handle(_, ctx) {
        await ctx.step("first", () => ++firstRuns);
        try {
          await ctx.step("second", async () => {
            await (ctx.attempt === 1 ? late : current).promise;
            return `attempt ${ctx.attempt}`;
          });
        } catch (error) {
          refusals.push((error as Error).message);
          throw error;
        }
      },
    });
    // A lease long in real time: worker A never renews during the test, while the shared clock
    // is moved past it, so worker B takes the job over and A's attempt goes on unaware.
    const dead = { leaseMs: 60_000, pollMs: 10 } as const;
    await using queueA = await db.open({ jobs: [job], clock });
    await using queueB = await db.open({ jobs: [job], clock });
    const id = await queueA.dispatch(job, { n: 1 });
    const workerA = queueA.work(dead);
    let workerB: ReturnType<Queue["work"]> | undefined;
    try {
      await waitUntil(async () => (await queueA.steps(id)).length === 1, {
        what: "attempt 1 recorded its first step",
      });
      clock.advance(dead.leaseMs + 1);
      const started = nextEvent<{ attempt: number }>(queueB, "job:start");
      workerB = queueB.work(dead);
      assert.equal((await started).attempt, 2);

      late.resolve(); // A's step ends after B took the job over
      await waitUntil(() => Promise.resolve(refusals.length === 1), { what: "A's step refused" });
      assert.match(
        refusals[0]!,
        new RegExp(`Step "second" of job ${id} was not recorded: the job's lease was lost`),
      );
      assert.deepEqual((await queueB.steps(id)).map(({ key }) => key), ["first"]);

      current.resolve();
      await waitUntil(async () => (await queueB.result(id))?.state === "completed", {
        what: "B completed it",
      });
    } finally {
      late.resolve();
      current.resolve();
      await workerA.stop();
      await workerB?.stop();
    }
    const steps = await queueB.steps(id);
    assert.deepEqual(steps.map(({ key, attempt, output }) => ({ key, attempt, output })), [
      { key: "first", attempt: 1, output: 1 },
      { key: "second", attempt: 2, output: "attempt 2" },
    ]);
    assert.equal(firstRuns, 1);
  },
);

storeTest(
  "a sleep that outlasts the retry deadline still wakes (it is not a retry), and a failure after it is final; a retry due past the deadline is still refused",
  async (db) => {
    const clock = new ManualClock();
    const runs = { first: 0, after: 0, boom: 0 };
    const deadline = (at: Date) => new Date(at.getTime() + 60_000);
    const sleeper = defineJob({
      name: "sleeps-past-deadline",
      schema: payload,
      maxAttempts: 3,
      backoff: [0],
      retryUntil: deadline,
      async handle(_, ctx) {
        await ctx.step("first", () => runs.first++);
        await ctx.sleep("long", 3_600_000);
        await ctx.step("after", () => {
          runs.after++;
          throw new Error("after fails");
        });
      },
    });
    const retried = defineJob({
      name: "retried-past-deadline",
      schema: payload,
      maxAttempts: 3,
      backoff: [3_600_000],
      jitter: 0,
      retryUntil: deadline,
      async handle(_, ctx) {
        await ctx.sleep("nap", 1_000);
        await ctx.step("boom", () => {
          runs.boom++;
          throw new Error("boom fails");
        });
      },
    });
    await using queue = await db.open({ jobs: [sleeper, retried], clock });
    const sleeping = await queue.dispatch(sleeper, { n: 1 });
    const failing = await queue.dispatch(retried, { n: 2 });
    const worker = queue.work({ pollMs: 10 });
    const finished = async (id: number) => {
      const result = await queue.result(id);
      return result?.state === "completed" || result?.state === "failed";
    };
    try {
      await waitUntil(async () => (await queue.steps(sleeping)).length === 2, { what: "it slept" });
      await waitUntil(async () => (await queue.steps(failing)).length === 1, { what: "it napped" });
      clock.advance(1_000);
      await waitUntil(() => Promise.resolve(runs.boom === 1), { what: "boom failed once" });
      clock.advance(3_600_000);
      await waitUntil(async () => await finished(sleeping) && await finished(failing), {
        what: "both failed",
      });
    } finally {
      await worker.stop();
    }
    const failed = new Map((await queue.failed()).map((job) => [job.id, job]));
    assert.match(failed.get(sleeping)!.error, /after fails/, "it woke and ran past the deadline");
    assert.equal(failed.get(sleeping)!.attempts, 1, "its failure past the deadline is final");
    assert.deepEqual(runs, { first: 1, after: 1, boom: 1 });
    assert.match(failed.get(failing)!.error, /retry deadline passed/);
  },
);

storeTest(
  "a job parked in waitFor that is cancelled never wakes, and a signal to it answers finished",
  async (db) => {
    let after = 0;
    const job = defineJob({
      name: "cancelled-wait",
      schema: payload,
      async handle(_, ctx) {
        await ctx.waitFor("approve");
        after++;
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    const worker = queue.work({ pollMs: 20 });
    try {
      await waitUntil(async () => (await queue.steps(id)).length === 1, { what: "it waited" });
      assert.equal(await queue.cancel(id), "cancelled");
      assert.equal(await queue.signal(id, "approve", true), "finished");
      await new Promise((resolve) => setTimeout(resolve, 300));
    } finally {
      await worker.stop();
    }
    assert.equal(after, 0);
    assert.equal((await queue.result(id))?.state, "cancelled");
  },
);

storeTest(
  "a step output that fails its output schema is not recorded and fails the attempt, naming it; a recorded output that no longer fits it fails the job for good",
  async (db) => {
    let runs = 0;
    let schema: z.ZodType<unknown> = z.number();
    const job = defineJob({
      name: "checked-output",
      schema: payload,
      maxAttempts: 3,
      backoff: [0],
      async handle(_, ctx) {
        await ctx.step("count", () => ++runs === 1 ? "one" : runs, { output: schema });
        if (ctx.attempt === 2) throw new Error("fails after count");
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const retries: string[] = [];
    queue.addEventListener("job:retry", (event) => {
      retries.push(String((event as CustomEvent<{ error: unknown }>).detail.error));
    });
    const id = await queue.dispatch(job, { n: 1 });
    await queue.work({ maxJobs: 2, stopWhenEmpty: true }).done;
    assert.equal(retries.length, 2);
    assert.match(
      retries[0]!,
      /ValidationError: Cannot store step "count" of "checked-output": step output: Invalid input/,
    );
    assert.deepEqual(
      (await queue.steps(id)).map(({ key, attempt, output }) => [key, attempt, output]),
      [
        ["count", 2, 2],
      ],
    );
    schema = z.string(); // the code changed the step's schema under the running job
    await workUntilEmpty(queue);
    const [failed] = await queue.failed();
    assert.equal(failed?.attempts, 3);
    assert.match(failed!.error, /PayloadIntegrityError: .*does not match the step's output schema/);
    assert.equal(runs, 2);
  },
);

storeTest(
  "a step whose output schema transforms or strips gives every run, the first included, the output it recorded, and the job goes on past a sleep",
  async (db) => {
    const clock = new ManualClock();
    const seen: unknown[][] = [];
    const job = defineJob({
      name: "shaped-outputs",
      schema: payload,
      async handle(_, ctx) {
        const length = await ctx.step("length-of", () => "abcd", {
          output: z.string().transform((text) => text.length),
        });
        const user = await ctx.step("user", () => ({ id: 1, password: "secret" }), {
          output: z.object({ id: z.number() }),
        });
        const both = await ctx.step("both", () => ({ id: 2, name: " Ann ", extra: true }), {
          output: z.object({ id: z.number(), name: z.string().trim().pipe(z.string().min(1)) }),
        });
        seen.push([length, user, both]);
        await ctx.sleep("nap", 60_000);
        seen.push([length, user, both]);
      },
    });
    await using queue = await db.open({ jobs: [job], clock });
    const id = await queue.dispatch(job, { n: 1 });
    await workUntilEmpty(queue);
    clock.advance(61_000);
    await workUntilEmpty(queue);
    assert.equal((await queue.result(id))?.state, "completed");
    assert.deepEqual(await queue.failed(), []);
    const recorded = [4, { id: 1 }, { id: 2, name: "Ann" }];
    assert.deepEqual(seen, [recorded, recorded, recorded], "the first run and both later ones");
    assert.deepEqual(
      (await queue.steps(id)).filter(({ kind }) => kind === "step").map(({ output }) => output),
      recorded,
    );
  },
);

storeTest(
  "a step output its own schema would refuse once read back from JSON is refused when recorded, naming the job, the step and the part",
  async (db) => {
    const job = defineJob({
      name: "dropped-key",
      schema: payload,
      maxAttempts: 1,
      async handle(_, ctx) {
        // JSON drops `data`; z.unknown() as a required property then refuses what is read back.
        await ctx.step("fetch", () => ({ data: undefined, ok: true }), {
          output: z.object({ data: z.unknown(), ok: z.boolean() }),
        });
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const id = await queue.dispatch(job, { n: 1 });
    await workUntilEmpty(queue);
    const [failed] = await queue.failed();
    assert.match(
      failed!.error,
      /ValidationError: Cannot store step "fetch" of "dropped-key": step output would fail its output schema once read back from JSON: step output\.data: /,
    );
    assert.deepEqual(await queue.steps(id), [], "nothing recorded");
  },
);

storeTest(
  "a step output nested deeper than 1000 arrays and objects fails the attempt with a ValidationError naming the job and the step; 1000 levels are recorded and read back",
  async (db) => {
    const clock = new ManualClock();
    /** `depth` arrays, one inside the other, around 1. */
    const nested = (depth: number) => {
      let value: unknown = 1;
      for (let level = 0; level < depth; level++) value = [value];
      return value;
    };
    const depthOf = (value: unknown) => {
      let depth = 0;
      for (; Array.isArray(value); depth++) value = value[0];
      return depth;
    };
    const depths: number[] = [];
    const deepEnough = defineJob({
      name: "deep-enough",
      schema: payload,
      async handle(_, ctx) {
        depths.push(depthOf(await ctx.step("nest", () => nested(1_000))));
        await ctx.sleep("nap", 60_000);
        depths.push(depthOf(await ctx.step("nest", () => nested(1_000))));
      },
    });
    const tooDeep = defineJob({
      name: "too-deep",
      schema: payload,
      maxAttempts: 1,
      async handle(_, ctx) {
        await ctx.step("nest", () => nested(5_000)); // 10 KB of JSON that JSON.stringify writes
      },
    });
    await using queue = await db.open({ jobs: [deepEnough, tooDeep], clock });
    const ok = await queue.dispatch(deepEnough, { n: 1 });
    const refused = await queue.dispatch(tooDeep, { n: 2 });
    await workUntilEmpty(queue);
    clock.advance(61_000);
    await workUntilEmpty(queue);
    assert.equal((await queue.result(ok))?.state, "completed");
    assert.deepEqual(depths, [1_000, 1_000, 1_000], "recorded, then read back on the next run");
    const [failed] = await queue.failed();
    assert.equal(failed?.id, refused);
    assert.match(
      failed!.error,
      /^ValidationError: Cannot store step "nest" of "too-deep": step output does not survive JSON: step output: nested deeper than 1000 arrays and objects/,
    );
    assert.deepEqual(await queue.steps(refused), []);
  },
);

storeTest(
  "ctx.sleepUntil parks the job until that time by the queue's clock, listed with it, and then goes on past it",
  async (db) => {
    const clock = new ManualClock();
    const wakeAt = new Date(clock.now() + 3_600_000);
    let after = 0;
    const job = defineJob({
      name: "sleeps-until",
      schema: payload,
      async handle(_, ctx) {
        await ctx.step("before", () => 1);
        await ctx.sleepUntil("until-then", wakeAt);
        after++;
      },
    });
    await using queue = await db.open({ jobs: [job], clock });
    const id = await queue.dispatch(job, { n: 1 });
    const worker = queue.work({ pollMs: 10 });
    try {
      await waitUntil(async () => (await queue.steps(id)).length === 2, { what: "it slept" });
      const [, sleep] = await queue.steps(id);
      assert.deepEqual([sleep?.key, sleep?.kind, sleep?.until?.getTime()], [
        "until-then",
        "sleep",
        wakeAt.getTime(),
      ]);
      clock.advance(3_600_000 - 1_000);
      await new Promise((resolve) => setTimeout(resolve, 200)); // polls that must not wake it
      assert.equal(after, 0, "not woken before its time");
      clock.advance(1_000);
      await waitUntil(async () => (await queue.result(id))?.state === "completed", {
        what: "it woke and completed",
      });
    } finally {
      await worker.stop();
    }
    assert.equal(after, 1);
    assert.equal((await queue.result(id))?.attempts, 1);
  },
);

storeTest(
  "a sleeping or waiting job keeps its unique key: a dispatch meanwhile is a duplicate, and one after it completed is not",
  async (db) => {
    const clock = new ManualClock();
    const job = defineJob({
      name: "unique-sleeper",
      schema: payload,
      uniqueForMs: 86_400_000,
      uniqueId: () => "one",
      async handle(_, ctx) {
        await ctx.sleep("nap", 3_600_000);
        await ctx.waitFor("go");
      },
    });
    await using queue = await db.open({ jobs: [job], clock });
    const id = await queue.dispatch(job, { n: 1 });
    const worker = queue.work({ pollMs: 10 });
    try {
      await waitUntil(async () => (await queue.steps(id)).length === 1, { what: "it slept" });
      assert.equal(await queue.dispatch(job, { n: 2 }), id, "a duplicate while it sleeps");
      clock.advance(3_600_000);
      await waitUntil(async () => (await queue.steps(id)).length === 2, { what: "it waited" });
      assert.equal(await queue.dispatch(job, { n: 3 }), id, "a duplicate while it waits");
      assert.equal(await queue.signal(id, "go", null), "delivered");
      await waitUntil(async () => (await queue.result(id))?.state === "completed", {
        what: "it completed",
      });
    } finally {
      await worker.stop();
    }
    assert.notEqual(await queue.dispatch(job, { n: 4 }), id);
  },
);

storeTest(
  "with the isolate executor a step that ignores its signal past its timeoutMs still ends the attempt, and the next attempt records the step, not the late result",
  async (db) => {
    const late = Promise.withResolvers<void>();
    let lateReturned = false;
    const job = defineJob({
      name: "stubborn-step",
      schema: payload,
      maxAttempts: 2,
      backoff: [0],
      async handle(_, ctx) {
        await ctx.step("stubborn", async () => {
          if (ctx.attempt > 1) return "on time";
          await late.promise; // ignores its signal
          lateReturned = true;
          return "late";
        }, { timeoutMs: 100 });
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const retries: string[] = [];
    queue.addEventListener("job:retry", (event) => retries.push(String(event.detail.error)));
    const id = await queue.dispatch(job, { n: 1 });
    const worker = queue.work({ pollMs: 20 });
    try {
      await waitUntil(async () => (await queue.result(id))?.state === "completed", {
        what: "attempt 2 completed while attempt 1's step still runs",
      });
      assert.equal(lateReturned, false);
      late.resolve();
      await waitUntil(() => Promise.resolve(lateReturned), { what: "the late step returned" });
    } finally {
      late.resolve();
      await worker.stop();
    }
    assert.deepEqual(retries, ['StepTimeoutError: Step "stubborn" timed out after 100 ms']);
    assert.deepEqual(
      (await queue.steps(id)).map(({ key, attempt, output }) => [key, attempt, output]),
      [["stubborn", 2, "on time"]],
    );
  },
);

storeTest(
  "ctx.sleepUntil a time with a fraction of a ms sleeps until the next whole ms, on every store",
  async (db) => {
    const clock = new ManualClock();
    const wakeAt = clock.now() + 60_000.5;
    const job = defineJob({
      name: "sleeps-until-fraction",
      schema: payload,
      async handle(_, ctx) {
        await ctx.sleepUntil("nap", wakeAt);
      },
    });
    await using queue = await db.open({ jobs: [job], clock });
    const id = await queue.dispatch(job, { n: 1 });
    const worker = queue.work({ pollMs: 10 });
    try {
      await waitUntil(async () => (await queue.steps(id)).length === 1, { what: "it slept" });
      assert.equal((await queue.steps(id))[0]?.until?.getTime(), Math.ceil(wakeAt));
      clock.advance(61_000);
      await waitUntil(async () => (await queue.result(id))?.state === "completed", {
        what: "it woke and completed",
      });
    } finally {
      await worker.stop();
    }
    assert.deepEqual(await queue.failed(), []);
  },
);

storeTest(
  "a debounced dispatch leaves a job its sleep or wait parked as it was (it started, on its payload): the dispatch stores a new job",
  async (db) => {
    const runs: string[] = [];
    const debounced = defineJob({
      name: "debounced-parks",
      schema: z.object({ doc: z.number(), text: z.string(), wait: z.boolean() }),
      debounceMs: 100,
      uniqueId: ({ doc }) => String(doc),
      async handle({ text, wait }, ctx) {
        await ctx.step("first", () => text);
        if (wait) await ctx.waitFor("answer", { timeoutMs: 60_000 });
        else await ctx.sleep("nap", 60_000);
        runs.push(text);
      },
    });
    await using queue = await db.open({ jobs: [debounced] });
    const worker = queue.work({ executor: "isolate", pollMs: 20 });
    try {
      for (const [doc, wait] of [[1, false], [2, true]] as const) {
        const parked = await queue.dispatch(debounced, { doc, text: "one", wait });
        await waitUntil(async () => (await queue.steps(parked)).length === 2, {
          what: `job ${parked} parked`,
        });
        const next = await queue.dispatch(debounced, { doc, text: "two", wait });
        assert.notEqual(next, parked, "the dispatch was merged into the parked job");
        await waitUntil(async () => (await queue.steps(next)).length === 2, {
          what: `job ${next} parked`,
        });
        // The parked job still sleeps (or waits) on its own payload, its memo unchanged.
        const memos = await queue.steps(parked);
        assert.deepEqual(memos.map((memo) => [memo.key, memo.state, memo.output]), [
          ["first", "done", "one"],
          [wait ? "answer" : "nap", wait ? "parked" : "done", undefined],
        ]);
        assert.ok(memos[1]!.until!.getTime() > Date.now() + 30_000, "its wake time moved");
        assert.equal((await queue.result(parked))?.state, "pending");
      }
      assert.deepEqual(runs, [], "a parked job resumed before its sleep or wait ended");
    } finally {
      await worker.stop();
    }
  },
);

storeTest(
  "two waits started together (Promise.all) park on one at a time and end with both signals, sent in either order",
  async (db) => {
    const both = defineJob({
      name: "two-waits",
      schema: z.null(),
      output: z.array(z.number()),
      async handle(_payload, ctx) {
        const [a, b] = await Promise.all([ctx.waitFor("a"), ctx.waitFor("b")]);
        return [a as number, b as number];
      },
    });
    await using queue = await db.open({ jobs: [both] });
    const id = await queue.dispatch(both, null);
    const worker = queue.work({ executor: "isolate", pollMs: 20 });
    try {
      await waitUntil(async () => (await queue.steps(id)).length > 0, { what: "the park" });
      await queue.signal(id, "b", 2);
      await queue.signal(id, "a", 1);
      const result = await waitUntil(async () => {
        const read = await queue.result(id);
        return read?.state === "completed" ? read : null;
      }, { what: `job ${id} completed` });
      assert.deepEqual(result.output, [1, 2]);
    } finally {
      await worker.stop();
    }
  },
);

storeTest(
  "steps the handler did not await, called or ending after its attempt parked or returned, never run late and never end the process",
  async (db) => {
    const calls: string[] = [];
    const later = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    const contexts = new Map<string, JobContext>();
    const loose = defineJob({
      name: "loose-steps",
      schema: z.string(),
      async handle(kind, ctx) {
        contexts.set(kind, ctx);
        if (kind === "after-park") return await ctx.sleep("nap", 60_000);
        await ctx.step("before", () => 1);
        if (kind === "throws-late") {
          // Its fn throws once the attempt ended: the rejection goes nowhere.
          void ctx.step("throws-late", async () => {
            await later(50);
            calls.push("throws-late threw");
            throw new Error("thrown after the attempt ended");
          });
        }
      },
    });
    await using queue = await db.open({ jobs: [loose] });
    const [parked, returned, throwing] = await queue.dispatchMany(loose, [
      "after-park",
      "after-return",
      "throws-late",
    ]);
    const worker = queue.work({ executor: "isolate", pollMs: 20 });
    try {
      await waitUntil(async () => (await queue.steps(parked!)).length === 1, {
        what: "the sleep parked",
      });
      for (const id of [returned!, throwing!]) {
        await waitUntil(async () => (await queue.result(id))?.state === "completed", {
          what: `job ${id} completed`,
        });
      }
      // Called once the attempt parked, or once its handler returned: never settles, never runs.
      void contexts.get("after-park")!.step("late", () => void calls.push("late ran"));
      void contexts.get("after-return")!.step("after", () => void calls.push("after ran"));
      await waitUntil(() => calls.includes("throws-late threw"), { what: "the late throw" });
      await later(100);
    } finally {
      await worker.stop();
    }
    assert.deepEqual(calls, ["throws-late threw"]);
    assert.deepEqual((await queue.steps(parked!)).map((memo) => memo.key), ["nap"]);
    assert.deepEqual((await queue.steps(returned!)).map((memo) => memo.key), ["before"]);
  },
);
