/**
 * Looking after flows: read one's status, list them, cancel one, prune finished ones.
 *
 * @internal
 * @module
 */
import type { FlowNodeStatus, FlowStatus } from "../flow.ts";
import type { FlowRow } from "../stores/store.ts";
import { assertId, cutoff, type ListOptions, page, type PruneOptions } from "./listing.ts";
import type { FailedJobsParts } from "./failed_jobs.ts";

/** The flows of one queue. */
export class Flows {
  readonly #parts: FailedJobsParts;
  readonly #cancelJob: (id: number) => Promise<unknown>;

  /** Flow admin on `parts`, cancelling a node's job with `cancelJob` (the queue's `cancel`). */
  constructor(parts: FailedJobsParts, cancelJob: (id: number) => Promise<unknown>) {
    this.#parts = parts;
    this.#cancelJob = cancelJob;
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

  /** Deletes finished flows dispatched more than `options.olderThanMs` ago; how many. */
  prune(options: PruneOptions): Promise<number> {
    const now = this.#parts.clock.now();
    return this.#parts.store.pruneFlows(cutoff(now, options, "pruneFlows"));
  }

  /**
   * Cancels a flow: its waiting nodes at once, its queued and running ones
   * the normal way (a running one is asked to stop); false when there is no
   * such flow or it had finished.
   */
  async cancel(id: number): Promise<boolean> {
    const store = this.#parts.store;
    const flowId = assertId(id, "A flow id");
    const before = await store.flow(flowId);
    if (before === null || toFlowStatus(before).finished) return false;
    const cancelled = await store.cancelFlow(flowId, this.#parts.clock.now());
    if (cancelled === null) return false;
    for (const jobId of cancelled.jobIds) await this.#cancelJob(jobId);
    return true;
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
