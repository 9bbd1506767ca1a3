/**
 * What the queue's admin calls take and return: jobs by state, running and
 * failed jobs as the API shows them, listing and pruning options, with the
 * checks of those options and the mapping from store rows.
 *
 * @module
 */
import { optionBag, optionNames } from "../option_bags.ts";
import { shown } from "../shown.ts";
import type { Page, RunningJob } from "../stores/store.ts";

export type { FailedJob, RunningJob } from "../stores/store.ts";

/** Jobs in one queue by state. */
export interface QueueCounts {
  /**
   * Due now and waiting: jobs whose worker died, and jobs a worker claimed
   * ahead and has not started, included.
   */
  readonly pending: number;
  /** Waiting for a later time. */
  readonly delayed: number;
  /** Running: leased to a worker that started them. */
  readonly reserved: number;
  /** Failed for good. */
  readonly failed: number;
  /** The jobs counted in `reserved` whose lease is live, with the progress they reported. */
  readonly running: RunningJob[];
}

/** Options for `Queue.failed` and `Queue.batches`. */
export interface ListOptions {
  /**
   * Rows at most, 1 to 1000.
   * @default {100}
   */
  limit?: number;
  /**
   * Rows to skip.
   * @default {0}
   */
  offset?: number;
}

/** Options for `Queue.pruneFailed`, `Queue.pruneFinished`, `Queue.pruneBatches` and `Queue.pruneFlows`. */
export interface PruneOptions {
  /** Delete what ended longer ago than this. */
  olderThanMs: number;
}

/** Throws a `RangeError` unless `id` is a positive integer; `what` names it (`A batch id`). */
export function assertId(id: number, what = "A job id"): number {
  if (!Number.isSafeInteger(id) || id < 1) {
    throw new RangeError(
      `${what} must be a positive integer: got ${shown(id)}`,
    );
  }
  return id;
}

/** The options of a listing without filters. */
const LIST_OPTIONS = optionNames<ListOptions>()(["limit", "offset"]);

/**
 * Checks {@linkcode ListOptions} and fills in their defaults; `method`
 * starts each error. `known` lists every option the call takes (its
 * filters too): any other is refused by name, so a misspelt filter does not
 * list every job.
 */
export function page(
  options: ListOptions | null | undefined,
  method: string,
  known: readonly string[] = LIST_OPTIONS,
): Page {
  const bag = optionBag(options, method, known);
  const limit = bag?.limit ?? 100;
  const offset = bag?.offset ?? 0;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new RangeError(`${method}: limit must be an integer from 1 to 1000: got ${shown(limit)}`);
  }
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new RangeError(`${method}: offset must be an integer >= 0: got ${shown(offset)}`);
  }
  return { limit, offset };
}

/** The options of a prune. */
const PRUNE_OPTIONS = optionNames<PruneOptions>()(["olderThanMs"]);

/**
 * The time before which {@linkcode PruneOptions} prune: a whole ms, and
 * never before the epoch (nothing is stored before it), so that an
 * `olderThanMs` of any size reads the same on every store. Any other option
 * is refused by name: a prune takes no filter, and one that looked like it
 * did (`queue`) would delete the rows of every queue.
 */
export function cutoff(now: number, options: PruneOptions | undefined, method: string): number {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new TypeError(
      `${method}: options with olderThanMs are required, e.g. { olderThanMs: 86_400_000 }`,
    );
  }
  optionBag(options, method, PRUNE_OPTIONS);
  const { olderThanMs } = options;
  if (typeof olderThanMs !== "number" || !Number.isFinite(olderThanMs) || olderThanMs < 0) {
    throw new RangeError(
      `${method}: olderThanMs must be a finite number >= 0: got ${shown(olderThanMs)}`,
    );
  }
  return Math.max(0, Math.floor(now - olderThanMs));
}
