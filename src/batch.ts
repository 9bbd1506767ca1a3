/**
 * Batches: jobs dispatched together and tracked together, with callbacks
 * queued when the batch succeeds, first fails, or finishes.
 *
 * @module
 */
import { shown } from "./shown.ts";
import type { DispatchOptions, JobDefinition, PayloadOf, PlannedJobs } from "./job.ts";
import type { BatchRow } from "./stores/store.ts";

/** A batch as its builder hands it over to be checked and stored. */
export interface BatchPlan {
  /** The batch's name. */
  readonly name: string;
  /** Its jobs. */
  readonly jobs: readonly PlannedJobs[];
  /** Queued once every job has succeeded. */
  readonly then: readonly PlannedJobs[];
  /** Queued at the first job that fails for good. */
  readonly catch: readonly PlannedJobs[];
  /** Queued once nothing is pending. */
  readonly finally: readonly PlannedJobs[];
  /** Whether a failure leaves the other jobs running. */
  readonly allowFailures: boolean;
}

/**
 * Where a batch stands. `total = pending + failed + skipped + succeeded` at
 * every instant: the counters change in the transaction that settles each job.
 */
export interface BatchStatus {
  /** The batch's id. */
  readonly id: number;
  /** Its name. */
  readonly name: string;
  /** Jobs in the batch, those added by `ctx.addToBatch` included. */
  readonly total: number;
  /** Jobs that have not yet succeeded, failed for good or been skipped. */
  readonly pending: number;
  /** Jobs that succeeded. */
  readonly succeeded: number;
  /** Jobs that failed for good (less any retried since). */
  readonly failed: number;
  /** Jobs removed before they ran, by a cancel or a clear. */
  readonly skipped: number;
  /** Whether a failure leaves the other jobs running. */
  readonly allowFailures: boolean;
  /** Whether it was cancelled, by `cancelBatch` or by a failure without `allowFailures`. */
  readonly cancelled: boolean;
  /** True once nothing is pending (until a retried job makes one pending again). */
  readonly finished: boolean;
  /** When it was dispatched. */
  readonly createdAt: Date;
  /** When it was cancelled, or null. */
  readonly cancelledAt: Date | null;
  /** When it finished, or null. */
  readonly finishedAt: Date | null;
  /** The share of jobs that have run to an end or been skipped, 0 to 100, rounded down. */
  progress(): number;
}

/**
 * Builds a batch: `.push()` adds jobs, `.then()`, `.catch()` and `.finally()`
 * add callback jobs, `.dispatch()` stores it all in one transaction.
 *
 * - `then` jobs are queued once, when every job has succeeded and the batch
 *   was never cancelled (a retried failure that then succeeds counts).
 * - `catch` jobs are queued once, at the first job that fails for good.
 * - `finally` jobs are queued once, the first time nothing is pending,
 *   however it went.
 * - Without `allowFailures()`, the first failure cancels the batch: its jobs
 *   that are not running are skipped (counted, never run).
 *
 * Callback jobs see the batch in `ctx.batchId` without being counted in it.
 *
 * @example An import in three parts, with a report when it is done
 * ```ts
 * import { defineJob, Queue } from "@renox/queue";
 * import { z } from "zod";
 *
 * const importPart = defineJob({ name: "import-part", schema: z.object({ part: z.number() }), handle() {} });
 * const report = defineJob({ name: "report", schema: z.object({ file: z.string() }), async handle(_, ctx) {
 *   const status = await queue.batchStatus(ctx.batchId!);
 *   console.log(`${status!.succeeded} of ${status!.total} parts imported`);
 * } });
 *
 * await using queue = await Queue.open({ path: ":memory:", jobs: [importPart, report] });
 * const id = await queue.batch("import october.csv")
 *   .push(importPart, { part: 1 }).push(importPart, { part: 2 }).push(importPart, { part: 3 })
 *   .finally(report, { file: "october.csv" })
 *   .dispatch();
 * await queue.work({ stopWhenEmpty: true }).done; // 3 of 3 parts imported
 * console.log((await queue.batchStatus(id))!.progress()); // 100
 * ```
 */
