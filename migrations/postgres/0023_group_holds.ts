/**
 * Timed group pauses, or holds, as SQLite's step 23 says
 * (migrations/sqlite/0023_group_holds.ts): `group_pauses.until`, when a
 * group's pause ends on its own (a nullable column without a default adds
 * no rewrite of the table).
 *
 * @module
 */
export { kind, version } from "../sqlite/0023_group_holds.ts";

/** The statements. */
export const sql = `
ALTER TABLE group_pauses ADD COLUMN until bigint;
`;
