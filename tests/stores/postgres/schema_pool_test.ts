/**
 * The schemas PostgreSQL tests hand on to each other (tests/_schema_pool.ts):
 * the next test gets one that is as a fresh migration leaves it, and a
 * schema a test changed, or shared with other processes, is dropped
 * instead. Runs when `QUEUE_TEST_POSTGRES_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import type { PostgresStore } from "../../../src/stores/postgres/mod.ts";
import { claim, newJob, T0 } from "../contract/mod.ts";
import { freshSchema, openTestPostgresStore, postgresTestUrl } from "../../_postgres.ts";

const url = postgresTestUrl();
if (url === null) console.log("PostgreSQL tests skipped: QUEUE_TEST_POSTGRES_URL is not set");

/**
 * What a test could see of `schema`, but the server's own stamps: each
 * table's row count, each relation's size on disk and as the planner reads
 * it, each sequence's last value, the steps recorded, the indexes and the
 * routines' bodies.
 */
async function stateOf(store: PostgresStore, schema: string): Promise<unknown> {
  return await store.transaction(async (tx) => ({
    rows: await tx.query(
      `SELECT relname, (xpath('/row/n/text()', query_to_xml(
          format('SELECT count(*) AS n FROM %I.%I', $1::text, relname), false, true, '')))[1]::text
          AS n
        FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind = 'r' ORDER BY relname`,
      [schema],
    ),
    sizes: await tx.query(
      `SELECT relname, relkind, relpages, reltuples, relallvisible,
          CASE WHEN relname LIKE 'queue_migrations%' THEN NULL ELSE pg_relation_size(oid) END
            AS bytes
        FROM pg_class WHERE relnamespace = $1::regnamespace ORDER BY relname`,
      [schema],
    ),
    sequences: await tx.query(
      "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = $1 ORDER BY 1",
      [schema],
    ),
    steps: await tx.query("SELECT version, kind FROM queue_migrations ORDER BY version"),
    indexes: await tx.query(
      `SELECT replace(indexdef, $1, '') AS def FROM pg_indexes WHERE schemaname = $1 ORDER BY 1`,
      [schema],
    ),
    routines: await tx.query(
      "SELECT proname, prosrc FROM pg_proc WHERE pronamespace = $1::regnamespace ORDER BY 1",
      [schema],
    ),
  }));
}

/** Whether `schema` exists, asked on a connection of its own. */
async function exists(schema: string): Promise<boolean> {
  const sql = postgres(url!, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`SELECT to_regnamespace(${schema}) IS NOT NULL AS found`;
    return row!.found === true;
  } finally {
    await sql.end();
  }
}

/** Writes to several tables, and uses a sequence whose table gets no row. */
async function useSchema(store: PostgresStore): Promise<void> {
  await store.insertJobs(Array.from({ length: 20 }, () => newJob({ availableAt: T0 })));
  assert.equal((await claim(store)).length, 10);
  await store.transaction(async (tx) => {
    await tx.query("SELECT nextval('batches_id_seq')");
    await tx.query(
      `INSERT INTO workers (id, host, pid, queues, concurrency, started_at, last_seen_at, running)
       VALUES ('w1', 'h', 1, 'default', 1, 0, 0, 0)`,
    );
  });
}

Deno.test({
  name:
    "openTestPostgresStore() hands the next test the schema of one that ended, as a fresh migration leaves it",
  ignore: url === null,
  async fn() {
    let used: string;
    {
      await using first = await openTestPostgresStore(url!, { clock: "caller" });
      used = first.schema;
      await useSchema(first.store);
    }
    assert.equal(await exists(used), true, "kept for the next test");
    await using next = await openTestPostgresStore(url!, { clock: "caller" });
    assert.equal(next.schema, used, "the schema handed back");
    await using fresh = await openTestPostgresStore(url!, {
      clock: "caller",
      schema: freshSchema(),
    });
    assert.deepEqual(
      await stateOf(next.store, next.schema),
      await stateOf(fresh.store, fresh.schema),
    );
    assert.deepEqual(await next.store.insertJobs([newJob()]), [1], "ids start again at 1");
  },
});

/** Statements that change what a migration made, each a test's change the pool must not pass on. */
const CHANGES: Record<string, string[]> = {
  "an index dropped": ["DROP INDEX jobs_batch"],
  "a function replaced": [
    `CREATE OR REPLACE FUNCTION queue_moved_refuse() RETURNS trigger LANGUAGE plpgsql AS $f$
     BEGIN RETURN NULL; END $f$`,
  ],
  "a move's fence left": [
    `CREATE TRIGGER queue_moved BEFORE INSERT OR UPDATE OR DELETE ON jobs
     FOR EACH STATEMENT EXECUTE FUNCTION queue_moved_refuse()`,
  ],
  "a table of the app's": ["CREATE TABLE orders (id integer PRIMARY KEY)"],
  "a column's default changed": ["ALTER TABLE jobs ALTER COLUMN attempts SET DEFAULT 7"],
  "an ANALYZE": [
    "INSERT INTO queue_pauses (queue, paused_at) VALUES ('q', 0)",
    "ANALYZE queue_pauses",
  ],
  "a step recorded": ["INSERT INTO queue_migrations (version, applied_at) VALUES (9001, 0)"],
};

for (const [change, statements] of Object.entries(CHANGES)) {
  Deno.test({
    name: `openTestPostgresStore() drops a schema a test left with ${change}, not handing it on`,
    ignore: url === null,
    async fn() {
      let changed: string;
      {
        await using opened = await openTestPostgresStore(url!);
        changed = opened.schema;
        await opened.store.transaction(async (tx) => {
          for (const statement of statements) await tx.query(statement);
        });
      }
      assert.equal(await exists(changed), false);
    },
  });
}

Deno.test({
  name: "openTestPostgresStore() drops a schema other processes were told of, not handing it on",
  ignore: url === null,
  async fn() {
    let shared: string;
    {
      await using opened = await openTestPostgresStore(url!);
      shared = opened.schema;
      opened.sharedOutside();
    }
    assert.equal(await exists(shared), false);
  },
});

Deno.test({
  name: "openTestPostgresStore() on a schema the test names drops it, never handing it on",
  ignore: url === null,
  async fn() {
    const named = freshSchema();
    {
      await using opened = await openTestPostgresStore(url!, { schema: named });
      assert.equal(opened.schema, named);
    }
    assert.equal(await exists(named), false);
  },
});
