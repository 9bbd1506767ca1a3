/**
 * Flows: jobs that wait for other jobs and take their outputs (a directed
 * acyclic graph of jobs). A node is queued when all its parents succeeded,
 * in the transaction that settles the last of them; its handler reads their
 * outputs as `ctx.parents`, keyed by each parent's key (typed where its job
 * declares them: `defineJob({ parents })`). A node that fails
 * for good (or is cancelled) skips its descendants and queues the flow's
 * catch once; `queue.retry(id)` of that node resumes the flow.
 *
 * A chain is a flow shaped like a path, built with its own API.
 *
 * @module
 */
import { shown } from "./shown.ts";
import { assertName } from "./names.ts";
import { optionBag, optionNames } from "./option_bags.ts";
import {
  DISPATCH_OPTIONS,
  type DispatchOptions,
  type JobDefinition,
  type PayloadOf,
  type PlannedJobs,
} from "./job.ts";

/** Options of one node of a flow: {@linkcode DispatchOptions} and where it sits in the graph. */
export interface FlowNodeOptions extends DispatchOptions {
  /**
   * The node's key, unique in the flow: what its children find its output
   * under in `ctx.parents`, and what `after` may name.
   * @default {the job's name}
   */
  key?: string;
  /**
   * The nodes this one waits for: handles from `flow.add()` of this flow,
   * or their keys (a key may name a node added later).
   * @default {none: the node is queued at dispatch}
   */
  after?: readonly (FlowNode | string)[];
  /**
   * When true, this node still runs when a parent fails for good, is
   * cancelled or is skipped: it applies to every edge from its parents. Such
   * a parent's key is then absent from `ctx.parents` and present in
   * `ctx.parentErrors` with the error's message. When false, a parent that
   * does not succeed skips this node and its descendants.
   * @default {false}
   */
  continueOnFailure?: boolean;
}

/** Every option of `flow.add()`. */
const FLOW_NODE_OPTIONS = optionNames<FlowNodeOptions>()([
  ...DISPATCH_OPTIONS,
  "key",
  "after",
  "continueOnFailure",
]);

/** A node of a flow being built, as `flow.add()` returns it: pass it in another node's `after`. */
export interface FlowNode {
  /** The node's key in its flow. */
  readonly key: string;
  /** The flow builder it belongs to. @internal */
  readonly flow: FlowBuilder;
}

/** One node as the builder hands it over: its job, payload and options, its parents by key. */
export interface PlannedFlowNode {
  /** The node's key. */
  readonly key: string;
  /** The job, its one payload and its dispatch options. */
  readonly planned: PlannedJobs;
  /** The keys of its parents. */
  readonly parents: readonly string[];
  /** Whether it runs when a parent does not succeed. */
  readonly continueOnFailure: boolean;
}

/** A flow as its builder hands it over: checked (no cycle, no unknown parent), nodes parents first. */
export interface FlowPlan {
  /** The flow's name, for people. */
  readonly name: string;
  /** Every node, each after all its parents. */
  readonly nodes: readonly PlannedFlowNode[];
  /** Jobs queued once, when a node fails for good or is cancelled. */
  readonly onFailure: readonly PlannedJobs[];
}

/**
 * Builds a flow: `.add()` adds a node (after the nodes named in its
 * `after`), `.catch()` a job queued once when a node fails for good, and
 * `.dispatch()` checks the graph and every payload, then stores the flow in
 * one transaction. The nodes without parents are queued at once; the others
 * wait.
 *
 * @example A diamond: two fetches, a report from both, a mail of the report
 * ```ts
 * import { defineJob, Queue } from "@renox/queue";
 * import { z } from "zod";
 *
 * const fetchSales = defineJob({
 *   name: "fetch-sales",
 *   schema: z.object({ day: z.string() }),
 *   output: z.number(),
 *   handle: () => 1_200,
 * });
 * const fetchRefunds = defineJob({
 *   name: "fetch-refunds",
 *   schema: z.object({ day: z.string() }),
 *   output: z.number(),
 *   handle: () => 150,
 * });
 * const buildReport = defineJob({
 *   name: "build-report",
 *   schema: z.object({ day: z.string() }),
 *   parents: { "fetch-sales": fetchSales, refunds: fetchRefunds }, // types ctx.parents
 *   handle(_payload, ctx) {
 *     const { "fetch-sales": sales, refunds } = ctx.parents; // both numbers
 *     console.log(`net ${sales - refunds}`);
 *   },
 * });
 *
 * await using queue = await Queue.open({
 *   path: ":memory:",
 *   jobs: [fetchSales, fetchRefunds, buildReport],
 * });
 * const day = "2026-12-01";
 * const flow = queue.flow("nightly-report");
 * const sales = flow.add(fetchSales, { day });
 * const refunds = flow.add(fetchRefunds, { day }, { key: "refunds" });
 * flow.add(buildReport, { day }, { after: [sales, refunds] });
 * const flowId = await flow.dispatch();
 * await queue.work({ stopWhenEmpty: true }).done; // net 1050
 * console.log((await queue.flowStatus(flowId))?.state); // succeeded
 * ```
 */
