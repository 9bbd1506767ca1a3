/**
 * The metrics rollup by store: one row per (minute, queue, job name, shard),
 * where `shard` is drawn by each open store (a worker process) at random.
 * Every settle adds to its minute's row in the settle's own transaction;
 * with one row per (minute, queue, name), worker processes on one
 * PostgreSQL database waited for each other's row lock, so three processes
 * settled one after another and drained slower than one. Reads add the
 * shards up. Rows written before this step keep shard 0.
 *
 * SQLite cannot change a primary key in place: the table is built anew.
 *
 * @module
 */
/** Number of this step; never reused. */
export const version = 12;

/** Whether code of the step before keeps working on it (contract): the rollup's primary key gains shard: the upsert of code of step 11 (ON CONFLICT on minute, queue, name) no longer matches a key and fails every settle. */
export const kind = "contract";

/** The runtime histogram's columns as step 4 made them (an applied step never changes). */
const buckets = Array.from({ length: 17 }, (_, index) => `runtime_b${index}`);

const columns = [
  "minute",
  "queue",
  "name",
  "completed",
  "failed",
  "retried",
  "runtime_ms",
  "wait_ms",
  ...buckets,
].join(", ");

/** The statements of this step. */
export const sql = `
CREATE TABLE job_metrics_by_store (
  minute      INTEGER NOT NULL,
  queue       TEXT    NOT NULL,
  name        TEXT    NOT NULL,
  shard       INTEGER NOT NULL,
  completed   INTEGER NOT NULL DEFAULT 0,
  failed      INTEGER NOT NULL DEFAULT 0,
  retried     INTEGER NOT NULL DEFAULT 0,
  runtime_ms  REAL    NOT NULL DEFAULT 0,
  wait_ms     REAL    NOT NULL DEFAULT 0,
${buckets.map((column) => `  ${column} INTEGER NOT NULL DEFAULT 0,`).join("\n")}
  PRIMARY KEY (minute, queue, name, shard)
) WITHOUT ROWID;
INSERT INTO job_metrics_by_store (shard, ${columns}) SELECT 0, ${columns} FROM job_metrics;
DROP TABLE job_metrics;
ALTER TABLE job_metrics_by_store RENAME TO job_metrics;
`;
