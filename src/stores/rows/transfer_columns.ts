/**
 * The columns of every table a move copies (src/stores/rows/transfer.ts),
 * typed: each table's columns at the current schema step, in the schema's
 * order, their type, whether they may be null and the default of a column
 * Redis leaves out. Every store checks the rows of an import against it
 * before it stores any ({@linkcode assertTransferRows}), so that a row one
 * store would refuse is refused by all of them, naming the table, the row,
 * the column and the value. tests/stores/redis/moving_test.ts holds it equal
 * to SQLite's `PRAGMA table_info`, tests/stores/sql/transfer_layout_test.ts
 * to both SQL schemas.
 *
 * @internal
 * @module
 */
import { shown } from "../../shown.ts";
import {
  assertIdCounterRows,
  assertTransferTable,
  ID_COUNTERS_TABLE,
  type TransferRow,
  type TransferTable,
} from "./transfer.ts";

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
  flows: [
    int("id"),
    text("name"),
    int("created_at"),
    intNull("cancelled_at"),
    intNull("ended_at"),
  ],
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
  rate_windows: [text("key"), int("window_start"), int("starts"), intNull("per_ms")],
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
 * Throws a `TypeError` naming the table, the row, the column and the value
 * unless `table` is one a move copies and every row of `rows` fits it: every
 * column there and no other, null only where the column may be null, text
 * in a TEXT column, a finite number in a REAL one and a safe integer in an
 * INTEGER one (and each row of `id_counters` names a counter and a whole
 * value >= 0).
 */
export function assertTransferRows(table: TransferTable, rows: readonly TransferRow[]): void {
  assertTransferTable(table);
  const columns = TRANSFER_COLUMNS[table];
  const known = new Set(columns.map((column) => column.name));
  rows.forEach((row, index) => {
    const refuse = (column: string, detail: string): never => {
      throw new TypeError(`Cannot import row ${index} of ${table}: ${column}: ${detail}`);
    };
    for (const name of Object.keys(row)) {
      if (!known.has(name)) refuse(name, "no such column at this schema step");
    }
    for (const column of columns) {
      if (!Object.hasOwn(row, column.name)) refuse(column.name, "missing (every column is given)");
      const value: unknown = row[column.name];
      if (value === null) {
        if (!column.nullable) refuse(column.name, "null in a column that is never null");
      } else if (column.type === "text") {
        if (typeof value !== "string") refuse(column.name, `expected text, got ${shown(value)}`);
      } else if (typeof value !== "number" || !Number.isFinite(value)) {
        refuse(column.name, `expected a number, got ${shown(value)}`);
      } else if (column.type === "integer" && !Number.isSafeInteger(value)) {
        refuse(column.name, `expected an integer, got ${value}`);
      }
    }
  });
  if (table === ID_COUNTERS_TABLE) assertIdCounterRows(rows);
}
