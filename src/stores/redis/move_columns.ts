/**
 * The SQL schema's tables as a move copies them (src/stores/rows/transfer.ts),
 * written down for the Redis store, which has no tables to read them from:
 * each table's columns at the current schema step, their type, whether they
 * may be null and the default of a column whose field Redis leaves out.
 * Rows are checked against it before an import (a row that does not fit is
 * refused naming the table and the column) and built with it after an
 * export. tests/stores/redis/moving_test.ts holds it equal to SQLite's
 * `PRAGMA table_info`.
 *
 * @internal
 * @module
 */
import type { TransferRow, TransferTable } from "../rows/transfer.ts";

/** A column's type: INTEGER, TEXT or REAL. */
export type ColumnType = "integer" | "text" | "real";

/** One column of a table. */
export interface Column {
  /** Its name. */
  readonly name: string;
  /** Its type. */
  readonly type: ColumnType;
  /** Whether it may be null. */
  readonly nullable: boolean;
  /** What an absent Redis field reads as, for a column that is never null (undefined: none). */
  readonly absent?: number;
}

const int = (name: string, absent?: number): Column =>
  absent === undefined
    ? { name, type: "integer", nullable: false }
    : { name, type: "integer", nullable: false, absent };
const text = (name: string): Column => ({ name, type: "text", nullable: false });
const intNull = (name: string): Column => ({ name, type: "integer", nullable: true });
const textNull = (name: string): Column => ({ name, type: "text", nullable: true });
const realNull = (name: string): Column => ({ name, type: "real", nullable: true });
const real = (name: string, absent: number): Column => ({
  name,
  type: "real",
  nullable: false,
  absent,
});

/** Every column of every table a move copies, in the schema's order (and `id_counters`'s). */
export const TRANSFER_COLUMNS: Readonly<Record<TransferTable, readonly Column[]>> = {
  batches: [
    int("id"),
    text("name"),
    int("total"),
    int("pending"),
    int("failed", 0),
    int("skipped", 0),
    int("allow_failures"),
    int("created_at"),
    intNull("cancelled_at"),
    intNull("finished_at"),
  ],
  flows: [int("id"), text("name"), int("created_at"), intNull("cancelled_at")],
  flow_nodes: [
    int("flow_id"),
    int("position"),
    text("node_key"),
    text("name"),
    text("state"),
    int("waiting_for", 0),
    intNull("job_id"),
    textNull("output"),
    textNull("error"),
  ],
  flow_edges: [int("flow_id"), int("parent"), int("child"), int("continue_on_failure")],
  waiting_jobs: [
    int("id"),
    text("role"),
    intNull("chain_id"),
    intNull("batch_id"),
    int("position"),
    text("queue"),
    text("name"),
    text("payload"),
    int("priority", 0),
    int("delay_ms", 0),
    intNull("retry_for_ms"),
    textNull("trace"),
    intNull("expire_in_ms"),
    intNull("flow_id"),
  ],
  jobs: [
    int("id"),
    text("queue"),
    text("name"),
    text("payload"),
    int("priority", 0),
    int("available_at"),
    intNull("token"),
    int("attempts", 0),
    int("crashes", 0),
    intNull("retry_until"),
    textNull("last_error"),
    int("created_at"),
    intNull("batch_id"),
    int("batch_member", 0),
    intNull("chain_id"),
    realNull("progress"),
    intNull("waited_ms"),
    int("keyed", 0),
    int("locked", 0),
    int("recovered", 0),
    textNull("cancel_requested"),
    int("awaited", 0),
    textNull("trace"),
    textNull("last_span"),
    int("claimed_ahead", 0),
    intNull("expire_at"),
    textNull("group_key"),
    intNull("group_limit"),
    int("group_ordered", 0),
    int("begun", 1),
    int("suspect", 0),
    intNull("flow_id"),
    textNull("flow_parents"),
  ],
  failed_jobs: [
    int("id"),
    text("queue"),
    text("name"),
    text("payload"),
    int("priority", 0),
    text("error"),
    textNull("stack"),
    int("attempts", 0),
    int("crashes", 0),
    int("created_at"),
    int("failed_at"),
    intNull("batch_id"),
    int("batch_member", 0),
    intNull("chain_id"),
    textNull("trace"),
    textNull("group_key"),
    intNull("group_limit"),
    int("group_ordered", 0),
    intNull("flow_id"),
    textNull("flow_parents"),
  ],
  completed_jobs: [
    int("id"),
    text("queue"),
    text("name"),
    text("state"),
    text("payload"),
    textNull("output"),
    textNull("error"),
    int("attempts", 0),
    int("created_at"),
    intNull("started_at"),
    int("finished_at"),
    intNull("duration_ms"),
    int("keep_until"),
  ],
  job_keys: [
    text("key"),
    text("kind"),
    int("job_id"),
    intNull("expires_at"),
    int("release_on_start", 0),
    intNull("latest_at"),
  ],
  job_locks: [text("key"), int("job_id"), int("token"), int("expires_at")],
  rate_windows: [text("key"), int("window_start"), int("starts")],
  schedules: [
    text("name"),
    text("job"),
    text("queue"),
    textNull("cron"),
    intNull("every_ms"),
    text("timezone"),
    text("missed"),
    int("max_catch_up"),
    text("overlap"),
    int("jitter_ms", 0),
    text("definition"),
    intNull("next_slot"),
    int("paused", 0),
    intNull("last_slot"),
    intNull("last_job_id"),
    intNull("last_fired_at"),
    int("updated_at"),
  ],
  schedule_runs: [int("job_id"), text("schedule"), int("slot"), int("manual", 0), int("fired_at")],
  queue_pauses: [text("queue"), int("paused_at"), intNull("until"), textNull("reason")],
  group_pauses: [text("name"), text("group_key"), int("paused_at", 0), intNull("until")],
  job_groups: [
    text("queue"),
    text("name"),
    text("group_key"),
    intNull("group_limit"),
    int("group_ordered", 0),
    int("version", 0),
  ],
  job_steps: [
    int("job_id"),
    int("seq"),
    text("key"),
    text("kind"),
    textNull("output"),
    intNull("until"),
    int("done"),
    int("attempt"),
    int("duration_ms"),
    int("at"),
  ],
  job_signals: [int("id"), int("job_id"), text("name"), text("payload"), int("sent_at")],
  job_logs: [
    int("id"),
    int("job_id"),
    int("attempt"),
    int("at"),
    text("level"),
    text("message"),
    textNull("fields"),
    int("encrypted", 0),
    int("bytes"),
  ],
  job_metrics: [
    int("minute"),
    text("queue"),
    text("name"),
    int("shard", 0),
    int("completed", 0),
    int("failed", 0),
    int("retried", 0),
    real("runtime_ms", 0),
    real("wait_ms", 0),
    ...Array.from({ length: 17 }, (_, bucket) => int(`runtime_b${bucket}`, 0)),
    int("expired", 0),
  ],
  id_counters: [text("name"), int("value")],
};

