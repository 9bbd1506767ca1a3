/**
 * The rows of flows: a flow to insert, a flow as the store reads it back,
 * and the parents' outputs a node's job carries.
 *
 * @module
 */
import type { NewJobRow, WaitingJobRow } from "./dispatch.ts";

/** One node of a flow to insert. */
export interface NewFlowNodeRow {
  /** Its key, unique in the flow. */
  readonly key: string;
  /** Its job: queued at once when it has no parents, else waiting. */
  readonly job: NewJobRow & WaitingJobRow;
  /** Its parents, as positions in {@linkcode NewFlowRow.nodes} (each before it). */
  readonly parents: readonly number[];
  /** Whether it runs when a parent does not succeed. */
  readonly continueOnFailure: boolean;
}

/** A flow to insert: its nodes in an order where each comes after its parents. */
export interface NewFlowRow {
  /** Its name, for people. */
  readonly name: string;
  /** Dispatch time, in ms since the epoch. */
  readonly createdAt: number;
  /** Every node, parents first. */
  readonly nodes: readonly NewFlowNodeRow[];
  /** Queued once, when a node fails for good or is cancelled. */
  readonly onFailure: readonly WaitingJobRow[];
}

/** What `insertFlow` stored: the flow's id and the ids of the jobs queued at once. */
export interface InsertedFlow {
  /** The flow's id. */
  readonly id: number;
  /** The jobs of the nodes without parents, in node order. */
  readonly jobIds: readonly number[];
}

/** The state of a node as stored (`running` is a `pending` node whose job is leased). */
export type StoredFlowNodeState =
  | "waiting"
  | "pending"
  | "running"
  | "succeeded"
  | "failed"
  | "skipped"
  | "cancelled";

/** One node as the store reads it back. */
export interface FlowNodeRow {
  /** Its key. */
  readonly key: string;
  /** Its job's name. */
  readonly name: string;
  /** Its state. */
  readonly state: StoredFlowNodeState;
  /** Its job's id once queued, else null. */
  readonly jobId: number | null;
  /** Its parents' keys. */
  readonly parents: readonly string[];
  /** The error it failed with, or null. */
  readonly error: string | null;
}

/** A flow as the store reads it back. */
export interface FlowRow {
  /** Its id. */
  readonly id: number;
  /** Its name. */
  readonly name: string;
  /** Dispatch time, in ms since the epoch. */
  readonly createdAt: number;
  /** When `cancelFlow` cancelled it, or null. */
  readonly cancelledAt: number | null;
  /** Every node, parents first. */
  readonly nodes: readonly FlowNodeRow[];
}

/**
 * A flow to cancel (`cancelFlow`): its queued nodes' jobs are cancelled and
 * its running ones asked to stop in the same write, each as `cancel` does.
 */
export interface CancelFlowRequest {
  /** The flow's id. */
  readonly id: number;
  /** Why, kept as each cancelled job's error (and its node's). */
  readonly reason: string;
  /** Now, in ms since the epoch on the caller's clock (a store that keeps its own clock moves it). */
  readonly now: number;
  /**
   * Keep each cancelled job's record until then (at or before `now`,
   * record nothing), unless its job name is in `keepUntilByName`.
   */
  readonly keepUntil: number;
  /** The `keepUntil` of each job name whose type keeps its finished jobs for a time of its own. */
  readonly keepUntilByName: Readonly<Record<string, number>>;
}

/** What `cancelFlow` did: null when there is no such flow, or it has ended. */
export interface CancelledFlow {
  /** The jobs of its nodes that had not started (queued, or claimed ahead): cancelled. */
  readonly cancelled: readonly number[];
  /** The jobs of its running nodes: asked to stop, as `cancel` asks a running job. */
  readonly cancelling: readonly number[];
}

/**
 * What a node's job carries about its parents (`ClaimedJob.flowParents`,
 * as JSON): each parent's job name and stored output (null when it has
 * none) under its key, and the error message of each parent that did not
 * succeed (a node with `continueOnFailure`).
 */
export interface FlowParentsRow {
  /** Outputs of the parents that succeeded, by key. */
  readonly outputs: Readonly<
    Record<string, { readonly name: string; readonly output: string | null }>
  >;
  /** Error messages of the parents that did not succeed, by key. */
  readonly errors: Readonly<Record<string, string>>;
}