export class FlowBuilder {
  readonly #name: string;
  readonly #submit: (plan: FlowPlan) => Promise<number>;
  readonly #track: (dispatching: Promise<number>) => Promise<number>;
  readonly #nodes = new Map<
    string,
    Omit<PlannedFlowNode, "parents"> & { after: readonly (FlowNode | string)[] }
  >();
  readonly #onFailure: PlannedJobs[] = [];
  #dispatched = false;

  /**
   * Made by `queue.flow()` and `tx.flow()`; `track` gives the promise
   * `dispatch()` returns for the dispatch's own (a transaction follows it).
   * @internal
   */
  constructor(
    name: string,
    submit: (plan: FlowPlan) => Promise<number>,
    track: (dispatching: Promise<number>) => Promise<number> = (dispatching) => dispatching,
  ) {
    this.#name = name;
    this.#track = track;
    this.#submit = submit;
  }

  /**
   * Adds a node: `job` with `payload`, run once every node in
   * `options.after` has succeeded. Returns its handle, for other nodes'
   * `after`. Throws at once for a duplicate key or a parent handle of
   * another flow.
   */
  add<J extends JobDefinition>(
    job: J,
    payload: PayloadOf<J>,
    options: FlowNodeOptions = {},
  ): FlowNode {
    if (typeof job !== "object" || job === null || typeof job.name !== "string") {
      throw new TypeError(`flow.add(job, payload) takes a job definition: got ${typeof job}`);
    }
    const where = `Cannot add "${job.name}" to flow "${this.#name}"`;
    const { key = job.name, after = [], continueOnFailure = false, ...dispatch } =
      optionBag(options, where, FLOW_NODE_OPTIONS) ?? {};
    assertName(key, where, "key");
    if (this.#nodes.has(key)) {
      throw new TypeError(
        `Cannot add "${job.name}" to flow "${this.#name}": key "${key}" is taken; give one node { key }`,
      );
    }
    if (!Array.isArray(after)) {
      throw new TypeError(
        `Cannot add "${key}" to flow "${this.#name}": after must be an array of nodes or keys`,
      );
    }
    for (const parent of after) {
      if (typeof parent === "string") continue;
      if (typeof parent !== "object" || parent === null || parent.flow !== this) {
        throw new TypeError(
          `Cannot add "${key}" to flow "${this.#name}": parent ${
            typeof parent === "object" && parent !== null && typeof parent.key === "string"
              ? `"${parent.key}"`
              : String(parent)
          } is not a node of this flow`,
        );
      }
    }
    if (typeof continueOnFailure !== "boolean") {
      throw new TypeError(
        `Cannot add "${key}" to flow "${this.#name}": continueOnFailure must be true or false: got ${
          shown(continueOnFailure)
        }`,
      );
    }
    this.#nodes.set(key, {
      key,
      planned: { job, payloads: [payload], options: dispatch },
      after: [...after],
      continueOnFailure,
    });
    return { key, flow: this };
  }

  /** Adds a job queued once, when a node fails for good or is cancelled. */
  catch<J extends JobDefinition>(job: J, payload: PayloadOf<J>, options?: DispatchOptions): this {
    this.#onFailure.push({ job, payloads: [payload], options });
    return this;
  }

  /**
   * Checks the graph (no empty flow, no unknown parent, no cycle: the error
   * names the cycle) and every payload, then stores the flow in one
   * transaction and returns its id. Nothing is stored when anything is refused.
   */
  dispatch(): Promise<number> {
    return this.#track(this.#dispatch());
  }

  async #dispatch(): Promise<number> {
    if (this.#dispatched) {
      throw new Error(
        `Flow "${this.#name}" was already dispatched: build a new one with queue.flow()`,
      );
    }
    const nodes = this.#ordered();
    this.#dispatched = true; // before the await: a second call meanwhile must not store a copy
    try {
      return await this.#submit({ name: this.#name, nodes, onFailure: this.#onFailure });
    } catch (error) {
      this.#dispatched = false; // nothing was stored
      throw error;
    }
  }

  /** The nodes, each after its parents; throws naming an unknown parent or a cycle. */
  #ordered(): PlannedFlowNode[] {
    if (this.#nodes.size === 0) {
      throw new TypeError(
        `Cannot dispatch an empty flow "${this.#name}": add a job with flow.add(job, payload)`,
      );
    }
    const parentsOf = new Map<string, string[]>();
    for (const [key, node] of this.#nodes) {
      const parents = [
        ...new Set(node.after.map((parent) => typeof parent === "string" ? parent : parent.key)),
      ];
      for (const parent of parents) {
        if (!this.#nodes.has(parent)) {
          throw new TypeError(
            `Cannot dispatch flow "${this.#name}": node "${key}" waits for "${parent}", which is not in the flow`,
          );
        }
      }
      parentsOf.set(key, parents);
    }
    const ordered: PlannedFlowNode[] = [];
    const state = new Map<string, "visiting" | "done">();
    const visit = (key: string, path: string[]): void => {
      const seen = state.get(key);
      if (seen === "done") return;
      if (seen === "visiting") {
        const cycle = [...path.slice(path.indexOf(key)), key];
        throw new TypeError(
          `Cannot dispatch flow "${this.#name}": its nodes wait for each other in a cycle: ${
            cycle.join(" → ")
          }`,
        );
      }
      state.set(key, "visiting");
      for (const parent of parentsOf.get(key)!) visit(parent, [...path, key]);
      state.set(key, "done");
      const { after: _after, ...node } = this.#nodes.get(key)!;
      ordered.push({ ...node, parents: parentsOf.get(key)! });
    };
    for (const key of this.#nodes.keys()) visit(key, []);
    for (const node of ordered) this.#assertDeclaredParents(node);
    return ordered;
  }

  /**
   * Checks a node whose job declares its parents (`defineJob({ parents })`,
   * which types its `ctx.parents`): each declared key names a parent of the
   * node that runs the declared job, and no parent may fail into it
   * (`continueOnFailure` would leave a declared output absent).
   */
  #assertDeclaredParents(node: PlannedFlowNode): void {
    const job = node.planned.job;
    if (job.parents === undefined) return;
    const where = `Cannot dispatch flow "${this.#name}": node "${node.key}" (job "${job.name}")`;
    if (node.continueOnFailure) {
      throw new TypeError(
        `${where} declares its parents, whose outputs it reads: it cannot take continueOnFailure, which would run it without a failed parent's output`,
      );
    }
    for (const [key, declared] of Object.entries(job.parents)) {
      if (!node.parents.includes(key)) {
        throw new TypeError(
          `${where} declares parent "${key}" (job "${declared.name}"), which it does not wait for: add it to the node's after`,
        );
      }
      const parentJob = this.#nodes.get(key)!.planned.job;
      if (parentJob.name !== declared.name) {
        throw new TypeError(
          `${where} declares parent "${key}" as job "${declared.name}", but that node runs "${parentJob.name}"`,
        );
      }
    }
  }
}

