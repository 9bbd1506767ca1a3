/**
 * Timed group pauses, or holds (docs/groups.md): `group_pauses.until`, when
 * a group's pause ends on its own (on the store's clock), NULL for a pause
 * that lasts until `resumeGroup`. A hold that has passed no longer holds:
 * the claim, a start confirmation and the next-due read compare `until`
 * with their now, and nothing deletes the row but a resume or a later
 * pause that replaces it.
 *
 * An expand step: a nullable column that code of the step before never
 * names. That code reads every row as a pause without an end, so a worker
 * of it keeps a held group paused until it is resumed (see
 * docs/upgrading.md).
 *
 * @module
 */

/** Number of the step. */
export const version = 23;

/**
 * Whether code of the step before keeps working on it (expand): a nullable
 * column it never names; it reads a hold as a pause until resumed.
 */
export const kind = "expand";

/** The statements. */
export const sql = `
ALTER TABLE group_pauses ADD COLUMN until INTEGER;
`;
