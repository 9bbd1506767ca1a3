/**
 * What a job holds, as columns its settle reads, and one word for follow-ups:
 * the same statements as SQLite's step 5, which both engines run unchanged.
 *
 * @module
 */
export { kind, sql, version } from "../sqlite/0005_what_jobs_hold.ts";
