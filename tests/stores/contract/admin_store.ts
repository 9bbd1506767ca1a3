/**
 * The contract of `AdminStore`'s failed jobs and clearing: listing,
 * retrying, forgetting and pruning failed jobs, and clearing queues. Batches
 * are in `chains_batches.ts`.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  claim,
  complete,
  type ContractArea,
  type ContractTest,
  countsAt,
  fail,
  failedJobs,
  ids,
  LEASE_MS,
  newJob,
  release,
  sorted,
  T0,
} from "./fixtures.ts";

/** Failed jobs and clearing queues. */
export const adminStore: ContractArea = {
  covers: [
    "failed",
    "failedJob",
    "unfinishedJob",
    "retry",
    "forget",
    "flushFailed",
    "pruneFailed",
    "clear",
  ],
  register,
};

function register(test: ContractTest): void {
  test("unfinishedJob() reads a waiting or running job's stored payload and last error; null once it ended", async (store) => {
    const [id] = await store.insertJobs([newJob({ payload: '{"to":"ada"}' })]);
    assert.deepEqual({ ...await store.unfinishedJob(id!) }, {
      payload: '{"to":"ada"}',
      lastError: null,
    });
    assert.equal((await claim(store, { limit: 1, token: 1 }))[0]?.id, id);
    assert.deepEqual(
      (await store.settle([release(id!, 1, T0, "Error: try later")])).applied,
      [true],
    );
    assert.deepEqual(
      { ...await store.unfinishedJob(id!) },
      { payload: '{"to":"ada"}', lastError: "Error: try later" },
      "released with an error: the error of its last attempt",
    );
    assert.equal((await claim(store, { limit: 1, token: 2 }))[0]?.id, id);
    assert.equal((await store.unfinishedJob(id!))?.payload, '{"to":"ada"}', "running");
    assert.deepEqual((await store.settle([complete(id!, 2)])).applied, [true]);
    assert.equal(await store.unfinishedJob(id!), null, "completed: no longer unfinished");
    assert.equal(await store.unfinishedJob(987_654), null);
  });

  test("failed() lists failed jobs newest first, with limit and offset; failedJob() finds one", async (store) => {
    const [at1, at30, at20, at40] = await failedJobs(store, [
      T0 + 1,
      T0 + 30,
      T0 + 20,
      T0 + 40,
    ]);
    const page = async (limit: number, offset: number) =>
      ids(await store.failed({ limit, offset }));
    assert.deepEqual(await page(10, 0), [at40, at30, at20, at1]);
    assert.deepEqual(await page(2, 0), [at40, at30]);
    assert.deepEqual(await page(2, 2), [at20, at1]);
    assert.deepEqual(await page(2, 4), []);
    const [queued] = await store.insertJobs([newJob()]);
    assert.equal(await store.failedJob(queued!), null, "failedJob() of a queued job");
    assert.equal(await store.failedJob(123_456), null, "failedJob() of an unknown id");
  });

  test("retry() brings a failed job back under the same id, due now, with fresh attempts", async (store) => {
    const row = newJob({ queue: "mail", priority: 4, payload: '{"k":"v"}', createdAt: T0 - 7 });
    const [id] = await store.insertJobs([row]);
    await claim(store, { queues: ["mail"], token: 1 });
    await claim(store, { queues: ["mail"], now: T0 + LEASE_MS, token: 2 });
    await store.settle([fail(id!, 2, T0 + LEASE_MS, 2)]);
    const now = T0 + 2 * LEASE_MS;
    assert.deepEqual(await store.retry([id!], now), [id]);
    assert.equal(await store.failedJob(id!), null);
    assert.deepEqual(await countsAt(store, now), { mail: [1, 0, 0, 0] });
    assert.deepEqual(await claim(store, { queues: ["mail"], now: now - 1, token: 3 }), []);
    const [job] = await claim(store, { queues: ["mail"], now, token: 4 });
    assert.deepEqual(
      [job?.id, job?.attempts, job?.crashes, job?.recovered, job?.lastError],
      [id, 1, 0, false, null],
    );
    assert.deepEqual([job?.queue, job?.name, job?.payload], [row.queue, row.name, row.payload]);
    assert.deepEqual([job?.priority, job?.createdAt], [4, T0 - 7]);
  });

  test("retry() skips ids that are not failed jobs; a job is never in both tables or neither", async (store) => {
    const [failedId] = await failedJobs(store, [T0]);
    assert.deepEqual(
      await claim(store, { now: T0 + 99 * LEASE_MS }),
      [],
      "a failed job is not queued",
    );
    const [queued] = await store.insertJobs([newJob()]);
    assert.deepEqual(await store.retry([424_242], T0), []);
    assert.deepEqual(await store.retry([queued!], T0), []);
    const twice = await Promise.all([
      store.retry([424_242, failedId!, failedId!], T0),
      store.retry([failedId!], T0),
    ]);
    assert.deepEqual(twice.flat(), [failedId], "two retries at once bring it back once");
    assert.equal(await store.failedJob(failedId!), null);
    assert.deepEqual(await store.retry("all", T0), []);
    assert.deepEqual(sorted(ids(await claim(store))), sorted([queued!, failedId!]));
  });

  test('retry("all") brings every failed job back to its own queue', async (store) => {
    const a = await failedJobs(store, [T0, T0 + 1], { queue: "a" });
    const b = await failedJobs(store, [T0 + 2], { queue: "b" });
    assert.deepEqual(sorted(await store.retry("all", T0 + 5)), sorted([...a, ...b]));
    assert.deepEqual(await store.failed({ limit: 10, offset: 0 }), []);
    assert.deepEqual(await countsAt(store, T0 + 5), { a: [2, 0, 0, 0], b: [1, 0, 0, 0] });
    assert.deepEqual(await store.retry("all", T0 + 5), []);
  });

  test("forget(), flushFailed() and pruneFailed(before) delete failed jobs and say how many", async (store) => {
    const [old, atCut, newer, newest] = await failedJobs(store, [T0 - 2, T0 - 1, T0, T0 + 1]);
    const [queued] = await store.insertJobs([newJob()]);
    assert.equal(await store.forget(newest!), true);
    assert.equal(await store.forget(newest!), false);
    assert.equal(await store.failedJob(newest!), null);
    assert.equal(await store.pruneFailed(T0 - 1, T0), 1, "only what failed strictly before");
    assert.equal(await store.failedJob(old!), null);
    assert.deepEqual(ids(await store.failed({ limit: 10, offset: 0 })), [newer, atCut]);
    assert.equal(await store.flushFailed(), 2);
    assert.equal(await store.flushFailed(), 0);
    assert.deepEqual(ids(await claim(store)), [queued], "queued jobs are untouched");
  });

  test("clear(queue) deletes that queue's jobs that are not running, nothing else: a running job finishes and settles", async (store) => {
    await failedJobs(store, [T0], { queue: "a" });
    const [running, ahead, dead] = await store.insertJobs([
      newJob({ queue: "a" }),
      newJob({ queue: "a" }),
      newJob({ queue: "d" }),
    ]);
    // The first starts now; the second is held ahead, not started.
    assert.deepEqual(ids(await claim(store, { queues: ["a"], token: 1, aheadFrom: 1 })), [
      running,
      ahead,
    ]);
    // Its worker died: its lease runs out at T0 + LEASE_MS.
    assert.deepEqual(ids(await claim(store, { queues: ["d"], token: 3 })), [dead]);
    await store.insertJobs([
      newJob({ queue: "a" }),
      newJob({ queue: "a", availableAt: T0 + 5_000 }),
    ]);
    const [kept] = await store.insertJobs([newJob({ queue: "b" })]);
    assert.equal(await store.clear("a", T0), 3, "the one held ahead, the waiting and the delayed");
    assert.equal(await store.clear("nothing-here", T0), 0);
    assert.deepEqual(await countsAt(store, T0), {
      a: [0, 0, 1, 1],
      b: [1, 0, 0, 0],
      d: [0, 0, 1, 0],
    });
    assert.deepEqual((await store.settle([complete(running!, 1)])).applied, [true]);
    const later = T0 + LEASE_MS; // kept's lease runs past d's
    assert.deepEqual(ids(await claim(store, { queues: ["a", "b"], token: 2, now: later })), [kept]);
    await store.insertJobs([newJob({ queue: "c" })]);
    assert.equal(
      await store.clear(undefined, T0 + LEASE_MS + 1),
      2,
      "c's, and d's whose lease ran out",
    );
    assert.deepEqual(await countsAt(store, T0 + LEASE_MS + 1), {
      a: [0, 0, 0, 1],
      b: [0, 0, 1, 0],
    });
  });
}