/** The state of one node of a flow. */
export type FlowNodeState =
  | "waiting"
  | "pending"
  | "running"
  | "succeeded"
  | "failed"
  | "skipped"
  | "cancelled";

/** One node of a flow as {@linkcode Queue.flowStatus} shows it. */
export interface FlowNodeStatus {
  /** Its key in the flow. */
  readonly key: string;
  /** Its job's name. */
  readonly name: string;
  /** Its job's id, once queued; null while it waits (or was skipped or cancelled before). */
  readonly jobId: number | null;
  /**
   * `waiting` for its parents, `pending` (queued), `running`, `succeeded`,
   * `failed` (for good; `queue.retry(jobId)` resumes the flow), `skipped`
   * (a parent did not succeed) or `cancelled`.
   */
  readonly state: FlowNodeState;
  /** The keys of its parents. */
  readonly parents: readonly string[];
  /** The message of the error it failed with, or null. */
  readonly error: string | null;
}

/** A flow and its nodes, as {@linkcode Queue.flowStatus} shows them. */
export interface FlowStatus {
  /** The flow's id. */
  readonly id: number;
  /** Its name. */
  readonly name: string;
  /**
   * `running` while a node can still run; once none can, `succeeded` (every
   * node did), `failed` (a node failed, was skipped or cancelled) or
   * `cancelled` (by `queue.cancelFlow`).
   */
  readonly state: "running" | "succeeded" | "failed" | "cancelled";
  /** True once no node can run any more. */
  readonly finished: boolean;
  /** When it was dispatched. */
  readonly createdAt: Date;
  /** Every node, parents before children. */
  readonly nodes: readonly FlowNodeStatus[];
}
