/**
 * A dispatch writes one index fewer: `jobs_due_time` goes, as on SQLite
 * (see `../sqlite/0015_dispatch_writes_less.ts`): the idle worker's look for
 * the next due time walks `jobs_claim_order` instead, one seek per priority
 * level.
 *
 * @module
 */
export { kind, sql, version } from "../sqlite/0015_dispatch_writes_less.ts";