/**
 * `rows` of `table` as the Redis store's functions take them: every value a
 * decimal string (Lua's numbers keep 14 digits; a token has 16) or null.
 * Throws naming the table, the row and the column when a row does not fit:
 * a column missing or unknown, a null where none may be, a value of another
 * type.
 */
export function toLuaRows(
  table: TransferTable,
  rows: readonly TransferRow[],
): Record<string, string | null>[] {
  const columns = TRANSFER_COLUMNS[table];
  if (columns === undefined) throw new TypeError(`Cannot import rows: no table ${String(table)}`);
  const known = new Set(columns.map((column) => column.name));
  return rows.map((row, index) => {
    const refuse = (column: string, detail: string): never => {
      throw new TypeError(`Cannot import row ${index} of ${table}: ${column}: ${detail}`);
    };
    for (const name of Object.keys(row)) {
      if (!known.has(name)) refuse(name, "no such column at this schema step");
    }
    const out: Record<string, string | null> = {};
    for (const column of columns) {
      if (!Object.hasOwn(row, column.name)) refuse(column.name, "missing (every column is given)");
      const value = row[column.name];
      if (value === null) {
        if (!column.nullable) refuse(column.name, "null in a column that is never null");
        out[column.name] = null;
      } else if (column.type === "text") {
        if (typeof value !== "string") refuse(column.name, `expected text, got ${typeof value}`);
        out[column.name] = value as string;
      } else if (typeof value !== "number" || !Number.isFinite(value)) {
        refuse(column.name, `expected a number, got ${JSON.stringify(value) ?? typeof value}`);
      } else if (column.type === "integer" && !Number.isSafeInteger(value)) {
        refuse(column.name, `expected an integer, got ${value}`);
      } else {
        out[column.name] = String(value);
      }
    }
    return out;
  });
}

/**
 * A row of `table` from what a Redis function gave back (values as strings
 * or numbers; an absent field is its column's default, or null).
 */
export function fromLuaRow(
  table: TransferTable,
  raw: Readonly<Record<string, string | number | boolean | null>>,
): TransferRow {
  const row: Record<string, string | number | null> = {};
  for (const column of TRANSFER_COLUMNS[table]) {
    const value = raw[column.name];
    if (value === undefined || value === null) {
      row[column.name] = column.absent ?? null;
    } else if (column.type === "text") {
      row[column.name] = String(value);
    } else if (typeof value === "boolean") {
      row[column.name] = value ? 1 : 0;
    } else {
      const number = Number(value);
      if (!Number.isFinite(number)) {
        throw new Error(`Cannot export ${table}: ${column.name}: stored ${JSON.stringify(value)}`);
      }
      row[column.name] = number;
    }
  }
  return row;
}
