/**
 * Group ids given from the group's listing (docs/upgrading.md,
 * docs/performance.md): step 25's `jobs_take_group_id`, an insert trigger
 * on `jobs`, is dropped, and `job_groups_give_id` gives a group's id to its
 * jobs that have none when the group is listed again (`version` bumped).
 *
 * Why: a trigger on a table's inserts, whatever its `WHEN` says, makes
 * every insert into it a statement that may write twice, so SQLite opens a
 * statement journal for each insert inside a transaction (every page the
 * insert writes copied first) and calls the trigger's program for each
 * row: plain dispatches paid for a trigger that only grouped rows of older
 * code need (docs/performance.md).
 *
 * Who inserts a grouped job without a group id, and lists its group after
 * it in the same transaction: code of step 24 (its dispatch), a retry from
 * the failed jobs (`failed_jobs` keeps the key only; the groups are listed
 * again after), and a move's import (`job_groups` is copied after `jobs`).
 * A group listed anew is numbered by step 25's `job_groups_take_id`, which
 * gives its id to its jobs; a group listed again (its `version` bumped, as
 * every listing of a group already there does) now gives it by
 * `job_groups_give_id`. `jobs_group_unnumbered` holds the grouped jobs
 * without an id, none in the normal case, so each listing adds one seek on
 * an empty index, never a walk over a group's backlog; step 25's trigger
 * reads it too.
 *
 * An expand step: code of the step before sets the group id on every
 * grouped insert of its own and lists the groups after a retry or an
 * import, as code of step 24 does.
 *
 * @module
 */

/** Number of this step; never reused. */
export const version = 26;

/**
 * Whether code of the step before keeps working on it (expand): its grouped
 * inserts set the id or list the group after, which gives it.
 */
export const kind = "expand";

/** The statements of this step. */
export const sql = `
DROP TRIGGER jobs_take_group_id;
CREATE INDEX jobs_group_unnumbered ON jobs (queue, name, group_key)
  WHERE group_key IS NOT NULL AND group_id IS NULL;

CREATE TRIGGER job_groups_give_id AFTER UPDATE OF version ON job_groups
BEGIN
  UPDATE jobs SET group_id = new.id
  WHERE queue = new.queue AND name = new.name AND group_key = new.group_key
    AND group_key IS NOT NULL AND group_id IS NULL;
END;
`;
