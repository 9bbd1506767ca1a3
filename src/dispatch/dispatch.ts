/**
 * The one dispatch path. `queue.dispatch`, `tx.dispatch`, handlers'
 * `ctx.queue` and `ctx.addToBatch`, dispatch by name from Web Workers, and
 * the chain and batch builders all go through a {@linkcode Dispatch}: bound
 * to a target (the store, or an open store transaction) that stores the
 * rows, and to a sink that hears of the jobs stored as new ones (at once, or
 * buffered until the transaction commits). A unique job whose key names a
 * job already stored is a duplicate, and a debounced one updates the job
 * waiting under its key: either way it gets that job's id, and the sink does
 * not hear of it.
 *
 * @internal
 * @module
 */
import { BatchBuilder, type BatchPlan } from "../batch.ts";
import {
  CHAIN_OPTIONS,
  ChainBuilder,
  type ChainOptions,
  type ChainPlan,
  previousOutput,
} from "../chain.ts";
import type { Clock } from "../clock.ts";
import { FlowBuilder, type FlowPlan } from "../flow.ts";
import {
  type Dispatcher,
  type DispatchOptions,
  type JobDefinition,
  type PayloadOf,
  type PlannedJobs,
  resolveDispatch,
} from "../job.ts";
import { type EncodedPayload, intoBatch, type JobRows, toWaiting } from "./job_rows.ts";
import { assertName, assertQueueName } from "../names.ts";
import { optionBag } from "../option_bags.ts";
import type { JobRegistry } from "../registry.ts";
import {
  FROM_PREVIOUS_OUTPUT,
  type JobWrites,
  type KeyedJobRow,
  type NewJobRow,
  type StoreTransaction,
  type WaitingJobRow,
} from "../stores/store.ts";

/** Where a dispatch stores its jobs: the store, or an open store transaction. */
export type DispatchTarget = Pick<
  StoreTransaction,
  "insertJobs" | "insertKeyed" | "insertChain" | "insertBatch" | "insertFlow"
>;

/** A target that can also add jobs to a batch already stored: the store itself. */
export type StoreTarget = DispatchTarget & Pick<JobWrites, "addToBatch">;

/** Hears of jobs stored as new jobs, with their ids, once they count. */
export type DispatchSink = (rows: readonly NewJobRow[], ids: readonly number[]) => void;

/** A sink that keeps what a transaction stored until it commits. */
export class CommitBuffer {
  readonly #kept: [readonly NewJobRow[], readonly number[]][] = [];

  /** The sink to bind a transaction's dispatch to. */
  readonly sink: DispatchSink = (rows, ids) => {
    this.#kept.push([rows, ids]);
  };

  /** Passes everything kept, in order, to `sink`: call it once the transaction committed. */
  flush(sink: DispatchSink): void {
    for (const [rows, ids] of this.#kept) sink(rows, ids);
  }
}

/** What every dispatch of one queue shares. */
export interface DispatchRules {
  /** Turns jobs and payloads into checked rows. */
  readonly jobRows: JobRows;
  /** The job definitions, for dispatch by name. */
  readonly registry: JobRegistry;
  /** Source of stored times. */
  readonly clock: Clock;
}

/** What one {@linkcode Dispatch} is bound to. */
export interface DispatchBinding<Target extends DispatchTarget> {
  /** Stores the rows. */
  readonly target: Target;
  /** Hears of the jobs stored as new jobs. */
  readonly sink: DispatchSink;
  /**
   * Throws once the queue no longer takes dispatches. Handlers' dispatch
   * passes a check that never throws: a job finishing within the grace
   * period of a closing queue can still dispatch its follow-ups.
   */
  readonly assertOpen: () => void;
  /**
   * Follows each dispatch from its call to its end (a transaction waits for
   * those its callback did not await); the promise it gives back is the one
   * the caller gets, none made from it. Absent: the dispatch's own promise.
   */
  readonly track?: <T>(dispatching: Promise<T>) => Promise<T>;
}

/** Dispatches jobs, chains and batches through one target and one sink. */
export class Dispatch<Target extends DispatchTarget> implements Dispatcher {
  readonly #rules: DispatchRules;
  readonly #target: Target;
  readonly #sink: DispatchSink;
  readonly #assertOpen: () => void;
  readonly #track: <T>(dispatching: Promise<T>) => Promise<T>;

