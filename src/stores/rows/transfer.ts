/**
 * The rows a move copies from one store to another (`moveQueue`, the
 * `move` command; docs/moving.md). Every store speaks one layout here: the
 * SQL schema's tables at the current schema step, a row being its columns by
 * name. SQLite and PostgreSQL read and write their own tables; Redis turns
 * its keys into these rows and back. So a move from any store to any other
 * is one loop over {@linkcode TRANSFER_TABLES}, and a rule about what a move
 * changes (a running job becomes pending, an expired lock is left behind)
 * is written once, on these rows.
 *
 * @module
 */
import { shown } from "../../shown.ts";

/**
 * The tables a move copies, in the order it copies them:
 * {@linkcode ID_COUNTERS_TABLE} first, then every table that holds what a
 * queue holds. Left out:
 * `workers` (the source's workers are stopped), `queue_migrations` (each
 * store keeps its own), `group_cursors` (where the fair claim goes next:
 * it starts over) and SQLite's `group_id_floor` (the destination gives its
 * groups ids of its own).
 */
export const TRANSFER_TABLES = [
  "id_counters",
  "batches",
  "flows",
  "flow_nodes",
  "flow_edges",
  "waiting_jobs",
  "jobs",
  "failed_jobs",
  "completed_jobs",
  "job_keys",
  "job_locks",
  "rate_windows",
  "schedules",
  "schedule_runs",
  "queue_pauses",
  "group_pauses",
  "job_groups",
  "job_steps",
  "job_signals",
  "job_logs",
  "job_metrics",
] as const;

/** One of {@linkcode TRANSFER_TABLES}. */
export type TransferTable = typeof TRANSFER_TABLES[number];

/** Throws a `TypeError` naming `table` unless it is one of {@linkcode TRANSFER_TABLES}. */
export function assertTransferTable(table: unknown): asserts table is TransferTable {
  if (!(TRANSFER_TABLES as readonly unknown[]).includes(table)) {
    throw new TypeError(
      `No table ${JSON.stringify(table)} to move: expected one of ${TRANSFER_TABLES.join(", ")}`,
    );
  }
}

/**
 * The one entry of {@linkcode TRANSFER_TABLES} that is no table of the
 * schema: a store's id counters, one row `{ name, value }` per counter that
 * has handed out an id, `value` the highest it handed out (SQLite's
 * `sqlite_sequence`, and for job ids `job_id_floor` with the highest id
 * `jobs` holds; PostgreSQL's identity sequences; Redis's counters). An
 * import raises the destination's counter to at least `value`, never
 * lowering it, so the destination never hands out an id the source handed
 * out, though the rows that held it are gone (finished jobs not kept,
 * pruned failed jobs, deleted batches, log lines). A counter already at or
 * past `value` counts as the row being there. Copied first: a row the
 * destination takes before the move ends (an app pointed at it too early)
 * then gets an id past the source's, so it never takes the key of a row
 * still to be copied (which the import would skip); the counts differ
 * instead, and the move says so.
 */
export const ID_COUNTERS_TABLE = "id_counters";

/** The tables of the schema a move copies: {@linkcode TRANSFER_TABLES} but the id counters. */
export type SchemaTable = Exclude<TransferTable, typeof ID_COUNTERS_TABLE>;

/** The tables of the schema a move copies, in its order. */
export const SCHEMA_TABLES: readonly SchemaTable[] = TRANSFER_TABLES.filter(
  (table): table is SchemaTable => table !== ID_COUNTERS_TABLE,
);

/**
 * The id counters a move carries, named for the table whose ids each hands
 * out (the ids of chains are their first job's).
 */
export const ID_COUNTER_NAMES = [
  "batches",
  "flows",
  "job_logs",
  "job_signals",
  "jobs",
  "waiting_jobs",
] as const;

/** One of {@linkcode ID_COUNTER_NAMES}. */
export type IdCounter = typeof ID_COUNTER_NAMES[number];

/**
 * Throws a `TypeError` naming the row and what is wrong unless each row of
 * {@linkcode ID_COUNTERS_TABLE} names a counter of
 * {@linkcode ID_COUNTER_NAMES} with a whole `value` >= 0 (the columns
 * themselves are checked as any table's).
 */
