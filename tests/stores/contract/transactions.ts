/**
 * The contract of `JobWrites.transaction`: the app's statements and
 * its pushed jobs commit or roll back together, and transactions never undo
 * each other's work. A store that runs no SQL (Redis) refuses the app's
 * statements with a `TypeError` that says why and names the way out; its
 * pushed jobs still commit or roll back together.
 *
 * @module
 */
import assert from "node:assert/strict";
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
}
