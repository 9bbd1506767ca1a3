/**
 * A move's side of the SQL stores (docs/moving.md): each table of
 * {@linkcode TRANSFER_TABLES} read page by page in the order of its key,
 * stored row by row unless its key is already there, counted; the fence
 * (`queue_moves`, and triggers the dialect creates on every table the queue
 * writes); and the id counters: read and raised as rows of `id_counters`
 * (the dialect knows where each engine keeps them), and moved past the
 * highest id copied.
 *
 * Each table's columns are those of src/stores/rows/transfer_columns.ts,
 * its key is listed here (tests/stores/sql/transfer_layout_test.ts holds
 * both to the schema of both engines). `job_locks` has no primary key: a lock is
 * one row per `(key, job_id, token)` (a job's attempt holds a key once), so
 * that is its key here, and its import checks for the row rather than
 * leaning on a constraint.
 *
 * @internal
 * @module
 */
import {
  ID_COUNTER_NAMES,
  ID_COUNTERS_TABLE,
  type IdCounter,
  type MoveFence,
  rowsWithin,
  SCHEMA_TABLES,
  type SchemaTable,
  TRANSFER_TABLES,
  type TransferPage,
  type TransferRow,
  type TransferTable,
} from "../rows/transfer.ts";
import { TRANSFER_COLUMNS } from "../rows/transfer_columns.ts";
import type { Dialect } from "./dialect.ts";
import { exec, type Script } from "./script.ts";
import { type Statement, statement } from "./statement.ts";

/**
 * A table's columns (in SQLite's order), the columns of its key, and the
 * columns a move leaves out because the destination builds them itself.
 */
export interface TableLayout {
  readonly columns: readonly string[];
  readonly key: readonly string[];
  /**
   * Columns not copied: the destination's schema fills them as it stores
   * the row (a group's id and a grouped job's, schema step 25: the ids are
   * the destination's own, given by its triggers and defaults).
   */
  readonly rebuilt?: readonly string[];
}

/** The columns of each table's key, the order a move reads the table in. */
const TABLE_KEYS: Readonly<Record<TransferTable, readonly string[]>> = {
  batches: ["id"],
  flows: ["id"],
  flow_nodes: ["flow_id", "position"],
  flow_edges: ["flow_id", "parent", "child"],
  waiting_jobs: ["id"],
  jobs: ["id"],
  failed_jobs: ["id"],
  completed_jobs: ["id"],
  job_keys: ["key"],
  job_locks: ["key", "job_id", "token"],
  rate_windows: ["key"],
  schedules: ["name"],
  schedule_runs: ["job_id"],
  queue_pauses: ["queue"],
  group_pauses: ["name", "group_key"],
  job_groups: ["queue", "name", "group_key"],
  job_steps: ["job_id", "seq"],
  job_signals: ["id"],
  job_logs: ["id"],
  job_metrics: ["minute", "queue", "name", "shard"],
  id_counters: ["name"],
};

/**
 * The columns a move does not copy, by table: ids the destination's schema
 * gives as it stores the row (schema step 25: a group's id, and a grouped
 * job's copy of it, are the destination's own).
 */
const REBUILT: Partial<Record<TransferTable, readonly string[]>> = {
  jobs: ["group_id"],
  job_groups: ["id"],
};

/**
 * Every table a move copies, as the schema has it at the current step
 * (its columns are those of `TRANSFER_COLUMNS`), and the rows of
 * `id_counters` (no table: see `ID_COUNTERS_TABLE`).
 */
export const TABLE_LAYOUTS = Object.fromEntries(
  TRANSFER_TABLES.map((table): [TransferTable, TableLayout] => [table, {
    columns: TRANSFER_COLUMNS[table].map((column) => column.name),
    key: TABLE_KEYS[table],
    ...(REBUILT[table] === undefined ? {} : { rebuilt: REBUILT[table] }),
  }]),
) as Readonly<Record<TransferTable, TableLayout>>;

/**
 * The tables a fence refuses writes to: every table a move copies, and
 * those the queue writes beside them (the workers' heartbeats, so that a
 * worker started against a moved store stops at once; where the fair
 * claim goes next).
 */
