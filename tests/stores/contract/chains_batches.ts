/**
 * The contract of chains, batches and progress every `Store` keeps, at the
 * store level (no queue): pushing chains and batches, what a settle moves
 * along, the batch admin calls of `AdminStore`, and `running()` with the
 * progress settles wrote. Only the `Store` API is used, so the same cases
 * run against every engine. Times are passed in, never read from a clock.
 *
 * Batch callbacks wait in the "cb" queue unless a case says otherwise, so a
 * claim of "cb" shows exactly which callbacks were queued (and at most once:
 * a claimed callback is leased and never handed out again).
 *
 * @module
 */
import assert from "node:assert/strict";
import type {
  BatchRow,
  ClaimedJob,
  ClaimRequest,
  NewBatchRow,
  NewChainRow,
  NewJobRow,
  Settlement,
  Store,
  StoredError,
  WaitingJobRow,
} from "../../../src/stores/store.ts";
import {
  begin,
  claim,
  type ContractArea,
  type ContractTest,
  LEASE_MS,
  newJob,
  T0,
} from "./fixtures.ts";

/** Far enough ahead that every delay has passed and every lease taken before has expired. */
const LATER = T0 + 1_000 * LEASE_MS;

/** A waiting job named `name`, in "cb", due as soon as it is queued. */
function waiting(name: string, overrides: Partial<WaitingJobRow> = {}): WaitingJobRow {
  const what = { queue: "cb", name, payload: `{"job":"${name}"}`, priority: 0 };
  return { ...what, delayMs: 0, retryForMs: null, ...overrides };
}

/** A job row named `name`, due at `T0` in "default". */
const member = (name: string, overrides: Partial<NewJobRow> = {}) =>
  newJob({ name, payload: `{"job":"${name}"}`, ...overrides });

/** A chain whose links run in `queue`; its catch jobs wait in "cb". */
function newChain(
  links: readonly [string, ...(string | WaitingJobRow)[]],
  onFailure: readonly (string | WaitingJobRow)[] = [],
  queue = "default",
): NewChainRow {
  const [first, ...next] = links;
  return {
    first: member(first, { queue }),
    next: next.map((link) => typeof link === "string" ? waiting(link, { queue }) : link),
    onFailure: onFailure.map((job) => typeof job === "string" ? waiting(job) : job),
  };
}

/** A batch created at `T0`, without failures allowed, with `overrides` applied. */
function newBatch(overrides: Partial<NewBatchRow> = {}): NewBatchRow {
  const what = { name: "contract-batch", allowFailures: false, createdAt: T0 };
  return { ...what, jobs: [], then: [], catch: [], finally: [], ...overrides };
}

let lastToken = 0;
/** Claims up to 100 jobs of `queues` at `now`, with a token no other claim used. */
function take(store: Store, queues: string[] = ["default"], now = T0, limit = 100) {
  return claim(store, { queues, now, limit, token: ++lastToken });
}

/** A claim request with a fresh token. */
function request(queues: string[], now: number): ClaimRequest {
  return { queues, limit: 100, now, leaseMs: LEASE_MS, token: ++lastToken };
}

/** Claims every due job of `queues` at `now` and completes it; returns their sorted names. */
async function drain(store: Store, queues: string[], now: number): Promise<string[]> {
  const jobs = await take(store, queues, now);
  const applied = await apply(store, ...jobs.map((job) => done(job, now)));
  assert.deepEqual(applied, jobs.map(() => true));
  return names(jobs);
}

/** Claimed jobs as sorted `name@batchId` strings. */
const names = (jobs: readonly ClaimedJob[]) =>
  jobs.map((job) => `${job.name}@${job.batchId}`).sort();
const ids = (jobs: readonly { id: number }[]) => jobs.map((job) => job.id);

type Leased = { readonly id: number; readonly token: number };
const BOOM: StoredError = { message: "Error: boom", stack: "Error: boom\n    at a (b.ts:1:1)" };
const done = (job: Leased, at: number): Settlement => ({ kind: "complete", ...lease(job), at });
const failed = (job: Leased, at: number): Settlement => ({
  kind: "fail",
  ...lease(job),
  error: BOOM,
  attempts: 1,
  at,
});
const released = (job: Leased, at: number, availableAt: number): Settlement => ({
  kind: "release",
  ...lease(job),
  at,
  availableAt,
  error: "Error: later",
  refundAttempt: false,
});
const progressed = (job: Leased, at: number, percent: number): Settlement => ({
  kind: "progress",
  ...lease(job),
  at,
  percent,
});
const lease = ({ id, token }: Leased) => ({ id, token });

/** Settles and returns which settlements applied. */
async function apply(store: Store, ...settlements: Settlement[]): Promise<boolean[]> {
  return (await store.settle(settlements)).applied;
}

/** A batch's counters as a case expects them; `succeeded` is tracked by the case itself. */
interface Expected {
  readonly total: number;
  readonly pending: number;
  readonly failed: number;
  readonly skipped: number;
  readonly succeeded: number;
  readonly cancelledAt: number | null;
  readonly finishedAt: number | null;
}

/** Asserts a batch's counters and times, and `total = pending + failed + skipped + succeeded`. */
async function expectBatch(store: Store, id: number, expected: Expected, message?: string) {
  const { succeeded, ...stored } = expected;
  const { total, pending, failed, skipped } = stored;
  assert.equal(total, pending + failed + skipped + succeeded, "the case's own expectation");
  const row: BatchRow | null = await store.batch(id);
  assert.ok(row !== null, `batch ${id} exists`);
  const { cancelledAt, finishedAt } = row;
  assert.deepEqual(
    { total: row.total, pending: row.pending, failed: row.failed, skipped: row.skipped },
    { total, pending, failed, skipped },
    message,
  );
  assert.deepEqual({ cancelledAt, finishedAt }, {
    cancelledAt: stored.cancelledAt,
    finishedAt: stored.finishedAt,
  }, message);
  assert.equal(
    row.total - row.pending - row.failed - row.skipped,
    succeeded,
    "total = pending + failed + skipped + succeeded",
  );
}

/** Counters of a batch that nothing has happened to yet. */
const fresh = (total: number): Expected => ({
  total,
  pending: total,
  failed: 0,
  skipped: 0,
  succeeded: 0,
  cancelledAt: null,
  finishedAt: null,
});

/** Chains, batches and progress, at the store level. */
export const chainsBatches: ContractArea = {
  covers: [
    "insertChain",
    "insertBatch",
    "addToBatch",
    "batch",
    "batches",
    "cancelBatch",
    "pruneBatches",
    "running",
  ],
  register,
};

