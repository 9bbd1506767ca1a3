/**
 * The contract of `JobWrites.transaction`: the app's statements and
 * its pushed jobs commit or roll back together, and transactions never undo
 * each other's work. A store that runs no SQL (Redis) refuses the app's
 * statements with a `TypeError` that says why and names the way out; its
 * pushed jobs still commit or roll back together. A job an open transaction
 * stored or debounced under a key is the transaction's until it ends (a row
 * lock on SQL): a store without SQL keeps it out of claim order, and makes a
 * dispatch of its key from elsewhere wait for the transaction's end.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { KeyedJobRow, Store, StoreTransaction } from "../../../src/stores/store.ts";
import {
  claim,
  type ContractArea,
  type ContractTest,
  countsAt,
  ids,
  newJob,
  plain,
  T0,
} from "./fixtures.ts";

/** A debounce key capped at `T0 + 100`: a job debounced under it is due by then. */
const DEBOUNCE = { kind: "debounce", key: "d", latestAt: T0 + 100 } as const;

/** A unique key `key`, held for a minute. */
const unique = (key: string) =>
  ({ kind: "unique", key, expiresAt: T0 + 60_000, releaseOnStart: false }) as const;

/** A row under `key` with payload `{"v":v}`, due a minute after `T0` unless its key says sooner. */
function keyedRow(key: KeyedJobRow["key"], v: number): KeyedJobRow {
  return { ...newJob({ payload: `{"v":${v}}`, availableAt: T0 + 60_000 }), key };
}

/**
 * Resolves once `store` answered two calls made after now: a call sent on
 * its connection before these has had its answer (and another round trip
 * to settle), whether it stored or was told to wait.
 */
async function answered(store: Store): Promise<void> {
  await store.counts(T0);
  await store.counts(T0);
}

/** App transactions. */
export const transactions: ContractArea = {
  covers: ["transaction"],
  register,
};

