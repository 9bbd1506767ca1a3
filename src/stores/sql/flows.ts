/**
 * Flows: inserting them, moving them on as their nodes' jobs settle, and
 * reading them back. Every script runs inside the write transaction that
 * settles the job, so a node's outcome and what it changes in its flow
 * commit together: a node is queued exactly once, when its last parent
 * settles. Nodes not yet queued wait in `waiting_jobs` (role `node`) as
 * chain links do; moving one out is what makes it fire at most once. Every
 * script that changes a flow first locks its row, so the settles of one
 * flow's nodes in concurrent transactions apply one after another. A flow
 * ends when no node is left waiting, queued or running, cancelled or not:
 * each script that moves its nodes records then (`flows.ended_at`, schema
 * step 29), and `pruneFlows` counts its age from it.
 *
 * @internal
 * @module
 */
import type {
  CancelFlowRequest,
  CancelRequest,
  FlowNodeRow,
  FlowParentsRow,
  FlowRow,
  InsertedFlow,
  NewFlowRow,
  Page,
  StoredFlowNodeState,
} from "../store.ts";
import { cancelUnheld } from "./cancel.ts";
import { clockParam, type Dialect, PLAIN } from "./dialect.ts";
import { each, exec, type Script } from "./script.ts";
import { statement } from "./statement.ts";
import type { JobLinks } from "./stored_rows.ts";

