/**
 * The contract of a `Store`'s lifetime: its schema and its close,
 * after which every operation rejects.
 *
 * @module
 */
import assert from "node:assert/strict";
import { QueueClosedError } from "../../../src/errors.ts";
import { within } from "../../_helpers.ts";
import { CLOSE_WAITS_MS } from "../../../src/stores/close_wait.ts";
import type { Store, StoreTransaction } from "../../../src/stores/store.ts";
import {
  claim,
  complete,
  type ContractArea,
  type ContractTest,
  newJob,
  stuckTransaction,
  T0,
} from "./fixtures.ts";

/** A store's schema and close. */
export const lifetime: ContractArea = {
  covers: ["migrate", "migrationPlan", "startClosing", "close"],
  register,
};

function register(test: ContractTest): void {
  test(
    "a transaction's handle fails once it ended, and every operation fails after close()",
    async (store, opened) => {
      const tx = await endedTransaction(store);
      await assert.rejects(async () => await tx.insertJobs([newJob()]));
      // A store without SQL refuses tx.query always (see transactions.ts): no ended-handle case to tell.
      if (opened.sql ?? true) await assert.rejects(async () => await tx.query("SELECT 1 AS one"));
      assert.deepEqual(await store.counts(T0), [], "nothing was stored");
      await store.close();
      await store.close();
      for (const [method, call] of operations(store)) {
        await assert.rejects(async () => await call(), method);
      }
    },
  );

  test(
    "close() waits for an open transaction to end, and the transaction commits",
    async (store, opened) => {
      let entered!: () => void;
      const inside = new Promise<void>((resolve) => entered = resolve);
      let release!: () => void;
      const released = new Promise<void>((resolve) => release = resolve);
      const committed = store.transaction(async (tx) => {
        const first = await tx.insertJobs([newJob()]);
        entered();
        await released;
        return [...first, ...await tx.insertJobs([newJob()])];
      });
      await inside;
      let closed = false;
      const closing = store.close().then(() => closed = true);
      // Time for a close that does not wait to finish; one that waits is still waiting then.
      await Promise.race([closing, new Promise((resolve) => setTimeout(resolve, 1_000))]);
      assert.equal(closed, false, "close() waited for the transaction");
      release();
      assert.equal((await committed).length, 2, "the transaction stored both jobs");
      await closing;
      if (opened.another === undefined) return;
      const another = await opened.another();
      try {
        assert.equal((await another.counts(T0))[0]?.pending, 2, "both jobs were committed");
      } finally {
        await another.close();
      }
    },
  );

  test(
    "close() rolls back a transaction whose callback never settles after waiting 5 s for it, and resolves: nothing it wrote is stored, its key is free, its handle refuses",
    async (store, opened) => {
      let entered!: () => void;
      const inside = new Promise<void>((resolve) => entered = resolve);
      // Let go only when the case ends, so that a close that waits for ever fails it, not hangs it.
      let release!: () => void;
      const released = new Promise<void>((resolve) => release = resolve);
      let handle!: StoreTransaction;
      const key = { kind: "unique", key: "order:7", expiresAt: T0 + 3_600_000 } as const;
      const stuck = store.transaction(async (tx) => {
        handle = tx;
        await tx.insertJobs([newJob()]);
        await tx.insertKeyed([{ ...newJob(), key: { ...key, releaseOnStart: false } }]);
        entered();
        await released;
      });
      const outcome = stuck.then(() => "committed", (error: Error) => error);
      await inside;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const gaveUp = new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve("still open after 60 s"), 60_000);
      });
      try {
        assert.equal(await Promise.race([store.close().then(() => "closed"), gaveUp]), "closed");
      } finally {
        clearTimeout(timer);
        release();
      }
      const rejected = await outcome;
      assert.ok(
        rejected instanceof QueueClosedError,
        `the transaction rejected as closed: ${rejected}`,
      );
      assert.match(rejected.message, /close\(\) stopped waiting for it to end and rolled it back/);
      const refused = await handle.insertJobs([newJob()]).then(() => null, (error: Error) => error);
      assert.ok(
        refused instanceof QueueClosedError,
        `its handle refuses a write as closed: ${refused}`,
      );
      if (opened.another === undefined) return;
      const another = await opened.another();
      try {
        assert.deepEqual(await another.counts(T0), [], "nothing it wrote was stored");
        const [again] = await another.insertKeyed([
          { ...newJob(), key: { ...key, releaseOnStart: false } },
        ]);
        assert.equal(again?.outcome, "stored", "its unique key is free");
      } finally {
        await another.close();
      }
    },
  );

  test(
    "a transaction asked for while close() waits for an open one is refused with QueueClosedError; the open one commits",
    async (store, opened) => {
      const entered = Promise.withResolvers<void>();
      const released = Promise.withResolvers<void>();
      const open = store.transaction(async (tx) => {
        await tx.insertJobs([newJob()]);
        entered.resolve();
        await released.promise;
      });
      await entered.promise;
      const closing = store.close();
      const late = await store.transaction((tx) => tx.insertJobs([newJob()])).then(
        () => null,
        (error: Error) => error,
      );
      released.resolve();
      await open;
      await closing;
      assert.ok(late instanceof QueueClosedError, `refused as closed, not: ${late}`);
      if (opened.another === undefined) return;
      const another = await opened.another();
      try {
        const counts = await another.counts(T0);
        const stored = counts.reduce((sum, row) => sum + row.pending + row.delayed, 0);
        assert.equal(stored, 1, "the open one's job, and only it, is stored");
      } finally {
        await another.close();
      }
    },
  );

  test(
    "startClosing(), then close(): a transaction whose callback never settles is rolled back after the wait, and close() ends",
    async (store) => {
      const stuck = await stuckTransaction(store);
      store.startClosing?.(CLOSE_WAITS_MS);
      await within(store.close(), 60_000, "close() after startClosing()");
      assert.match(
        String(await stuck.outcome),
        /close\(\) stopped waiting for it to end and rolled it back/,
      );
    },
  );

  test("operations fail by rejecting their promise, never by throwing synchronously", async (store) => {
    const tx = await endedTransaction(store);
    await store.close();
    const calls: [string, () => Promise<unknown>][] = [
      ["tx.push after its transaction", () => tx.insertJobs([newJob()])],
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
    ["migrationPlan", () => store.migrationPlan()],
    ["insertJobs", () => store.insertJobs([newJob()])],
    ["transaction", () => store.transaction(() => 1)],
    ["claim", () => claim(store)],
    ["settle", () => store.settle([complete(1, 1)])],
    ["renew", () => store.renew([{ id: 1, token: 1 }], T0, T0)],
    ["counts", () => store.counts(T0)],
    ["failed", () => store.failed({ limit: 1, offset: 0 })],
    ["failedJob", () => store.failedJob(1)],
    ["unfinishedJob", () => store.unfinishedJob(1)],
    ["retry", () => store.retry([1], T0)],
    ["retry all", () => store.retry("all", T0)],
    ["forget", () => store.forget(1)],
    ["flushFailed", () => store.flushFailed()],
    ["pruneFailed", () => store.pruneFailed(T0, T0)],
    ["clear", () => store.clear(undefined, T0)],
    [
      "insertKeyed",
      () =>
        store.insertKeyed([{ ...newJob(), key: { kind: "debounce", key: "k", latestAt: null } }]),
    ],
    ["insertChain", () => store.insertChain({ first: newJob(), next: [], onFailure: [] })],
    [
      "insertBatch",
      () =>
        store.insertBatch({
          name: "b",
          allowFailures: false,
          createdAt: T0,
          jobs: [],
          then: [],
          catch: [],
          finally: [],
        }),
    ],
    ["addToBatch", () => store.addToBatch(1, [newJob()])],
    ["nextDueAt", () => store.nextDueAt(["default"], T0)],
    ["acquire", () => store.acquire([{ id: 1, token: 1, locks: [], rates: [] }], T0)],
    [
      "heartbeat",
      () =>
        store.heartbeat({
          id: "w",
          host: "h",
          pid: 1,
          queues: ["default"],
          concurrency: 1,
          startedAt: T0,
          lastSeenAt: T0,
          running: 0,
          names: [],
        }, T0),
    ],
    ["removeWorker", () => store.removeWorker("w")],
    ["cancelsAsked", () => store.cancelsAsked([{ id: 1, token: 1 }])],
    ["batch", () => store.batch(1)],
    ["batches", () => store.batches({ limit: 1, offset: 0 })],
    ["cancelBatch", () => store.cancelBatch(1, T0)],
    ["pruneBatches", () => store.pruneBatches(T0, T0)],
    ["pendingByName", () => store.pendingByName(T0)],
    ["running", () => store.running(T0)],
    [
      "jobs",
      () => store.jobs({ state: null, queue: null, name: null }, { limit: 1, offset: 0 }, T0),
    ],
    ["metrics", () => store.metrics(T0, T0 + 1)],
    ["workers", () => store.workers(T0, T0)],
    ["logs", () => store.logs(1)],
    ["backup", () => store.backup("./no-such-folder/never-written.db")],
    ["syncSchedules", () => store.syncSchedules([], T0)],
    ["schedules", () => store.schedules()],
    ["setSchedulePaused", () => store.setSchedulePaused("s", true, T0)],
    ["forgetSchedule", () => store.forgetSchedule("s")],
    ["runSchedule", () => store.runSchedule("s", [], T0)],
    ["result", () => store.result(1, T0)],
    ["results", () => store.results([1], T0)],
    ["finished", () => store.finished({}, { limit: 1, offset: 0 })],
    ["finishedJob", () => store.finishedJob(1)],
    ["pruneFinished", () => store.pruneFinished(T0, T0)],
    ["markAwaited", () => store.markAwaited(1)],
    ["cancel", () => store.cancel({ id: 1, reason: "r", now: T0, keepUntil: T0 })],
    ["pause", () => store.pause("default", T0, null, null)],
    ["resume", () => store.resume("default", T0)],
    ["paused", () => store.paused(T0)],
    ["jobSteps", () => store.jobSteps(1)],
    ["signal", () => store.signal({ jobId: 1, name: "s", payload: "1", now: T0 })],
  ];
}