export const FENCED_TABLES: readonly string[] = [...SCHEMA_TABLES, "workers", "group_cursors"];

/**
 * Every column holding an id one of the id counters handed out: a job's id
 * stays its id in the failed and finished jobs, names its chain
 * (`chain_id` is the first link's id) and its runs, steps, signals and
 * logs, so the counter of `jobs` must pass them all.
 */
const ID_COUNTERS: Readonly<Record<IdCounter, readonly (readonly [string, string])[]>> = {
  jobs: [
    ["jobs", "id"],
    ["jobs", "chain_id"],
    ["failed_jobs", "id"],
    ["failed_jobs", "chain_id"],
    ["completed_jobs", "id"],
    ["waiting_jobs", "chain_id"],
    ["flow_nodes", "job_id"],
    ["job_keys", "job_id"],
    ["job_locks", "job_id"],
    ["schedules", "last_job_id"],
    ["schedule_runs", "job_id"],
    ["job_steps", "job_id"],
    ["job_signals", "job_id"],
    ["job_logs", "job_id"],
  ],
  batches: [["batches", "id"], ["jobs", "batch_id"], ["failed_jobs", "batch_id"], [
    "waiting_jobs",
    "batch_id",
  ]],
  flows: [["flows", "id"], ["flow_nodes", "flow_id"], ["jobs", "flow_id"], [
    "failed_jobs",
    "flow_id",
  ], ["waiting_jobs", "flow_id"]],
  waiting_jobs: [["waiting_jobs", "id"]],
  job_signals: [["job_signals", "id"]],
  job_logs: [["job_logs", "id"]],
};

/** The highest id each counter handed out that the tables hold (NULL when none). */
const HIGHEST_IDS: Readonly<Record<IdCounter, Statement>> = Object.fromEntries(
  ID_COUNTER_NAMES.map((counter) => [
    counter,
    statement(
      `SELECT max(m) AS h FROM (${
        ID_COUNTERS[counter].map(([table, column]) => `SELECT max(${column}) AS m FROM ${table}`)
          .join(" UNION ALL ")
      }) ids`,
      { oneRow: true },
    ),
  ]),
) as Record<IdCounter, Statement>;

/** The statements of one table, built once from its layout. */
interface TableStatements {
  readonly first: Statement;
  readonly next: Statement;
  /**
   * The text bytes of each row `first` and `next` would give (`b`), or null
   * for a table without a text column: a page's rows are counted before
   * they are read.
   */
  readonly firstSizes: Statement | null;
  readonly nextSizes: Statement | null;
  readonly count: Statement;
  readonly insert: Statement;
}

/**
 * A schedule already on the destination that never fired (the app's
 * `Queue.open` stored it there from its jobs module while the move ran, or
 * before a run again) takes the source's row whole when that one fired or
 * was paused: what the source's schedule did is not lost, and a paused
 * schedule stays paused. The app's next open brings its definition up to
 * date as on any store. Held together with the Lua import's `I.schedules`
 * by tests/moving_test.ts.
 */
const SCHEDULE_TAKES_STATE = `ON CONFLICT (name) DO UPDATE SET ${
  TABLE_LAYOUTS.schedules.columns.filter((column) => column !== "name")
    .map((column) => `${column} = excluded.${column}`).join(", ")
}
  WHERE schedules.last_slot IS NULL
    AND (excluded.last_slot IS NOT NULL OR excluded.paused <> schedules.paused)`;

