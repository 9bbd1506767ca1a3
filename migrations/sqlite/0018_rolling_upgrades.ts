/**
 * Rolling upgrades: `queue_migrations.kind` records each applied step's kind
 * (`expand` or `contract`, written by the code that applies it, and filled
 * in for the steps before this one), so that code older than the database
 * can tell whether it may keep working on it; `workers.schema_step` is the
 * schema step the code of each worker was built for, written with its
 * heartbeat, so that a contract step knows which live workers it would
 * break.
 *
 * @module
 */

/** Number of the step. */
export const version = 18;

/**
 * Whether code of the step before keeps working on it (expand): two nullable
 * columns it never names; its workers' rows keep a NULL step, which counts
 * as older than any step to come.
 */
export const kind = "expand";

/** The statements. */
export const sql = `
ALTER TABLE queue_migrations ADD COLUMN kind TEXT;
ALTER TABLE workers ADD COLUMN schema_step INTEGER;
`;
