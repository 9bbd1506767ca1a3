/**
 * The start mark: the same statement as SQLite's step 14, which both
 * engines run unchanged (a constant default adds the column without
 * rewriting the table).
 *
 * @module
 */
export { kind, sql, version } from "../sqlite/0014_claimed_ahead.ts";