function tableStatements(table: SchemaTable): TableStatements {
  const { columns, key } = TABLE_LAYOUTS[table];
  const list = columns.join(", ");
  const order = key.join(", ");
  const afterKey = key.length === 1
    ? `${key[0]} > $1`
    : `(${order}) > (${key.map((_, index) => `$${index + 1}`).join(", ")})`;
  const limit = `$${key.length + 1}`;
  const texts = TRANSFER_COLUMNS[table].filter((column) => column.type === "text")
    .map((column) => `coalesce(octet_length(${column.name}), 0)`);
  const size = texts.length === 0 ? null : texts.join(" + ");
  const records = `{{records $1 ${table} ${list}}}`;
  const insert = table === "job_locks"
    // No constraint to lean on: the row is looked for (see the module doc).
    ? `INSERT INTO job_locks (${list}) SELECT DISTINCT ${list} FROM ${records} r
      WHERE NOT EXISTS (SELECT 1 FROM job_locks l
        WHERE l.key = r.key AND l.job_id = r.job_id AND l.token = r.token)`
    // WHERE true: SQLite would read ON CONFLICT as a join's ON without it.
    : `INSERT INTO ${table} (${list}) SELECT ${list} FROM ${records} r WHERE true
      ${table === "schedules" ? SCHEDULE_TAKES_STATE : "ON CONFLICT DO NOTHING"}`;
  return {
    first: statement(`SELECT ${list} FROM ${table} ORDER BY ${order} LIMIT $1`),
    next: statement(
      `SELECT ${list} FROM ${table} WHERE ${afterKey} ORDER BY ${order} LIMIT ${limit}`,
    ),
    firstSizes: size === null
      ? null
      : statement(`SELECT ${size} AS b FROM ${table} ORDER BY ${order} LIMIT $1`),
    nextSizes: size === null ? null : statement(
      `SELECT ${size} AS b FROM ${table} WHERE ${afterKey} ORDER BY ${order} LIMIT ${limit}`,
    ),
    count: statement(`SELECT count(*) AS n FROM ${table}`, { oneRow: true }),
    insert: statement(insert),
  };
}

const STATEMENTS = Object.fromEntries(
  SCHEMA_TABLES.map((table) => [table, tableStatements(table)]),
) as Record<SchemaTable, TableStatements>;

const SET_FENCE = statement(
  "INSERT INTO queue_moves (id, to_url, fenced_at) VALUES (1, $1, $2) ON CONFLICT DO NOTHING",
);
const READ_FENCE = statement("SELECT to_url, fenced_at FROM queue_moves WHERE id = 1", {
  oneRow: true,
});
const DROP_FENCE = statement("DELETE FROM queue_moves WHERE id = 1");

/**
 * Up to `limit` rows of `table` after the key `after` names (null: from the
 * first), and no more than hold `maxBytes` bytes of text together (at least
 * one row): the rows' sizes are read first, then as many rows as fit.
 */
export function* exportRows(
  dialect: Dialect,
  table: TransferTable,
  after: string | null,
  limit: number,
  maxBytes: number,
): Script<TransferPage> {
  const { key } = TABLE_LAYOUTS[table];
  let rows: readonly TransferRow[];
  let more: boolean;
  if (table === ID_COUNTERS_TABLE) {
    const from = after === null ? null : String(readAfter(table, after)[0]);
    rows = (yield* counterRows(dialect)).filter(({ name }) => from === null || String(name) > from)
      .slice(0, limit);
    more = rows.length === limit;
  } else {
    const statements = STATEMENTS[table];
    const from = after === null ? [] : readAfter(table, after);
    let take = limit;
    more = false;
    const sizes = after === null ? statements.firstSizes : statements.nextSizes;
    if (sizes !== null) {
      const bytes = (yield* exec<{ b: number | string }>(sizes, ...from, limit)).rows
        .map((row) => Number(row.b));
      take = rowsWithin(bytes, maxBytes);
      more = take < bytes.length;
    }
    rows = take === 0
      ? []
      : after === null
      ? (yield* exec<TransferRow>(statements.first, take)).rows
      : (yield* exec<TransferRow>(statements.next, ...from, take)).rows;
    more ||= rows.length === limit;
  }
  const last = more ? rows.at(-1) : undefined;
  return {
    rows,
    after: last === undefined ? null : JSON.stringify(key.map((column) => last[column] ?? null)),
  };
}

/**
 * Stores `rows` of `table` in one statement, each unless its key is there;
 * how many were new. A row of `id_counters` raises its counter unless the
 * counter is already there or past.
 */
