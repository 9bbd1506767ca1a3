/**
 * The layout a move speaks (src/stores/sql/transfer.ts) is the schema's:
 * every table a move copies, with every column, on
 * SQLite and PostgreSQL; every other table of the schema is one a move
 * leaves out on purpose. A schema step that adds a column or a table fails
 * here until the layout says what a move does with it. And the id counters
 * a move carries (`id_counters`) are every counter the schema has: a step
 * that gives a table ids of its own fails here until a move carries them,
 * or says the destination rebuilds them (`rebuilt`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { SqliteStore } from "../../../src/stores/sqlite/mod.ts";
import { TABLE_LAYOUTS } from "../../../src/stores/sql/transfer.ts";
import { ID_COUNTER_NAMES, SCHEMA_TABLES } from "../../../src/stores/rows/transfer.ts";
import { openTestPostgresStore, postgresTestUrl } from "../../_postgres.ts";

/** The tables a move leaves out, and why (see `TRANSFER_TABLES`). */
const LEFT_OUT = [
  "group_cursors", // where the fair claim goes next: it starts over
  "group_id_floor", // the group ids' floor (SQLite's step 27): a move gives groups new ids
  "job_id_floor", // the job ids' floor (SQLite's step 24): carried in id_counters
  "queue_migrations", // each store has its own steps
  "queue_moves", // the fence is the source's
  "sqlite_sequence", // the id counters: carried in id_counters
  "workers", // the source's workers are stopped
];

/**
 * Each table's columns, by name (the engines' orders differ where a step
 * added a column): those a move copies and those the destination rebuilds.
 */
const expected = Object.fromEntries(
  SCHEMA_TABLES.map((
    table,
  ) => [table, [...TABLE_LAYOUTS[table].columns, ...TABLE_LAYOUTS[table].rebuilt ?? []].sort()]),
);

/** Identity columns whose ids a move does not carry: the destination gives its own (`rebuilt`). */
const REBUILT_IDS: readonly string[] = SCHEMA_TABLES.flatMap((table) =>
  (TABLE_LAYOUTS[table].rebuilt ?? []).includes("id") ? [table] : []
);

/** `columns` by table, each table's sorted, without the tables a move leaves out. */
function layout(columns: Record<string, string[]>): Record<string, string[]> {
  for (const table of LEFT_OUT) delete columns[table];
  return Object.fromEntries(
    Object.entries(columns).map(([table, names]) => [table, names.sort()]),
  );
}

Deno.test("The move's layout lists every column of every table a move copies, as SQLite's schema has them", async () => {
  await using store = await SqliteStore.open(":memory:");
  const rows = await store.transaction((tx) =>
    tx.query<{ table_name: string; name: string }>(
      `SELECT m.name AS table_name, c.name FROM sqlite_master m, pragma_table_info(m.name) c
      WHERE m.type = 'table' ORDER BY m.name, c.cid`,
    )
  );
  const actual: Record<string, string[]> = {};
  for (const row of rows) (actual[row.table_name] ??= []).push(row.name);
  assert.deepEqual(layout(actual), expected);
});

Deno.test({
  name:
    "The move's layout lists every column of every table a move copies, as PostgreSQL's schema has them",
  ignore: postgresTestUrl() === null,
  async fn() {
    await using opened = await openTestPostgresStore(postgresTestUrl()!);
    const rows = await opened.store.transaction((tx) =>
      tx.query<{ table_name: string; column_name: string }>(
        `SELECT table_name, column_name FROM information_schema.columns
        WHERE table_schema = $1 ORDER BY table_name, ordinal_position`,
        [opened.schema],
      )
    );
    const actual: Record<string, string[]> = {};
    for (const row of rows) (actual[row.table_name] ??= []).push(row.column_name);
    assert.deepEqual(layout(actual), expected);
  },
});

Deno.test("The move carries every id counter of SQLite's schema: each AUTOINCREMENT table's, and the job ids'", async () => {
  await using store = await SqliteStore.open(":memory:");
  const rows = await store.transaction((tx) =>
    tx.query<{ name: string }>(
      `SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%AUTOINCREMENT%'
      UNION SELECT 'jobs' ORDER BY name`,
    )
  );
  assert.deepEqual(rows.map((row) => row.name), [...ID_COUNTER_NAMES]);
});

Deno.test({
  name: "The move carries every id counter of PostgreSQL's schema: each identity column's sequence",
  ignore: postgresTestUrl() === null,
  async fn() {
    await using opened = await openTestPostgresStore(postgresTestUrl()!);
    const rows = await opened.store.transaction((tx) =>
      tx.query<{ table_name: string; column_name: string }>(
        `SELECT table_name, column_name FROM information_schema.columns
        WHERE table_schema = $1 AND is_identity = 'YES' ORDER BY table_name COLLATE "C"`,
        [opened.schema],
      )
    );
    assert.deepEqual(
      rows.filter((row) => !REBUILT_IDS.includes(row.table_name)).map((
        row,
      ) => [row.table_name, row.column_name]),
      ID_COUNTER_NAMES.map((name) => [name, "id"]),
    );
  },
});
