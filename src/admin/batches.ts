/**
 * Looking after batches: read one's status, list them, cancel one, retry
 * its failed jobs, prune finished ones. What may be due after a change
 * wakes the queue's workers.
 *
 * @internal
 * @module
 */
import { type BatchStatus, toBatchStatus } from "../batch.ts";
import { assertId, cutoff, type ListOptions, page, type PruneOptions } from "./listing.ts";
import type { FailedJobs, FailedJobsParts } from "./failed_jobs.ts";

/** The batches of one queue. */
export class Batches {
  readonly #parts: FailedJobsParts;
  readonly #failedJobs: FailedJobs;

  /** Batch admin on `parts`, retrying through `failedJobs`. */
  constructor(parts: FailedJobsParts, failedJobs: FailedJobs) {
    this.#parts = parts;
    this.#failedJobs = failedJobs;
  }

  /** One batch's status, or null. */
  async status(id: number): Promise<BatchStatus | null> {
    const row = await this.#parts.store.batch(assertId(id, "A batch id"));
    return row === null ? null : toBatchStatus(row);
  }

  /** A page of batches, newest first. */
  async list(options: ListOptions): Promise<BatchStatus[]> {
    return (await this.#parts.store.batches(page(options, "batches"))).map(toBatchStatus);
  }

  /** Cancels a batch's jobs that have not started; false when it was not running. */
  async cancel(id: number): Promise<boolean> {
    const store = this.#parts.store;
    const cancelled = await store.cancelBatch(assertId(id, "A batch id"), this.#parts.clock.now());
    this.#parts.notify(); // its finally jobs may be due now
    return cancelled;
  }

  /** Retries a batch's failed jobs; resolves with how many. */
  retry(id: number): Promise<number> {
    return this.#failedJobs.retry({ batchId: assertId(id, "A batch id") });
  }

  /** Deletes batches that ended more than `options.olderThanMs` ago; resolves with how many. */
  prune(options: PruneOptions): Promise<number> {
    const now = this.#parts.clock.now();
    return this.#parts.store.pruneBatches(cutoff(now, options, "pruneBatches"), now);
  }
}