export function* importRows(
  dialect: Dialect,
  table: TransferTable,
  rows: readonly TransferRow[],
): Script<number> {
  if (table !== ID_COUNTERS_TABLE) return (yield* exec(STATEMENTS[table].insert, rows)).count;
  const counters = yield* dialect.idCounters();
  let raised = 0;
  for (const row of rows) {
    const name = row.name as IdCounter;
    const value = row.value as number;
    if (counters[name] >= value) continue;
    yield* dialect.raiseIdCounter(name, value);
    counters[name] = value;
    raised++;
  }
  return raised;
}

/** How many rows `table` holds (for `id_counters`, the counters that handed out an id). */
export function* countRows(dialect: Dialect, table: TransferTable): Script<number> {
  if (table === ID_COUNTERS_TABLE) return (yield* counterRows(dialect)).length;
  const { rows: [row] } = yield* exec<{ n: number }>(STATEMENTS[table].count);
  return Number(row?.n ?? 0);
}

/** Moves every id counter past the highest id the tables hold, never back. */
export function* moveIdCountersPast(dialect: Dialect): Script<void> {
  const counters = yield* dialect.idCounters();
  for (const counter of ID_COUNTER_NAMES) {
    const { rows: [row] } = yield* exec<{ h: number | string | null }>(HIGHEST_IDS[counter]);
    const highest = Number(row?.h ?? 0);
    if (highest > counters[counter]) yield* dialect.raiseIdCounter(counter, highest);
  }
}

/** The rows of `id_counters`: each counter that handed out an id, in the order of their names. */
function* counterRows(dialect: Dialect): Script<TransferRow[]> {
  const counters = yield* dialect.idCounters();
  return ID_COUNTER_NAMES.filter((name) => counters[name] > 0)
    .map((name) => ({ name, value: counters[name] }));
}

/** The fence this store carries, or null. */
export function* moveFence(): Script<MoveFence | null> {
  const { rows: [row] } = yield* exec<{ to_url: string; fenced_at: number }>(READ_FENCE);
  return row === undefined ? null : { to: String(row.to_url), at: Number(row.fenced_at) };
}

/** Records the fence unless one is there, then refuses every write of the queue; the fence kept. */
export function* fence(dialect: Dialect, to: string, now: number): Script<MoveFence> {
  yield* exec(SET_FENCE, to, now);
  yield* dialect.fenceWrites(true);
  return (yield* moveFence())!;
}

/** The schema step that adds `queue_moves`, where a fence is kept. */
export const FENCE_STEP = 22;

/**
 * Creates the fence's triggers again when the store carries a fence: a
 * schema step that builds a table anew drops the table's triggers with it,
 * and a moved store must go on refusing writes after any step.
 */
export function* keepFence(dialect: Dialect): Script<void> {
  if ((yield* moveFence()) !== null) yield* dialect.fenceWrites(true);
}

/** Whether step {@linkcode FENCE_STEP} is applied (a release may have applied later steps first). */
const FENCE_STEP_APPLIED = statement(
  "SELECT 1 AS applied FROM queue_migrations WHERE version = $1",
);

/**
 * Drops the fence's triggers, its record kept, when the store carries a
 * fence: for a migration's steps, whose writes they would refuse;
 * {@linkcode keepFence} sets them again in the same transaction.
 */
export function* fenceOffForSteps(dialect: Dialect): Script<void> {
  const { rows } = yield* exec(FENCE_STEP_APPLIED, FENCE_STEP);
  if (rows.length > 0 && (yield* moveFence()) !== null) yield* dialect.fenceWrites(false);
}

/** Drops the triggers and the fence; whether there was one. */
export function* liftFence(dialect: Dialect): Script<boolean> {
  const there = (yield* moveFence()) !== null;
  yield* dialect.fenceWrites(false);
  yield* exec(DROP_FENCE);
  return there;
}

/** Where a page after `after` starts, checked against `table`'s key. */
function readAfter(table: TransferTable, after: string): (number | string | null)[] {
  const { key } = TABLE_LAYOUTS[table];
  let values: unknown;
  try {
    values = JSON.parse(after);
  } catch {
    values = undefined;
  }
  if (
    !Array.isArray(values) || values.length !== key.length ||
    !values.every((value) => typeof value === "number" || typeof value === "string")
  ) {
    throw new TypeError(`Cannot read ${table} after ${after}: not where a page of it ends`);
  }
  return values;
}
