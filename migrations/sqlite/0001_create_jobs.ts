/**
 * Jobs and failed jobs.
 *
 * A waiting job has `token` NULL and is due at `available_at`. A claimed job
 * carries its claim's `token`, and `available_at` holds its lease's end: when
 * the lease expires the job is due again, so one index serves both first
 * claims and crash recovery, walked in claim order.
 *
 * @module
 */

/** Number of this step; never reused. */
export const version = 1;

/** Whether code of the step before keeps working on it (expand): it creates the first tables; no code comes before it. */
export const kind = "expand";

/** The statements of this step. */
export const sql = `
CREATE TABLE jobs (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  queue        TEXT    NOT NULL,
  name         TEXT    NOT NULL,
  payload      TEXT    NOT NULL,
  priority     INTEGER NOT NULL DEFAULT 0,
  available_at INTEGER NOT NULL,
  token        INTEGER,
  attempts     INTEGER NOT NULL DEFAULT 0,
  crashes      INTEGER NOT NULL DEFAULT 0,
  retry_until  INTEGER,
  last_error   TEXT,
  created_at   INTEGER NOT NULL
);
CREATE INDEX jobs_claim_order ON jobs (queue, priority DESC, available_at);

CREATE TABLE failed_jobs (
  id         INTEGER PRIMARY KEY,
  queue      TEXT    NOT NULL,
  name       TEXT    NOT NULL,
  payload    TEXT    NOT NULL,
  priority   INTEGER NOT NULL,
  error      TEXT    NOT NULL,
  stack      TEXT,
  attempts   INTEGER NOT NULL,
  crashes    INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  failed_at  INTEGER NOT NULL
);
CREATE INDEX failed_jobs_failed_at ON failed_jobs (failed_at);
`;