const INSERT_FLOW = statement(
  "INSERT INTO flows (name, created_at) VALUES ($1, $2) RETURNING id",
  { oneRow: true },
);
const INSERT_NODE = statement(
  `INSERT INTO flow_nodes (flow_id, position, node_key, name, state, waiting_for, job_id)
  VALUES ($1, $2, $3, $4, $5, $6, $7)`,
);
const INSERT_EDGE = statement(
  "INSERT INTO flow_edges (flow_id, parent, child, continue_on_failure) VALUES ($1, $2, $3, $4)",
);
const START_NODE = statement("UPDATE jobs SET flow_id = $1 WHERE id = $2");
const INSERT_WAITING = statement(
  `INSERT INTO waiting_jobs
  (role, flow_id, position, queue, name, payload, priority, delay_ms, retry_for_ms, trace,
    expire_in_ms)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
);
/** The flow's row, locked until the transaction ends where the engine locks rows. */
const FLOW_LOCK = statement("SELECT cancelled_at FROM flows WHERE id = $1 {{forUpdate}}", {
  oneRow: true,
});
const FLOW_ONE = statement("SELECT id, name, created_at, cancelled_at FROM flows WHERE id = $1", {
  oneRow: true,
});
const NODE_SUCCEEDED = statement(
  `UPDATE flow_nodes SET state = 'succeeded', output = $3
  WHERE flow_id = $1 AND job_id = $2 AND state = 'pending' RETURNING position`,
  { oneRow: true },
);
const NODES_ENDED = statement(
  `UPDATE flow_nodes SET state = $3, error = $4
  WHERE flow_id = $1 AND job_id IN {{ids $2}} AND state = 'pending'`,
);
const NODE_RETRIED = statement(
  `UPDATE flow_nodes SET state = 'pending', error = NULL
  WHERE flow_id = $1 AND job_id = $2 AND state IN ('failed', 'cancelled')`,
);
/** One parent less to wait for, for each waiting child of node `$2`. */
const CHILDREN_WAIT_LESS = statement(
  `UPDATE flow_nodes SET waiting_for = waiting_for - 1
  WHERE flow_id = $1 AND state = 'waiting'
  AND position IN (SELECT child FROM flow_edges WHERE flow_id = $1 AND parent = $2)
  RETURNING position, waiting_for`,
);
const NODES = statement(
  "SELECT position, state, waiting_for FROM flow_nodes WHERE flow_id = $1 ORDER BY position",
);
const EDGES = statement(
  "SELECT parent, child, continue_on_failure FROM flow_edges WHERE flow_id = $1",
);
const SET_NODE = statement(
  "UPDATE flow_nodes SET state = $3, waiting_for = $4 WHERE flow_id = $1 AND position = $2",
);
const PARENTS_OF = statement(
  `SELECT n.node_key, n.name, n.state, n.output, n.error
  FROM flow_edges e JOIN flow_nodes n ON n.flow_id = e.flow_id AND n.position = e.parent
  WHERE e.flow_id = $1 AND e.child = $2 ORDER BY e.parent`,
);
/** Inserts a waiting node as a due job, due `delay_ms` after $1, carrying its parents ($4). */
const INSERT_NODE_JOB = statement(
  `INSERT INTO jobs
  (id, queue, name, payload, priority, available_at, retry_until, created_at, trace, expire_at,
    flow_id, flow_parents)
  SELECT {{newJobId}}, queue, name, payload, priority, $1 + delay_ms, $1 + retry_for_ms, $1,
    trace, $1 + expire_in_ms, flow_id, $4
  FROM waiting_jobs WHERE flow_id = $2 AND role = 'node' AND position = $3
  RETURNING id`,
  { oneRow: true },
);
const DROP_WAITING_NODE = statement(
  "DELETE FROM waiting_jobs WHERE flow_id = $1 AND role = 'node' AND position = $2",
);
const NODE_QUEUED = statement(
  "UPDATE flow_nodes SET state = 'pending', job_id = $3 WHERE flow_id = $1 AND position = $2",
);
const INSERT_CATCH = statement(
  `INSERT INTO jobs
  (id, queue, name, payload, priority, available_at, retry_until, created_at, trace, expire_at)
  SELECT {{newJobId ORDER BY position}}, queue, name, payload, priority, $1 + delay_ms,
    $1 + retry_for_ms, $1, trace, $1 + expire_in_ms
  FROM waiting_jobs WHERE flow_id = $2 AND role = 'flow-catch' ORDER BY position`,
);
const DROP_CATCH = statement(
  "DELETE FROM waiting_jobs WHERE flow_id = $1 AND role = 'flow-catch'",
);
/** A node of flow `$1` still waiting, queued or running: the flow has not ended. */
const ANY_OPEN_NODE = statement(
  "SELECT 1 AS open FROM flow_nodes WHERE flow_id = $1 AND state IN ('waiting', 'pending') LIMIT 1",
  { oneRow: true },
);
const CANCEL_FLOW = statement("UPDATE flows SET cancelled_at = $2 WHERE id = $1");
const CANCEL_WAITING_NODES = statement(
  "UPDATE flow_nodes SET state = 'cancelled' WHERE flow_id = $1 AND state = 'waiting'",
);
/** The jobs of flow `$1`'s queued and running nodes, with their names, in id order. */
const NODE_JOBS = statement(
  `SELECT job_id AS id, name FROM flow_nodes WHERE flow_id = $1 AND state = 'pending'
  ORDER BY job_id`,
);
const NODES_SHOWN = statement(
  `SELECT n.position, n.node_key, n.name, n.state, n.job_id, n.error,
    CASE WHEN j.token IS NOT NULL AND j.claimed_ahead = 0 THEN 1 ELSE 0 END AS running
  FROM flow_nodes n LEFT JOIN jobs j ON j.id = n.job_id AND n.state = 'pending'
  WHERE n.flow_id = $1 ORDER BY n.position`,
);

/**
 * Whether the flow of the row `flows` has a node waiting, queued or running:
 * it has not ended. One seek of the index `flow_nodes_open` (schema step
 * 29), which holds the open nodes only, where reading the flow's nodes by
 * its key made each settle of a large flow read every node settled before.
 */
const OPEN = `EXISTS (SELECT 1 FROM flow_nodes n
  WHERE n.flow_id = flows.id AND n.state IN ('waiting', 'pending'))`;
/**
 * The end of the row `flows` at `$2`, just after one of its nodes moved
 * (cast: PostgreSQL would read a bare `$2` beside `NULL` as text).
 */
const END_NOW = `CASE WHEN ${OPEN} THEN NULL ELSE CAST($2 AS bigint) END`;
/**
 * Flow `$1`, one of whose nodes just moved, ended at `$2` once no node is
 * left open (the move ended it then, even over an end older code left
 * before its retry opened the flow again), and has not ended while one is.
 * Written only when it changes: a settle that leaves the flow open writes
 * no new version of its row.
 */
const MARK_END = statement(
  `UPDATE flows SET ended_at = ${END_NOW}
  WHERE id = $1 AND ended_at IS DISTINCT FROM ${END_NOW}`,
);
/**
 * The flows whose end code before schema step 29 left unsaid: one that
 * ended with no `ended_at` ends at `{{now $1}}`, one opened again with one
 * has not ended.
 */
const MARK_UNSAID_ENDS = statement(
  `UPDATE flows SET ended_at = CASE WHEN ended_at IS NULL THEN {{now $1}} ELSE NULL END
  WHERE CASE WHEN ended_at IS NULL THEN NOT ${OPEN} ELSE ${OPEN} END`,
);

const FLOW_PAGE = statement("SELECT id FROM flows ORDER BY id DESC LIMIT $1 OFFSET $2");
const PRUNE_FLOWS = statement(
  `DELETE FROM flows WHERE ended_at < (SELECT {{now $1}} - $2) AND NOT ${OPEN} RETURNING id`,
);
const PRUNE_NODES = statement("DELETE FROM flow_nodes WHERE flow_id = $1");
const PRUNE_EDGES = statement("DELETE FROM flow_edges WHERE flow_id = $1");
const PRUNE_WAITING = statement("DELETE FROM waiting_jobs WHERE flow_id = $1");

/** A node that did not succeed: a child without `continueOnFailure` on its edge is skipped. */
const NOT_SUCCEEDED = new Set(["failed", "cancelled", "skipped"]);

/** Inserts a flow: its nodes without parents as jobs, the others and its catch waiting. */
export function* insertFlow(dialect: Dialect, flow: NewFlowRow): Script<InsertedFlow> {
  const { rows: [row] } = yield* exec<{ id: number }>(INSERT_FLOW, flow.name, flow.createdAt);
  const id = Number(row!.id);
  const roots = flow.nodes.flatMap((node, position) => node.parents.length === 0 ? [position] : []);
  const jobIds = yield* dialect.insertJobs(
    roots.map((position) => flow.nodes[position]!.job),
    PLAIN,
  );
  yield* each(START_NODE, jobIds.map((jobId) => [id, jobId]));
  const jobOf = new Map(roots.map((position, index) => [position, jobIds[index]!]));
  yield* each(
    INSERT_NODE,
    flow.nodes.map((node, position) => [
      id,
      position,
      node.key,
      node.job.name,
      jobOf.has(position) ? "pending" : "waiting",
      node.parents.length,
      jobOf.get(position) ?? null,
    ]),
  );
  yield* each(
    INSERT_EDGE,
    flow.nodes.flatMap((node, child) =>
      node.parents.map((parent) => [id, parent, child, node.continueOnFailure ? 1 : 0])
    ),
  );
  const waiting = flow.nodes.flatMap((node, position) =>
    jobOf.has(position) ? [] : [{ role: "node", position, row: node.job }]
  );
  yield* each(
    INSERT_WAITING,
    [...waiting, ...flow.onFailure.map((row, position) => ({ role: "flow-catch", position, row }))]
      .map(({ role, position, row }) => [
        role,
        id,
        position,
        row.queue,
        row.name,
        row.payload,
        row.priority,
        row.delayMs,
        row.retryForMs,
        row.trace ?? null,
        row.expireInMs ?? null,
      ]),
  );
  return { id, jobIds };
}

/**
 * Moves the flow of a node's job that just succeeded (its output kept for
 * its children), failed for good or was cancelled (its descendants
 * skipped, the flow's catch queued once), or was deleted unrun by a clear
 * (`"clear"`: cancelled, its descendants skipped, no catch); how many jobs
 * it queued.
 */
export function* settled(
  links: JobLinks & { readonly id: number },
  kind: "complete" | "fail" | "cancel" | "clear",
  at: number,
  output: string | null,
  error: string | null,
): Script<number> {
  const flowId = links.flow_id === null || links.flow_id === undefined
    ? null
    : Number(links.flow_id);
  if (flowId === null) return 0;
  const { rows: [flow] } = yield* exec<{ cancelled_at: number | null }>(FLOW_LOCK, flowId);
  if (flow === undefined) return 0;
  if (kind === "complete") {
    const { rows: [node] } = yield* exec<{ position: number }>(
      NODE_SUCCEEDED,
      flowId,
      links.id,
      output,
    );
    if (node === undefined) return 0;
    let queued = 0;
    if (flow.cancelled_at === null) {
      const { rows: children } = yield* exec<{ position: number; waiting_for: number }>(
        CHILDREN_WAIT_LESS,
        flowId,
        node.position,
      );
      for (const child of children) {
        if (Number(child.waiting_for) === 0) {
          queued += yield* queueNode(flowId, Number(child.position), at);
        }
      }
    }
    // A child queued keeps the flow open: nothing to write (an end older code left on it is the
    // prune's to clear, and the settle that ends the flow writes its own).
    if (queued === 0) yield* exec(MARK_END, flowId, at);
    return queued;
  }
  return yield* ended(flowId, flow.cancelled_at !== null, [links.id], kind, at, error);
}

/**
 * Moves the flows of node jobs cancelled before they started, each flow
 * once, in flow order: as a `"cancel"` settle of each job would.
 */
export function* cancelled(
  jobs: readonly (JobLinks & { readonly id: number })[],
  at: number,
  reason: string,
): Script<number> {
  const byFlow = new Map<number, number[]>();
  for (const job of jobs) {
    if (job.flow_id === null || job.flow_id === undefined) continue;
    const ids = byFlow.get(Number(job.flow_id)) ?? [];
    ids.push(Number(job.id));
    byFlow.set(Number(job.flow_id), ids);
  }
  let queued = 0;
  for (const [flowId, ids] of [...byFlow].sort(([a], [b]) => a - b)) {
    const { rows: [flow] } = yield* exec<{ cancelled_at: number | null }>(FLOW_LOCK, flowId);
    if (flow === undefined) continue;
    queued += yield* ended(flowId, flow.cancelled_at !== null, ids, "cancel", at, reason);
  }
  return queued;
}

/**
 * Nodes of flow `flowId` (its row locked) whose jobs `ids` failed for good,
 * were cancelled or cleared: the flow's catch queued once (not for a clear,
 * nor in a cancelled flow), their descendants skipped. Walking the graph
 * once after all of them ended gives what walking it after each would:
 * a node is queued once every parent ended, skipped once one is blocked.
 */
function* ended(
  flowId: number,
  isCancelled: boolean,
  ids: readonly number[],
  kind: "fail" | "cancel" | "clear",
  at: number,
  error: string | null,
): Script<number> {
  const state = kind === "fail" ? "failed" : "cancelled";
  const { count } = yield* exec(NODES_ENDED, flowId, ids, state, error ?? state);
  if (count === 0) return 0;
  let queued = 0;
  if (!isCancelled && kind !== "clear") {
    queued += (yield* exec(INSERT_CATCH, at, flowId)).count;
    yield* exec(DROP_CATCH, flowId);
  }
  queued += yield* settleGraph(flowId, isCancelled, at);
  yield* exec(MARK_END, flowId, at);
  return queued;
}

/** Moves the flows of node jobs deleted unrun by a clear: each node is cancelled, its descendants skipped. */
export function* cleared(
  deleted: readonly (JobLinks & { readonly id: number })[],
  at: number,
): Script<number> {
  let queued = 0;
  const nodes = deleted.filter((job) => job.flow_id !== null && job.flow_id !== undefined)
    .sort((a, b) => Number(a.flow_id) - Number(b.flow_id));
  for (const job of nodes) {
    queued += yield* settled(job, "clear", at, null, "deleted by a clear of its queue");
  }
  return queued;
}

/** Resumes the flows of node jobs moved back from the failed jobs: their skipped descendants wait again. */
export function* retried(
  moved: readonly (JobLinks & { readonly id: number })[],
  at: number,
): Script<number> {
  let queued = 0;
  const nodes = moved.filter((job) => job.flow_id !== null && job.flow_id !== undefined)
    .sort((a, b) => Number(a.flow_id) - Number(b.flow_id));
  for (const job of nodes) {
    const flowId = Number(job.flow_id);
    const { rows: [flow] } = yield* exec<{ cancelled_at: number | null }>(FLOW_LOCK, flowId);
    if (flow === undefined) continue;
    // No node moved (it was not failed nor cancelled): the flow is as it was.
    if ((yield* exec(NODE_RETRIED, flowId, job.id)).count === 0) continue;
    queued += yield* settleGraph(flowId, flow.cancelled_at !== null, at);
    yield* exec(MARK_END, flowId, at);
  }
  return queued;
}

/**
 * Cancels a flow that has not ended in one write: marks it and its waiting nodes cancelled,
 * drops its catch, and cancels its queued and running nodes' jobs by the
 * rule of a job's cancel (`cancel.ts`): one not started (queued, or claimed
 * ahead and not confirmed) is removed and kept as cancelled, its node
 * cancelled, so no claim after the commit takes it; a running one gets its
 * cancel asked. A job whose row another transaction holds at that moment
 * (a claim taking it, a start confirmation, its own settle) is left to the
 * caller to cancel after the commit (`held`). Null when there is no such
 * flow, or it has ended (no node waiting, queued or running), read under
 * the flow's lock: a settle that ends it commits before, or sees it cancelled.
 */
export function* cancelFlow(
  dialect: Dialect,
  request: CancelFlowRequest,
): Script<FlowCancel | null> {
  const { id, now, reason } = request;
  // Lock order, where the engine locks rows: the flow's row first, and then no wait for any job's
  // row. A worker's settle locks the rows of the jobs it settles, then the flows of those that
  // are nodes, then the rows of the jobs it claimed ahead (their start confirmations); a cancel of
  // one job locks its row, then its flow's. Any of them may hold a node's job while it waits for
  // this flow's row, so this write skips the rows held (SKIP LOCKED): it waits only for the flow,
  // holding nothing yet, and takes no part in a cycle of waits.
  const { rows: [flow] } = yield* exec<{ cancelled_at: number | null }>(FLOW_LOCK, id);
  if (flow === undefined) return null;
  if ((yield* exec(ANY_OPEN_NODE, id)).rows.length === 0) return null;
  if (flow.cancelled_at === null) yield* exec(CANCEL_FLOW, id, now);
  yield* exec(CANCEL_WAITING_NODES, id);
  yield* exec(DROP_CATCH, id);
  const { rows } = yield* exec<{ id: number; name: string }>(NODE_JOBS, id);
  const jobs = rows.map((row) => ({
    id: Number(row.id),
    keepUntil: Object.hasOwn(request.keepUntilByName, row.name)
      ? request.keepUntilByName[row.name]!
      : request.keepUntil,
  }));
  // Marked first: each job's cancel then moves the flow as a cancelled one's (no catch, no child).
  const outcomes = yield* cancelUnheld(dialect, { jobs, reason, now });
  const done: FlowCancel = { cancelled: [], cancelling: [], held: [] };
  for (const job of jobs) {
    const outcome = outcomes.get(job.id);
    if (outcome === "cancelled") done.cancelled.push(job.id);
    else if (outcome === "cancelling") done.cancelling.push(job.id);
    else if (outcome === "held") {
      done.held.push({ id: job.id, reason, now, keepUntil: job.keepUntil });
    }
  }
  return done;
}

/** What `cancelFlow` did in its write, and the cancels it left for the caller to make after it. */
export interface FlowCancel {
  /** The jobs of nodes not started: cancelled. */
  readonly cancelled: number[];
  /** The jobs of running nodes: asked to stop. */
  readonly cancelling: number[];
  /** The nodes' jobs whose rows another transaction held: to cancel after the commit. */
  readonly held: CancelRequest[];
}

/** One flow with every node, or null. */
export function* flow(id: number): Script<FlowRow | null> {
  const { rows: [row] } = yield* exec<
    { id: number; name: string; created_at: number; cancelled_at: number | null }
  >(FLOW_ONE, id);
  if (row === undefined) return null;
  const { rows: nodes } = yield* exec<{
    position: number;
    node_key: string;
    name: string;
    state: StoredFlowNodeState;
    job_id: number | null;
    error: string | null;
    running: number;
  }>(NODES_SHOWN, id);
  const { rows: edges } = yield* exec<{ parent: number; child: number }>(EDGES, id);
  const keyAt = new Map(nodes.map((node) => [Number(node.position), node.node_key]));
  const parents = new Map<number, string[]>();
  for (const edge of edges) {
    const list = parents.get(Number(edge.child)) ?? [];
    list.push(keyAt.get(Number(edge.parent))!);
    parents.set(Number(edge.child), list);
  }
  return {
    id: Number(row.id),
    name: row.name,
    createdAt: Number(row.created_at),
    cancelledAt: row.cancelled_at === null ? null : Number(row.cancelled_at),
    nodes: nodes.map((node): FlowNodeRow => ({
      key: node.node_key,
      name: node.name,
      state: Number(node.running) === 1 ? "running" : node.state,
      jobId: node.job_id === null ? null : Number(node.job_id),
      parents: parents.get(Number(node.position)) ?? [],
      error: node.error,
    })),
  };
}

/** Flows with every node, newest first. */
export function* flows(page: Page): Script<FlowRow[]> {
  const { rows } = yield* exec<{ id: number }>(FLOW_PAGE, page.limit, page.offset);
  const found: FlowRow[] = [];
  for (const { id } of rows) {
    const row = yield* flow(Number(id));
    if (row !== null) found.push(row);
  }
  return found;
}

/**
 * Deletes the flows that ended (no node waiting, queued or running) before
 * `before` (`now` being the caller's now: on the store's clock, as long
 * before its now), with what they hold; how many.
 */
export function* prune(dialect: Dialect, before: number, now: number): Script<number> {
  const clock = clockParam(dialect, now);
  yield* exec(MARK_UNSAID_ENDS, clock);
  const { rows } = yield* exec<{ id: number }>(PRUNE_FLOWS, clock, now - before);
  const ids = rows.map((row) => [Number(row.id)]);
  yield* each(PRUNE_NODES, ids);
  yield* each(PRUNE_EDGES, ids);
  yield* each(PRUNE_WAITING, ids);
  return ids.length;
}

/**
 * Walks a flow's nodes parents first after a node failed, was cancelled or
 * retried: a waiting or skipped node with a parent that did not succeed
 * (on an edge without `continueOnFailure`) is skipped, any other waits for
 * its parents not yet settled, and is queued when none is left (never in a
 * cancelled flow). How many it queued.
 */
function* settleGraph(flowId: number, cancelled: boolean, at: number): Script<number> {
  const { rows: nodeRows } = yield* exec<{ position: number; state: string; waiting_for: number }>(
    NODES,
    flowId,
  );
  const { rows: edgeRows } = yield* exec<
    { parent: number; child: number; continue_on_failure: number }
  >(
    EDGES,
    flowId,
  );
  const states = nodeRows.map((node) => node.state);
  const parentsOf = new Map<number, { parent: number; continues: boolean }[]>();
  for (const edge of edgeRows) {
    const list = parentsOf.get(Number(edge.child)) ?? [];
    list.push({ parent: Number(edge.parent), continues: Number(edge.continue_on_failure) === 1 });
    parentsOf.set(Number(edge.child), list);
  }
  let queued = 0;
  for (const [position, node] of nodeRows.entries()) {
    if (node.state !== "waiting" && node.state !== "skipped") continue;
    const parents = parentsOf.get(position) ?? [];
    const blocked = parents.some(({ parent, continues }) =>
      !continues && NOT_SUCCEEDED.has(states[parent]!)
    );
    if (cancelled && !blocked) continue; // no node of a cancelled flow waits again
    const waitingFor = parents.filter(({ parent, continues }) =>
      !(states[parent] === "succeeded" || (continues && NOT_SUCCEEDED.has(states[parent]!)))
    ).length;
    const state = blocked ? "skipped" : "waiting";
    states[position] = state;
    if (state !== node.state || waitingFor !== Number(node.waiting_for)) {
      yield* exec(SET_NODE, flowId, position, state, waitingFor);
    }
    if (state === "waiting" && waitingFor === 0) {
      queued += yield* queueNode(flowId, position, at);
      states[position] = "pending";
    }
  }
  return queued;
}

/** Queues a waiting node at `at` with its parents' outputs and errors; how many (1). */
function* queueNode(flowId: number, position: number, at: number): Script<number> {
  const { rows: parents } = yield* exec<{
    node_key: string;
    name: string;
    state: string;
    output: string | null;
    error: string | null;
  }>(PARENTS_OF, flowId, position);
  const carried: FlowParentsRow = {
    outputs: Object.fromEntries(
      parents.filter((parent) => parent.state === "succeeded")
        .map((parent) => [parent.node_key, { name: parent.name, output: parent.output }]),
    ),
    errors: Object.fromEntries(
      parents.filter((parent) => parent.state !== "succeeded")
        .map((parent) => [parent.node_key, parent.error ?? parent.state]),
    ),
  };
  const { rows: [job] } = yield* exec<{ id: number }>(
    INSERT_NODE_JOB,
    at,
    flowId,
    position,
    JSON.stringify(carried),
  );
  if (job === undefined) return 0;
  yield* exec(DROP_WAITING_NODE, flowId, position);
  yield* exec(NODE_QUEUED, flowId, position, Number(job.id));
  return 1;
}
