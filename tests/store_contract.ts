/**
 * The contract every {@linkcode Store} keeps: a store's test file calls
 * {@linkcode storeContract} with a way to open a fresh, empty store. Times are
 * passed in, never read from a clock. App SQL given to `tx.query` uses no
 * placeholders and only types SQLite and PostgreSQL share.
 *
 * @module
 */
import assert from "node:assert/strict";
import type {
  ClaimedJob,
  ClaimRequest,
  NewJobRow,
  Settlement,
  Store,
  StoredError,
  StoreTransaction,
} from "../src/stores/store.ts";

/** A fresh, empty store; disposing it closes the store and drops its data. */
export interface OpenedStore extends AsyncDisposable {
  /** The store under test. */
  readonly store: Store;
}

/** The time every case counts from. */
export const T0 = Date.UTC(2026, 0, 1);
/** The lease every claim takes unless a case says otherwise. */
export const LEASE_MS = 30_000;

/** A job row due at `T0` in "default", with `overrides` applied. */
export function newJob(overrides: Partial<NewJobRow> = {}): NewJobRow {
  const what = { queue: "default", name: "contract-job", payload: '{"n":0}', priority: 0 };
  return { ...what, availableAt: T0, retryUntil: null, createdAt: T0, ...overrides };
}

/** Claims with defaults: queue "default", limit 10, at `T0`, lease `LEASE_MS`, token 1. */
export function claim(store: Store, request: Partial<ClaimRequest> = {}): Promise<ClaimedJob[]> {
  const defaults = { queues: ["default"], limit: 10, now: T0, leaseMs: LEASE_MS, token: 1 };
  return store.claim({ ...defaults, ...request });
}

const ids = (jobs: readonly { id: number }[]) => jobs.map((job) => job.id);
const sorted = (numbers: readonly number[]) => [...numbers].sort((a, b) => a - b);
/** Counts by queue as `[pending, delayed, reserved, failed]`. */
async function countsAt(store: Store, now: number) {
  return Object.fromEntries(
    (await store.counts(now)).map((c) => [c.queue, [c.pending, c.delayed, c.reserved, c.failed]]),
  );
}
/** Rows as plain objects (drivers may hand out objects with a null prototype). */
const plain = <R extends object>(rows: readonly R[]) => rows.map((row) => ({ ...row }));

const BOOM: StoredError = {
  message: "Error: boom",
  stack: "Error: boom\n    at handle (a.ts:1:1)",
};
const complete = (id: number, token: number, at = T0): Settlement => ({
  kind: "complete",
  id,
  token,
  at,
});
const release = (id: number, token: number, availableAt: number, error: string | null = null) =>
  ({ kind: "release", id, token, at: T0, availableAt, error, refundAttempt: false }) as const;
const fail = (id: number, token: number, at = T0, attempts = 1, error = BOOM) =>
  ({ kind: "fail", id, token, error, attempts, at }) as const;

/** Pushes one job per `failedAt`, claims each and fails it then; returns the ids. */
async function failedJobs(store: Store, failedAts: number[], job: Partial<NewJobRow> = {}) {
  const failed: number[] = [];
  for (const failedAt of failedAts) {
    const [id] = await store.push([newJob(job)]);
    const [claimed] = await claim(store, { queues: [job.queue ?? "default"], limit: 1, token: 77 });
    assert.equal(claimed?.id, id);
    assert.deepEqual((await store.settle([fail(id!, 77, failedAt)])).applied, [true]);
    failed.push(id!);
  }
  return failed;
}

