/**
 * Rolling upgrades: `queue_migrations.kind` and `workers.schema_step`, as on
 * SQLite (migrations/sqlite/0018_rolling_upgrades.ts).
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
ALTER TABLE queue_migrations ADD COLUMN kind text;
ALTER TABLE workers ADD COLUMN schema_step integer;
`;
