/**
 * Durable steps: `job_steps` holds the memo each `ctx.step`, `ctx.sleep`
 * and `ctx.waitFor` leaves on its job, one row per call position (`seq`),
 * replaced when a wait that was waiting ends; `job_signals` is each job's
 * mailbox, the signals not yet taken by one of its waits, taken oldest
 * first per name (`id` order). Times are ms since the epoch; `done` is 0
 * only for a wait still waiting. Both are kept while their job is in
 * `jobs`, `failed_jobs` or `completed_jobs`, and pruned with the log lines
 * once it is in none.
 *
 * An expand step: code of the step before never reads or writes the new
 * tables, and nothing it does needs them.
 *
 * @module
 */

/** Number of the step. */
export const version = 16;

/** Whether code of the step before keeps working on it (expand): new tables that code of step 15 never reads or writes. */
export const kind = "expand";

/** The statements. */
export const sql = `
CREATE TABLE job_steps (
  job_id      INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  key         TEXT    NOT NULL,
  kind        TEXT    NOT NULL,
  output      TEXT,
  until       INTEGER,
  done        INTEGER NOT NULL,
  attempt     INTEGER NOT NULL,
  duration_ms INTEGER NOT NULL,
  at          INTEGER NOT NULL,
  PRIMARY KEY (job_id, seq)
);

CREATE TABLE job_signals (
  id      INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id  INTEGER NOT NULL,
  name    TEXT    NOT NULL,
  payload TEXT    NOT NULL,
  sent_at INTEGER NOT NULL
);
CREATE INDEX job_signals_job ON job_signals (job_id, name, id);
`;
