/**
 * What the app's statements in `tx.query` change on their connection beyond
 * the transaction is reset before the queue's next statements run on it,
 * whether the transaction commits, its callback throws, or one of its
 * statements fails. Each store here has one connection in its pool, so the
 * call after the transaction runs on the connection it used.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { PostgresStore } from "../../../src/stores/postgres/mod.ts";
import type { StoreTransaction } from "../../../src/stores/store.ts";
import { claim, newJob, T0 } from "../contract/mod.ts";
import { openTestPostgresStore, postgresTestUrl } from "../../_postgres.ts";

const url = postgresTestUrl();

/** Statements that change the session past their transaction, none of them a `SET`. */
async function changeTheSession(tx: StoreTransaction): Promise<void> {
  await tx.query("CREATE TEMP TABLE jobs (id bigint)"); // ahead of the queue's jobs on the search path
  await tx.query("LISTEN app_channel");
  await tx.query("PREPARE app_plan AS SELECT 1");
  await tx.query("SELECT pg_advisory_lock(7204311)");
  await tx.query("DECLARE app_cursor CURSOR WITH HOLD FOR SELECT 1");
  await tx.query("SELECT set_config('statement_timeout', '4321', false)");
  await tx.query("SELECT set_config('search_path', 'no_such_schema', false)");
}

/** What the session holds that `changeTheSession` changes, read in a transaction of its own. */
function sessionState(store: PostgresStore): Promise<Record<string, unknown>[]> {
  return store.transaction((tx) =>
    tx.query(`SELECT current_setting('search_path') AS search_path,
      current_setting('statement_timeout') AS statement_timeout,
      to_regclass('pg_temp.jobs') AS temp_jobs,
      (SELECT count(*)::int FROM pg_listening_channels()) AS channels,
      (SELECT count(*)::int FROM pg_prepared_statements WHERE from_sql) AS prepared,
      (SELECT count(*)::int FROM pg_cursors) AS cursors,
      (SELECT count(*)::int FROM pg_locks
        WHERE locktype = 'advisory' AND pid = pg_backend_pid()) AS advisory_locks`)
  );
}

const endings: Record<string, (tx: StoreTransaction) => Promise<void>> = {
  "commits": changeTheSession,
  "throws": async (tx) => {
    await changeTheSession(tx);
    throw new Error("the app's own error");
  },
  "has a statement that fails": async (tx) => {
    await changeTheSession(tx);
    await tx.query("SELECT 1 / 0").catch(() => {}); // the app carries on; the transaction cannot
  },
};

for (const [ending, callback] of Object.entries(endings)) {
  Deno.test({
    name:
      `PostgresStore: what tx.query changed on the connection is reset before the queue's next statement when the transaction ${ending}`,
    ignore: url === null,
    async fn() {
      await using pg = await openTestPostgresStore(url!, { maxConnections: 1, clock: "caller" });
      const before = await sessionState(pg.store);
      const outcome = await pg.store.transaction(callback).then(() => "committed", String);
      assert.equal(
        outcome,
        {
          "commits": "committed",
          "throws": "Error: the app's own error",
          "has a statement that fails": "PostgresError: division by zero",
        }[ending],
      );
      const [id] = await pg.store.insertJobs([newJob()]);
      assert.deepEqual((await claim(pg.store, { now: T0 })).map((job) => job.id), [id]);
      assert.deepEqual(await sessionState(pg.store), before);
    },
  });
}

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
