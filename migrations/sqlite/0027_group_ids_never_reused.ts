/**
 * Group ids never handed out twice (docs/groups.md, docs/upgrading.md), as
 * step 24 keeps job ids: a group listed anew took one more than the highest
 * id of `job_groups`, so once the newest group emptied and was dropped, the
 * next group listed took its id again. The round robin's cursor
 * (`group_cursors.group_id`) may still name that id: the group that took it
 * was then served as if it stood where the dropped one stood, not last, and
 * a group listed before it (a higher id) went after it.
 *
 * So a group listed anew takes one more than the highest of the table's ids
 * and `group_id_floor.floor` (`{{newGroupId}}`,
 * `src/stores/sql/statement.ts`), and the trigger
 * `job_groups_keep_id_floor` raises the floor to a dropped group's id.
 * Unlike `jobs_keep_id_floor`, it does not ask whether a newer row is left
 * (`job_groups` has no index by id alone, so that would read every group on
 * each drop): it raises the floor whenever the dropped id is above it, one
 * write to a one-row table in a claim that drops groups. The floor starts at
 * the highest id listed or named by a cursor. `job_groups_take_id` (step 25)
 * is made again to number a group listed without an id (by code of step 24,
 * a retry from the failed jobs, a move's import) the same way.
 *
 * PostgreSQL's identity sequence never hands out an id twice: it has no
 * step 27.
 *
 * @module
 */

/** Number of this step; never reused. */
export const version = 27;

/**
 * Whether code of the step before keeps working on it (expand): a new table
 * and trigger it never names. Its own listings still take one more than the
 * highest id of `job_groups`, so until it stops, a group it lists can take
 * the id of the newest group dropped, as before this step.
 */
export const kind = "expand";

/** The statements of this step. */
export const sql = `
CREATE TABLE group_id_floor (
  one   INTEGER PRIMARY KEY CHECK (one = 1),
  floor INTEGER NOT NULL
);
INSERT INTO group_id_floor (one, floor)
  SELECT 1, max(ifnull((SELECT max(id) FROM job_groups), 0),
    ifnull((SELECT max(group_id) FROM group_cursors), 0));

CREATE TRIGGER job_groups_keep_id_floor AFTER DELETE ON job_groups
BEGIN
  UPDATE group_id_floor SET floor = old.id WHERE floor < old.id;
END;

DROP TRIGGER job_groups_take_id;
CREATE TRIGGER job_groups_take_id AFTER INSERT ON job_groups
  WHEN new.id IS NULL
BEGIN
  UPDATE job_groups SET id = (SELECT max(ifnull(max(id), 0), (SELECT floor FROM group_id_floor)) + 1
    FROM job_groups)
  WHERE queue = new.queue AND name = new.name AND group_key = new.group_key;
  UPDATE jobs SET group_id = (SELECT g.id FROM job_groups g
    WHERE g.queue = new.queue AND g.name = new.name AND g.group_key = new.group_key)
  WHERE queue = new.queue AND name = new.name AND group_key = new.group_key
    AND group_id IS NULL;
END;
`;
