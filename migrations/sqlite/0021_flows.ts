/**
 * Flows: jobs that wait for other jobs and take their outputs.
 *
 * `flows` holds one row per flow; `flow_nodes` one row per node (its key,
 * job name, state, the job id once queued, how many parents it still waits
 * for, and its output or error once it ended); `flow_edges` one row per
 * parent → child edge, with `continue_on_failure`. A node not yet queued
 * waits in `waiting_jobs` (role `node`, `flow_id`, `position` = the node's
 * position), as chain links do; the flow's catch waits there too (role
 * `flow-catch`). A node's job carries `flow_id`, and `flow_parents`: the
 * parents' outputs and errors (JSON) as they were when it was queued, read
 * by its handler as `ctx.parents`; both move with it to `failed_jobs` and
 * back.
 *
 * A contract step: code of the step before never reads the new tables or
 * columns (every job it writes gets NULL, no flow), but a worker of that
 * code would run a flow's node and settle it without moving the flow on, so
 * its children would never be queued, as step 2 says of chain links.
 *
 * @module
 */

/** Number of the step. */
export const version = 21;

/**
 * Whether code of the step before keeps working on it (contract): its
 * workers would run flow nodes without queueing their children.
 */
export const kind = "contract";

/** The statements. */
export const sql = `
ALTER TABLE jobs ADD COLUMN flow_id INTEGER;
ALTER TABLE jobs ADD COLUMN flow_parents TEXT;
ALTER TABLE failed_jobs ADD COLUMN flow_id INTEGER;
ALTER TABLE failed_jobs ADD COLUMN flow_parents TEXT;
ALTER TABLE waiting_jobs ADD COLUMN flow_id INTEGER;
CREATE INDEX waiting_jobs_flow ON waiting_jobs (flow_id, role, position) WHERE flow_id IS NOT NULL;

CREATE TABLE flows (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  name         TEXT    NOT NULL,
  created_at   INTEGER NOT NULL,
  cancelled_at INTEGER
);

CREATE TABLE flow_nodes (
  flow_id     INTEGER NOT NULL,
  position    INTEGER NOT NULL,
  node_key    TEXT    NOT NULL,
  name        TEXT    NOT NULL,
  state       TEXT    NOT NULL,
  waiting_for INTEGER NOT NULL,
  job_id      INTEGER,
  output      TEXT,
  error       TEXT,
  PRIMARY KEY (flow_id, position)
);
CREATE INDEX flow_nodes_job ON flow_nodes (job_id) WHERE job_id IS NOT NULL;

CREATE TABLE flow_edges (
  flow_id             INTEGER NOT NULL,
  parent              INTEGER NOT NULL,
  child               INTEGER NOT NULL,
  continue_on_failure INTEGER NOT NULL,
  PRIMARY KEY (flow_id, parent, child)
);
CREATE INDEX flow_edges_child ON flow_edges (flow_id, child);
`;
