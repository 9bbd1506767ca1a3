/**
 * The contract of `JobWrites`' inserts: plain jobs, and jobs with a
 * unique or debounce key.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  claim,
  type ContractArea,
  type ContractTest,
  ids,
  newJob,
  sorted,
  T0,
} from "./fixtures.ts";

/** Inserting jobs: `push()` and `insertKeyed()`. */
export const jobWrites: ContractArea = {
  covers: ["insertJobs", "insertKeyed"],
  register,
};

function register(test: ContractTest): void {
  test("push() stores one or many jobs and returns their ids in order", async (store) => {
    const [one] = await store.insertJobs([newJob()]);
    assert.ok(Number.isSafeInteger(one) && one! > 0, `id: ${one}`);
    assert.deepEqual(ids(await claim(store)), [one]);
    const rows = [1, 2, 3].map((n) => newJob({ payload: `{"n":${n}}` }));
    const first = await store.insertJobs(rows);
    assert.equal(first.length, 3);
    assert.deepEqual(first, sorted(first));
    assert.equal(new Set(first).size, 3);
    assert.ok(first[0]! > one!, "a later push gets a higher id");
    const claimed = await claim(store, { token: 2 });
    for (const [index, id] of first.entries()) {
      assert.equal(claimed.find((job) => job.id === id)?.payload, rows[index]!.payload);
    }
  });

  test("push() of many rows stores each row's own fields under its own id, in order", async (store) => {
    // 70 rows: more than one bulk statement's worth and a rest (SQLite inserts 32 rows a statement).
    const plain = Array.from({ length: 70 }, (_, n) =>
      newJob({
        payload: `{"n":${n}}`,
        priority: n % 3,
        retryUntil: n % 2 === 0 ? null : T0 + n,
        createdAt: T0 - n,
      }));
    // One row with a trace makes the whole call bind the wider row.
    const wide = Array.from({ length: 41 }, (_, n) =>
      newJob({
        queue: "wide",
        payload: `{"w":${n}}`,
        trace: n === 40 ? "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" : null,
        expireAt: n % 2 === 0 ? null : T0 + 1_000 + n,
      }));
    for (const rows of [plain, wide]) {
      const stored = await store.insertJobs(rows);
      assert.equal(stored.length, rows.length);
      assert.deepEqual(stored, sorted(stored), "ids in the rows' order");
      assert.equal(new Set(stored).size, rows.length);
      const claimed = await claim(store, { queues: [rows[0]!.queue], limit: 200 });
      assert.equal(claimed.length, rows.length);
      for (const [index, id] of stored.entries()) {
        const job = claimed.find((candidate) => candidate.id === id);
        const row = rows[index]!;
        assert.deepEqual(
          [job?.payload, job?.priority, job?.retryUntil, job?.createdAt, job?.trace ?? null],
          [row.payload, row.priority, row.retryUntil, row.createdAt, row.trace ?? null],
          `job ${id}, row ${index}`,
        );
        assert.equal(job?.expireAt ?? null, row.expireAt ?? null, `expiry of row ${index}`);
      }
    }
  });

  test("insertKeyed() stores a unique job once: a row whose key a job holds is a duplicate naming that job", async (store) => {
    const unique = (key: string, expiresAt = T0 + 60_000, releaseOnStart = false) =>
      ({ kind: "unique", key, expiresAt, releaseOnStart }) as const;
    const pushed = await store.insertKeyed([
      { ...newJob(), key: unique("a") },
      { ...newJob({ payload: '{"n":2}' }), key: unique("a") },
      { ...newJob(), key: unique("b") },
    ]);
    const [a, dup, b] = pushed.map((row) => ({ ...row }));
    assert.deepEqual([a?.outcome, dup, b?.outcome], [
      "stored",
      { id: a?.id, outcome: "duplicate" },
      "stored",
    ]);
    assert.deepEqual(sorted(ids(await claim(store))), sorted([a!.id, b!.id]), "one job per key");
    await store.settle([{ kind: "complete", id: a!.id, token: 1, at: T0 + 1 }]);
    const [afterSettle] = await store.insertKeyed([{ ...newJob(), key: unique("a") }]);
    assert.equal(afterSettle?.outcome, "stored", "the settle released its key");
    const [held] = await store.insertKeyed([{
      ...newJob({ createdAt: T0 + 1 }),
      key: unique("b"),
    }]);
    assert.deepEqual({ ...held }, { id: b!.id, outcome: "duplicate" }, "held while running");
    const [expired] = await store.insertKeyed([
      { ...newJob({ createdAt: T0 + 60_000 }), key: unique("b", T0 + 120_000) },
    ]);
    assert.equal(expired?.outcome, "stored", "a key past its expiry holds nothing");
    assert.deepEqual(await store.insertKeyed([]), []);
  });

  test("insertKeyed() with releaseOnStart lets the next job in once the holder is claimed", async (store) => {
    const key = { kind: "unique", key: "k", expiresAt: T0 + 60_000, releaseOnStart: true } as const;
    const [first] = await store.insertKeyed([{ ...newJob(), key }]);
    const [dup] = await store.insertKeyed([{ ...newJob(), key }]);
    assert.deepEqual([first?.outcome, dup?.outcome, dup?.id], ["stored", "duplicate", first?.id]);
    assert.deepEqual(ids(await claim(store)), [first?.id]);
    const [next] = await store.insertKeyed([{ ...newJob(), key }]);
    assert.equal(next?.outcome, "stored");
    assert.notEqual(next?.id, first?.id);
  });

  test("a claim with the job's name in checkedNames keeps its key held until processing; acquire() releases it when it lets the job start, not when it holds it back", async (store) => {
    const key = { kind: "unique", key: "k", expiresAt: T0 + 60_000, releaseOnStart: true } as const;
    const [first] = await store.insertKeyed([{ ...newJob(), key }]);
    const checkedNames = ["contract-job"];
    const [claimed] = await claim(store, { checkedNames, token: 1 });
    assert.equal(claimed?.id, first?.id);
    const again = async () => (await store.insertKeyed([{ ...newJob(), key }]))[0]!;
    assert.deepEqual(await again(), { id: first!.id, outcome: "duplicate" }, "not started yet");
    const lock = (id: number, token: number) => ({
      id,
      token,
      locks: [{ key: "busy", limit: 1, expiresAt: T0 + 60_000, retryAt: T0 + 1_000 }],
      rates: [],
    });
    // Another job holds the lock: the middleware holds the first back, and it keeps its key.
    const [holder] = await store.insertJobs([newJob({ name: "holder" })]);
    const [taken] = await claim(store, { names: ["holder"], token: 2 });
    assert.equal(taken?.id, holder);
    assert.deepEqual(await store.acquire([lock(holder!, 2)], T0), [null]);
    assert.deepEqual(await store.acquire([lock(first!.id, 1)], T0), [T0 + 1_000]);
    assert.deepEqual(await again(), { id: first!.id, outcome: "duplicate" }, "held back");
    // Let through (no rules, or its lock free): it starts, and its key lets the next job in.
    assert.deepEqual(await store.acquire([{ id: first!.id, token: 1, locks: [], rates: [] }], T0), [
      null,
    ]);
    const next = await again();
    assert.equal(next.outcome, "stored");
    assert.notEqual(next.id, first?.id);
  });

  test("insertKeyed() debounces: a waiting job with the key takes the new payload and due time, up to latestAt", async (store) => {
    const key = (latestAt: number | null) => ({ kind: "debounce", key: "d", latestAt }) as const;
    const [first] = await store.insertKeyed([
      { ...newJob({ payload: '{"v":1}', availableAt: T0 + 1_000 }), key: key(T0 + 2_500) },
    ]);
    const [second] = await store.insertKeyed([
      { ...newJob({ payload: '{"v":2}', availableAt: T0 + 2_000 }), key: key(null) },
    ]);
    assert.deepEqual({ ...second }, { id: first?.id, outcome: "debounced" });
    const [third] = await store.insertKeyed([
      { ...newJob({ payload: '{"v":3}', availableAt: T0 + 3_000 }), key: key(null) },
    ]);
    assert.equal(third?.outcome, "debounced");
    assert.equal(await store.nextDueAt(["default"], T0), T0 + 2_500, "no later than latestAt");
    const [job] = await claim(store, { now: T0 + 2_500 });
    assert.deepEqual([job?.id, job?.payload], [first?.id, '{"v":3}']);
    const [afterStart] = await store.insertKeyed([
      { ...newJob({ payload: '{"v":4}', availableAt: T0 + 3_000 }), key: key(null) },
    ]);
    assert.equal(afterStart?.outcome, "stored", "a started job is not debounced into");
  });

  test("a job that had a cancel asked holds its unique or debounce key for no new dispatch: the next is stored as a job of its own, and the cancelled job's end leaves that one the key", async (store) => {
    const unique = {
      kind: "unique",
      key: "u",
      expiresAt: T0 + 60_000,
      releaseOnStart: false,
    } as const;
    const debounce = { kind: "debounce", key: "d", latestAt: null } as const;
    const [first] = await store.insertKeyed([{ ...newJob(), key: unique }]);
    const [waiting] = await store.insertKeyed([{ ...newJob(), key: debounce }]);
    assert.deepEqual(
      sorted(ids(await claim(store, { token: 7 }))),
      sorted([first!.id, waiting!.id]),
    );
    const cancel = (id: number) => store.cancel({ id, reason: "stop", now: T0, keepUntil: T0 + 1 });
    assert.equal(await cancel(first!.id), "cancelling");
    assert.equal(await cancel(waiting!.id), "cancelling");
    // The debounced job goes back unleased with its attempt (held back by middleware, say): it
    // would be debounced into, and then end cancelled, the new payload with it.
    const holdBack = {
      kind: "release",
      id: waiting!.id,
      token: 7,
      at: T0,
      availableAt: T0 + 1_000,
      error: null,
      refundAttempt: true,
    } as const;
    await store.settle([holdBack], undefined);
    const [second] = await store.insertKeyed([{ ...newJob(), key: unique }]);
    assert.equal(second?.outcome, "stored");
    assert.notEqual(second?.id, first?.id);
    const [debounced] = await store.insertKeyed([{ ...newJob(), key: debounce }]);
    assert.equal(debounced?.outcome, "stored");
    assert.notEqual(debounced?.id, waiting?.id);
    // The cancelled job ends (its worker saw the cancel): the new job keeps the key.
    const ended = {
      kind: "cancel",
      id: first!.id,
      token: 7,
      at: T0,
      reason: "stop",
      keepUntil: T0 + 1,
    } as const;
    await store.settle([ended], undefined);
    const [third] = await store.insertKeyed([{ ...newJob(), key: unique }]);
    assert.deepEqual({ ...third }, { id: second!.id, outcome: "duplicate" });
  });

  test("tx.insertKeyed() inside a transaction that throws holds no key afterwards", async (store) => {
    const key = {
      kind: "unique",
      key: "tx",
      expiresAt: T0 + 60_000,
      releaseOnStart: false,
    } as const;
    await assert.rejects(
      store.transaction(async (tx) => {
        const [row] = await tx.insertKeyed([{ ...newJob(), key }]);
        assert.equal(row?.outcome, "stored");
        throw new Error("roll back");
      }),
      /roll back/,
    );
    assert.deepEqual(await store.counts(T0), []);
    const [after] = await store.insertKeyed([{ ...newJob(), key }]);
    assert.equal(after?.outcome, "stored");
  });
}
