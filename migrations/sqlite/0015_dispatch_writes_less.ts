/**
 * A dispatch writes one index page fewer: `jobs_due_time` (step 11) goes.
 * Every insert into `jobs` wrote a leaf of each of its indexes, and each
 * page a commit touches is copied whole into the WAL; that index cost an
 * autocommit insert about a fifth of its time (a raw insert on the store's
 * schema: 15.2 µs of CPU with it, 12.1 µs without). Its one reader, the idle
 * worker's look for the next due time, walks `jobs_claim_order` instead: one
 * seek per priority level.
 *
 * Expand: older code keeps working on it (it read the index by its columns,
 * never by name), only its look for the next due time takes a seek per level.
 *
 * @module
 */

/** Number of this step; never reused. */
export const version = 15;

/** Whether code of the step before keeps working on it (expand): it drops an index that code of step 14 reads by its columns, never by name. */
export const kind = "expand";

/** The statements of this step. */
export const sql = `
DROP INDEX jobs_due_time;
`;
