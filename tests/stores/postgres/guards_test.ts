/**
 * PostgreSQL's guards: a bigint the driver cannot hand to JavaScript
 * exactly, an app statement short of params, and the queue used inside its
 * own transaction callback.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob } from "../../../src/job.ts";
import { Queue } from "../../../src/queue.ts";
import { isStrayRejection } from "../../../src/stores/postgres/crash_guard.ts";
import { PostgresStore } from "../../../src/stores/postgres/mod.ts";
import { openTestPostgresStore, postgresTestUrl } from "../../_postgres.ts";

const noop = defineJob({ name: "noop", schema: z.number(), handle() {} });

const url = postgresTestUrl();

Deno.test({
  name:
    "PostgresStore: a bigint beyond JavaScript's safe integers is refused, and the store still works",
  ignore: url === null,
  async fn() {
    await using pg = await openTestPostgresStore(url!);
    await assert.rejects(
      pg.store.transaction((tx) => tx.query("SELECT 9007199254740993::bigint AS x")),
      (error: Error) =>
        error instanceof RangeError && /beyond JavaScript's safe integers/.test(error.message),
    );
    const rows = await pg.store.transaction((tx) =>
      tx.query<{ x: number }>("SELECT 9007199254740991::bigint AS x")
    );
    assert.deepEqual(rows.map((row) => row.x), [9007199254740991]);
  },
});

Deno.test({
  name:
    "PostgresStore: tx.query with fewer params than its statement takes fails as that statement, not as a lost connection",
  ignore: url === null,
  async fn() {
    await using pg = await openTestPostgresStore(url!);
    for (const [text, params] of [["SELECT $1::int AS a", []], ["SELECT $1::int + $2 AS a", [1]]]) {
      await assert.rejects(
        pg.store.transaction((tx) => tx.query(text as string, params as unknown[])),
        (error: Error) => {
          assert.doesNotMatch(error.message, /Cannot reach/);
          assert.match(error.message, /bind message supplies \d parameters/);
          return true;
        },
      );
    }
    const [row] = await pg.store.transaction((tx) => tx.query<{ a: number }>("SELECT 1 AS a"));
    assert.equal(row!.a, 1);
  },
});

Deno.test({
  name:
    "PostgresStore: the queue used inside its own transaction callback is refused, and nothing is stored",
  ignore: url === null,
  async fn() {
    await using pg = await openTestPostgresStore(url!);
    const store = await PostgresStore.open(url!, { schema: pg.schema });
    await using queue = await Queue.open({ store, jobs: [noop] });
    await assert.rejects(
      queue.transaction(async () => {
        await queue.dispatch(noop, 1);
      }),
      /Cannot use the queue inside its own transaction callback/,
    );
    const count = async () => {
      const [row] = await pg.store.transaction((tx) =>
        tx.query<{ n: number }>("SELECT COUNT(*) AS n FROM jobs")
      );
      return Number(row!.n);
    };
    assert.equal(await count(), 0);
    await queue.transaction((tx) => tx.dispatch(noop, 2));
    await queue.dispatch(noop, 3);
    assert.equal(await count(), 2, "the tx handle and the queue outside still work");
  },
});

if (url === null) {
  console.log("PostgreSQL guard tests skipped: QUEUE_TEST_POSTGRES_URL is not set");
}

Deno.test("the driver crash guard drops a server's shutdown error only where the driver's own connection code raised it", () => {
  /** An error as postgres.js raises it, `code` set and raised in `stackFile`. */
  const raised = (code: string, stackFile: string) =>
    Object.assign(new Error("terminating connection due to administrator command"), {
      code,
      stack:
        `PostgresError: terminating connection due to administrator command\n    at ErrorResponse (${stackFile}:794:26)`,
    });
  const driver = "file:///root/.cache/deno/npm/registry.npmjs.org/postgres/3.4.9/src/connection.js";
  // The array types query a new connection sends unawaited, cut by pg_terminate_backend.
  assert.equal(isStrayRejection(raised("57P01", driver)), true);
  assert.equal(isStrayRejection(raised("57P02", driver)), true);
  assert.equal(isStrayRejection(raised("CONNECTION_CLOSED", driver)), true);
  // The app's own unawaited query keeps its error, and so does any other driver error.
  assert.equal(isStrayRejection(raised("57P01", "file:///app/main.ts")), false);
  assert.equal(isStrayRejection(raised("23505", driver)), false);
  assert.equal(isStrayRejection("57P01"), false);
});