export function assertIdCounterRows(rows: readonly TransferRow[]): void {
  rows.forEach((row, index) => {
    if (!(ID_COUNTER_NAMES as readonly unknown[]).includes(row.name)) {
      throw new TypeError(
        `Cannot import row ${index} of ${ID_COUNTERS_TABLE}: name: ${
          JSON.stringify(row.name)
        } is none of ${ID_COUNTER_NAMES.join(", ")}`,
      );
    }
    if (!Number.isSafeInteger(row.value) || (row.value as number) < 0) {
      throw new TypeError(
        `Cannot import row ${index} of ${ID_COUNTERS_TABLE}: value: expected a whole number >= 0, got ${
          JSON.stringify(row.value)
        }`,
      );
    }
  });
}

/**
 * One row of a table, by column name, with the schema's column names. An
 * INTEGER column (ids, times in ms since the epoch, counters, 0/1 flags) is
 * a number, a TEXT column a string (payloads as stored: ciphertext stays
 * ciphertext), a REAL column a number, and NULL is null. Every column of
 * the table at the current schema step is present.
 */
export type TransferRow = Readonly<Record<string, number | string | null>>;

/** A page of a table's rows, in the order of the table's primary key. */
export interface TransferPage {
  /** The rows, at most the limit asked for. */
  readonly rows: readonly TransferRow[];
  /** Where the next page starts (opaque to the caller); null after the last row. */
  readonly after: string | null;
}

/** The mark a move leaves on its source: from then on the source refuses writes. */
export interface MoveFence {
  /** Where the queue went, as given to the move (its URL with the password hidden). */
  readonly to: string;
  /** When the move fenced the source, in ms since the epoch. */
  readonly at: number;
}

/**
 * How much text a page of a move holds at most, in bytes: an export ends a
 * page once the text of its rows (their payloads, outputs, errors, log
 * lines, every text column) would pass it, besides the page's row limit,
 * and a row bigger than this goes in a page of its own. A page is stored in
 * one statement or call of the destination, sent as one JSON string (a
 * string past about 512 MB is refused by V8): without this bound a page of
 * 500 jobs of 2 MB each could never be copied.
 */
export const MOVE_PAGE_BYTES = 4 * 1024 * 1024;

/** Throws a `RangeError` unless `bytes` is a page's bound: a whole number >= 1. */
export function assertPageBytes(bytes: unknown): asserts bytes is number {
  if (!Number.isSafeInteger(bytes) || (bytes as number) < 1) {
    throw new RangeError(`maxBytes must be a whole number of bytes >= 1: got ${shown(bytes)}`);
  }
}

/**
 * The text a row holds, as a page's bound counts it here: the length of its
 * text values in UTF-16 code units (never more than their UTF-8 bytes, as
 * the stores count them: a page an export bounded stays whole here).
 */
export function rowText(row: TransferRow): number {
  let length = 0;
  for (const value of Object.values(row)) if (typeof value === "string") length += value.length;
  return length;
}

/**
 * How many of the rows whose text sizes are `sizes`, from `start` on, go in
 * one page: as many as hold at most `maxBytes` together, and at least one
 * (a row bigger than that goes alone).
 */
export function rowsWithin(sizes: readonly number[], maxBytes: number, start = 0): number {
  let bytes = 0;
  for (let index = start; index < sizes.length; index++) {
    bytes += sizes[index]!;
    if (index > start && bytes > maxBytes) return index - start;
  }
  return sizes.length - start;
}

/**
 * `rows` in runs that each hold at most `maxBytes` of text (see
 * {@linkcode rowText}), in order; a row bigger than that alone.
 */
export function pagesWithin(rows: readonly TransferRow[], maxBytes: number): TransferRow[][] {
  const sizes = rows.map(rowText);
  const pages: TransferRow[][] = [];
  for (let start = 0; start < rows.length;) {
    const count = rowsWithin(sizes, maxBytes, start);
    pages.push(rows.slice(start, start + count));
    start += count;
  }
  return pages;
}
