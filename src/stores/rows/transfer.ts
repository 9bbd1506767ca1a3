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

/**
 * The tables a move copies, in the order it copies them: every table that
 * holds what a queue holds. Left out: `workers` (the source's workers are
 * stopped), `queue_migrations` (each store keeps its own), `group_cursors`
 * (where the fair claim goes next: it starts over), and a store's id
 * counters (SQLite's `sqlite_sequence` and `job_id_floor`, PostgreSQL's
 * sequences, Redis's counters), which the destination moves past the
 * highest id copied (`MoveStore.finishImport`).
 */
export const TRANSFER_TABLES = [
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
