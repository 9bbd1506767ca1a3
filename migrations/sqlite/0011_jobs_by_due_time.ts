/**
 * Jobs by queue and due time, whatever their priority: the index that finds
 * a queue's next due time (an idle worker sleeps until then instead of until
 * its next poll) with one seek. The claim keeps walking `jobs_claim_order`.
 *
 * @module
 */

/** Number of the step. */
export const version = 11;

/** Whether code of the step before keeps working on it (expand): a new index. */
export const kind = "expand";

/** The statements. */
export const sql = `
CREATE INDEX jobs_due_time ON jobs (queue, available_at);
`;
