/**
 * Batches, chains and per-job progress.
 *
 * A batch member carries its batch's id with `batch_member` 1 and is counted
 * in the batch; a batch's follow-up job (then, catch, finally) carries the id
 * with `batch_member` 0, so its handler sees the batch without being counted.
 * A chain's id is its first link's job id; every link carries it while it is
 * queued, running or failed. Jobs that wait for another job's outcome (the
 * later links of a chain, a chain's catch, a batch's callbacks) wait in
 * `held_jobs` with their delay and retry window relative to when they are
 * queued, and move to `jobs` in the transaction that settles what they wait for.
 *
 * @module
 */

/** Number of this step; never reused. */
export const version = 2;

/** Whether code of the step before keeps working on it (contract): code of step 1 runs the batch members and chain links that newer code dispatches without advancing their batch or queueing the next link, so batches never finish and chains stop. */
export const kind = "contract";

/** The statements of this step. */
export const sql = `
ALTER TABLE jobs ADD COLUMN batch_id INTEGER;
ALTER TABLE jobs ADD COLUMN batch_member INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN chain_id INTEGER;
ALTER TABLE jobs ADD COLUMN progress REAL;
CREATE INDEX jobs_batch ON jobs (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX jobs_chain ON jobs (chain_id) WHERE chain_id IS NOT NULL;

ALTER TABLE failed_jobs ADD COLUMN batch_id INTEGER;
ALTER TABLE failed_jobs ADD COLUMN batch_member INTEGER NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN chain_id INTEGER;
CREATE INDEX failed_jobs_batch ON failed_jobs (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX failed_jobs_chain ON failed_jobs (chain_id) WHERE chain_id IS NOT NULL;

CREATE TABLE batches (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  name           TEXT    NOT NULL,
  total          INTEGER NOT NULL,
  pending        INTEGER NOT NULL,
  failed         INTEGER NOT NULL DEFAULT 0,
  skipped        INTEGER NOT NULL DEFAULT 0,
  allow_failures INTEGER NOT NULL,
  created_at     INTEGER NOT NULL,
  cancelled_at   INTEGER,
  finished_at    INTEGER
);
CREATE INDEX batches_created_at ON batches (created_at);

CREATE TABLE held_jobs (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  role         TEXT    NOT NULL,
  chain_id     INTEGER,
  batch_id     INTEGER,
  position     INTEGER NOT NULL,
  queue        TEXT    NOT NULL,
  name         TEXT    NOT NULL,
  payload      TEXT    NOT NULL,
  priority     INTEGER NOT NULL,
  delay_ms     INTEGER NOT NULL,
  retry_for_ms INTEGER
);
CREATE INDEX held_jobs_chain ON held_jobs (chain_id, role, position) WHERE chain_id IS NOT NULL;
CREATE INDEX held_jobs_batch ON held_jobs (batch_id, role) WHERE batch_id IS NOT NULL;
`;
