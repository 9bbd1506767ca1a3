/**
 * The length of a rate window, as SQLite's step 28 says
 * (migrations/sqlite/0028_rate_window_lengths.ts): `rate_windows.per_ms`,
 * so the settles' prune drops a `rateLimited` window a minute after it
 * ends (a nullable column without a default adds no rewrite of the table).
 *
 * @module
 */
export { kind, version } from "../sqlite/0028_rate_window_lengths.ts";

/** The statements. */
export const sql = `
ALTER TABLE rate_windows ADD COLUMN per_ms bigint;
`;
