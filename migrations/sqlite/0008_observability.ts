/**
 * Traces and job logs.
 *
 * `jobs.trace` keeps the W3C `traceparent` that was active when the job was
 * dispatched (null outside a trace), and travels with the job: into
 * `waiting_jobs` for chain links and batch callbacks, into `failed_jobs`, and
 * back with a retry. `jobs.last_span` is the `traceparent` of the job's last
 * attempt that was retried, so the next attempt's span links to it.
 *
 * `job_logs` holds what handlers wrote with `ctx.log()` (and, with
 * `captureConsole`, printed), one row per line, per attempt. `bytes` is the
 * line's size before encryption, what the per-job cap counts; `encrypted` is
 * 1 when `message` holds the line (message and fields) sealed with the job's
 * key. A row of level `cap` says how many older lines the cap dropped.
 *
 * @module
 */

/** Number of the step. */
export const version = 8;

/** Whether code of the step before keeps working on it (expand): nullable columns and a new table that code of step 7 never reads. */
export const kind = "expand";

/** The statements. */
export const sql = `
ALTER TABLE jobs ADD COLUMN trace TEXT;
ALTER TABLE jobs ADD COLUMN last_span TEXT;
ALTER TABLE waiting_jobs ADD COLUMN trace TEXT;
ALTER TABLE failed_jobs ADD COLUMN trace TEXT;

CREATE TABLE job_logs (
  id        INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id    INTEGER NOT NULL,
  attempt   INTEGER NOT NULL,
  at        INTEGER NOT NULL,
  level     TEXT    NOT NULL,
  message   TEXT    NOT NULL,
  fields    TEXT,
  encrypted INTEGER NOT NULL DEFAULT 0,
  bytes     INTEGER NOT NULL
);
CREATE INDEX job_logs_job ON job_logs (job_id, id);
CREATE INDEX job_logs_at ON job_logs (at);
`;
