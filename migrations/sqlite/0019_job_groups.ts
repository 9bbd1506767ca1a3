/**
 * Fair scheduling by group (docs/groups.md). A job may carry a group key
 * (`jobs.group_key`, with its definition's `group_limit`, NULL for none,
 * and `group_ordered`, 1 for one at a time in dispatch order); a failed job
 * keeps them so a retry brings it back to its group.
 *
 * The claim index becomes partial: `jobs_claim_order` holds only jobs
 * without a group, so the plain claim never walks over a group's backlog,
 * and a plain dispatch still writes one index. It ends with `group_key`
 * (always NULL in it, a byte per entry) so that the claim's `group_key IS
 * NULL`, which SQLite checks again, reads it from the index: without it the
 * claim read every row it took from the table. Grouped jobs have their own
 * two: by due time (a group's due jobs, and its leased ones, whose lease
 * end is their due time) and, for ordered groups only, by id (an ordered
 * group's first job).
 *
 * `job_groups` lists the groups that have jobs, per queue, with the
 * settings of their latest dispatch; `group_cursors` holds the last group
 * each queue's round robin served (the turn goes on in key order).
 * `version` grows with each dispatch into the group, so a claim that
 * drops a group it saw empty never drops one a dispatch just filled
 * (PostgreSQL re-checks it under the row's lock). `group_pauses` holds the
 * paused groups (by job name and key, in every queue).
 *
 * A contract step: code before it reads `jobs_claim_order` by name
 * (`INDEXED BY`) with no condition on `group_key`, which SQLite refuses
 * for a partial index. Stop older workers before migrating.
 *
 * @module
 */

/** Number of the step (18 is another branch's; the runner takes steps with gaps). */
export const version = 19;

/**
 * Whether code of the step before keeps working on it (contract): that code
 * claims through `INDEXED BY jobs_claim_order` with no condition on
 * `group_key`, which SQLite refuses for the now partial index, so every
 * claim of an older worker fails; it would also claim grouped jobs outside
 * their group's turn and limit.
 */
export const kind = "contract";

/** The statements. */
export const sql = `
ALTER TABLE jobs ADD COLUMN group_key TEXT;
ALTER TABLE jobs ADD COLUMN group_limit INTEGER;
ALTER TABLE jobs ADD COLUMN group_ordered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN group_key TEXT;
ALTER TABLE failed_jobs ADD COLUMN group_limit INTEGER;
ALTER TABLE failed_jobs ADD COLUMN group_ordered INTEGER NOT NULL DEFAULT 0;
DROP INDEX jobs_claim_order;
CREATE INDEX jobs_claim_order ON jobs (queue, priority DESC, available_at, group_key)
  WHERE group_key IS NULL;
CREATE INDEX jobs_group_due ON jobs (queue, name, group_key, available_at)
  WHERE group_key IS NOT NULL;
CREATE INDEX jobs_group_order ON jobs (queue, name, group_key, id)
  WHERE group_key IS NOT NULL AND group_ordered = 1;
CREATE TABLE job_groups (
  queue     TEXT    NOT NULL,
  name      TEXT    NOT NULL,
  group_key TEXT    NOT NULL,
  group_limit   INTEGER,
  group_ordered INTEGER NOT NULL DEFAULT 0,
  version   INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (queue, name, group_key)
) WITHOUT ROWID;
CREATE TABLE group_cursors (
  queue     TEXT    NOT NULL PRIMARY KEY,
  name      TEXT    NOT NULL,
  group_key TEXT    NOT NULL
) WITHOUT ROWID;
CREATE TABLE group_pauses (
  name      TEXT    NOT NULL,
  group_key TEXT    NOT NULL,
  paused_at INTEGER NOT NULL,
  PRIMARY KEY (name, group_key)
) WITHOUT ROWID;
`;
