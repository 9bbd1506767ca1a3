/**
 * Fair scheduling by group (docs/groups.md): the same columns, indexes and
 * tables as SQLite's step (migrations/sqlite/0019_job_groups.ts), whose
 * doc says what each is for.
 *
 * A contract step in practice: code before it claims with no condition on
 * `group_key`, which the partial claim index cannot serve, so its claims
 * would scan the table. Stop older workers before migrating.
 *
 * @module
 */

/** Number of the step. */
export const version = 19;

/**
 * Whether code of the step before keeps working on it (contract): that code
 * claims with no condition on `group_key`, which the now partial claim index
 * cannot serve (each claim of an older worker scans the table), and it would
 * claim grouped jobs outside their group's turn and limit.
 */
export const kind = "contract";

/** The statements. */
export const sql = `
ALTER TABLE jobs ADD COLUMN group_key text;
ALTER TABLE jobs ADD COLUMN group_limit integer;
ALTER TABLE jobs ADD COLUMN group_ordered integer NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN group_key text;
ALTER TABLE failed_jobs ADD COLUMN group_limit integer;
ALTER TABLE failed_jobs ADD COLUMN group_ordered integer NOT NULL DEFAULT 0;
DROP INDEX jobs_claim_order;
CREATE INDEX jobs_claim_order ON jobs (queue, priority DESC, available_at, id)
  WHERE group_key IS NULL;
CREATE INDEX jobs_group_due ON jobs (queue, name, group_key, available_at, id)
  WHERE group_key IS NOT NULL;
CREATE INDEX jobs_group_order ON jobs (queue, name, group_key, id)
  WHERE group_key IS NOT NULL AND group_ordered = 1;
CREATE TABLE job_groups (
  queue     text    NOT NULL,
  name      text    NOT NULL,
  group_key text    NOT NULL,
  group_limit   integer,
  group_ordered integer NOT NULL DEFAULT 0,
  version   bigint  NOT NULL DEFAULT 0,
  PRIMARY KEY (queue, name, group_key)
);
CREATE TABLE group_cursors (
  queue     text    NOT NULL PRIMARY KEY,
  name      text    NOT NULL,
  group_key text    NOT NULL
);
CREATE TABLE group_pauses (
  name      text    NOT NULL,
  group_key text    NOT NULL,
  paused_at bigint  NOT NULL,
  PRIMARY KEY (name, group_key)
);
`;