/** Registers the contract's cases as `Deno.test`s named `${name}: …`. */
export function storeContract(name: string, open: () => Promise<OpenedStore>): void {
  const test = (what: string, fn: (store: Store) => Promise<void>) =>
    Deno.test(`${name}: ${what}`, async () => {
      await using opened = await open();
      await fn(opened.store);
    });

  test("push() stores one or many jobs and returns their ids in order", async (store) => {
    const [one] = await store.push([newJob()]);
    assert.ok(Number.isSafeInteger(one) && one! > 0, `id: ${one}`);
    assert.deepEqual(ids(await claim(store)), [one]);
    const rows = [1, 2, 3].map((n) => newJob({ payload: `{"n":${n}}` }));
    const first = await store.push(rows);
    assert.equal(first.length, 3);
    assert.deepEqual(first, sorted(first));
    assert.equal(new Set(first).size, 3);
    assert.ok(first[0]! > one!, "a later push gets a higher id");
    const claimed = await claim(store, { token: 2 });
    for (const [index, id] of first.entries()) {
      assert.equal(claimed.find((job) => job.id === id)?.payload, rows[index]!.payload);
    }
  });

  test("nextDueAt() gives the earliest due time after now of the queues asked for, leases' ends included", async (store) => {
    assert.equal(await store.nextDueAt(["default"], T0), null);
    await store.push([
      newJob({ availableAt: T0 - 5 }), // due already: not "next"
      newJob({ availableAt: T0 + 900, priority: 9 }),
      newJob({ availableAt: T0 + 300 }),
      newJob({ queue: "other", availableAt: T0 + 100 }),
    ]);
    assert.equal(await store.nextDueAt(["default"], T0), T0 + 300);
    assert.equal(await store.nextDueAt(["default", "other"], T0), T0 + 100);
    assert.equal(await store.nextDueAt(["default"], T0 + 300), T0 + 900);
    assert.equal(await store.nextDueAt(["default"], T0 + 900), null);
    assert.equal(await store.nextDueAt(["empty"], T0), null);
    // A leased job is due again when its lease runs out (a dead worker's job is recovered then).
    const [leased] = await claim(store, { limit: 1, leaseMs: 50 });
    assert.equal(leased?.id !== undefined, true);
    assert.equal(await store.nextDueAt(["default"], T0), T0 + 50);
  });

  test("claim() hands over the job's fields, leased, at attempt 1, with no crash", async (store) => {
    const row = newJob({
      queue: "mail",
      name: "send-receipt",
      payload: '{"to":"zoë@example.com","note":"✓ \\"quoted\\""}',
      priority: 3,
      retryUntil: T0 + 60_000,
      createdAt: T0 - 10,
    });
    const [id] = await store.push([row]);
    const claimed = await claim(store, { queues: ["mail"], token: 42 });
    const { availableAt: _, ...fields } = row;
    const leased = {
      attempts: 1,
      crashes: 0,
      recovered: false,
      lastError: null,
      token: 42,
      batchId: null,
      trace: null,
      lastSpan: null,
    };
    const [{ waitedMs, ...rest }] = plain(claimed) as [ClaimedJob];
    assert.ok(typeof waitedMs === "number" && waitedMs >= 0, `waitedMs: ${waitedMs}`);
    assert.deepEqual(rest, { id: id!, ...fields, ...leased });
  });

  test("claim() past aheadFrom holds jobs ahead unstarted: a worker death charges them nothing", async (store) => {
    const [a, b, c] = await store.push([newJob(), newJob(), newJob()]);
    // One attempt and one crash allowed: held ahead all the same, since a death costs them nothing.
    const oneOfEach = { "contract-job": { attempts: 1, crashes: 1 } };
    const first = await claim(store, {
      limit: 3,
      aheadFrom: 1,
      spendLimits: oneOfEach,
      token: 1,
    });
    assert.deepEqual(first.map((job) => [job.id, job.ahead === true]), [
      [a, false],
      [b, true],
      [c, true],
    ]);
    // Token 1's worker dies: the job it started counts a crash and an attempt; the others nothing.
    const later = T0 + LEASE_MS + 1;
    const recovered = await claim(store, { limit: 3, now: later, token: 2 });
    assert.deepEqual(
      recovered.map((job) => [job.id, job.attempts, job.crashes, job.recovered, job.lastError]),
      [[a, 2, 1, true, "worker died during attempt 1"], [b, 1, 0, false, null], [
        c,
        1,
        0,
        false,
        null,
      ]],
    );
  });

  test("settle() confirms the starts of jobs claimed ahead, and refuses one cancelled meanwhile", async (store) => {
    const [a, b, c] = await store.push([newJob(), newJob(), newJob()]);
    await claim(store, { limit: 3, aheadFrom: 1, token: 1 });
    const cancel = { id: b!, reason: "not wanted", now: T0, keepUntil: T0 };
    assert.equal(await store.cancel(cancel), "cancelled", "a job claimed ahead has not started");
    assert.equal(await store.result(c!, T0).then((row) => row?.state), "pending");
    const starts = {
      leases: [{ id: b!, token: 1 }, { id: c!, token: 1 }],
      leaseMs: LEASE_MS,
      now: T0,
    };
    const { applied, started } = await store.settle([complete(a!, 1)], undefined, { starts });
    assert.deepEqual([applied, started], [[true], [c]]);
    assert.equal(await store.result(c!, T0).then((row) => row?.state), "running");
    assert.equal(await store.cancel({ ...cancel, id: c! }), "cancelling");
  });

  test("settle() refuses the start of a job claimed ahead whose queue is paused, and gives it back charged nothing", async (store) => {
    const [a, b] = await store.push([newJob(), newJob({ availableAt: T0 - 5 })]);
    const [first] = await claim(store, { limit: 2, aheadFrom: 1, token: 1 });
    assert.equal(first?.id, b, "the job due earlier is claimed first");
    await store.pause("default", T0, null, null);
    const starts = { leases: [{ id: a!, token: 1 }], leaseMs: LEASE_MS, now: T0 };
    assert.deepEqual((await store.settle([], undefined, { starts })).started, []);
    await store.resume("default", T0);
    // Given back unleased, due when it was, its attempt not counted.
    const again = await claim(store, { limit: 2, token: 2 });
    assert.deepEqual(again.map((job) => [job.id, job.attempts, job.crashes]), [[a, 1, 0]]);
  });

  test("a start refused for a pause releases the overlap lock the job claimed ahead took", async (store) => {
    const [a, b, c] = await store.push([
      newJob({ availableAt: T0 - 2 }),
      newJob({ availableAt: T0 - 1 }),
      newJob(),
    ]);
    await claim(store, { limit: 2, aheadFrom: 1, token: 1 });
    const lock = (id: number, token: number) => ({
      id,
      token,
      locks: [{ key: "k", limit: 1, expiresAt: T0 + 60_000, retryAt: T0 + 1_000 }],
      rates: [],
    });
    assert.deepEqual(await store.acquire([lock(b!, 1)], T0), [null]);
    await store.pause("default", T0, null, null);
    const starts = { leases: [{ id: b!, token: 1 }], leaseMs: LEASE_MS, now: T0 };
    assert.deepEqual((await store.settle([complete(a!, 1)], undefined, { starts })).started, []);
    await store.resume("default", T0);
    const [next] = await claim(store, { limit: 1, token: 2 });
    assert.equal(next?.id, b, "given back due when it was");
    assert.deepEqual(await store.acquire([lock(c!, 3)], T0), [null], "the lock was released");
  });

  test("claim() past aheadFrom keeps a recovered job that has spent its attempts, to fail it as recovered", async (store) => {
    const [a, b] = await store.push([newJob(), newJob()]);
    await claim(store, { limit: 2, token: 1 });
    // Its worker died: with one attempt allowed, both have spent theirs and will fail unrun.
    const oneAttempt = { "contract-job": { attempts: 1, crashes: 2 } };
    const recovered = await claim(store, {
      limit: 2,
      now: T0 + LEASE_MS + 1,
      aheadFrom: 1,
      spendLimits: oneAttempt,
      token: 2,
    });
    assert.deepEqual(
      recovered.map((job) => [job.id, job.attempts, job.crashes, job.recovered]),
      [[a, 2, 1, true], [b, 2, 1, true]],
    );
  });

  test("claim() takes at most `limit` jobs, every due job of the first queue before the second", async (store) => {
    const [low1, low2] = await store.push([newJob({ queue: "low" }), newJob({ queue: "low" })]);
    const [high1, high2, high3] = await store.push([1, 2, 3].map(() => newJob({ queue: "high" })));
    await store.push([newJob({ queue: "other" })]);
    const take = (token: number) => claim(store, { queues: ["high", "low"], limit: 2, token });
    assert.deepEqual(sorted(ids(await take(1))), [high1, high2]);
    assert.deepEqual(sorted(ids(await take(2))), sorted([high3!, low1!]));
    assert.deepEqual(ids(await take(3)), [low2]);
    assert.deepEqual(await take(4), [], "a queue not asked for is never claimed from");
  });

  test("claim() takes the higher priority first, then the earlier due time, then the earlier push", async (store) => {
    const [a] = await store.push([newJob({ priority: 0, availableAt: T0 - 3_000 })]);
    const [b] = await store.push([newJob({ priority: 5, availableAt: T0 - 1_000 })]);
    const [c] = await store.push([newJob({ priority: 5, availableAt: T0 - 2_000 })]);
    const [d] = await store.push([newJob({ priority: -1, availableAt: T0 - 9_000 })]);
    const [e] = await store.push([newJob({ priority: 0, availableAt: T0 - 3_000 })]);
    const order: number[] = [];
    for (let token = 1; token <= 5; token++) {
      order.push(...ids(await claim(store, { limit: 1, token })));
    }
    assert.deepEqual(order, [c, b, a, e, d]);
  });

  test("claim() takes due jobs past delayed ones at higher priorities, with few or many priority levels", async (store) => {
    // 20 levels: more than a claim seeks one by one, so the claim walks the queue's index instead.
    for (const levels of [3, 20]) {
      const queue = `levels-${levels}`;
      await store.push(
        Array.from(
          { length: levels },
          (_, level) => newJob({ queue, priority: 100 + level, availableAt: T0 + 60_000 }),
        ),
      );
      const [late] = await store.push([newJob({ queue, priority: 1, availableAt: T0 - 1_000 })]);
      const [early] = await store.push([newJob({ queue, priority: 1, availableAt: T0 - 2_000 })]);
      const [top] = await store.push([newJob({ queue, priority: 2, availableAt: T0 })]);
      const order: number[] = [];
      for (let token = 1; token <= 4; token++) {
        order.push(...ids(await claim(store, { queues: [queue], limit: 2, token })));
      }
      assert.deepEqual(order, [top, early, late], `${levels} levels`);
    }
  });

  test("claim() returns the jobs it took in claim order", async (store) => {
    const [low] = await store.push([newJob({ queue: "low", priority: 9 })]);
    const [highLow] = await store.push([newJob({ queue: "high", priority: 0 })]);
    const [highTop] = await store.push([newJob({ queue: "high", priority: 7 })]);
    const [highLater] = await store.push([newJob({ queue: "high", priority: 0 })]);
    const claimed = await claim(store, { queues: ["high", "low"] });
    assert.deepEqual(ids(claimed), [highTop, highLow, highLater, low]);
  });

  test("claim() skips jobs not yet due and takes a job due exactly now", async (store) => {
    const [later] = await store.push([newJob({ availableAt: T0 + 1_000 })]);
    const [due] = await store.push([newJob({ availableAt: T0 })]);
    assert.deepEqual(ids(await claim(store, { now: T0, token: 1 })), [due]);
    assert.deepEqual(await claim(store, { now: T0 + 999, token: 2 }), []);
    assert.deepEqual(ids(await claim(store, { now: T0 + 1_000, token: 3 })), [later]);
  });

  test("a claimed job is not claimed again until its lease expires", async (store) => {
    const [id] = await store.push([newJob()]);
    assert.deepEqual(ids(await claim(store, { token: 1 })), [id]);
    assert.deepEqual(await claim(store, { now: T0 + LEASE_MS - 1, token: 2 }), []);
    const [counts] = await store.counts(T0 + LEASE_MS - 1);
    assert.equal(counts?.reserved, 1);
    assert.deepEqual(ids(await claim(store, { now: T0 + LEASE_MS, token: 3 })), [id]);
  });

  test("claims running at once never hand out the same job", async (store) => {
    const pushed = await store.push(Array.from({ length: 10 }, () => newJob()));
    const batches = await Promise.all(
      [1, 2, 3, 4].map((token) => claim(store, { limit: 3, token })),
    );
    const claimed = batches.flatMap(ids);
    assert.equal(new Set(claimed).size, claimed.length, "no job claimed twice");
    assert.deepEqual(sorted(claimed), pushed);
  });

  test("a job whose lease expired is claimed again as recovered, counting a crash and an attempt", async (store) => {
    const [id] = await store.push([newJob()]);
    await claim(store, { token: 1 });
    const [second] = await claim(store, { now: T0 + LEASE_MS, token: 2 });
    const { attempts, crashes, recovered, token } = second!;
    assert.deepEqual([second?.id, attempts, crashes, recovered, token], [id, 2, 1, true, 2]);
    const [third] = await claim(store, { now: T0 + 2 * LEASE_MS, token: 3 });
    assert.deepEqual([third?.attempts, third?.crashes, third?.recovered], [3, 2, true]);
    const now = T0 + 2 * LEASE_MS;
    assert.deepEqual((await store.settle([release(id!, 3, now)])).applied, [true]);
    const [fourth] = await claim(store, { now, token: 4 });
    assert.deepEqual([fourth?.attempts, fourth?.crashes, fourth?.recovered], [4, 2, false]);
  });

  test("release puts the job back, due at availableAt, with its error; refundAttempt gives the attempt back", async (store) => {
    const [id] = await store.push([newJob()]);
    await claim(store, { token: 1 });
    assert.deepEqual((await store.settle([release(id!, 1, T0 + 5_000, "Error: later")])).applied, [
      true,
    ]);
    assert.deepEqual(await countsAt(store, T0), { default: [0, 1, 0, 0] });
    assert.deepEqual(
      (await store.settle([complete(id!, 1)])).applied,
      [false],
      "the released token is void",
    );
    assert.deepEqual(await claim(store, { now: T0 + 4_999, token: 2 }), []);
    const [job] = await claim(store, { now: T0 + 5_000, token: 3 });
    assert.deepEqual(
      [job?.id, job?.attempts, job?.crashes, job?.recovered, job?.lastError],
      [id, 2, 0, false, "Error: later"],
    );
    const refund = { ...release(id!, 3, T0 + 5_000), refundAttempt: true };
    assert.deepEqual((await store.settle([refund])).applied, [true]);
    const [again] = await claim(store, { now: T0 + 5_000, token: 4 });
    assert.deepEqual([again?.attempts, again?.lastError], [2, null], "refundAttempt gives it back");
  });

  test("fail moves the job to the failed jobs with its queue, name, payload, attempts, error and stack", async (store) => {
    const payload = '{"to":"zoë","list":[1,2]}';
    const [id] = await store.push([
      newJob({ queue: "mail", name: "send", payload, createdAt: T0 - 10 }),
    ]);
    await claim(store, { queues: ["mail"], token: 1 });
    await claim(store, { queues: ["mail"], now: T0 + LEASE_MS, token: 2 });
    const error = { message: "TypeError: nope", stack: "TypeError: nope\n    at x (y.ts:1:2)" };
    const failedAt = T0 + LEASE_MS + 1;
    assert.deepEqual((await store.settle([fail(id!, 2, failedAt, 2, error)])).applied, [true]);
    assert.deepEqual({ ...await store.failedJob(id!) }, {
      id: id!,
      queue: "mail",
      name: "send",
      payload,
      error: error.message,
      stack: error.stack,
      attempts: 2,
      crashes: 1,
      createdAt: T0 - 10,
      failedAt,
      batchId: null,
      chainId: null,
    });
    assert.deepEqual(await claim(store, { queues: ["mail"], now: T0 + 99 * LEASE_MS }), []);
    assert.deepEqual(await countsAt(store, T0), { mail: [0, 0, 0, 1] });
  });

  test("a late settle from a worker that lost its lease changes nothing (R05)", async (store) => {
    const [id] = await store.push([newJob()]);
    const A = 1_001, B = 2_002;
    await claim(store, { token: A });
    const [taken] = await claim(store, { now: T0 + LEASE_MS, token: B });
    assert.equal(taken?.id, id);
    const now = T0 + LEASE_MS + 10;
    const stale = [complete(id!, A), release(id!, A, now, "Error: stale"), fail(id!, A, now)];
    for (const settlement of stale) {
      assert.deepEqual((await store.settle([settlement])).applied, [false], settlement.kind);
    }
    assert.deepEqual(await countsAt(store, now), { default: [0, 0, 1, 0] });
    assert.deepEqual(await store.failed({ limit: 10, offset: 0 }), []);
    assert.deepEqual(await store.renew([{ id: id!, token: A }], now + LEASE_MS, now), [id]);
    assert.deepEqual((await store.settle([complete(id!, B)])).applied, [true]);
    assert.deepEqual((await store.settle([complete(id!, A)])).applied, [false]);
    assert.deepEqual(await store.counts(now), []);
  });

  test("settle() with a claim request claims the next jobs in the same call, after settling", async (store) => {
    const [a, b, c] = await store.push([newJob(), newJob(), newJob()]);
    await claim(store, { limit: 1, token: 1 });
    const request = { queues: ["default"], limit: 5, now: T0, leaseMs: LEASE_MS, token: 2 };
    const { applied, claimed } = await store.settle([release(a!, 1, T0)], request);
    assert.deepEqual(applied, [true]);
    assert.deepEqual(ids(claimed), [a, b, c], "the job released in this call is claimable again");
    assert.ok(claimed.every((job) => job.token === 2));
    assert.deepEqual((await store.settle([complete(b!, 1)])).applied, [false], "b is leased to 2");
    assert.deepEqual((await store.settle([], request)).claimed, [], "nothing left to claim");
  });

  test("settle() applies a batch, reporting each settlement; complete deletes the job", async (store) => {
    const [a, b, c, d] = await store.push([newJob(), newJob(), newJob(), newJob()]);
    await claim(store, { token: 1 });
    const { applied } = await store.settle([
      complete(a!, 1),
      complete(b!, 999),
      release(c!, 1, T0 + 1_000),
      fail(d!, 1),
    ]);
    assert.deepEqual(applied, [true, false, true, true]);
    assert.deepEqual(await countsAt(store, T0), { default: [0, 1, 1, 1] });
    assert.deepEqual(
      (await store.settle([complete(a!, 1)])).applied,
      [false],
      "a completed job is gone",
    );
    assert.deepEqual(sorted(ids(await claim(store, { now: T0 + 9 * LEASE_MS, token: 2 }))), [b, c]);
  });

  test("one settle keeps each kept success and cancel with its own output, times and fence, across claims", async (store) => {
    const [a, b, c, d] = await store.push([
      newJob({ payload: '{"n":1}' }),
      newJob({ payload: '{"n":2}' }),
      newJob(),
      newJob(),
    ]);
    const big = Number.MAX_SAFE_INTEGER;
    await claim(store, { limit: 2, token: 1 });
    await claim(store, { limit: 2, token: big });
    const keepUntil = T0 + 60_000;
    const output = '{"text":"quote \\" backslash \\\\ newline \\n ünïcødé 🚀","n":-1.5e-7}';
    const reason = `stop "now"\n— 'please' 🛑`;
    const { applied } = await store.settle([
      { kind: "complete", id: a!, token: 1, at: T0 + 20, durationMs: 12.4, output, keepUntil },
      { kind: "complete", id: b!, token: 1, at: T0 + 30, keepUntil },
      { kind: "cancel", id: c!, token: big, at: T0 + 40, reason, keepUntil, durationMs: 3 },
      { kind: "complete", id: d!, token: 1, at: T0 + 50, output: "lost", keepUntil },
    ]);
    assert.deepEqual(applied, [true, true, true, false], "d is leased to the other claim");
    const kept = new Map((await store.completed({}, { limit: 10, offset: 0 })).map((row) => [
      row.id,
      { ...row },
    ]));
    assert.deepEqual([...kept.keys()].sort((x, y) => x - y), [a, b, c]);
    assert.deepEqual(kept.get(a!), {
      id: a,
      queue: "default",
      name: "contract-job",
      state: "completed",
      payload: '{"n":1}',
      output,
      error: null,
      attempts: 1,
      createdAt: T0,
      startedAt: T0 + 8,
      finishedAt: T0 + 20,
      durationMs: 12,
    });
    assert.deepEqual(
      [kept.get(b!)?.state, kept.get(b!)?.output, kept.get(b!)?.startedAt, kept.get(b!)?.payload],
      ["completed", null, null, '{"n":2}'],
    );
    assert.deepEqual(
      [kept.get(c!)?.state, kept.get(c!)?.error, kept.get(c!)?.durationMs],
      ["cancelled", reason, 3],
    );
    assert.deepEqual(await countsAt(store, T0), { default: [0, 0, 1, 0] });
  });

  test("settles are fenced exactly, even with tokens up to 2^53 - 1", async (store) => {
    const [id] = await store.push([newJob()]);
    const token = Number.MAX_SAFE_INTEGER;
    await claim(store, { token });
    assert.deepEqual((await store.settle([complete(id!, token - 1)])).applied, [false]);
    assert.deepEqual(await store.renew([{ id: id!, token }], T0 + 2 * LEASE_MS, T0), []);
    assert.deepEqual((await store.settle([complete(id!, token)])).applied, [true]);
  });

  test("renew() extends leases and reports the ids whose lease was lost", async (store) => {
    const [a, b] = await store.push([newJob(), newJob()]);
    const [waiting] = await store.push([newJob({ availableAt: T0 + 1 })]);
    assert.deepEqual(sorted(ids(await claim(store, { token: 1 }))), [a, b]);
    const lost = await store.renew(
      [
        { id: a!, token: 1 },
        { id: b!, token: 2 },
        { id: waiting!, token: 1 },
        { id: 987_654, token: 1 },
      ],
      T0 + 3 * LEASE_MS,
      T0,
    );
    assert.deepEqual(sorted(lost), sorted([b!, waiting!, 987_654]));
    const atOldEnd = await claim(store, { now: T0 + LEASE_MS, token: 3 });
    assert.deepEqual(sorted(ids(atOldEnd)), sorted([b!, waiting!]), "a's lease was extended");
    const again = await claim(store, { now: T0 + 3 * LEASE_MS, token: 4 });
    assert.equal(again.find((job) => job.id === a)?.recovered, true, "a's renewed lease ran out");
  });

  test("counts() reports pending, delayed, reserved and failed per queue", async (store) => {
    const [expired] = await store.push([newJob({ queue: "a", availableAt: T0 - 5_000 })]);
    await claim(store, { queues: ["a"], now: T0 - 5_000, leaseMs: 1_000, token: 1 });
    await store.push([newJob({ queue: "a", availableAt: T0 - 100, priority: 1 })]);
    const [reserved] = await claim(store, { queues: ["a"], now: T0 - 100, limit: 1, token: 2 });
    assert.notEqual(reserved?.id, expired);
    await store.push([newJob({ queue: "a" }), newJob({ queue: "a", availableAt: T0 - 1 })]);
    await store.push([newJob({ queue: "a", availableAt: T0 + 10_000 })]);
    await failedJobs(store, [T0], { queue: "b" });
    await store.push([newJob({ queue: "c", availableAt: T0 + 1 })]);
    assert.deepEqual(await countsAt(store, T0), {
      a: [3, 1, 1, 0],
      b: [0, 0, 0, 1],
      c: [0, 1, 0, 0],
    });
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
    const [queued] = await store.push([newJob()]);
    assert.equal(await store.failedJob(queued!), null, "failedJob() of a queued job");
    assert.equal(await store.failedJob(123_456), null, "failedJob() of an unknown id");
  });

  test("retry() brings a failed job back under the same id, due now, with fresh attempts", async (store) => {
    const row = newJob({ queue: "mail", priority: 4, payload: '{"k":"v"}', createdAt: T0 - 7 });
    const [id] = await store.push([row]);
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
    const [queued] = await store.push([newJob()]);
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
    const [queued] = await store.push([newJob()]);
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

  test("clear(queue) deletes that queue's waiting, delayed and leased jobs, nothing else", async (store) => {
    await failedJobs(store, [T0], { queue: "a" });
    const [leased] = await store.push([newJob({ queue: "a" })]);
    await claim(store, { queues: ["a"], token: 1 });
    await store.push([newJob({ queue: "a" }), newJob({ queue: "a", availableAt: T0 + 5_000 })]);
    const [kept] = await store.push([newJob({ queue: "b" })]);
    assert.equal(await store.clear("a", T0), 3);
    assert.equal(await store.clear("nothing-here", T0), 0);
    assert.deepEqual(await countsAt(store, T0), { a: [0, 0, 0, 1], b: [1, 0, 0, 0] });
    assert.deepEqual((await store.settle([complete(leased!, 1)])).applied, [false]);
    assert.deepEqual(ids(await claim(store, { queues: ["a", "b"], token: 2 })), [kept]);
    await store.push([newJob({ queue: "c" })]);
    assert.equal(await store.clear(undefined, T0), 2);
    assert.deepEqual(await countsAt(store, T0), { a: [0, 0, 0, 1] });
  });

  test("transaction() commits the app's statements and its pushed jobs together", async (store) => {
    const result = await store.transaction(async (tx) => {
      await tx.query("CREATE TABLE contract_orders (id INTEGER PRIMARY KEY, note TEXT NOT NULL)");
      await tx.query("INSERT INTO contract_orders (id, note) VALUES (1, 'first')");
      const pushed = await tx.push([newJob(), newJob({ queue: "other" })]);
      const rows = await tx.query<{ note: string }>("SELECT note FROM contract_orders");
      assert.deepEqual(plain(rows), [{ note: "first" }]);
      return pushed;
    });
    assert.equal(result.length, 2);
    assert.deepEqual(ids(await claim(store, { queues: ["default", "other"] })), result);
    const rows = await store.transaction((tx) => tx.query("SELECT id, note FROM contract_orders"));
    assert.deepEqual(plain(rows), [{ id: 1, note: "first" }]);
  });

  test("a transaction whose callback throws rolls back its app statements and jobs", async (store) => {
    await store.transaction((tx) =>
      tx.query("CREATE TABLE contract_orders (id INTEGER PRIMARY KEY, note TEXT NOT NULL)")
    );
    const thrown = new Error("stop here");
    await assert.rejects(
      store.transaction(async (tx) => {
        await tx.query("INSERT INTO contract_orders (id, note) VALUES (1, 'lost')");
        await tx.push([newJob(), newJob()]);
        throw thrown;
      }),
      (error) => error === thrown,
    );
    const rows = await store.transaction((tx) => tx.query("SELECT id FROM contract_orders"));
    assert.deepEqual(rows, []);
    assert.deepEqual(await store.counts(T0), []);
    const [after] = await store.push([newJob()]);
    assert.deepEqual(ids(await claim(store)), [after], "the store works after a rollback");
  });

  test("transactions started together run one after the other and both commit", async (store) => {
    let opened!: () => void;
    const inFirst = new Promise<void>((resolve) => opened = resolve);
    const results = await Promise.allSettled([
      store.transaction(async (tx) => {
        const pushed = await tx.push([newJob()]);
        opened();
        await Promise.resolve();
        return pushed;
      }),
      store.transaction(async (tx) => {
        await inFirst;
        return await tx.push([newJob()]);
      }),
    ]);
    assert.deepEqual(results.map((result) => result.status), ["fulfilled", "fulfilled"]);
    assert.equal((await store.counts(T0))[0]?.pending, 2);
  });

  test("a push that resolved is never undone by another transaction's rollback", async (store) => {
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => openGate = resolve);
    let started!: () => void;
    const firstStarted = new Promise<void>((resolve) => started = resolve);
    const first = store.transaction(async (tx) => {
      await tx.push([newJob({ queue: "first" })]);
      started();
      await gate;
    });
    await firstStarted;
    const rolledBack = store.transaction(async (tx) => {
      await tx.push([newJob({ queue: "rolled-back" })]);
      await new Promise((resolve) => setTimeout(resolve, 0));
      throw new Error("roll back");
    });
    const one = store.push([newJob({ queue: "outside" })]);
    const many = store.push([newJob({ queue: "outside" }), newJob({ queue: "outside" })]);
    openGate();
    const results = await Promise.allSettled([first, one, many, rolledBack]);
    assert.deepEqual(
      results.map((result) => result.status === "rejected" ? String(result.reason) : "ok"),
      ["ok", "ok", "ok", "Error: roll back"],
    );
    assert.deepEqual(await countsAt(store, T0), { first: [1, 0, 0, 0], outside: [3, 0, 0, 0] });
  });

  test("a transaction's handle fails once it ended, and every operation fails after close()", async (store) => {
    const tx = await endedTransaction(store);
    await assert.rejects(async () => await tx.push([newJob()]));
    await assert.rejects(async () => await tx.query("SELECT 1 AS one"));
    assert.deepEqual(await store.counts(T0), [], "nothing was stored");
    await store.close();
    await store.close();
    for (const [method, call] of operations(store)) {
      await assert.rejects(async () => await call(), method);
    }
  });

  test("operations fail by rejecting their promise, never by throwing synchronously", async (store) => {
    const tx = await endedTransaction(store);
    await store.close();
    const calls: [string, () => Promise<unknown>][] = [
      ["tx.push after its transaction", () => tx.push([newJob()])],
      ["tx.query after its transaction", () => tx.query("SELECT 1 AS one")],
      ...operations(store),
    ];
    const syncThrows: string[] = [];
    for (const [method, call] of calls) {
      let result: Promise<unknown>;
      try {
        result = call();
      } catch {
        syncThrows.push(method);
        continue;
      }
      await assert.rejects(result, method);
    }
    assert.deepEqual(
      syncThrows,
      [],
      "these threw synchronously (after close) instead of rejecting",
    );
  });
}

/** The handle of a transaction that has committed. */
async function endedTransaction(store: Store): Promise<StoreTransaction> {
  let handle: StoreTransaction | undefined;
  await store.transaction((tx) => {
    handle = tx;
  });
  return handle!;
}

/** Every `Store` operation, as a named call with harmless arguments. */
function operations(store: Store): [string, () => Promise<unknown>][] {
  return [
    ["migrate", () => store.migrate()],
    ["push", () => store.push([newJob()])],
    ["transaction", () => store.transaction(() => 1)],
    ["claim", () => claim(store)],
    ["settle", () => store.settle([complete(1, 1)])],
    ["renew", () => store.renew([{ id: 1, token: 1 }], T0, T0)],
    ["counts", () => store.counts(T0)],
    ["failed", () => store.failed({ limit: 1, offset: 0 })],
    ["failedJob", () => store.failedJob(1)],
    ["retry", () => store.retry([1], T0)],
    ["retry all", () => store.retry("all", T0)],
    ["forget", () => store.forget(1)],
    ["flushFailed", () => store.flushFailed()],
    ["pruneFailed", () => store.pruneFailed(T0, T0)],
    ["clear", () => store.clear(undefined, T0)],
  ];
}
