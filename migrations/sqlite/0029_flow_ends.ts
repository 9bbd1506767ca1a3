/**
 * When a flow ended (docs/flows.md): `flows.ended_at`, the time its last
 * node stopped waiting, queued or running (nothing left open, cancelled or
 * not), written by the scripts that settle, cancel, clear and retry its
 * nodes. `pruneFlows` counts a flow's age from it, where it counted from
 * the flow's dispatch and deleted a flow that ran longer than the retention
 * the moment it ended. Each of those scripts asks whether a node is still
 * open: `flow_nodes_open`, an index of the open nodes only (waiting, or
 * queued or running: `pending`), answers with one seek, where the table's
 * key made the settles of a flow read its nodes settled before, a flow
 * costing the square of its size.
 *
 * An expand step: a nullable column and an index that code of the step
 * before never names. A flow that code ends keeps `ended_at` null, and one
 * it opens again (a retry) keeps the end written before; the prune sets such
 * a flow's end to its own now when it finds it ended with none, and clears
 * it when it finds it open with one, and the next script of this code that
 * ends it writes its end anew, so the flow is kept for the whole retention
 * counted from when it ended, or from when the prune first saw it ended.
 *
 * @module
 */

/** Number of the step. */
export const version = 29;

/**
 * Whether code of the step before keeps working on it (expand): a nullable
 * column it never names; the prune gives the flows that code ends an end.
 */
export const kind = "expand";

/** The statements. */
export const sql = `
ALTER TABLE flows ADD COLUMN ended_at INTEGER;
CREATE INDEX flow_nodes_open ON flow_nodes (flow_id) WHERE state IN ('waiting', 'pending');
`;
