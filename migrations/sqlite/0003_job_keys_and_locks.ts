/**
 * Unique and debounced jobs, and the locks and counters of job middleware.
 *
 * `job_keys` maps a unique or debounce key (the job's name and its
 * `uniqueId`) to the job that holds it: written in the transaction that
 * inserts the job, deleted in the one that settles it (or, for
 * `release_on_start`, the one that claims it); a unique key also expires on
 * its own at `expires_at`. `job_locks` holds the overlap locks of running
 * jobs, fenced by the claim's token and expiring on their own;
 * `rate_windows` counts the starts per rate-limit key in its current window.
 *
 * @module
 */

/** Number of this step; never reused. */
export const version = 3;

/** Whether code of the step before keeps working on it (contract): code of step 2 settles a unique or debounced job without deleting its key (the key then refuses duplicates until it expires, or for ever) and runs a job without taking its middleware locks. */
export const kind = "contract";

/** The statements of this step. */
export const sql = `
CREATE TABLE job_keys (
  key              TEXT    PRIMARY KEY,
  kind             TEXT    NOT NULL,
  job_id           INTEGER NOT NULL,
  expires_at       INTEGER,
  release_on_start INTEGER NOT NULL DEFAULT 0,
  latest_at        INTEGER
);
CREATE INDEX job_keys_job ON job_keys (job_id);

CREATE TABLE job_locks (
  key        TEXT    NOT NULL,
  job_id     INTEGER NOT NULL,
  token      INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX job_locks_key ON job_locks (key, expires_at);
CREATE INDEX job_locks_job ON job_locks (job_id);

CREATE TABLE rate_windows (
  key          TEXT    PRIMARY KEY,
  window_start INTEGER NOT NULL,
  starts       INTEGER NOT NULL
);
`;
