/**
 * Group ids (docs/groups.md, docs/performance.md): each row of `job_groups`
 * gets a small integer `id`, each grouped job carries its group's in
 * `jobs.group_id`, and the grouped claim's indexes go by it.
 *
 * Why: a claim's lease, a start confirmation and a settle each move or drop
 * a grouped job's entry in the by-due-time index, one entry per group of a
 * claim, spread over as many groups. Keyed by (queue, name, key, due time)
 * an entry took about 45 bytes; keyed by (group id, due time) about 18, so a
 * transaction dirties fewer pages. And the round robin now goes through a
 * queue's groups in id order, the order they were first given jobs, where
 * jobs dispatched across groups have neighbouring ids: one turn's jobs sit
 * on neighbouring table pages (in key order they sat wherever their key
 * fell). A drain over 1,000 groups wrote a third less to the WAL.
 *
 * - `job_groups.id`: one more than the highest when a group is listed
 *   (`{{newGroupId}}`), with `job_groups_turn` (queue, id) for the window;
 *   a group dropped empty and listed again takes a new id, so it goes to
 *   the end of the turn. Existing groups are numbered in key order.
 * - `jobs.group_id`: set by the insert of a grouped job (its group is
 *   listed first), or by the triggers below for rows that come without one.
 * - `group_cursors.group_id`: the last group served, by id (the name and key
 *   are still written, for code of the step before).
 * - `jobs_group_due` becomes (group id, due time), `jobs_group_order`
 *   (group id, id); `jobs_group_key` (queue, name, key), without the due
 *   time, so a lease does not move it, serves code of the step before and
 *   the triggers.
 *
 * An expand step: code of the step before never names the new columns and
 * keeps an index on the columns it reads. Its inserts set no group id:
 * `jobs_take_group_id` gives a grouped job inserted without one its group's
 * id, and `job_groups_take_id` numbers a group listed without one (that
 * code lists a group after inserting its jobs) and gives it to its jobs
 * that have none. The same triggers serve a retry from the failed jobs
 * (`failed_jobs` keeps the key only) and a move's import.
 *
 * @module
 */

/** Number of this step; never reused. */
export const version = 25;

/**
 * Whether code of the step before keeps working on it (expand): new
 * nullable columns it never names, filled by triggers for its inserts, and
 * an index on the columns its grouped claim reads.
 */
export const kind = "expand";

/** The statements of this step. */
export const sql = `
ALTER TABLE job_groups ADD COLUMN id INTEGER;
ALTER TABLE jobs ADD COLUMN group_id INTEGER;
ALTER TABLE group_cursors ADD COLUMN group_id INTEGER;

UPDATE job_groups SET id = numbered.id FROM (
  SELECT queue, name, group_key, row_number() OVER (ORDER BY queue, name, group_key) AS id
  FROM job_groups
) numbered
WHERE numbered.queue = job_groups.queue AND numbered.name = job_groups.name
  AND numbered.group_key = job_groups.group_key;
UPDATE jobs SET group_id = g.id FROM job_groups g
WHERE jobs.group_key IS NOT NULL AND g.queue = jobs.queue AND g.name = jobs.name
  AND g.group_key = jobs.group_key;
UPDATE group_cursors SET group_id = g.id FROM job_groups g
WHERE g.queue = group_cursors.queue AND g.name = group_cursors.name
  AND g.group_key = group_cursors.group_key;

CREATE UNIQUE INDEX job_groups_turn ON job_groups (queue, id);
DROP INDEX jobs_group_due;
DROP INDEX jobs_group_order;
CREATE INDEX jobs_group_due ON jobs (group_id, available_at) WHERE group_id IS NOT NULL;
CREATE INDEX jobs_group_order ON jobs (group_id, id)
  WHERE group_id IS NOT NULL AND group_ordered = 1;
CREATE INDEX jobs_group_key ON jobs (group_key) WHERE group_key IS NOT NULL;

CREATE TRIGGER jobs_take_group_id AFTER INSERT ON jobs
  WHEN new.group_key IS NOT NULL AND new.group_id IS NULL
BEGIN
  UPDATE jobs SET group_id = (SELECT g.id FROM job_groups g
    WHERE g.queue = new.queue AND g.name = new.name AND g.group_key = new.group_key)
  WHERE id = new.id;
END;

CREATE TRIGGER job_groups_take_id AFTER INSERT ON job_groups
  WHEN new.id IS NULL
BEGIN
  UPDATE job_groups SET id = (SELECT ifnull(max(id), 0) + 1 FROM job_groups)
  WHERE queue = new.queue AND name = new.name AND group_key = new.group_key;
  UPDATE jobs SET group_id = (SELECT g.id FROM job_groups g
    WHERE g.queue = new.queue AND g.name = new.name AND g.group_key = new.group_key)
  WHERE queue = new.queue AND name = new.name AND group_key = new.group_key
    AND group_id IS NULL;
END;
`;
