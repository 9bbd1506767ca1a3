/**
 * Job control: finished jobs kept with their output (`completed_jobs`), a
 * cancel asked of a running job (`jobs.cancel_requested`), and paused
 * queues (`queue_pauses`); see the SQLite step of the same number.
 *
 * @module
 */

/** Number of this step; never reused, the same as SQLite's. */
export const version = 7;

/** Whether code of the step before keeps working on it (contract): code of step 6 deletes the jobs it settles without keeping them in completed_jobs, so a result asked of them never comes and an awaited job never wakes its caller; it also claims from paused queues. */
export const kind = "contract";

/** The statements of this step. */
export const sql = `
ALTER TABLE jobs ADD COLUMN cancel_requested text;
ALTER TABLE jobs ADD COLUMN awaited integer NOT NULL DEFAULT 0;

CREATE TABLE completed_jobs (
  id          bigint  PRIMARY KEY,
  queue       text    NOT NULL,
  name        text    NOT NULL,
  state       text    NOT NULL,
  payload     text    NOT NULL,
  output      text,
  error       text,
  attempts    integer NOT NULL,
  created_at  bigint  NOT NULL,
  started_at  bigint,
  finished_at bigint  NOT NULL,
  duration_ms bigint,
  keep_until  bigint  NOT NULL
);
CREATE INDEX completed_jobs_keep_until ON completed_jobs (keep_until);
CREATE INDEX completed_jobs_finished_at ON completed_jobs (finished_at);

CREATE TABLE queue_pauses (
  queue     text   PRIMARY KEY,
  paused_at bigint NOT NULL,
  until     bigint,
  reason    text
);
`;