export class BatchBuilder {
  readonly #name: string;
  readonly #submit: (plan: BatchPlan) => Promise<number>;
  readonly #track: (dispatching: Promise<number>) => Promise<number>;
  readonly #jobs: PlannedJobs[] = [];
  readonly #callbacks = {
    then: [] as PlannedJobs[],
    catch: [] as PlannedJobs[],
    finally: [] as PlannedJobs[],
  };
  #allowFailures = false;
  #dispatched = false;

  /**
   * Made by `queue.batch()` and `tx.batch()`; `track` gives the promise
   * `dispatch()` returns for the dispatch's own (a transaction follows it).
   * @internal
   */
  constructor(
    name: string,
    submit: (plan: BatchPlan) => Promise<number>,
    track: (dispatching: Promise<number>) => Promise<number> = (dispatching) => dispatching,
  ) {
    this.#name = name;
    this.#track = track;
    this.#submit = submit;
  }

  /** Adds one job to the batch. */
  push<J extends JobDefinition>(job: J, payload: PayloadOf<J>, options?: DispatchOptions): this {
    return this.pushMany(job, [payload], options);
  }

  /** Adds one job per payload to the batch. */
  pushMany<J extends JobDefinition>(
    job: J,
    payloads: readonly PayloadOf<J>[],
    options?: DispatchOptions,
  ): this {
    if (!Array.isArray(payloads)) {
      throw new TypeError(`batch.pushMany: payloads must be an array: got ${typeof payloads}`);
    }
    this.#jobs.push({ job, payloads, options });
    return this;
  }

  /** Adds a job queued once every job of the batch has succeeded. */
  then<J extends JobDefinition>(job: J, payload: PayloadOf<J>, options?: DispatchOptions): this {
    return this.#callback("then", job, payload, options);
  }

  /** Adds a job queued at the first job of the batch that fails for good. */
  catch<J extends JobDefinition>(job: J, payload: PayloadOf<J>, options?: DispatchOptions): this {
    return this.#callback("catch", job, payload, options);
  }

  /** Adds a job queued once nothing in the batch is pending, however it went. */
  finally<J extends JobDefinition>(job: J, payload: PayloadOf<J>, options?: DispatchOptions): this {
    return this.#callback("finally", job, payload, options);
  }

  /** Lets the other jobs run when one fails for good, instead of cancelling the batch. */
  allowFailures(allow = true): this {
    if (typeof allow !== "boolean") {
      throw new TypeError(`batch.allowFailures: allow must be a boolean: got ${shown(allow)}`);
    }
    this.#allowFailures = allow;
    return this;
  }

  /**
   * Checks every payload, then stores the batch, its jobs and its callbacks
   * in one transaction and returns the batch's id. Nothing is stored if any
   * payload is refused. A batch with no jobs finishes at once: its `then` and
   * `finally` jobs are queued.
   */
  dispatch(): Promise<number> {
    return this.#track(this.#dispatch());
  }

  async #dispatch(): Promise<number> {
    if (this.#dispatched) {
      throw new Error(
        `Batch "${this.#name}" was already dispatched: build a new one with queue.batch()`,
      );
    }
    this.#dispatched = true; // before the await: a second call meanwhile must not store a copy
    try {
      return await this.#submit({
        name: this.#name,
        jobs: this.#jobs,
        ...this.#callbacks,
        allowFailures: this.#allowFailures,
      });
    } catch (error) {
      this.#dispatched = false; // nothing was stored
      throw error;
    }
  }

  #callback(
    role: "then" | "catch" | "finally",
    job: JobDefinition,
    payload: unknown,
    options: DispatchOptions | undefined,
  ): this {
    if (typeof job === "function") {
      // `await batch` would call then(resolve, reject): say what happened instead of storing it.
      throw new TypeError(
        `batch.${role}(job, payload) takes a job definition, not a callback: a batch is not a promise, await batch.dispatch()`,
      );
    }
    this.#callbacks[role].push({ job, payloads: [payload], options });
    return this;
  }
}

/** Maps a stored batch to what the API returns. */
export function toBatchStatus(row: BatchRow): BatchStatus {
  const succeeded = row.total - row.pending - row.failed - row.skipped;
  return {
    id: row.id,
    name: row.name,
    total: row.total,
    pending: row.pending,
    succeeded,
    failed: row.failed,
    skipped: row.skipped,
    allowFailures: row.allowFailures,
    cancelled: row.cancelledAt !== null,
    finished: row.finishedAt !== null,
    createdAt: new Date(row.createdAt),
    cancelledAt: row.cancelledAt === null ? null : new Date(row.cancelledAt),
    finishedAt: row.finishedAt === null ? null : new Date(row.finishedAt),
    progress: () =>
      row.total === 0 ? 100 : Math.floor(((row.total - row.pending) / row.total) * 100),
  };
}

/**
 * What a progress bar shows for a batch: the share of its jobs that ran to an
 * end (succeeded or failed), 0 to 100, rounded down. Unlike `progress()`, a
 * skipped job does not count, so a batch cancelled before any job ran shows
 * 0 %, not a full bar.
 */
export function ranShare(batch: Pick<BatchStatus, "total" | "succeeded" | "failed">): number {
  if (batch.total === 0) return 100;
  return Math.floor(((batch.succeeded + batch.failed) / batch.total) * 100);
}
