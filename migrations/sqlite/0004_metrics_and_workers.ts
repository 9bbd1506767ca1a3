/**
 * The metrics rollup, the workers seen, and how long each claimed job waited.
 *
 * `job_metrics` holds one row per (minute, queue, job name): attempts that
 * completed, failed for good, or ended in an error and were retried; the
 * total runtime and wait of the attempts that ran; and a histogram of their
 * runtimes over fixed log-scale buckets (`runtime_b0` … `runtime_b16`, upper
 * bounds in `RUNTIME_BUCKETS_MS` of src/stores/store.ts), from which a p95
 * is estimated. The transaction that settles a tick's jobs adds to it, one
 * upsert per (minute, queue, name); rows older than 7 days are pruned.
 *
 * `jobs.waited_ms` is written by each claim: how long the job had been due
 * when it was claimed (the claim's time less the `available_at` it
 * replaces), kept until the attempt settles so the settle can add it up.
 *
 * `workers` has one row per running worker, written at its start, on its
 * lease-renewal timer, and deleted when it stops.
 *
 * @module
 */

/** Number of this step; never reused. */
export const version = 4;

/** Whether code of the step before keeps working on it (expand): a nullable column and new tables that code of step 3 never reads; its workers only go unlisted. */
export const kind = "expand";

/** The statements of this step. */
export const sql = `
ALTER TABLE jobs ADD COLUMN waited_ms INTEGER;

CREATE TABLE job_metrics (
  minute      INTEGER NOT NULL,
  queue       TEXT    NOT NULL,
  name        TEXT    NOT NULL,
  completed   INTEGER NOT NULL DEFAULT 0,
  failed      INTEGER NOT NULL DEFAULT 0,
  retried     INTEGER NOT NULL DEFAULT 0,
  runtime_ms  REAL    NOT NULL DEFAULT 0,
  wait_ms     REAL    NOT NULL DEFAULT 0,
  runtime_b0  INTEGER NOT NULL DEFAULT 0,
  runtime_b1  INTEGER NOT NULL DEFAULT 0,
  runtime_b2  INTEGER NOT NULL DEFAULT 0,
  runtime_b3  INTEGER NOT NULL DEFAULT 0,
  runtime_b4  INTEGER NOT NULL DEFAULT 0,
  runtime_b5  INTEGER NOT NULL DEFAULT 0,
  runtime_b6  INTEGER NOT NULL DEFAULT 0,
  runtime_b7  INTEGER NOT NULL DEFAULT 0,
  runtime_b8  INTEGER NOT NULL DEFAULT 0,
  runtime_b9  INTEGER NOT NULL DEFAULT 0,
  runtime_b10 INTEGER NOT NULL DEFAULT 0,
  runtime_b11 INTEGER NOT NULL DEFAULT 0,
  runtime_b12 INTEGER NOT NULL DEFAULT 0,
  runtime_b13 INTEGER NOT NULL DEFAULT 0,
  runtime_b14 INTEGER NOT NULL DEFAULT 0,
  runtime_b15 INTEGER NOT NULL DEFAULT 0,
  runtime_b16 INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (minute, queue, name)
) WITHOUT ROWID;

CREATE TABLE workers (
  id           TEXT    PRIMARY KEY,
  host         TEXT    NOT NULL,
  pid          INTEGER NOT NULL,
  queues       TEXT    NOT NULL,
  concurrency  INTEGER NOT NULL,
  started_at   INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  running      INTEGER NOT NULL
);
CREATE INDEX workers_last_seen_at ON workers (last_seen_at);
`;
