/**
 * Job control: finished jobs kept with their output (`completed_jobs`), a
 * cancel asked of a running job (`jobs.cancel_requested`, the reason), a
 * caller waiting for a job (`jobs.awaited`: its settle wakes the caller),
 * and paused queues (`queue_pauses`, read by every claim).
 *
 * A row of `completed_jobs` is a job that succeeded (`state` 'completed',
 * `output` its stored output or NULL) or was cancelled (`state`
 * 'cancelled', `error` the reason). Failed jobs stay in `failed_jobs`.
 *
 * @module
 */

/** Number of this step; never reused. */
export const version = 7;

/** Whether code of the step before keeps working on it (contract): code of step 6 deletes the jobs it settles without keeping them in completed_jobs, so a result asked of them never comes and an awaited job never wakes its caller; it also claims from paused queues. */
export const kind = "contract";

/** The statements of this step. */
export const sql = `
ALTER TABLE jobs ADD COLUMN cancel_requested TEXT;
ALTER TABLE jobs ADD COLUMN awaited INTEGER NOT NULL DEFAULT 0;

CREATE TABLE completed_jobs (
  id          INTEGER PRIMARY KEY,
  queue       TEXT    NOT NULL,
  name        TEXT    NOT NULL,
  state       TEXT    NOT NULL,
  payload     TEXT    NOT NULL,
  output      TEXT,
  error       TEXT,
  attempts    INTEGER NOT NULL,
  created_at  INTEGER NOT NULL,
  started_at  INTEGER,
  finished_at INTEGER NOT NULL,
  duration_ms INTEGER,
  keep_until  INTEGER NOT NULL
);
CREATE INDEX completed_jobs_keep_until ON completed_jobs (keep_until);
CREATE INDEX completed_jobs_finished_at ON completed_jobs (finished_at);

CREATE TABLE queue_pauses (
  queue     TEXT    PRIMARY KEY,
  paused_at INTEGER NOT NULL,
  until     INTEGER,
  reason    TEXT
);
`;