  /** A dispatch through `binding.target` to `binding.sink`. */
  constructor(rules: DispatchRules, binding: DispatchBinding<Target>) {
    this.#rules = rules;
    this.#target = binding.target;
    this.#sink = binding.sink;
    this.#assertOpen = binding.assertOpen;
    this.#track = binding.track ?? ((dispatching) => dispatching);
  }

  /** Stores one job and returns its id (a duplicate's is the id of the job it duplicates). */
  dispatch<J extends JobDefinition>(
    job: J,
    payload: PayloadOf<J>,
    options?: DispatchOptions,
  ): Promise<number> {
    // Followed as the caller gets it: the promise `track` follows must be the caller's own.
    return this.#track(this.#dispatchMany(job, [payload], options).then((ids) => ids[0]!));
  }

  /** Stores many jobs of one kind, all or none, and returns their ids in order. */
  dispatchMany<J extends JobDefinition>(
    job: J,
    payloads: readonly PayloadOf<J>[],
    options?: DispatchOptions,
  ): Promise<number[]> {
    return this.#track(this.#dispatchMany(job, payloads, options));
  }

  async #dispatchMany<J extends JobDefinition>(
    job: J,
    payloads: readonly PayloadOf<J>[],
    options?: DispatchOptions,
  ): Promise<number[]> {
    this.#assertOpen();
    // An encrypted job's payloads are sealed, which awaits; any other job's rows need no wait.
    // (`?.`: a value that is no job at all gets plainRows' error naming it.)
    const rows = job?.encrypted
      ? await this.#rules.jobRows.rows(job, payloads, options)
      : this.#rules.jobRows.plainRows(job, payloads, options);
    return await this.#insert(rows, () => this.#rules.jobRows.keyed(job, payloads, rows));
  }

