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
import { ChainBuilder, type ChainOptions, chainOptions, type ChainPlan } from "../chain.ts";
import type { Clock } from "../clock.ts";
import { FlowBuilder, type FlowPlan } from "../flow.ts";
import type { Dispatcher, DispatchOptions, JobDefinition, PayloadOf } from "../job.ts";
import { type EncodedPayload, intoBatch, type JobRows } from "./job_rows.ts";
import { assertName } from "../names.ts";
import { PlanRows } from "./plan_rows.ts";
import type { JobRegistry } from "../registry.ts";
import type { JobWrites, KeyedJobRow, NewJobRow, StoreTransaction } from "../stores/store.ts";

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
  readonly #plans: PlanRows;
  readonly #target: Target;
  readonly #sink: DispatchSink;
  readonly #assertOpen: () => void;
  readonly #track: <T>(dispatching: Promise<T>) => Promise<T>;

  /** A dispatch through `binding.target` to `binding.sink`. */
  constructor(rules: DispatchRules, binding: DispatchBinding<Target>) {
    this.#rules = rules;
    this.#plans = new PlanRows(rules.jobRows, rules.clock, binding.assertOpen);
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
    const { rows, keyed } = await this.#plans.jobs(job, payloads, options);
    return await this.#insert(rows, keyed);
  }

  /**
   * Stores `rows`, or by their keys when `keyed` gives them (a unique or
   * debounced job), and returns their ids.
   */
  async #insert(rows: NewJobRow[], keyed: KeyedJobRow[] | null): Promise<number[]> {
    if (rows.length === 0) {
      this.#sink(rows, []); // nothing stored, but heard all the same: the queue's sink wakes workers
      return [];
    }
    // A unique or debounced job is stored by its key, which may name a job already stored.
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
    return new ChainBuilder(
      chainOptions(options),
      async (plan: ChainPlan) => {
        const chain = await this.#plans.chain(plan);
        const id = await this.#target.insertChain(chain);
        this.#sink([chain.first], [id]);
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
        const flow = await this.#plans.flow(plan);
        const inserted = await this.#target.insertFlow(flow);
        this.#sink(
          flow.nodes.filter((node) => node.parents.length === 0).map((node) => node.job),
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
        const batch = await this.#plans.batch(plan);
        const pushed = await this.#target.insertBatch(batch);
        this.#sink(batch.jobs, pushed.jobIds);
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
        ? await this.#insert(rows, jobRows.encodedKeyed(job, encoded, rows))
        : await this.#addRows(batchId, rows);
    })());
  }
}
