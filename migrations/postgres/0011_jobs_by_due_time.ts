/**
 * Jobs by queue and due time: the same statement as SQLite's step 11, which
 * both engines run unchanged.
 *
 * @module
 */
export { kind, sql, version } from "../sqlite/0011_jobs_by_due_time.ts";
