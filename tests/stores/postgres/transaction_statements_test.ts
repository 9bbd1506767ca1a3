/**
 * The app's statements in a PostgreSQL transaction (`tx.query`) are waited
 * for before it ends, awaited by the callback or not: one that fails rolls
 * the transaction back, and the transaction rejects with its error.
 *
 * @module
 */
import assert from "node:assert/strict";
import { claim, newJob, T0 } from "../contract/mod.ts";
import { openTestPostgresStore, postgresTestUrl } from "../../_postgres.ts";

const url = postgresTestUrl();

Deno.test({
  name:
    "PostgresStore: a transaction whose callback returned before an app statement it did not await failed rejects with that statement's error and keeps none of its jobs",
  ignore: url === null,
  async fn() {
    await using pg = await openTestPostgresStore(url!, { clock: "caller" });
    const outcome = await pg.store.transaction(async (tx) => {
      await tx.insertJobs([newJob()]);
      void tx.query("SELECT 1 / 0").catch(() => {}); // PostgreSQL aborts the transaction here
    }).then(() => "committed", String);
    assert.equal(outcome, "PostgresError: division by zero");
    assert.deepEqual(await claim(pg.store, { now: T0 }), [], "the job rolled back with it");
  },
});

Deno.test({
  name:
    "PostgresStore: a transaction whose callback returned before an app statement it did not await succeeded commits both, and resolves with the callback's value",
  ignore: url === null,
  async fn() {
    await using pg = await openTestPostgresStore(url!, { clock: "caller" });
    const outcome = await pg.store.transaction(async (tx) => {
      await tx.query("CREATE TABLE app_rows (n int)");
      void tx.query("INSERT INTO app_rows SELECT 7 FROM pg_sleep(0.05)").catch(() => {});
      return "done";
    }).catch(String);
    assert.equal(outcome, "done");
    const rows = await pg.store.transaction((tx) =>
      tx.query<{ n: number }>("SELECT n FROM app_rows")
    );
    assert.deepEqual(rows, [{ n: 7 }]);
  },
});

Deno.test({
  name:
    "PostgresStore: an app statement and a store call sent one after the other without an await run in that order",
  ignore: url === null,
  async fn() {
    await using pg = await openTestPostgresStore(url!, { clock: "caller" });
    const [counted] = await pg.store.transaction(async (tx) => {
      const counting = tx.query<{ n: number }>("SELECT count(*)::int AS n FROM jobs");
      const inserting = tx.insertJobs([newJob()]);
      const [rows] = await Promise.all([counting, inserting]);
      return rows;
    });
    assert.deepEqual(counted, { n: 0 });
  },
});

Deno.test({
  name:
    "PostgresStore: an app statement sent after the callback returned, while the transaction waits for the earlier ones, is refused and the rest commits",
  ignore: url === null,
  async fn() {
    await using pg = await openTestPostgresStore(url!, { clock: "caller" });
    let late: unknown = null;
    let sentLate = false;
    const outcome = await pg.store.transaction(async (tx) => {
      await tx.query("CREATE TABLE app_rows (n int)");
      await tx.query("INSERT INTO app_rows VALUES (1)");
      // Keeps the transaction waiting after the callback returns.
      const waiting = tx.query("SELECT pg_sleep(0.3)");
      void waiting.then(async () => {
        sentLate = true;
        await tx.query("INSERT INTO app_rows VALUES (1 / 0)");
      }).catch((error) => late = error);
      return "done";
    });
    assert.equal(outcome, "done");
    assert.ok(sentLate);
    assert.match(String(late), /This transaction has ended/);
    const rows = await pg.store.transaction((tx) =>
      tx.query<{ n: number }>("SELECT n FROM app_rows")
    );
    assert.deepEqual(rows, [{ n: 1 }]);
  },
});
