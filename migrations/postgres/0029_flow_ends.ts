/**
 * When a flow ended, as SQLite's step 29 says
 * (migrations/sqlite/0029_flow_ends.ts): `flows.ended_at`, from which
 * `pruneFlows` counts a flow's age (a nullable column without a default
 * adds no rewrite of the table), and `flow_nodes_open`, the index of a
 * flow's open nodes that tells whether it has ended.
 *
 * @module
 */
export { kind, version } from "../sqlite/0029_flow_ends.ts";

/** The statements. */
export const sql = `
ALTER TABLE flows ADD COLUMN ended_at bigint;
CREATE INDEX flow_nodes_open ON flow_nodes (flow_id) WHERE state IN ('waiting', 'pending');
`;