function register(test: ContractTest): void {
  test("transaction() commits the app's statements and its pushed jobs together", async (store) => {
    const result = await store.transaction(async (tx) => {
      await tx.query("CREATE TABLE contract_orders (id INTEGER PRIMARY KEY, note TEXT NOT NULL)");
      await tx.query("INSERT INTO contract_orders (id, note) VALUES (1, 'first')");
      const pushed = await tx.insertJobs([newJob(), newJob({ queue: "other" })]);
      const rows = await tx.query<{ note: string }>("SELECT note FROM contract_orders");
      assert.deepEqual(plain(rows), [{ note: "first" }]);
      return pushed;
    });
    assert.equal(result.length, 2);
    assert.deepEqual(ids(await claim(store, { queues: ["default", "other"] })), result);
    const rows = await store.transaction((tx) => tx.query("SELECT id, note FROM contract_orders"));
    assert.deepEqual(plain(rows), [{ id: 1, note: "first" }]);
  }, { sql: true });

  test(
    "a transaction whose callback throws rolls back its app statements and jobs",
    async (store) => {
      await store.transaction((tx) =>
        tx.query("CREATE TABLE contract_orders (id INTEGER PRIMARY KEY, note TEXT NOT NULL)")
      );
      const thrown = new Error("stop here");
      await assert.rejects(
        store.transaction(async (tx) => {
          await tx.query("INSERT INTO contract_orders (id, note) VALUES (1, 'lost')");
          await tx.insertJobs([newJob(), newJob()]);
          throw thrown;
        }),
        (error) => error === thrown,
      );
      const rows = await store.transaction((tx) => tx.query("SELECT id FROM contract_orders"));
      assert.deepEqual(rows, []);
      assert.deepEqual(await store.counts(T0), []);
      const [after] = await store.insertJobs([newJob()]);
      assert.deepEqual(ids(await claim(store)), [after], "the store works after a rollback");
    },
    { sql: true },
  );

  test("a transaction whose callback throws keeps none of the jobs it pushed, in one call or many", async (store) => {
    const thrown = new Error("stop here");
    await assert.rejects(
      store.transaction(async (tx) => {
        await tx.insertJobs([newJob(), newJob({ queue: "other" })]);
        await tx.insertJobs([newJob({ availableAt: T0 + 60_000 })]);
        throw thrown;
      }),
      (error) => error === thrown,
    );
    assert.deepEqual(await store.counts(T0 + 60_000), []);
    assert.deepEqual(await claim(store, { queues: ["default", "other"], now: T0 + 60_000 }), []);
    const [after] = await store.insertJobs([newJob()]);
    assert.deepEqual(ids(await claim(store)), [after], "the store works after a rollback");
  });

  test(
    "a store without SQL refuses tx.query with a TypeError that says why and names the way out",
    async (store) => {
      const refused = await store.transaction(async (tx) => {
        let result: Promise<unknown>;
        try {
          result = tx.query("SELECT 1 AS one");
        } catch (error) {
          assert.fail(`tx.query threw synchronously instead of rejecting: ${error}`);
        }
        return await result.then(() => null, (error: unknown) => error);
      });
      assert.ok(refused instanceof TypeError, `tx.query was refused with a TypeError: ${refused}`);
      assert.match(refused.message, /cannot run SQL/, "it says why");
      assert.match(refused.message, /tx\.dispatch\(\)/, "it names the way out");
    },
    { sql: false },
  );

  test(
    "a store without SQL keeps nothing a transaction pushed when its callback throws on the refused tx.query",
    async (store) => {
      await assert.rejects(
        store.transaction(async (tx) => {
          await tx.insertJobs([newJob(), newJob()]);
          await tx.query("INSERT INTO orders (id) VALUES (1)");
        }),
        TypeError,
      );
      assert.deepEqual(await store.counts(T0), []);
      assert.deepEqual(await claim(store), []);
      const [after] = await store.insertJobs([newJob()]);
      assert.deepEqual(ids(await claim(store)), [after], "the store works after a rollback");
    },
    { sql: false },
  );

  test("transactions started together run one after the other and both commit", async (store) => {
    let opened!: () => void;
    const inFirst = new Promise<void>((resolve) => opened = resolve);
    const results = await Promise.allSettled([
      store.transaction(async (tx) => {
        const pushed = await tx.insertJobs([newJob()]);
        opened();
        await Promise.resolve();
        return pushed;
      }),
      store.transaction(async (tx) => {
        await inFirst;
        return await tx.insertJobs([newJob()]);
      }),
    ]);
    assert.deepEqual(results.map((result) => result.status), ["fulfilled", "fulfilled"]);
    assert.equal((await store.counts(T0))[0]?.pending, 2);
  });

  test(
    "a store refuses its own calls made inside its transaction's callback, saying to use the tx handle, and takes those that run after it ended",
    async (store) => {
      const useTx = /inside its own transaction callback.*use the tx handle/;
      const ended = Promise.withResolvers<void>();
      let later!: Promise<number[]>;
      const [inside] = await store.transaction(async (tx) => {
        const pushed = await tx.insertJobs([newJob()]);
        await assert.rejects(store.insertJobs([newJob()]), useTx);
        await assert.rejects(store.insertKeyed([keyedRow(unique("k"), 1)]), useTx);
        await assert.rejects(store.counts(T0), useTx);
        await assert.rejects(store.transaction(() => Promise.resolve()), useTx);
        // Started here, run once the transaction ended: no longer inside it.
        later = ended.promise.then(() => store.insertJobs([newJob({ queue: "later" })]));
        return pushed;
      });
      ended.resolve();
      const [after] = await later;
      assert.deepEqual(await countsAt(store, T0), { default: [1, 0, 0, 0], later: [1, 0, 0, 0] });
      assert.deepEqual(ids(await claim(store, { queues: ["default", "later"] })), [inside, after]);
    },
  );

  test("a push that resolved is never undone by another transaction's rollback", async (store) => {
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => openGate = resolve);
    let started!: () => void;
    const firstStarted = new Promise<void>((resolve) => started = resolve);
    const first = store.transaction(async (tx) => {
      await tx.insertJobs([newJob({ queue: "first" })]);
      started();
      await gate;
    });
    await firstStarted;
    const rolledBack = store.transaction(async (tx) => {
      await tx.insertJobs([newJob({ queue: "rolled-back" })]);
      await new Promise((resolve) => setTimeout(resolve, 0));
      throw new Error("roll back");
    });
    const one = store.insertJobs([newJob({ queue: "outside" })]);
    const many = store.insertJobs([newJob({ queue: "outside" }), newJob({ queue: "outside" })]);
    openGate();
    const results = await Promise.allSettled([first, one, many, rolledBack]);
    assert.deepEqual(
      results.map((result) => result.status === "rejected" ? String(result.reason) : "ok"),
      ["ok", "ok", "ok", "Error: roll back"],
    );
    assert.deepEqual(await countsAt(store, T0), { first: [1, 0, 0, 0], outside: [3, 0, 0, 0] });
  });

  test("a job debounced inside a transaction takes the new payload and due time when it commits", async (store) => {
    const [first] = await store.insertKeyed([keyedRow(DEBOUNCE, 1)]);
    const [again] = await store.transaction((tx) => tx.insertKeyed([keyedRow(DEBOUNCE, 2)]));
    assert.deepEqual({ ...again }, { id: first?.id, outcome: "debounced" });
    assert.equal(await store.nextDueAt(["default"], T0), T0 + 100);
    const [job] = await claim(store, { now: T0 + 100 });
    assert.deepEqual([job?.id, job?.payload], [first?.id, '{"v":2}']);
  });

  test(
    "a store without SQL keeps a job its open transaction debounced as committed and out of claim order until the rollback",
    async (store, opened) => {
      const [first] = await store.insertKeyed([keyedRow(DEBOUNCE, 1)]);
      const other = await opened.another!();
      try {
        await assert.rejects(
          store.transaction(async (tx) => {
            const [again] = await tx.insertKeyed([keyedRow(DEBOUNCE, 2)]);
            assert.deepEqual({ ...again }, { id: first?.id, outcome: "debounced" });
            const meanwhile = await claim(other, { now: T0 + 60_000 });
            assert.deepEqual(meanwhile, [], "no claim runs it while the transaction is open");
            throw new Error("roll back");
          }),
          /roll back/,
        );
      } finally {
        await other.close();
      }
      assert.equal(await store.nextDueAt(["default"], T0), T0 + 60_000, "due as committed");
      const [job] = await claim(store, { now: T0 + 60_000 });
      assert.deepEqual([job?.id, job?.payload], [first?.id, '{"v":1}']);
    },
    { sql: false },
  );

  test(
    "a store without SQL makes a debounce of a job another open transaction debounced wait for its end: both roll back, the job keeps its committed payload",
    async (store, opened) => {
      const [first] = await store.insertKeyed([keyedRow(DEBOUNCE, 1)]);
      const other = await opened.another!();
      try {
        let secondOutcome: string | undefined;
        const inFirst = Promise.withResolvers<void>();
        const endFirst = Promise.withResolvers<void>();
        const firstTx = store.transaction(async (tx) => {
          await tx.insertKeyed([keyedRow(DEBOUNCE, 2)]);
          inFirst.resolve();
          await endFirst.promise;
          throw new Error("first rolls back");
        });
        await inFirst.promise;
        const inSecond = Promise.withResolvers<void>();
        const secondTx = other.transaction(async (tx) => {
          const debouncing = tx.insertKeyed([keyedRow(DEBOUNCE, 3)]);
          inSecond.resolve();
          secondOutcome = (await debouncing)[0]?.outcome;
          throw new Error("second rolls back");
        });
        await inSecond.promise;
        await answered(other);
        assert.equal(secondOutcome, undefined, "the second waits while the first is open");
        endFirst.resolve();
        await assert.rejects(firstTx, /first rolls back/);
        await assert.rejects(secondTx, /second rolls back/);
        assert.equal(secondOutcome, "debounced", "then debounces the job");
      } finally {
        await other.close();
      }
      assert.equal(await store.nextDueAt(["default"], T0), T0 + 60_000);
      const [job] = await claim(store, { now: T0 + 60_000 });
      assert.deepEqual([job?.id, job?.payload], [first?.id, '{"v":1}']);
    },
    { sql: false },
  );

  test(
    "a store without SQL makes a dispatch of a unique key an open transaction's job holds wait for its end: a duplicate once it commits, stored once it rolls back",
    async (store, opened) => {
      const other = await opened.another!();
      try {
        /** Runs a transaction that stores a job under `key` while `other` dispatches it too. */
        const race = async (key: string, commit: boolean) => {
          let outside!: Promise<{ id: number; outcome: string } | undefined>;
          let settled = false;
          let inside: number | undefined;
          const transaction = store.transaction(async (tx) => {
            inside = (await tx.insertKeyed([keyedRow(unique(key), 1)]))[0]?.id;
            outside = other.insertKeyed([keyedRow(unique(key), 2)]).then(([row]) => row);
            outside.then(() => settled = true, () => {});
            await answered(other);
            assert.equal(settled, false, "the dispatch from elsewhere waits for the transaction");
            if (!commit) throw new Error("roll back");
          });
          if (commit) await transaction;
          else await assert.rejects(transaction, /roll back/);
          return { inside, outside: await outside };
        };
        const committed = await race("kept", true);
        assert.deepEqual(committed.outside, { id: committed.inside, outcome: "duplicate" });
        const rolledBack = await race("lost", false);
        assert.equal(rolledBack.outside?.outcome, "stored");
        assert.deepEqual(
          ids(await claim(store, { now: T0 + 60_000 })).sort(),
          [committed.inside, rolledBack.outside?.id].sort(),
        );
      } finally {
        await other.close();
      }
    },
    { sql: false },
  );

  test(
    "of two transactions that each dispatch a unique key the other holds, one gives up (a deadlock) and is aborted: the other commits while it is still open, and its later writes and its commit reject saying so",
    async (store) => {
      const firstHolds = Promise.withResolvers<void>();
      const secondHolds = Promise.withResolvers<void>();
      const winnerDone = Promise.withResolvers<void>();
      const seen: Record<string, unknown> = {};
      /**
       * Dispatches `mine`, then, once the other transaction holds its key,
       * `theirs`; the one that gives up catches the error and carries on.
       */
      const run =
        (mine: string, theirs: string, holds: () => void, otherHolds: Promise<void>) =>
        async (tx: StoreTransaction) => {
          const [first] = await tx.insertKeyed([keyedRow(unique(mine), 1)]);
          holds();
          await otherHolds;
          const second = await tx.insertKeyed([keyedRow(unique(theirs), 2)]).catch((e: Error) => e);
          if (!(second instanceof Error) || !/deadlock/.test(second.message)) {
            winnerDone.resolve();
            if (second instanceof Error) throw second;
            return [first?.outcome, second[0]?.outcome];
          }
          seen.gaveUp = second;
          // Still open: the other commits meanwhile only if this one let go of its key.
          await winnerDone.promise;
          seen.dispatch = await tx.insertJobs([newJob()]).then(() => null, (e: unknown) => e);
          seen.dispatchKeyed = await tx.insertKeyed([keyedRow(unique("c"), 3)])
            .then(() => null, (e: unknown) => e);
          return ["carried on"];
        };
      const first = store.transaction(run("a", "b", firstHolds.resolve, secondHolds.promise));
      await firstHolds.promise;
      const second = store.transaction(run("b", "a", secondHolds.resolve, firstHolds.promise));
      const results = await Promise.allSettled([first, second]);
      const committed = results.filter((result) => result.status === "fulfilled");
      const aborted = results.filter((result) => result.status === "rejected");
      assert.equal(committed.length, 1, `one commits: ${results.map((r) => r.status)}`);
      assert.deepEqual(committed[0]?.value, ["stored", "stored"], "the other stored both");
      assert.match(String(seen.gaveUp), /deadlock/, "the one that gives up says why");
      for (
        const [what, error] of Object.entries({
          dispatch: seen.dispatch,
          keyed: seen.dispatchKeyed,
        })
      ) {
        assert.ok(error instanceof Error, `its later ${what} rejected: ${error}`);
        assert.match(
          error.message,
          /aborted/,
          `its later ${what} says the transaction was aborted`,
        );
      }
      const commit = aborted[0]?.reason;
      assert.ok(commit instanceof Error, `its commit rejected: ${commit}`);
      assert.match(commit.message, /deadlock/, "its commit says why");
      assert.deepEqual(
        await countsAt(store, T0 + 60_000),
        { default: [2, 0, 0, 0] },
        "the winner's jobs alone",
      );
      const [again] = await store.insertKeyed([keyedRow(unique("c"), 4)]);
      assert.equal(again?.outcome, "stored", "the aborted one holds no key");
    },
    { concurrentTransactions: true },
  );
}
