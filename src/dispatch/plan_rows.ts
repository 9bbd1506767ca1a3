/**
 * What each kind of dispatch stores, checked: the rows of jobs dispatched on
 * their own (keyed, for a unique or debounced job), and of a chain, a batch
 * or a flow as its builder planned it. {@linkcode Dispatch} inserts them;
 * `QueueFake` records them instead, so that the fake refuses what the queue
 * refuses, with the same error, by the same code.
 *
 * @internal
 * @module
 */
import type { BatchPlan } from "../batch.ts";
import { type ChainPlan, previousOutput } from "../chain.ts";
import type { Clock } from "../clock.ts";
import type { FlowPlan } from "../flow.ts";
import {
  type DispatchOptions,
  type JobDefinition,
  type PlannedJobs,
  resolveDispatch,
} from "../job.ts";
import { type JobRows, toWaiting } from "./job_rows.ts";
import {
  FROM_PREVIOUS_OUTPUT,
  type KeyedJobRow,
  type NewBatchRow,
  type NewChainRow,
  type NewFlowRow,
  type NewJobRow,
} from "../stores/store.ts";

/** The rows of jobs dispatched on their own. */
export interface DispatchedRows {
  /** One per payload, in order. */
  readonly rows: NewJobRow[];
  /** The same rows with their keys, for a unique or debounced job; else null. */
  readonly keyed: KeyedJobRow[] | null;
}

/** Turns dispatches and builders' plans into checked rows; writes nothing. */
export class PlanRows {
  readonly #jobRows: JobRows;
  readonly #clock: Clock;
  readonly #assertOpen: () => void;

  /** `assertOpen` is called before each step that may await: a closed queue stops the dispatch. */
  constructor(jobRows: JobRows, clock: Clock, assertOpen: () => void) {
    this.#jobRows = jobRows;
    this.#clock = clock;
    this.#assertOpen = assertOpen;
  }

  /** The rows of `payloads` of `job` dispatched on their own (`dispatch`, `dispatchMany`). */
  async jobs(
    job: JobDefinition,
    payloads: readonly unknown[],
    options: DispatchOptions | undefined,
  ): Promise<DispatchedRows> {
    this.#assertOpen();
    // An encrypted job's payloads are sealed, which awaits; any other job's rows need no wait.
    // (`?.`: a value that is no job at all gets plainRows' error naming it.)
    const rows = job?.encrypted
      ? await this.#jobRows.rows(job, payloads, options)
      : this.#jobRows.plainRows(job, payloads, options);
    return { rows, keyed: rows.length === 0 ? null : this.#jobRows.keyed(job, payloads, rows) };
  }

  /** A chain's rows: its first link queued, the next ones and its catch waiting. */
  async chain(plan: ChainPlan): Promise<NewChainRow> {
    const [first, ...next] = await this.#linkRows(plan.links);
    const onFailure = (await this.#plannedRows(plan.onFailure, () => " as the catch of a chain"))
      .map(toWaiting);
    return { first: first!, next: next.map(toWaiting), onFailure };
  }

  /** A batch's rows: its jobs queued, its callbacks waiting. */
  async batch(plan: BatchPlan): Promise<NewBatchRow> {
    const jobs = await this.#plannedRows(plan.jobs, () => ` in batch "${plan.name}"`);
    const waiting = async (role: string, list: readonly PlannedJobs[]) =>
      (await this.#plannedRows(list, () => ` as the ${role} of batch "${plan.name}"`))
        .map(toWaiting);
    return {
      name: plan.name,
      allowFailures: plan.allowFailures,
      createdAt: this.#clock.now(),
      jobs,
      then: await waiting("then", plan.then),
      catch: await waiting("catch", plan.catch),
      finally: await waiting("finally", plan.finally),
    };
  }

  /** A flow's rows: its nodes, parents first, and its catch. */
  async flow(plan: FlowPlan): Promise<NewFlowRow> {
    const nodes = [];
    const positions = new Map<string, number>();
    for (const node of plan.nodes) {
      const [row] = await this.#plannedRows(
        [node.planned],
        () => ` as node "${node.key}" of flow "${plan.name}"`,
        true,
      );
      positions.set(node.key, nodes.length);
      nodes.push({
        key: node.key,
        job: { ...row!, ...toWaiting(row!) },
        parents: node.parents.map((key) => positions.get(key)!),
        continueOnFailure: node.continueOnFailure,
      });
    }
    const onFailure = (await this.#plannedRows(
      plan.onFailure,
      () => ` as the catch of flow "${plan.name}"`,
    )).map(toWaiting);
    return { name: plan.name, createdAt: this.#clock.now(), nodes, onFailure };
  }

  /**
   * The rows of a chain's links, in order; a link planned with
   * `previousOutput` gets the stored marker the settle of the link before
   * replaces with its output.
   */
  async #linkRows(links: readonly PlannedJobs[]): Promise<NewJobRow[]> {
    const rows: NewJobRow[] = [];
    for (const [index, link] of links.entries()) {
      const role = ` as link ${index + 1} of a chain`;
      if (link.payloads[0] !== previousOutput) {
        rows.push(...await this.#plannedRows([link], () => role));
        continue;
      }
      const where = `Cannot dispatch "${link.job?.name}"${role}`;
      await this.#jobRows.rows(link.job, [], link.options, role); // registered, options valid
      assertTakesPreviousOutput(link.job, links[index - 1]?.job, where);
      const createdAt = this.#clock.now();
      const { queue, availableAt, priority, retryUntil, expireAt } = resolveDispatch(
        link.job,
        link.options,
        where,
        createdAt,
      );
      rows.push({
        queue,
        name: link.job.name,
        payload: FROM_PREVIOUS_OUTPUT,
        priority,
        availableAt,
        retryUntil,
        expireAt,
        createdAt,
      });
    }
    return rows;
  }

  /**
   * The rows of jobs a builder planned, in order; `role(index)` places them
   * in error messages; `flowNodes`: they are a flow's nodes.
   */
  async #plannedRows(
    planned: readonly PlannedJobs[],
    role: (index: number) => string,
    flowNodes = false,
  ): Promise<NewJobRow[]> {
    this.#assertOpen();
    const rows: NewJobRow[] = [];
    for (const [index, { job, payloads, options }] of planned.entries()) {
      rows.push(...await this.#jobRows.rows(job, payloads, options, role(index), flowNodes));
    }
    return rows;
  }
}

/**
 * Refuses a chain link that takes `previousOutput` where no output can
 * reach it: the first link, a link to or from an encrypted job, or a link
 * after a job without an `output` schema (its settle stores no output, and
 * the link would fail for good on a null payload).
 */
export function assertTakesPreviousOutput(
  job: { readonly encrypted: boolean },
  before:
    | { readonly name: string; readonly encrypted: boolean; readonly output: unknown }
    | undefined,
  where: string,
): void {
  if (before === undefined) {
    throw new TypeError(
      `${where}: the first link has no previous output to take: give it a payload`,
    );
  }
  if (job.encrypted || before.encrypted) {
    throw new TypeError(
      `${where}: previousOutput cannot pass an output to or from an encrypted job: give it a payload`,
    );
  }
  if (before.output === undefined) {
    throw new TypeError(
      `${where}: previousOutput takes the output of the link before, and its job "${before.name}" declares no output schema: give "${before.name}" an output schema or give this link a payload`,
    );
  }
}
