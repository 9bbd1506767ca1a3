/**
 * Unique and debounced jobs, and the locks and counters of job middleware,
 * as on SQLite (migrations/sqlite/0003_job_keys_and_locks.ts).
 *
 * @module
 */

/** Number of this step; never reused, the same as SQLite's. */
export const version = 3;

/** Whether code of the step before keeps working on it (contract): code of step 2 settles a unique or debounced job without deleting its key (the key then refuses duplicates until it expires, or for ever) and runs a job without taking its middleware locks. */
export const kind = "contract";

/** The statements of this step. */
export const sql = `
CREATE TABLE job_keys (
  key              text    PRIMARY KEY,
  kind             text    NOT NULL,
  job_id           bigint  NOT NULL,
  expires_at       bigint,
  release_on_start integer NOT NULL DEFAULT 0,
  latest_at        bigint
);
CREATE INDEX job_keys_job ON job_keys (job_id);

CREATE TABLE job_locks (
  key        text   NOT NULL,
  job_id     bigint NOT NULL,
  token      bigint NOT NULL,
  expires_at bigint NOT NULL
);
CREATE INDEX job_locks_key ON job_locks (key, expires_at);
CREATE INDEX job_locks_job ON job_locks (job_id);

CREATE TABLE rate_windows (
  key          text   PRIMARY KEY,
  window_start bigint NOT NULL,
  starts       integer NOT NULL
);
`;
