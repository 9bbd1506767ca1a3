/**
 * Looking after failed jobs: list them, retry them, forget them, prune
 * them. A retry wakes the queue's workers, since the jobs it moves back are
 * due now.
 *
 * @internal
 * @module
 */
import type { Clock } from "../clock.ts";
import type { AdminStore } from "../stores/store.ts";
import {
  assertId,
  cutoff,
  type FailedJob,
  type ListOptions,
  page,
  type PruneOptions,
} from "./listing.ts";

/** What failed-job and batch admin reads, writes and wakes. */
export interface FailedJobsParts {
  /** Where failed jobs and batches are kept. */
  readonly store: AdminStore;
  /** Source of the time retries and prunes are written at. */
  readonly clock: Clock;
  /** Wakes the queue's workers: jobs may be due now. */
  readonly notify: () => void;
}

/** The failed jobs of one queue. */
export class FailedJobs {
  readonly #parts: FailedJobsParts;

  /** Failed-job admin on `parts`. */
  constructor(parts: FailedJobsParts) {
    this.#parts = parts;
  }

  /** A page of failed jobs, newest first. */
  async list(options: ListOptions): Promise<FailedJob[]> {
    return await this.#parts.store.failed(page(options, "failed"));
  }

  /** One failed job, or null. */
  one(id: number): Promise<FailedJob | null> {
    return this.#parts.store.failedJob(assertId(id));
  }

  /** Moves failed jobs back to be run: `ids`, every one, or a batch's; resolves with how many. */
  async retry(which: readonly number[] | "all" | { readonly batchId: number }): Promise<number> {
    const moved = await this.#parts.store.retry(which, this.#parts.clock.now());
    this.#parts.notify();
    return moved.length;
  }

  /** Deletes one failed job; false when there was none. */
  forget(id: number): Promise<boolean> {
    return this.#parts.store.forget(assertId(id));
  }

  /** Deletes every failed job; resolves with how many. */
  flush(): Promise<number> {
    return this.#parts.store.flushFailed();
  }

  /** Deletes failed jobs older than `options.olderThanMs`; resolves with how many. */
  prune(options: PruneOptions): Promise<number> {
    const now = this.#parts.clock.now();
    return this.#parts.store.pruneFailed(cutoff(now, options, "pruneFailed"), now);
  }
}
