/**
 * Expiring jobs: `jobs.expire_at` is when a job not started by then expires
 * (ms since the epoch on the store's clock, NULL for never); `waiting_jobs`
 * keeps it as `expire_in_ms`, relative to when the job is queued; and the
 * metrics rollup counts the jobs that expired.
 *
 * An expand step: code of the step before never reads the new columns, and
 * every job it writes gets NULL (never expires) and 0 expired.
 *
 * @module
 */

/** Number of the step. */
export const version = 17;

/** Whether code of the step before keeps working on it (expand): code of step 16 never reads the new columns; an expiry is not honoured by its workers. */
export const kind = "expand";

/** The statements. */
export const sql = `
ALTER TABLE jobs ADD COLUMN expire_at INTEGER;
ALTER TABLE waiting_jobs ADD COLUMN expire_in_ms INTEGER;
ALTER TABLE job_metrics ADD COLUMN expired INTEGER NOT NULL DEFAULT 0;
`;