function register(test: ContractTest): void {
  test("a job id is never handed out twice, even after the newest job left the queue: plain jobs, chain links and batch callbacks", async (store) => {
    const handedOut: number[] = [];
    const fresh = (id: number | undefined, what: string) => {
      assert.ok(
        id !== undefined && id > Math.max(0, ...handedOut),
        `${what}: ${id} after ${handedOut}`,
      );
      handedOut.push(id);
    };
    const [completed] = await store.insertJobs([newJob()]);
    fresh(completed, "a plain job");
    await drain(store, ["default"], T0);
    const [failing] = await store.insertJobs([newJob()]);
    fresh(failing, "the job after the newest completed");
    const [claimed] = await take(store);
    assert.deepEqual(await apply(store, failed(claimed!, T0)), [true]);
    const chain = await store.insertChain(newChain(["link-1", "link-2"]));
    fresh(chain, "a chain's first link after the newest failed for good");
    assert.deepEqual(await drain(store, ["default"], T0), ["link-1@null"]);
    const [link2] = await take(store);
    fresh(link2?.id, "the chain's next link, queued when the newest job completed");
    assert.deepEqual(await apply(store, done(link2!, T0)), [true]);
    const batch = await store.insertBatch(newBatch({
      jobs: [member("m1", { queue: "y" })],
      then: [waiting("then-1"), waiting("then-2")],
    }));
    fresh(batch.jobIds[0], "a batch's job");
    assert.deepEqual(await drain(store, ["y"], T0), [`m1@${batch.id}`]);
    const callbacks = (await take(store, ["cb"])).sort((a, b) => a.id - b.id);
    assert.deepEqual(callbacks.map((job) => job.name), ["then-1", "then-2"], "in their order");
    for (const job of callbacks) fresh(job.id, `callback ${job.name}`);
  });

  // Chains

  test("insertChain() returns the first link's id, and only that link is claimable", async (store) => {
    const [plainJob] = await store.insertJobs([newJob()]);
    const chainId = await store.insertChain(newChain(["link-1", "link-2", "link-3"], ["catch-1"]));
    const other = await store.insertChain(newChain(["other-1", "other-2"], [], "other"));
    assert.ok(chainId > plainJob! && other > chainId, `ids: ${plainJob}, ${chainId}, ${other}`);
    const claimed = await take(store, ["default", "other", "cb"], LATER);
    assert.deepEqual(
      claimed.map((job) => [job.id, job.name, job.payload, job.batchId]),
      [
        [plainJob, "contract-job", '{"n":0}', null],
        [chainId, "link-1", '{"job":"link-1"}', null],
        [other, "other-1", '{"job":"other-1"}', null],
      ],
    );
    assert.deepEqual(await take(store, ["default", "other", "cb"], LATER), []);
  });

  test("completing a link queues the next one, claimable by the same settle's claim request", async (store) => {
    const link2 = waiting("link-2", { queue: "other", payload: '{"n":2}', priority: 4 });
    const chainId = await store.insertChain(newChain(["link-1", link2, "link-3"]));
    const [first] = await take(store);
    assert.equal(first?.id, chainId);
    const one = await store.settle([done(first!, T0 + 5)], request(["default", "other"], T0 + 5));
    assert.deepEqual(one.applied, [true]);
    assert.deepEqual(
      one.claimed.map((job) => [job.queue, job.name, job.payload, job.priority, job.attempts]),
      [["other", "link-2", '{"n":2}', 4, 1]],
    );
    assert.ok(one.claimed[0]!.id > chainId, "a queued link is a new job");
    assert.deepEqual(await take(store, ["default", "cb"], LATER), [], "link-3 waits");
    const two = await store.settle([done(one.claimed[0]!, T0 + 6)], request(["default"], T0 + 6));
    assert.deepEqual([two.applied, names(two.claimed)], [[true], ["link-3@null"]]);
    const three = await store.settle([done(two.claimed[0]!, T0 + 7)], request(["default"], T0 + 7));
    assert.deepEqual([three.applied, three.claimed], [[true], []]);
  });

  test("a link that fails for good stops the chain and queues its catch jobs once ever", async (store) => {
    const chainId = await store.insertChain(
      newChain(["link-1", "link-2", "link-3"], ["catch-1", "catch-2"]),
    );
    const [first] = await take(store);
    const { claimed: [second] } = await store.settle(
      [done(first!, T0 + 1)],
      request(["default"], T0 + 1),
    );
    assert.deepEqual(await apply(store, failed(second!, T0 + 2)), [true]);
    const row = await store.failedJob(second!.id);
    assert.deepEqual([row?.name, row?.chainId, row?.batchId, row?.failedAt], [
      "link-2",
      chainId,
      null,
      new Date(T0 + 2),
    ]);
    assert.deepEqual(await drain(store, ["cb"], T0 + 2), ["catch-1@null", "catch-2@null"]);
    assert.deepEqual(await take(store, ["default", "cb"], LATER), [], "link-3 is not queued");
    assert.deepEqual(await store.retry([second!.id], T0 + 3), [second!.id]);
    const [again] = await take(store, ["default"], T0 + 3);
    assert.deepEqual([again?.id, again?.name], [second!.id, "link-2"]);
    assert.deepEqual(await apply(store, failed(again!, T0 + 4)), [true]);
    assert.deepEqual(await drain(store, ["default", "cb"], LATER), [], "no catch the second time");
    const lone = await store.insertChain(newChain(["lone-1", "lone-2"], ["lone-catch"], "lone"));
    const [loneFirst] = await take(store, ["lone"]);
    assert.deepEqual(await apply(store, failed(loneFirst!, T0 + 5)), [true]);
    assert.equal((await store.failedJob(lone))?.chainId, lone, "the first link's chain is itself");
  });

  test("retry() of a failed link resumes the chain where it stopped; after the last link nothing is left", async (store) => {
    const chainId = await store.insertChain(newChain(["link-1", "link-2", "link-3"], ["catch-1"]));
    const [first] = await take(store);
    const { claimed: [second] } = await store.settle(
      [done(first!, T0 + 1)],
      request(["default"], T0 + 1),
    );
    assert.deepEqual(await apply(store, failed(second!, T0 + 2)), [true]);
    assert.deepEqual(await drain(store, ["cb"], T0 + 2), ["catch-1@null"]);
    const row = await store.failedJob(second!.id);
    assert.equal(row?.chainId, chainId);
    assert.deepEqual(await store.retry([row!.id], T0 + 3), [second!.id]);
    const [again] = await take(store, ["default"], T0 + 3);
    assert.deepEqual([again?.id, again?.attempts], [second!.id, 1]);
    const resumed = await store.settle([done(again!, T0 + 4)], request(["default"], T0 + 4));
    assert.deepEqual([resumed.applied, names(resumed.claimed)], [[true], ["link-3@null"]]);
    const last = await store.settle(
      [done(resumed.claimed[0]!, T0 + 5)],
      request(["default", "cb"], T0 + 5),
    );
    assert.deepEqual([last.applied, last.claimed], [[true], []]);
    assert.deepEqual(await store.counts(LATER), []);
    assert.deepEqual(await store.failed({ limit: 10, offset: 0 }), []);
    assert.deepEqual(await take(store, ["default", "cb"], LATER), []);
    const whole = await store.insertChain(newChain(["w-1", "w-2"], ["w-catch"], "w"));
    const [w1] = await take(store, ["w"]);
    const { claimed: [w2] } = await store.settle([done(w1!, T0 + 6)], request(["w"], T0 + 6));
    assert.ok(w2!.id > whole);
    assert.deepEqual(await apply(store, done(w2!, T0 + 7)), [true]);
    assert.deepEqual(await store.counts(LATER), [], "a chain that succeeded leaves no job");
    assert.deepEqual(await take(store, ["w", "cb"], LATER), [], "its catch never fires");
  });

  test("forget(), flushFailed() and pruneFailed() of a failed link drop its chain's waiting links, and no other chain's", async (store) => {
    const failChain = async (queue: string, at: number, onFailure: string[] = []) => {
      const id = await store.insertChain(newChain([`${queue}-1`, `${queue}-2`], onFailure, queue));
      const [job] = await take(store, [queue]);
      assert.deepEqual(await apply(store, failed(job!, at)), [true]);
      return id;
    };
    const a = await failChain("a", T0 + 1, ["a-catch"]);
    await failChain("b", T0 + 1);
    await failChain("c", T0 + 1);
    await failChain("d", T0 + 3);
    const kept = await failChain("k", T0 + 1);
    assert.deepEqual(await store.retry([kept], T0 + 2), [kept], "k's failed link is queued again");
    const live = await store.insertChain(newChain(["e-1", "e-2"], [], "e"));
    const [liveFirst] = await take(store, ["e"]);
    assert.equal(liveFirst?.id, live);
    assert.equal(await store.forget(a), true);
    assert.equal(await store.pruneFailed(T0 + 2, T0 + 2), 2, "b and c");
    assert.equal(await store.flushFailed(), 1, "d");
    const dropped = ["a", "b", "c", "d"];
    assert.deepEqual(await take(store, dropped, LATER), []);
    const [newcomer] = await store.insertJobs([member("newcomer", { queue: "a" })]);
    const pushed = await store.insertChain(newChain(["n-1", "n-2"], [], "b"));
    assert.deepEqual(ids(await take(store, dropped, LATER)), [newcomer, pushed]);
    assert.deepEqual(await drain(store, ["cb"], LATER), ["a-catch@null"], "queued before");
    const e = await store.settle([done(liveFirst!, T0 + 4)], request(["e"], T0 + 4));
    assert.deepEqual(names(e.claimed), ["e-2@null"], "a running chain keeps its links");
    const [k1] = await take(store, ["k"], T0 + 4);
    const k = await store.settle([done(k1!, T0 + 5)], request(["k"], T0 + 5));
    assert.deepEqual(names(k.claimed), ["k-2@null"], "a retried chain keeps its links");
  });

  test("a queued job's delay and retry window count from the settle's at", async (store) => {
    const link2 = waiting("link-2", { queue: "other", delayMs: 5_000, retryForMs: 60_000 });
    await store.insertChain(newChain(["link-1", link2]));
    const [first] = await take(store);
    const settled = await store.settle([done(first!, T0 + 1_000)], request(["other"], T0 + 1_000));
    assert.deepEqual([settled.applied, settled.claimed], [[true], []]);
    assert.deepEqual(await take(store, ["other"], T0 + 5_999), []);
    const [second] = await take(store, ["other"], T0 + 6_000);
    assert.deepEqual([second?.name, second?.retryUntil], ["link-2", T0 + 61_000]);

    const catchJob = waiting("x-catch", { delayMs: 2_000, retryForMs: 500 });
    await store.insertChain(newChain(["x-1"], [catchJob], "x"));
    const [x1] = await take(store, ["x"], T0 + 7_000);
    assert.deepEqual(await apply(store, failed(x1!, T0 + 7_500)), [true]);
    assert.deepEqual(await take(store, ["cb"], T0 + 9_499), []);
    const [caught] = await take(store, ["cb"], T0 + 9_500);
    assert.deepEqual([caught?.name, caught?.retryUntil], ["x-catch", T0 + 8_000]);

    const { id } = await store.insertBatch(newBatch({
      jobs: [member("m1", { queue: "y" })],
      then: [waiting("then", { delayMs: 10, retryForMs: 20 })],
      finally: [waiting("finally", { delayMs: 50 })],
    }));
    const [m1] = await take(store, ["y"]);
    assert.deepEqual(await apply(store, done(m1!, T0 + 10_000)), [true]);
    assert.deepEqual(await take(store, ["cb"], T0 + 10_009), []);
    const [then] = await take(store, ["cb"], T0 + 10_010);
    assert.deepEqual([then?.name, then?.batchId, then?.retryUntil], ["then", id, T0 + 10_020]);
    assert.deepEqual(await take(store, ["cb"], T0 + 10_049), []);
    const [fin] = await take(store, ["cb"], T0 + 10_050);
    assert.deepEqual([fin?.name, fin?.batchId, fin?.retryUntil], ["finally", id, null]);
  });

  // Batches

  test("insertBatch() stores every job pending; batch() and batches() read batches back, newest first", async (store) => {
    const jobs = [member("m1"), member("m2", { queue: "other" }), member("m3")];
    const first = await store.insertBatch(
      newBatch({ name: "emails ✓", allowFailures: true, createdAt: T0 - 5, jobs }),
    );
    assert.equal(first.jobIds.length, 3);
    assert.equal(new Set(first.jobIds).size, 3);
    assert.deepEqual(first.jobIds, [...first.jobIds].sort((a, b) => a - b));
    assert.deepEqual({ ...await store.batch(first.id) }, {
      id: first.id,
      name: "emails ✓",
      total: 3,
      pending: 3,
      failed: 0,
      skipped: 0,
      allowFailures: true,
      createdAt: T0 - 5,
      cancelledAt: null,
      finishedAt: null,
    });
    const second = await store.insertBatch(newBatch({ name: "second", jobs: [member("s1")] }));
    assert.ok(second.id > first.id);
    assert.equal((await store.batch(second.id))?.allowFailures, false);
    assert.deepEqual(ids(await store.batches({ limit: 10, offset: 0 })), [second.id, first.id]);
    assert.deepEqual(ids(await store.batches({ limit: 1, offset: 1 })), [first.id]);
    assert.deepEqual(await store.batches({ limit: 1, offset: 2 }), []);
    assert.equal(await store.batch(second.id + 1_000), null);
    const claimed = await take(store, ["default", "other"]);
    assert.deepEqual(
      claimed.map((job) => [job.id, job.name, job.batchId]).sort((a, b) => +a[0]! - +b[0]!),
      [
        [first.jobIds[0], "m1", first.id],
        [first.jobIds[1], "m2", first.id],
        [first.jobIds[2], "m3", first.id],
        [second.jobIds[0], "s1", second.id],
      ],
    );
  });

  test("an empty batch is finished at once and queues its then and finally jobs, never its catch", async (store) => {
    const { id, jobIds } = await store.insertBatch(newBatch({
      createdAt: T0 + 7,
      then: [waiting("then")],
      catch: [waiting("catch")],
      finally: [waiting("finally")],
    }));
    assert.deepEqual(jobIds, []);
    await expectBatch(store, id, { ...fresh(0), finishedAt: T0 + 7 });
    assert.deepEqual(await drain(store, ["cb"], T0 + 7), [`finally@${id}`, `then@${id}`]);
    assert.deepEqual(await take(store, ["default", "cb"], LATER), []);
  });

  test("complete counts a member as succeeded; release and progress change no counter", async (store) => {
    const { id, jobIds } = await store.insertBatch(
      newBatch({ jobs: [member("m1"), member("m2"), member("m3")], finally: [waiting("finally")] }),
    );
    await expectBatch(store, id, fresh(3));
    const [j1, j2, j3] = await take(store);
    assert.deepEqual(ids([j1!, j2!, j3!]), jobIds);
    assert.deepEqual(await apply(store, progressed(j1!, T0 + 1, 30)), [true]);
    await expectBatch(store, id, fresh(3), "after progress");
    assert.deepEqual(await apply(store, released(j2!, T0 + 1, T0 + 2)), [true]);
    await expectBatch(store, id, fresh(3), "after release");
    assert.deepEqual(await apply(store, done(j1!, T0 + 3)), [true]);
    await expectBatch(store, id, { ...fresh(3), pending: 2, succeeded: 1 });
    const [again] = await take(store, ["default"], T0 + 3);
    assert.equal(again?.id, j2!.id);
    assert.deepEqual(await drain(store, ["cb"], LATER), []);
    assert.deepEqual(await apply(store, done(again!, T0 + 4), done(j3!, T0 + 5)), [true, true]);
    await expectBatch(store, id, { ...fresh(3), pending: 0, succeeded: 3, finishedAt: T0 + 5 });
  });

  test("then and finally jobs are queued when the last member succeeds; callbacks carry the batch id but are not counted", async (store) => {
    const { id } = await store.insertBatch(newBatch({
      jobs: [member("m1"), member("m2")],
      then: [waiting("then-a"), waiting("then-b")],
      catch: [waiting("catch")],
      finally: [waiting("finally")],
    }));
    const [m1, m2] = await take(store);
    assert.deepEqual(await apply(store, done(m1!, T0 + 1)), [true]);
    assert.deepEqual(await drain(store, ["cb"], LATER), [], "nothing before the last member");
    const last = await store.settle([done(m2!, T0 + 2)], request(["cb"], T0 + 2));
    assert.deepEqual(names(last.claimed), [`finally@${id}`, `then-a@${id}`, `then-b@${id}`]);
    const after = { ...fresh(2), pending: 0, succeeded: 2, finishedAt: T0 + 2 };
    await expectBatch(store, id, after);
    const byName = new Map(last.claimed.map((job) => [job.name, job]));
    assert.deepEqual(
      await apply(
        store,
        done(byName.get("then-a")!, T0 + 3),
        failed(byName.get("then-b")!, T0 + 3),
        released(byName.get("finally")!, T0 + 3, T0 + 3),
      ),
      [true, true, true],
    );
    await expectBatch(store, id, after, "callbacks are not counted");
    assert.equal((await store.failedJob(byName.get("then-b")!.id))?.batchId, id);
    assert.deepEqual(
      await drain(store, ["cb"], LATER),
      [`finally@${id}`],
      "a failed callback queues no catch",
    );
  });

  test("without allowFailures the first failure cancels the batch: unleased members are skipped, leased ones still settle", async (store) => {
    const { id, jobIds } = await store.insertBatch(newBatch({
      jobs: [
        ...["m1", "m2", "m3", "m4", "m5"].map((name) => member(name)),
        member("m6", { availableAt: T0 + 10_000 }),
      ],
      then: [waiting("then", { queue: "default" })],
      catch: [waiting("catch", { queue: "default" })],
      finally: [waiting("finally", { queue: "default" })],
    }));
    const [j1, j2, j3, j4] = await take(store, ["default"], T0, 4);
    assert.deepEqual(ids([j1!, j2!, j3!, j4!]), jobIds.slice(0, 4));
    assert.deepEqual(await apply(store, released(j4!, T0, T0 + 5_000)), [true], "in backoff");
    assert.deepEqual(await apply(store, failed(j1!, T0 + 1)), [true]);
    await expectBatch(store, id, {
      total: 6,
      pending: 2,
      failed: 1,
      skipped: 3,
      succeeded: 0,
      cancelledAt: T0 + 1,
      finishedAt: null,
    });
    const [caught, ...rest] = await take(store, ["default"], T0 + 20_000);
    assert.deepEqual([names([caught!]), rest], [[`catch@${id}`], []], "m4, m5, m6 are gone");
    assert.deepEqual(await apply(store, done(caught!, T0 + 20_000)), [true]);
    assert.deepEqual(await apply(store, done(j4!, T0 + 2)), [false], "a skipped member's lease");
    assert.deepEqual(await apply(store, done(j2!, T0 + 2)), [true]);
    await expectBatch(store, id, {
      total: 6,
      pending: 1,
      failed: 1,
      skipped: 3,
      succeeded: 1,
      cancelledAt: T0 + 1,
      finishedAt: null,
    });
    assert.deepEqual(await take(store, ["default"], T0 + 20_000), []);
    assert.deepEqual(await apply(store, failed(j3!, T0 + 3)), [true]);
    await expectBatch(store, id, {
      total: 6,
      pending: 0,
      failed: 2,
      skipped: 3,
      succeeded: 1,
      cancelledAt: T0 + 1,
      finishedAt: T0 + 3,
    });
    assert.deepEqual(await drain(store, ["default"], LATER), [`finally@${id}`]);
    assert.equal((await store.batch(id))?.cancelledAt, T0 + 1, "the first cancel is kept");
  });

  test("with allowFailures failures leave the batch running: catch is queued once, finally at the end, then not", async (store) => {
    const { id } = await store.insertBatch(newBatch({
      allowFailures: true,
      jobs: ["m1", "m2", "m3", "m4"].map((name) => member(name)),
      then: [waiting("then")],
      catch: [waiting("catch")],
      finally: [waiting("finally")],
    }));
    const [j1, j2, j3] = await take(store, ["default"], T0, 3);
    assert.deepEqual(await apply(store, failed(j1!, T0 + 1)), [true]);
    const state = { ...fresh(4), pending: 3, failed: 1 };
    await expectBatch(store, id, state);
    assert.deepEqual(await drain(store, ["cb"], LATER), [`catch@${id}`]);
    assert.deepEqual(await apply(store, failed(j2!, T0 + 2)), [true]);
    await expectBatch(store, id, { ...state, pending: 2, failed: 2 });
    assert.deepEqual(await apply(store, done(j3!, T0 + 3)), [true]);
    await expectBatch(store, id, { ...state, pending: 1, failed: 2, succeeded: 1 });
    assert.deepEqual(await drain(store, ["cb"], LATER), [], "one catch only; not finished yet");
    const [j4] = await take(store, ["default"], T0 + 3);
    assert.equal(j4?.name, "m4", "a failure skips nothing");
    assert.deepEqual(await apply(store, done(j4!, T0 + 4)), [true]);
    await expectBatch(store, id, {
      ...state,
      pending: 0,
      failed: 2,
      succeeded: 2,
      finishedAt: T0 + 4,
    });
    assert.deepEqual(await drain(store, ["cb"], LATER), [`finally@${id}`]);
  });

  test("retry() of a failed member and retry({ batchId }) count it pending again and clear finishedAt; then fires once nothing failed", async (store) => {
    const { id, jobIds: [m1, m2] } = await store.insertBatch(newBatch({
      allowFailures: true,
      jobs: ["m1", "m2", "m3"].map((name) => member(name)),
      then: [waiting("then")],
      catch: [waiting("catch")],
      finally: [waiting("finally")],
    }));
    const [j1, j2, j3] = await take(store);
    assert.deepEqual(
      await apply(store, failed(j1!, T0 + 1), failed(j2!, T0 + 2), done(j3!, T0 + 3)),
      [true, true, true],
    );
    const finished = { ...fresh(3), pending: 0, failed: 2, succeeded: 1, finishedAt: T0 + 3 };
    await expectBatch(store, id, finished);
    const callbacks = await take(store, ["cb"], T0 + 3);
    assert.deepEqual(names(callbacks), [`catch@${id}`, `finally@${id}`]);
    const catchJob = callbacks.find((job) => job.name === "catch")!;
    const finallyJob = callbacks.find((job) => job.name === "finally")!;
    assert.deepEqual(await apply(store, failed(catchJob, T0 + 4), done(finallyJob, T0 + 4)), [
      true,
      true,
    ]);
    await expectBatch(store, id, finished, "a failed callback is not counted");

    assert.deepEqual(await store.retry([m1!], T0 + 5), [m1]);
    await expectBatch(store, id, { ...finished, pending: 1, failed: 1, finishedAt: null });
    const [r1] = await take(store, ["default"], T0 + 5);
    assert.deepEqual([r1?.id, r1?.batchId, r1?.attempts], [m1, id, 1]);
    assert.deepEqual(await apply(store, done(r1!, T0 + 6)), [true]);
    await expectBatch(store, id, { ...finished, failed: 1, succeeded: 2, finishedAt: T0 + 6 });
    assert.deepEqual(await drain(store, ["cb"], LATER), [], "m2 still failed; finally fired");

    assert.deepEqual(await store.retry({ batchId: id }, T0 + 7), [m2], "members only");
    assert.equal((await store.failedJob(catchJob.id))?.batchId, id, "the callback stays failed");
    await expectBatch(store, id, {
      ...finished,
      pending: 1,
      failed: 0,
      succeeded: 2,
      finishedAt: null,
    });
    const [r2] = await take(store, ["default"], T0 + 7);
    assert.deepEqual(await apply(store, done(r2!, T0 + 8)), [true]);
    await expectBatch(store, id, { ...finished, failed: 0, succeeded: 3, finishedAt: T0 + 8 });
    assert.deepEqual(await drain(store, ["cb"], LATER), [`then@${id}`], "then, once");

    assert.deepEqual(await store.retry([catchJob.id], T0 + 9), [catchJob.id]);
    await expectBatch(store, id, { ...finished, failed: 0, succeeded: 3, finishedAt: T0 + 8 });
    assert.deepEqual(await store.retry({ batchId: id }, T0 + 9), []);
    assert.deepEqual(await store.retry({ batchId: id + 1_000 }, T0 + 9), []);
  });

  test("a member retried in a cancelled batch runs and is counted, but then never fires and finally not twice", async (store) => {
    const { id, jobIds: [m1] } = await store.insertBatch(newBatch({
      jobs: [member("m1"), member("m2")],
      then: [waiting("then")],
      catch: [waiting("catch")],
      finally: [waiting("finally")],
    }));
    const [j1, j2] = await take(store);
    assert.deepEqual(await apply(store, failed(j1!, T0 + 1), done(j2!, T0 + 2)), [true, true]);
    const cancelled = {
      ...fresh(2),
      pending: 0,
      failed: 1,
      succeeded: 1,
      cancelledAt: T0 + 1,
      finishedAt: T0 + 2,
    };
    await expectBatch(store, id, cancelled);
    assert.deepEqual(await drain(store, ["cb"], LATER), [`catch@${id}`, `finally@${id}`]);
    assert.deepEqual(await store.retry({ batchId: id }, T0 + 3), [m1]);
    await expectBatch(store, id, { ...cancelled, pending: 1, failed: 0, finishedAt: null });
    const [again] = await take(store, ["default"], T0 + 3);
    assert.deepEqual([again?.id, again?.batchId], [m1, id]);
    assert.deepEqual(await apply(store, done(again!, T0 + 4)), [true]);
    await expectBatch(store, id, { ...cancelled, failed: 0, succeeded: 2, finishedAt: T0 + 4 });
    assert.deepEqual(await drain(store, ["cb"], LATER), []);
  });

  test("cancelBatch() skips unleased members, lets leased ones settle, and returns false when there is nothing to cancel", async (store) => {
    assert.equal(await store.cancelBatch(424_242, T0), false, "no such batch");
    const { id } = await store.insertBatch(newBatch({
      jobs: ["m1", "m2", "m3", "m4"].map((name) => member(name)),
      then: [waiting("then")],
      catch: [waiting("catch")],
      finally: [waiting("finally")],
    }));
    const [j1, j2] = await take(store, ["default"], T0, 2);
    assert.equal(await store.cancelBatch(id, T0 + 5), true);
    const cancelled = { ...fresh(4), pending: 2, skipped: 2, cancelledAt: T0 + 5 };
    await expectBatch(store, id, cancelled);
    assert.deepEqual(await take(store, ["default", "cb"], T0 + 6), [], "m3, m4 gone; no callback");
    assert.equal(await store.cancelBatch(id, T0 + 6), false, "already cancelled");
    await expectBatch(store, id, cancelled, "a refused cancel changes nothing");
    assert.deepEqual(await apply(store, failed(j1!, T0 + 7)), [true]);
    await expectBatch(store, id, { ...cancelled, pending: 1, failed: 1 });
    assert.deepEqual(await drain(store, ["cb"], LATER), [`catch@${id}`], "first failure");
    assert.deepEqual(await apply(store, done(j2!, T0 + 8)), [true]);
    const finished = { ...cancelled, pending: 0, failed: 1, succeeded: 1, finishedAt: T0 + 8 };
    await expectBatch(store, id, finished);
    assert.deepEqual(await drain(store, ["cb"], LATER), [`finally@${id}`]);
    assert.equal(await store.cancelBatch(id, T0 + 9), false, "finished");
    await expectBatch(store, id, finished);

    const empty = await store.insertBatch(newBatch({ then: [waiting("empty-then")] }));
    assert.deepEqual(await drain(store, ["cb"], T0), [`empty-then@${empty.id}`]);
    assert.equal(await store.cancelBatch(empty.id, T0 + 1), false, "finished, never cancelled");
    await expectBatch(store, empty.id, { ...fresh(0), finishedAt: T0 });
  });

  test("cancelBatch() of a batch with no leased member finishes it at once and queues only finally", async (store) => {
    const { id } = await store.insertBatch(newBatch({
      allowFailures: true,
      jobs: [member("m1"), member("m2", { availableAt: T0 + 10_000 })],
      then: [waiting("then")],
      catch: [waiting("catch")],
      finally: [waiting("finally")],
    }));
    assert.equal(await store.cancelBatch(id, T0 + 3), true);
    await expectBatch(store, id, {
      ...fresh(2),
      pending: 0,
      skipped: 2,
      cancelledAt: T0 + 3,
      finishedAt: T0 + 3,
    });
    assert.deepEqual(names(await take(store, ["default", "cb"], LATER)), [`finally@${id}`]);
  });

  test("pruneBatches(before) deletes batches that ended (nothing pending) strictly before it, with their unfired callbacks", async (store) => {
    const a = await store.insertBatch(newBatch({ name: "a" }));
    const b = await store.insertBatch(
      newBatch({ name: "b", jobs: [member("b1", { queue: "b" })] }),
    );
    const [b1] = await take(store, ["b"]);
    assert.deepEqual(await apply(store, done(b1!, T0 + 2)), [true]);
    const c = await store.insertBatch(newBatch({
      name: "c",
      jobs: [member("c1", { queue: "c" }), member("c2", { queue: "c" })],
      finally: [waiting("c-finally")],
    }));
    const [c1] = await take(store, ["c"], T0, 1);
    assert.equal(await store.cancelBatch(c.id, T0 + 1), true);
    await expectBatch(store, c.id, { ...fresh(2), pending: 1, skipped: 1, cancelledAt: T0 + 1 });
    const d = await store.insertBatch(
      newBatch({ name: "d", jobs: [member("d1", { queue: "d" })] }),
    );
    const e = await store.insertBatch(newBatch({
      name: "e",
      allowFailures: true,
      jobs: [member("e1", { queue: "e" })],
      then: [waiting("e-then")],
    }));
    const [e1] = await take(store, ["e"]);
    assert.deepEqual(await apply(store, failed(e1!, T0 + 1)), [true]);
    await expectBatch(store, e.id, { ...fresh(1), pending: 0, failed: 1, finishedAt: T0 + 1 });
    const f = await store.insertBatch(
      newBatch({ name: "f", jobs: [member("f1", { queue: "f" })] }),
    );
    const [f1] = await take(store, ["f"]);
    assert.deepEqual(await apply(store, failed(f1!, T0 + 1)), [true]);
    assert.deepEqual(await store.retry([f1!.id], T0 + 1), [f1!.id]);
    await expectBatch(store, f.id, { ...fresh(1), cancelledAt: T0 + 1 });

    assert.equal(await store.pruneBatches(T0 + 2, T0 + 2), 2, "a (T0), e (T0+1)");
    for (const gone of [a, e]) assert.equal(await store.batch(gone.id), null);
    assert.deepEqual(ids(await store.batches({ limit: 10, offset: 0 })), [f.id, d.id, c.id, b.id]);
    assert.equal(await store.pruneBatches(T0 + 2, T0 + 2), 0);

    assert.deepEqual(await apply(store, done(c1!, T0 + 3)), [true]);
    assert.deepEqual(
      await drain(store, ["cb"], LATER),
      [`c-finally@${c.id}`],
      "a cancelled batch with a job running is kept until its finally fires",
    );
    const [again] = await take(store, ["f"], T0 + 3);
    assert.deepEqual(await apply(store, done(again!, T0 + 3)), [true]);
    await expectBatch(store, f.id, {
      ...fresh(1),
      pending: 0,
      succeeded: 1,
      cancelledAt: T0 + 1,
      finishedAt: T0 + 3,
    });
    assert.equal(await store.pruneBatches(T0 + 3, T0 + 3), 1, "b (T0+2); c and f ended at T0+3");
    assert.equal(await store.pruneBatches(T0 + 4, T0 + 4), 2, "c, f");
    for (const gone of [b, c, f]) assert.equal(await store.batch(gone.id), null);

    assert.deepEqual(await store.retry([e1!.id], T0 + 4), [e1!.id]);
    const [retried] = await take(store, ["e"], T0 + 4);
    assert.deepEqual(await apply(store, done(retried!, T0 + 5)), [true]);
    assert.deepEqual(await drain(store, ["cb"], LATER), [], "e's then was deleted");
    assert.equal(await store.batch(e.id), null);
    assert.equal(await store.pruneBatches(LATER, LATER), 0);
    await expectBatch(store, d.id, fresh(1), "a running batch is never pruned");
  });

  test("addToBatch() adds counted members to a running batch, and then waits for them", async (store) => {
    const { id, jobIds: [m1] } = await store.insertBatch(newBatch({
      jobs: [member("m1")],
      then: [waiting("then")],
      finally: [waiting("finally")],
    }));
    const [j1] = await take(store);
    const added = await store.addToBatch(id, [member("m2"), member("m3", { queue: "other" })]);
    assert.equal(added.length, 2);
    assert.ok(added[0]! > m1! && added[1]! > added[0]!, `ids: ${added}`);
    await expectBatch(store, id, fresh(3));
    assert.deepEqual(await apply(store, done(j1!, T0 + 1)), [true]);
    await expectBatch(store, id, { ...fresh(3), pending: 2, succeeded: 1 });
    assert.deepEqual(await drain(store, ["cb"], LATER), []);
    const claimed = await take(store, ["default", "other"], T0 + 1);
    assert.deepEqual(ids(claimed).sort((a, b) => a - b), added);
    assert.deepEqual(names(claimed), [`m2@${id}`, `m3@${id}`]);
    assert.deepEqual(await apply(store, ...claimed.map((job) => done(job, T0 + 2))), [true, true]);
    await expectBatch(store, id, { ...fresh(3), pending: 0, succeeded: 3, finishedAt: T0 + 2 });
    assert.deepEqual(await drain(store, ["cb"], LATER), [`finally@${id}`, `then@${id}`]);

    const lenient = await store.insertBatch(
      newBatch({ allowFailures: true, jobs: [member("l1", { queue: "l" }), member("l2")] }),
    );
    const [l1] = await take(store, ["l"]);
    assert.deepEqual(await apply(store, failed(l1!, T0 + 3)), [true]);
    assert.equal((await store.addToBatch(lenient.id, [member("l3")])).length, 1);
    await expectBatch(store, lenient.id, { ...fresh(3), pending: 2, failed: 1 });
  });

  test("addToBatch() refuses a cancelled, finished or unknown batch, naming why, and stores nothing", async (store) => {
    const cancelled = await store.insertBatch(newBatch({ jobs: [member("c1"), member("c2")] }));
    const [c1] = await take(store, ["default"], T0, 1);
    assert.equal(await store.cancelBatch(cancelled.id, T0 + 1), true);
    const finished = await store.insertBatch(newBatch({ jobs: [member("f1", { queue: "f" })] }));
    const [f1] = await take(store, ["f"]);
    assert.deepEqual(await apply(store, done(f1!, T0 + 2)), [true]);
    const snapshot = async () => ({
      counts: (await store.counts(LATER)).map((row) => ({ ...row })),
      batches: (await store.batches({ limit: 10, offset: 0 })).map((row) => ({ ...row })),
    });
    const before = await snapshot();
    const cases: [number, RegExp][] = [
      [cancelled.id, /cancelled/],
      [finished.id, /finished/],
      [finished.id + 1_000, /no such batch/],
    ];
    for (const [batchId, why] of cases) {
      await assert.rejects(
        store.addToBatch(batchId, [member("late"), member("late", { queue: "other" })]),
        (error) =>
          error instanceof Error && error.message.includes(String(batchId)) &&
          why.test(error.message),
      );
      assert.deepEqual(await snapshot(), before, `after refusing batch ${batchId}`);
    }
    assert.equal(await store.batch(finished.id + 1_000), null);
    assert.deepEqual(await apply(store, done(c1!, T0 + 3)), [true]);
    await expectBatch(store, cancelled.id, {
      ...fresh(2),
      pending: 0,
      skipped: 1,
      succeeded: 1,
      cancelledAt: T0 + 1,
      finishedAt: T0 + 3,
    });
    assert.deepEqual(await take(store, ["default", "other", "f"], LATER), [], "nothing was added");
  });

  test("clear(queue, now) counts cleared members as skipped and finishes a batch left with nothing pending", async (store) => {
    const { id } = await store.insertBatch(newBatch({
      jobs: [member("m1"), member("m2"), member("m3", { queue: "other" })],
      then: [waiting("then")],
      catch: [waiting("catch")],
      finally: [waiting("finally")],
    }));
    await store.insertJobs([newJob()]);
    const [j1] = await take(store, ["default"], T0, 1);
    assert.equal(j1?.name, "m1");
    assert.equal(await store.clear("default", T0 + 5), 2, "m2 and the plain job; m1 runs");
    await expectBatch(store, id, { ...fresh(3), pending: 2, skipped: 1 });
    assert.deepEqual(await apply(store, done(j1!, T0 + 6)), [true], "m1 finishes and settles");
    const partly = { ...fresh(3), pending: 1, succeeded: 1, skipped: 1 };
    await expectBatch(store, id, partly);
    assert.deepEqual(await drain(store, ["cb"], LATER), []);
    assert.equal(await store.clear("other", T0 + 7), 1);
    const cleared = { ...partly, pending: 0, skipped: 2, finishedAt: T0 + 7 };
    await expectBatch(store, id, cleared);
    assert.equal(await store.clear("cb", T0 + 8), 1, "the finally job queued by the clear");
    await expectBatch(store, id, cleared, "a cleared callback is not counted");

    const other = await store.insertBatch(newBatch({
      jobs: [member("x1", { queue: "x" })],
      then: [waiting("x-then", { queue: "x" })],
      finally: [waiting("x-finally", { queue: "x" })],
    }));
    assert.equal(await store.clear(undefined, T0 + 9), 1);
    await expectBatch(store, other.id, { ...fresh(1), pending: 0, skipped: 1, finishedAt: T0 + 9 });
    assert.deepEqual(names(await take(store, ["x"], T0 + 9)), [`x-finally@${other.id}`]);
  });

  test("clear() of more jobs than one chunk of a chunked store keeps the callbacks it queues", async (store) => {
    const { id } = await store.insertBatch(newBatch({
      jobs: [member("b1")],
      finally: [waiting("b-finally", { queue: "default" })],
    }));
    // Redis clears 250 jobs per call: the callback, queued by the first, comes after them all.
    await store.insertJobs(Array.from({ length: 600 }, () => newJob()));
    assert.equal(await store.clear(undefined, T0 + 5), 601);
    await expectBatch(store, id, { ...fresh(1), pending: 0, skipped: 1, finishedAt: T0 + 5 });
    assert.deepEqual(names(await take(store, ["default"], LATER)), [`b-finally@${id}`]);
  });

  // Progress

  test("running(now) lists leased jobs with the progress a progress settlement wrote; expired leases are not listed", async (store) => {
    const [a] = await store.insertJobs([member("a")]);
    const { id: batchId, jobIds: [b] } = await store.insertBatch(newBatch({ jobs: [member("b")] }));
    await store.insertJobs([member("waiting", { queue: "other" })]);
    assert.deepEqual(await store.running(T0), []);
    const [ja, jb] = await take(store);
    assert.deepEqual(ids([ja!, jb!]), [a, b]);
    const row = (job: ClaimedJob, attempt: number, progress: number | null, until: number) => ({
      id: job.id,
      queue: "default",
      name: job.name,
      attempt,
      progress,
      leasedUntil: new Date(until),
      batchId: job.batchId,
    });
    const running = async (now: number) => (await store.running(now)).map((r) => ({ ...r }));
    assert.deepEqual(await running(T0), [
      row(ja!, 1, null, T0 + LEASE_MS),
      row(jb!, 1, null, T0 + LEASE_MS),
    ]);
    assert.equal(jb?.batchId, batchId);
    assert.deepEqual(await apply(store, progressed(ja!, T0 + 1, 40)), [true]);
    assert.deepEqual(await apply(store, progressed(ja!, T0 + 2, 62.5)), [true]);
    assert.deepEqual(await running(T0 + 2), [
      row(ja!, 1, 62.5, T0 + LEASE_MS),
      row(jb!, 1, null, T0 + LEASE_MS),
    ]);
    await expectBatch(store, batchId, fresh(1), "progress is not a settle of the member");
    assert.deepEqual(await running(T0 + LEASE_MS), [], "a lease that ended is not running");
    await begin(store, ja!.token, ja!.id, jb!.id);
    const [ra, rb] = await take(store, ["default"], T0 + LEASE_MS);
    assert.deepEqual([ra?.attempts, rb?.attempts], [2, 2]);
    assert.deepEqual(await running(T0 + LEASE_MS), [
      row(ra!, 2, null, T0 + 2 * LEASE_MS),
      row(rb!, 2, null, T0 + 2 * LEASE_MS),
    ], "a new claim starts with no progress");
    assert.deepEqual(await apply(store, released(ra!, T0 + LEASE_MS, LATER)), [true]);
    assert.deepEqual(await running(T0 + LEASE_MS), [row(rb!, 2, null, T0 + 2 * LEASE_MS)]);
  });

  test("running() and jobs() give back the exact progress a settlement wrote, to the last digit of its double", async (store) => {
    const percents = [99.99999999999999, 100 / 3, 0.1 + 0.2];
    await store.insertJobs(percents.map((_, index) => member(`p${index}`)));
    const claimed = await take(store);
    assert.deepEqual(
      await apply(store, ...claimed.map((job, index) => progressed(job, T0 + 1, percents[index]!))),
      percents.map(() => true),
    );
    assert.deepEqual((await store.running(T0 + 1)).map((row) => row.progress), percents);
    const listed = await store.jobs(
      { state: "running", queue: null, name: null },
      { limit: 10, offset: 0 },
      T0 + 1,
    );
    assert.deepEqual(listed.jobs.map((row) => row.progress), percents);
  });

  test("a progress settlement with the wrong token applies nothing", async (store) => {
    const [a] = await store.insertJobs([member("a")]);
    const [old] = await take(store);
    assert.deepEqual(await apply(store, progressed(old!, T0 + 1, 10)), [true]);
    const [current] = await take(store, ["default"], T0 + LEASE_MS);
    assert.equal(current?.id, a);
    const stale = await store.settle([
      progressed(old!, T0 + LEASE_MS + 1, 99),
      progressed({ id: a!, token: current!.token + 1 }, T0 + LEASE_MS + 1, 98),
      progressed({ id: a! + 1_000, token: current!.token }, T0 + LEASE_MS + 1, 97),
      progressed(current!, T0 + LEASE_MS + 1, 20),
    ]);
    assert.deepEqual(stale.applied, [false, false, false, true]);
    const [listed] = await store.running(T0 + LEASE_MS + 1);
    assert.deepEqual([listed?.id, listed?.progress], [a, 20]);
    assert.deepEqual(await apply(store, progressed(old!, T0 + LEASE_MS + 2, 77)), [false]);
    assert.equal((await store.running(T0 + LEASE_MS + 2))[0]?.progress, 20);
    assert.deepEqual(await apply(store, done(current!, T0 + LEASE_MS + 3)), [true]);
    assert.deepEqual(await apply(store, progressed(current!, T0 + LEASE_MS + 4, 50)), [false]);
    assert.deepEqual(await store.running(T0 + LEASE_MS + 4), []);
  });

  test("a settle from a worker that lost its lease moves no chain and no batch", async (store) => {
    const chainId = await store.insertChain(newChain(["link-1", "link-2"], ["chain-catch"]));
    const { id } = await store.insertBatch(newBatch({
      jobs: [member("m1")],
      then: [waiting("then")],
      catch: [waiting("catch")],
      finally: [waiting("finally")],
    }));
    const [oldLink, oldMember] = await take(store);
    assert.equal(oldLink?.id, chainId);
    const [link, memberJob] = await take(store, ["default"], T0 + LEASE_MS);
    assert.deepEqual(ids([link!, memberJob!]), ids([oldLink!, oldMember!]));
    const at = T0 + LEASE_MS + 1;
    assert.deepEqual(await apply(store, failed(oldLink!, at), failed(oldMember!, at)), [
      false,
      false,
    ]);
    assert.deepEqual(await apply(store, done(oldLink!, at), done(oldMember!, at)), [false, false]);
    await expectBatch(store, id, fresh(1));
    assert.deepEqual(await store.failed({ limit: 10, offset: 0 }), []);
    assert.deepEqual(await take(store, ["default", "cb"], at), []);
    const settled = await store.settle(
      [done(link!, at), done(memberJob!, at)],
      request(["default", "cb"], at),
    );
    assert.deepEqual(settled.applied, [true, true]);
    assert.deepEqual(names(settled.claimed), [`finally@${id}`, "link-2@null", `then@${id}`]);
    await expectBatch(store, id, { ...fresh(1), pending: 0, succeeded: 1, finishedAt: at });
  });

  // Transactions

  test("insertChain() and insertBatch() inside transaction() commit with it", async (store) => {
    const [chainId, pushed] = await store.transaction(async (tx) => {
      const chainId = await tx.insertChain(newChain(["link-1", "link-2"], ["chain-catch"]));
      const pushed = await tx.insertBatch(newBatch({
        jobs: [member("m1")],
        finally: [waiting("finally")],
      }));
      const empty = await tx.insertBatch(newBatch({ finally: [waiting("empty-finally")] }));
      return [chainId, [pushed, empty]] as const;
    });
    const [batch, empty] = pushed;
    await expectBatch(store, batch.id, fresh(1));
    await expectBatch(store, empty.id, { ...fresh(0), finishedAt: T0 });
    const claimed = await take(store);
    assert.deepEqual(ids(claimed), [chainId, batch.jobIds[0]]);
    const settled = await store.settle(
      claimed.map((job) => done(job, T0 + 1)),
      request(["default", "cb"], T0 + 1),
    );
    assert.deepEqual(names(settled.claimed), [
      `empty-finally@${empty.id}`,
      `finally@${batch.id}`,
      "link-2@null",
    ]);
    await expectBatch(store, batch.id, {
      ...fresh(1),
      pending: 0,
      succeeded: 1,
      finishedAt: T0 + 1,
    });
  });

  test("insertChain() and insertBatch() inside a transaction that throws roll back with it", async (store) => {
    const thrown = new Error("roll back");
    await assert.rejects(
      store.transaction(async (tx) => {
        await tx.insertChain(newChain(["lost-1", "lost-2"], ["lost-catch"]));
        await tx.insertBatch(newBatch({ jobs: [member("lost-m1")], finally: [waiting("lost-f")] }));
        await tx.insertBatch(
          newBatch({ then: [waiting("lost-then")], finally: [waiting("lost-f")] }),
        );
        throw thrown;
      }),
      (error) => error === thrown,
    );
    assert.deepEqual(await store.batches({ limit: 10, offset: 0 }), []);
    assert.deepEqual(await store.counts(LATER), []);
    assert.deepEqual(await take(store, ["default", "cb"], LATER), []);

    const chainId = await store.insertChain(newChain(["after-1", "after-2"], ["after-catch"]));
    const { id, jobIds } = await store.insertBatch(
      newBatch({ jobs: [member("after-m1")], finally: [waiting("after-f")] }),
    );
    await expectBatch(store, id, fresh(1));
    assert.deepEqual((await store.batches({ limit: 10, offset: 0 })).length, 1);
    const claimed = await take(store);
    assert.deepEqual(ids(claimed), [chainId, jobIds[0]]);
    assert.deepEqual(names(claimed), ["after-1@null", `after-m1@${id}`]);
    const [link, memberJob] = claimed;
    const failedLink = await store.settle(
      [failed(link!, T0 + 1), done(memberJob!, T0 + 1)],
      request(["default", "cb"], T0 + 1),
    );
    assert.deepEqual(
      names(failedLink.claimed),
      ["after-catch@null", `after-f@${id}`],
      "none of the rolled-back callbacks or links",
    );
  });
}
