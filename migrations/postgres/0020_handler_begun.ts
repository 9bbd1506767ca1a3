/**
 * The handler's begin mark and the suspect mark: the same statements as
 * SQLite's step 20, which both engines run unchanged (a constant default
 * adds a column without rewriting the table).
 *
 * @module
 */
export { kind, sql, version } from "../sqlite/0020_handler_begun.ts";
