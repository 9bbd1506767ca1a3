/**
 * Migrations on PostgreSQL under the advisory locks: this code migrates a
 * schema beside another schema's migration, and still waits for code of
 * before 2026-12-06, which takes the database's migration lock exclusive
 * whatever its schema. Runs when `QUEUE_TEST_POSTGRES_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../../src/stores/postgres/mod.ts";
import { freshSchema, postgresTestUrl } from "../../_postgres.ts";
import { waitUntil, within } from "../../_helpers.ts";
import type { Migration } from "../../../migrations/migration.ts";
import { migrations } from "../../../migrations/postgres/mod.ts";

const url = postgresTestUrl();
/** The database's migration lock (src/stores/postgres/engine.ts). */
const MIGRATION_LOCK = 7_204_310;

/** Opens a store on a fresh schema; drops the schema and closes it. */
async function openAndDrop(schema: string): Promise<void> {
  const store = await PostgresStore.open(url!, { schema });
  await store.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
  await store.close();
}

/**
 * Runs `inside` while a transaction of a connection of its own holds the
 * advisory locks `lock` takes.
 */
async function holding(lock: string, params: (string | number)[], inside: () => Promise<void>) {
  const sql = postgres(url!, { max: 1, onnotice: () => {} });
  try {
    await sql.begin(async (tx) => {
      await tx.unsafe(lock, params);
      await inside();
    });
  } finally {
    await sql.end();
  }
}

Deno.test({
  name:
    "PostgreSQL: a schema migrates while another process migrates another schema (it holds the database's lock shared and that schema's own)",
  ignore: url === null,
  async fn() {
    const other = freshSchema();
    await holding(
      "SELECT pg_advisory_xact_lock_shared($1::bigint), pg_advisory_xact_lock($1::int, hashtext($2))",
      [MIGRATION_LOCK, other],
      () => within(openAndDrop(freshSchema()), 60_000, "the migration of a schema of its own"),
    );
  },
});

Deno.test({
  name:
    "PostgreSQL: a migration waits for code of before 2026-12-06 migrating any schema (the database's lock held exclusive), then applies",
  ignore: url === null,
  async fn() {
    let migrated = false;
    let migration: Promise<void> | undefined;
    await holding("SELECT pg_advisory_xact_lock($1::bigint)", [MIGRATION_LOCK], async () => {
      migration = openAndDrop(freshSchema()).then(() => {
        migrated = true;
      });
      // Long enough for a migration to finish when nothing stops it; it may only pass wrongly.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      assert.equal(migrated, false, "it waited for the older code's lock");
    });
    await within(migration!, 60_000, "the migration after the older code's lock was let go");
    assert.equal(migrated, true);
  },
});

Deno.test({
  name:
    "PostgreSQL: a migration that PostgreSQL rolls back to break a deadlock with a worker of older code (its steps lock two tables one way, the worker's reads the other) is run again and applies",
  ignore: url === null,
  async fn() {
    // A later release's step that alters two tables one after the other, as step 25 did.
    const step: Migration = {
      version: 9006,
      kind: "expand",
      sql: `ALTER TABLE jobs ADD COLUMN deadlock_a integer;
        ALTER TABLE job_groups ADD COLUMN deadlock_b integer`,
    };
    // PostgreSQL rolls back the side whose deadlock check (deadlock_timeout, 1 s, after its wait
    // began) finds the cycle: the migration, which waited first, unless the worker's read came
    // later than that. Tried until the migration was the one, so that its retry is what is tested.
    const victims: string[] = [];
    for (let round = 0; round < 5 && victims.at(-1) !== "the migration"; round++) {
      const schema = freshSchema();
      await (await PostgresStore.open(url!, { schema })).close();
      const sql = postgres(url!, {
        max: 2,
        onnotice: () => {},
        connection: { search_path: schema },
      });
      let opening: Promise<PostgresStore> | null = null;
      try {
        victims.push(
          await sql.begin(async (worker) => {
            // The older worker reads job_groups, then jobs; the migration takes jobs, then waits
            // for job_groups; the worker's read of jobs closes the cycle.
            await worker.unsafe("SELECT count(*) FROM job_groups");
            opening = PostgresStore.openWithSteps(url!, { schema }, [...migrations, step]);
            opening.catch(() => {});
            await waitUntil(async () => {
              const [row] = await sql.unsafe(
                `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                WHERE NOT l.granted AND c.relname = 'job_groups'`,
              );
              return (row?.n ?? 0) > 0;
            }, { what: "the migration waiting for job_groups", timeoutMs: 30_000 });
            await worker.unsafe("SELECT count(*) FROM jobs");
            return "the migration";
          }).catch(() => "the worker"),
        );
        const store = await within(opening!, 60_000, "the migration");
        const rows = await store.transaction((tx) =>
          tx.query<{ version: number }>(
            "SELECT version FROM queue_migrations WHERE version = 9006",
            [],
          )
        );
        await store.close();
        assert.equal(rows.length, 1, "the step was applied");
      } finally {
        await sql.end();
        await openAndDrop(schema);
      }
    }
    assert.equal(victims.at(-1), "the migration", `rolled back, round by round: ${victims}`);
  },
});