  /**
   * Stores `rows`, or by their keys when `keyed` gives them (a unique or
   * debounced job), and returns their ids.
   */
  async #insert(
    rows: NewJobRow[],
    keyedRows: () => KeyedJobRow[] | null,
  ): Promise<number[]> {
    if (rows.length === 0) {
      this.#sink(rows, []); // nothing stored, but heard all the same: the queue's sink wakes workers
      return [];
    }
    // A unique or debounced job is stored by its key, which may name a job already stored.
    const keyed = keyedRows();
    if (keyed === null) {
      const ids = await this.#target.insertJobs(rows);
      this.#sink(rows, ids);
      return ids;
    }
    const pushed = await this.#target.insertKeyed(keyed);
    const fresh = pushed.flatMap((push, index) => push.outcome === "stored" ? [index] : []);
    this.#sink(fresh.map((index) => keyed[index]!), fresh.map((index) => pushed[index]!.id));
    return pushed.map((push) => push.id);
  }

  /** Starts a chain stored through this dispatch's target. See {@linkcode ChainBuilder}. */
  chain(options?: ChainOptions): ChainBuilder {
    options = optionBag(options, "chain", CHAIN_OPTIONS) ?? {};
    if (options.queue !== undefined) assertQueueName(options.queue, "chain");
    return new ChainBuilder(
      options,
      async (plan: ChainPlan) => {
        const [first, ...next] = await this.#linkRows(plan.links);
        const onFailure =
          (await this.#plannedRows(plan.onFailure, () => " as the catch of a chain"))
            .map(toWaiting);
        const id = await this.#target.insertChain({
          first: first!,
          next: next.map(toWaiting),
          onFailure,
        });
        this.#sink([first!], [id]);
        return id;
      },
      this.#track,
    );
  }

  /** Starts a flow stored through this dispatch's target. See {@linkcode FlowBuilder}. */
  flow(name: string): FlowBuilder {
    assertName(name, "flow", "name");
    return new FlowBuilder(
      name,
      async (plan: FlowPlan) => {
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
        const inserted = await this.#target.insertFlow({
          name: plan.name,
          createdAt: this.#rules.clock.now(),
          nodes,
          onFailure,
        });
        this.#sink(
          nodes.filter((node) => node.parents.length === 0).map((node) => node.job),
          inserted.jobIds,
        );
        return inserted.id;
      },
      this.#track,
    );
  }

  /** Starts a batch stored through this dispatch's target. See {@linkcode BatchBuilder}. */
  batch(name: string): BatchBuilder {
    assertName(name, "batch", "name");
    return new BatchBuilder(
      name,
      async (plan: BatchPlan) => {
        const jobs = await this.#plannedRows(plan.jobs, () => ` in batch "${plan.name}"`);
        const waiting = async (
          role: string,
          list: readonly PlannedJobs[],
        ): Promise<WaitingJobRow[]> =>
          (await this.#plannedRows(list, () => ` as the ${role} of batch "${plan.name}"`))
            .map(toWaiting);
        const pushed = await this.#target.insertBatch({
          name: plan.name,
          allowFailures: plan.allowFailures,
          createdAt: this.#rules.clock.now(),
          jobs,
          then: await waiting("then", plan.then),
          catch: await waiting("catch", plan.catch),
          finally: await waiting("finally", plan.finally),
        });
        this.#sink(jobs, pushed.jobIds);
        return pushed.id;
      },
      this.#track,
    );
  }

  /** Adds counted jobs to batch `batchId` (`ctx.addToBatch`); returns their ids. */
  async addToBatch(
    this: Dispatch<StoreTarget>,
    batchId: number,
    job: JobDefinition,
    payloads: readonly unknown[],
    options: DispatchOptions | undefined,
  ): Promise<number[]> {
    this.#assertOpen();
    const rows = await this.#rules.jobRows.rows(job, payloads, options, intoBatch(batchId));
    return await this.#addRows(batchId, rows);
  }

  async #addRows(this: Dispatch<StoreTarget>, batchId: number, rows: NewJobRow[]) {
    const ids = await this.#target.addToBatch(batchId, rows);
    this.#sink(rows, ids);
    return ids;
  }

  /**
   * Dispatch from a handler in a Web Worker, which names its job instead of
   * passing it: into batch `batchId`, or on its own when that is null.
   */
  async byName(
    this: Dispatch<StoreTarget>,
    name: string,
    payloads: readonly unknown[],
    options: DispatchOptions | undefined,
    batchId: number | null,
  ): Promise<number[]> {
    const job = this.#rules.registry.get(name);
    if (job === undefined) {
      throw new TypeError(`Cannot dispatch "${name}": no job of that name is registered`);
    }
    return batchId === null
      ? await this.dispatchMany(job, payloads, options)
      : await this.addToBatch(batchId, job, payloads, options);
  }

  /**
   * Dispatch from a handler in a Web Worker, which checked and encoded the
   * payloads with the same job definitions ({@linkcode JobRows.encode}):
   * into batch `batchId`, or on its own when that is null. The rows are
   * sealed here, for an encrypted job.
   */
  encodedByName(
    this: Dispatch<StoreTarget>,
    name: string,
    encoded: readonly EncodedPayload[],
    options: DispatchOptions | undefined,
    batchId: number | null,
  ): Promise<number[]> {
    const job = this.#rules.registry.get(name);
    if (job === undefined) {
      return Promise.reject(
        new TypeError(`Cannot dispatch "${name}": no job of that name is registered`),
      );
    }
    const { jobRows } = this.#rules;
    return this.#track((async () => {
      this.#assertOpen();
      const role = batchId === null ? "" : intoBatch(batchId);
      const rows = await jobRows.sealAll(job, jobRows.encodedRows(job, encoded, options, role));
      return batchId === null
        ? await this.#insert(rows, () => jobRows.encodedKeyed(job, encoded, rows))
        : await this.#addRows(batchId, rows);
    })());
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
      await this.#rules.jobRows.rows(link.job, [], link.options, role); // registered, options valid
      assertTakesPreviousOutput(link.job, links[index - 1]?.job, where);
      const createdAt = this.#rules.clock.now();
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
      rows.push(...await this.#rules.jobRows.rows(job, payloads, options, role(index), flowNodes));
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
