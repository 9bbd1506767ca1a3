/**
 * Expiring jobs (`expireInMs`) and the budget across retries
 * (`deadlineMs`), on every store: a job not started by its expiry never
 * starts and ends as `expired` (its result, the kept history, the metrics,
 * its batch and chain); a job that started is never stopped by it; a
 * deadline stops retries. Time comes from a manual clock.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, defineSchedule, JobCancelledError, type JobEventDetail } from "../mod.ts";
import { workUntilEmpty } from "../src/testing.ts";
import { ManualClock, waitUntil, within } from "./_helpers.ts";
import { storeTest } from "./_stores.ts";

function expiringJobs() {
  const ran: string[] = [];
  const note = defineJob({
    name: "note",
    schema: z.object({ n: z.string() }),
    handle: ({ n }) => {
      ran.push(n);
    },
  });
  const expiring = defineJob({
    name: "expiring",
    schema: z.object({ n: z.string() }),
    expireInMs: 5_000,
    handle: ({ n }) => {
      ran.push(n);
    },
  });
  let failures = 0;
  const flaky = defineJob({
    name: "flaky",
    schema: z.object({ n: z.string() }),
    maxAttempts: 10,
    backoff: [10_000],
    jitter: 0,
    handle: ({ n }) => {
      ran.push(n);
      if (failures++ === 0) throw new Error("first attempt fails");
    },
  });
  const alwaysFails = defineJob({
    name: "always-fails",
    schema: z.object({ n: z.string() }),
    maxAttempts: 10,
    backoff: [10_000],
    jitter: 0,
    deadlineMs: 25_000,
    handle: ({ n }) => {
      ran.push(n);
      throw new Error("fails");
    },
  });
  return { jobs: [note, expiring, flaky, alwaysFails], note, expiring, flaky, alwaysFails, ran };
}

storeTest(
  "a delayed job whose expiry passes before its due time never starts and ends as expired",
  async (db) => {
    const clock = new ManualClock(1_000_000);
    const { jobs, note, ran } = expiringJobs();
    await using queue = await db.open({ jobs, clock });
    const id = await queue.dispatch(note, { n: "late" }, { delayMs: 10_000, expireInMs: 5_000 });
    const fresh = await queue.dispatch(note, { n: "fresh" }, { delayMs: 10_000 });
    clock.advance(11_000);
    const cancelled: JobEventDetail[] = [];
    queue.addEventListener("job:cancelled", (event) => cancelled.push(event.detail));
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(ran, ["fresh"]);
    const result = await queue.result(id);
    assert.equal(result?.state, "expired");
    assert.equal(result?.attempts, 0, "its handler never started");
    assert.deepEqual(cancelled.map(({ id, attempt }) => ({ id, attempt })), [{ id, attempt: 0 }]);
    assert.match(result?.error ?? "", /^expired: not started by /);
    assert.equal((await queue.result(fresh))?.state, "completed");
    const kept = await queue.finished();
    assert.deepEqual(
      kept.map((job) => [job.id, job.state, job.attempts]).sort(),
      [
        [id, "expired", 0],
        [fresh, "completed", 1],
      ].sort(),
    );
    const metrics = await queue.metrics();
    assert.equal(metrics.byJob[0]?.expired, 1);
    assert.equal(metrics.byJob[0]?.completed, 1);
    assert.equal(metrics.perMinute.reduce((sum, minute) => sum + minute.expired, 0), 1);
  },
);

storeTest(
  "a job dispatched while no worker runs expires by its job's default; one in time runs",
  async (db) => {
    const clock = new ManualClock(1_000_000);
    const { jobs, expiring, ran } = expiringJobs();
    await using queue = await db.open({ jobs, clock });
    const [first, second] = await queue.dispatchMany(expiring, [{ n: "a" }, { n: "b" }]);
    clock.advance(5_000);
    const third = await queue.dispatch(expiring, { n: "c" });
    const longer = await queue.dispatch(expiring, { n: "d" }, { expireInMs: 60_000 });
    clock.advance(1_000);
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(ran.sort(), ["c", "d"]);
    assert.equal((await queue.result(first!))?.state, "expired");
    assert.equal((await queue.result(second!))?.state, "expired");
    assert.equal((await queue.result(third))?.state, "completed");
    assert.equal((await queue.result(longer))?.state, "completed");
  },
);

storeTest("a batch counts an expired job as skipped and its callbacks follow", async (db) => {
  const clock = new ManualClock(1_000_000);
  const { jobs, note, ran } = expiringJobs();
  await using queue = await db.open({ jobs, clock });
  const batchId = await queue.batch("nightly")
    .push(note, { n: "member" }, { expireInMs: 1_000 })
    .push(note, { n: "other" }, { delayMs: 2_000 })
    .then(note, { n: "then" })
    .finally(note, { n: "finally" })
    .dispatch();
  clock.advance(2_000);
  await workUntilEmpty(queue, { executor: "isolate" });
  const status = await queue.batchStatus(batchId);
  assert.equal(status?.skipped, 1);
  assert.equal(status?.pending, 0);
  assert.equal(status?.finished, true);
  assert.deepEqual(ran.sort(), ["finally", "other"]);
});

storeTest(
  "a chain whose link expires runs its catch, and its expiry counts from its queueing",
  async (db) => {
    const clock = new ManualClock(1_000_000);
    const { jobs, note, ran } = expiringJobs();
    await using queue = await db.open({ jobs, clock });
    // The second link's expiry counts from when the first succeeds, not from the dispatch.
    const kept = await queue.chain()
      .then(note, { n: "k1" }, { delayMs: 10_000 })
      .then(note, { n: "k2" }, { expireInMs: 5_000 })
      .catch(note, { n: "k-catch" })
      .dispatch();
    clock.advance(10_000);
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(ran, ["k1", "k2"]);
    assert.equal((await queue.result(kept))?.state, "completed");

    ran.length = 0;
    const chainId = await queue.chain()
      .then(note, { n: "c1" }, { expireInMs: 1_000 })
      .then(note, { n: "c2" })
      .catch(note, { n: "caught" })
      .dispatch();
    clock.advance(1_000);
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(ran, ["caught"]);
    assert.equal((await queue.result(chainId))?.state, "expired");
  },
);

storeTest("a job that started before its expiry is not stopped by it on a retry", async (db) => {
  const clock = new ManualClock(1_000_000);
  const { jobs, flaky, ran } = expiringJobs();
  await using queue = await db.open({ jobs, clock });
  const id = await queue.dispatch(flaky, { n: "f" }, { expireInMs: 1_000 });
  await workUntilEmpty(queue, { executor: "isolate" });
  assert.deepEqual(ran, ["f"]);
  assert.equal((await queue.result(id))?.state, "pending");
  clock.advance(10_000); // past its expiry and its backoff
  await workUntilEmpty(queue, { executor: "isolate" });
  assert.deepEqual(ran, ["f", "f"]);
  assert.equal((await queue.result(id))?.state, "completed");
});

storeTest("deadlineMs stops retries: no attempt starts past it", async (db) => {
  const clock = new ManualClock(1_000_000);
  const { jobs, alwaysFails, ran } = expiringJobs();
  await using queue = await db.open({ jobs, clock });
  const byDefault = await queue.dispatch(alwaysFails, { n: "d" });
  // Attempts at 0, 10 s and 20 s; the one due at 30 s is past the 25 s budget.
  for (let step = 0; step < 4; step++) {
    await workUntilEmpty(queue, { executor: "isolate" });
    clock.advance(10_000);
  }
  assert.deepEqual(ran, ["d", "d", "d"]);
  assert.equal((await queue.result(byDefault))?.state, "failed");

  ran.length = 0;
  // A dispatch's deadline overrides the job's: the earlier retry deadline wins.
  const byDispatch = await queue.dispatch(alwaysFails, { n: "e" }, { deadlineMs: 5_000 });
  await workUntilEmpty(queue, { executor: "isolate" });
  clock.advance(10_000);
  await workUntilEmpty(queue, { executor: "isolate" });
  assert.deepEqual(ran, ["e"]);
  assert.equal((await queue.result(byDispatch))?.state, "failed");
});

storeTest("a schedule's job expires by its job's default expireInMs", async (db) => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 1));
  const { jobs, expiring, ran } = expiringJobs();
  const schedule = defineSchedule({
    name: "hourly-code",
    everyMs: 60 * 60_000,
    job: expiring,
    payload: () => ({ n: "scheduled" }),
  });
  await using queue = await db.open({ jobs: [...jobs, schedule], clock });
  const id = await queue.triggerSchedule("hourly-code");
  assert.ok(id !== null);
  clock.advance(5_000);
  await workUntilEmpty(queue, { executor: "isolate" });
  assert.deepEqual(ran, []);
  assert.equal((await queue.result(id))?.state, "expired");
});

storeTest(
  "dispatchAndWait() of a job that expires rejects with a JobCancelledError saying so",
  async (db) => {
    const clock = new ManualClock(1_000_000);
    const { jobs, note, ran } = expiringJobs();
    await using queue = await db.open({ jobs, clock });
    const waiting = queue.dispatchAndWait(note, { n: "awaited" }, { expireInMs: 1_000 });
    const settled = waiting.then(() => null, (error: unknown) => error);
    await waitUntil(async () => (await queue.jobs()).jobs.length === 1, { what: "the job stored" });
    clock.advance(1_000);
    // A worker that runs until the waiting call has its answer, as an app's would. The call marks
    // the job awaited in a write of its own after the dispatch; on PostgreSQL a claim that runs
    // meanwhile skips the locked row (SKIP LOCKED), and a worker that stops at its first empty
    // claim (workUntilEmpty) once left with the job pending, the call waiting for ever.
    const worker = queue.work({ executor: "isolate", pollMs: 10 });
    const error = await within(settled, 30_000, "the awaited job's answer");
    await worker.stop();
    assert.ok(error instanceof JobCancelledError, `rejected with ${error}`);
    assert.match(error.message, /expired: not started by /);
    assert.deepEqual(ran, []);
  },
);

storeTest(
  "bad expireInMs and deadlineMs are refused at dispatch, naming the option",
  async (db) => {
    const { jobs, note } = expiringJobs();
    await using queue = await db.open({ jobs });
    for (const bad of [-1, Number.NaN, 101 * 365 * 24 * 60 * 60 * 1_000]) {
      await assert.rejects(
        queue.dispatch(note, { n: "x" }, { expireInMs: bad }),
        /Cannot dispatch "note": expireInMs must be a number of ms from 0 to/,
      );
      await assert.rejects(
        queue.dispatch(note, { n: "x" }, { deadlineMs: bad }),
        /Cannot dispatch "note": deadlineMs must be a number of ms from 0 to/,
      );
    }
    assert.deepEqual((await queue.jobs()).jobs, []);
  },
);

Deno.test("defineJob() refuses a bad expireInMs or deadlineMs, naming the option", () => {
  for (const option of ["expireInMs", "deadlineMs"] as const) {
    for (const bad of [-5, Number.NaN, Infinity]) {
      assert.throws(
        () => defineJob({ name: "bad", schema: z.null(), [option]: bad, handle() {} }),
        new RegExp(`${option} must be a number of ms from 0 to`),
      );
    }
  }
});
