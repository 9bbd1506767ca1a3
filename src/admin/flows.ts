/**
 * Looking after flows: read one's status, list them, cancel one, prune ended ones.
 *
 * @internal
 * @module
 */
import type { FlowNodeStatus, FlowStatus } from "../flow.ts";
import type { FlowRow } from "../stores/store.ts";
import { assertId, cutoff, type ListOptions, page, type PruneOptions } from "./listing.ts";
import type { FailedJobsParts } from "./failed_jobs.ts";
import type { FinishedJobs } from "./finished_jobs.ts";
import { cancelReason } from "./job_control.ts";

/** The flows of one queue. */
export class Flows {
  readonly #parts: FailedJobsParts;
  readonly #finished: Pick<FinishedJobs, "keepsOfCancelled">;

  /** Flow admin on `parts`, keeping the jobs it cancels for as long as `finished` says. */
  constructor(parts: FailedJobsParts, finished: Pick<FinishedJobs, "keepsOfCancelled">) {
    this.#parts = parts;
    this.#finished = finished;
  }

  /** One flow's status, or null. */
  async status(id: number): Promise<FlowStatus | null> {
    const row = await this.#parts.store.flow(assertId(id, "A flow id"));
    return row === null ? null : toFlowStatus(row);
  }

  /** A page of flows, newest first. */
  async list(options: ListOptions): Promise<FlowStatus[]> {
    return (await this.#parts.store.flows(page(options, "flows"))).map(toFlowStatus);
  }

  /** Deletes flows that ended more than `options.olderThanMs` ago; how many. */
  prune(options: PruneOptions): Promise<number> {
    const now = this.#parts.clock.now();
    return this.#parts.store.pruneFlows(cutoff(now, options, "pruneFlows"), now);
  }

  /**
   * Cancels a flow in one write of the store, which also tells whether it
   * is there and has not finished (a read before it would leave a gap in
   * which the flow ends, or a node starts): its waiting nodes, and its
   * queued and running ones as `Queue.cancel` cancels a job (a running one
   * is asked to stop), each job kept as cancelled for its type's
   * `keepFinishedMs`; false when there is no such flow or it had finished.
   */
  async cancel(id: number): Promise<boolean> {
    const flowId = assertId(id, "A flow id");
    const now = this.#parts.clock.now();
    const keeps = this.#finished.keepsOfCancelled(now);
    const reason = cancelReason(undefined);
    return (await this.#parts.store.cancelFlow({ id: flowId, reason, now, ...keeps })) !== null;
  }
}

/** A flow as the store reads it, for people. */
export function toFlowStatus(row: FlowRow): FlowStatus {
  const nodes: FlowNodeStatus[] = row.nodes.map((node) => ({
    key: node.key,
    name: node.name,
    jobId: node.jobId,
    state: node.state,
    parents: node.parents,
    error: node.error,
  }));
  const open = nodes.some((node) => ["waiting", "pending", "running"].includes(node.state));
  const state = open
    ? "running"
    : row.cancelledAt !== null
    ? "cancelled"
    : nodes.every((node) => node.state === "succeeded")
    ? "succeeded"
    : "failed";
  return {
    id: row.id,
    name: row.name,
    state,
    finished: !open,
    createdAt: new Date(row.createdAt),
    nodes,
  };
}
