/**
 * What a store reads back for people: batches, running, listed and failed
 * jobs, counts per queue, the metrics rollup and the workers seen.
 *
 * @module
 */

/** A batch as a store reads it. `total = pending + failed + skipped + succeeded`. */
export interface BatchRow {
  /** The batch's id. */
  readonly id: number;
  /** Its name. */
  readonly name: string;
  /** Jobs in the batch. */
  readonly total: number;
  /** Jobs that have not succeeded, failed for good or been skipped. */
  readonly pending: number;
  /** Jobs in the failed jobs. */
  readonly failed: number;
  /** Jobs removed unrun by a cancel or a clear. */
  readonly skipped: number;
  /** Whether failures leave the batch running. */
  readonly allowFailures: boolean;
  /** Dispatch time. */
  readonly createdAt: number;
  /** When it was cancelled, or null. */
  readonly cancelledAt: number | null;
  /** When nothing was pending any more, or null. */
  readonly finishedAt: number | null;
}

/** A leased job, as a store lists it. */
export interface RunningJobRow {
  /** The job's id. */
  readonly id: number;
  /** Queue it was taken from. */
  readonly queue: string;
  /** Job name. */
  readonly name: string;
  /** Starts of the handler, this one included. */
  readonly attempts: number;
  /** Progress its handler last reported, 0 to 100, or null. */
  readonly progress: number | null;
  /** When its lease ends unless renewed. */
  readonly leasedUntil: number;
  /** Its batch, or null. */
  readonly batchId: number | null;
}

/**
 * Upper bounds, in ms, of the buckets of the metrics rollup's runtime
 * histogram, a 1-2-5 log scale. A run falls in the first bucket whose bound
 * it does not exceed; one more bucket, after these, holds longer runs. Every
 * store uses these bounds, so a p95 read from any of them means the same.
 */
export const RUNTIME_BUCKETS_MS: readonly number[] = Object.freeze([
  1,
  2,
  5,
  10,
  20,
  50,
  100,
  200,
  500,
  1_000,
  2_000,
  5_000,
  10_000,
  20_000,
  60_000,
  300_000,
]);

/**
 * The index of the runtime histogram bucket a run of `durationMs` falls in:
 * the first `i` with `durationMs <= RUNTIME_BUCKETS_MS[i]`, else
 * `RUNTIME_BUCKETS_MS.length` (the bucket of longer runs).
 */
export function runtimeBucket(durationMs: number): number {
  const index = RUNTIME_BUCKETS_MS.findIndex((bound) => durationMs <= bound);
  return index === -1 ? RUNTIME_BUCKETS_MS.length : index;
}

/** How long metrics rows are kept: rows of minutes older than this before a settle are pruned. */
export const METRICS_RETENTION_MS = 7 * 24 * 60 * 60 * 1_000;

/** One row of the metrics rollup: what settled in one minute, for one job name on one queue. */
export interface MetricsRow {
  /** The minute's start, in ms since the epoch (a multiple of 60,000). */
  readonly minute: number;
  /** Queue name. */
  readonly queue: string;
  /** Job name. */
  readonly name: string;
  /** Attempts that succeeded. */
  readonly completed: number;
  /** Jobs that failed for good. */
  readonly failed: number;
  /** Attempts that ended in an error and were released for a retry. */
  readonly retried: number;
  /** Total runtime of the attempts that carried `durationMs`, in ms. */
  readonly runtimeMs: number;
  /** Total wait of the same attempts: due time to claim, in ms. */
  readonly waitMs: number;
  /**
   * Runs per runtime bucket: `RUNTIME_BUCKETS_MS.length + 1` counts, in the
   * order of {@linkcode RUNTIME_BUCKETS_MS}, the longer runs last. Their sum
   * is the number of attempts that carried `durationMs`.
   */
  readonly runtimeBuckets: readonly number[];
}

/** A worker as it records itself. */
export interface WorkerRow {
  /** A random id, unique per worker (a process may run several). */
  readonly id: string;
  /** The machine's host name, or `"unknown"`. */
  readonly host: string;
  /** The process id. */
  readonly pid: number;
  /** The queues it claims from, in order. */
  readonly queues: readonly string[];
  /** Jobs it runs at once at most. */
  readonly concurrency: number;
  /** When it started, in ms since the epoch. */
  readonly startedAt: number;
  /** When it last wrote this row, in ms since the epoch. */
  readonly lastSeenAt: number;
  /** Jobs it was running then. */
  readonly running: number;
  /** The job names its process has definitions for: the only jobs it claims. */
  readonly names: readonly string[];
}

/**
 * A job's state in a listing, at the listing's `now`: `"pending"` when due
 * (`available_at <= now`, which includes a job whose worker's lease expired),
 * `"delayed"` when not leased and due later, `"running"` when leased with a
 * live lease. The same rule as `Store.counts`.
 */
export type JobState = "pending" | "delayed" | "running";

/** Which jobs `Store.jobs` lists; a null field matches every job. */
export interface JobFilter {
  /** Only jobs in this state. */
  readonly state: JobState | null;
  /** Only jobs of this queue. */
  readonly queue: string | null;
  /** Only jobs of this name. */
  readonly name: string | null;
}

/** A job not yet finished, as `Store.jobs` lists it. */
export interface ListedJobRow {
  /** The job's id. */
  readonly id: number;
  /** Queue name. */
  readonly queue: string;
  /** Job name. */
  readonly name: string;
  /** Its state at the listing's `now`. */
  readonly state: JobState;
  /** Higher runs first within a queue. */
  readonly priority: number;
  /** Starts of the handler so far (the running one included). */
  readonly attempts: number;
  /** When it is due; for a running job, when its lease ends. */
  readonly availableAt: number;
  /** Dispatch time. */
  readonly createdAt: number;
  /** Progress its handler last reported in the running attempt, 0 to 100, or null. */
  readonly progress: number | null;
  /** The batch it belongs to or follows up, or null. */
  readonly batchId: number | null;
  /** The error of its last attempt (or why it was put back), or null. */
  readonly lastError: string | null;
}

/** How many due jobs of one name wait in one queue. */
export interface PendingByName {
  /** Queue name. */
  readonly queue: string;
  /** Job name. */
  readonly name: string;
  /** Due now and waiting (including jobs whose worker died). */
  readonly pending: number;
}

/** A page of `Store.jobs`. */
export interface JobListing {
  /** Jobs matching the filter, on every page. */
  readonly total: number;
  /** The page's jobs, in id order. */
  readonly rows: ListedJobRow[];
}

/** A job that failed for good, as a store lists it. */
export interface FailedJobRow {
  /** The job's id (kept from when it was queued). */
  readonly id: number;
  /** Queue it ran on. */
  readonly queue: string;
  /** Job name. */
  readonly name: string;
  /** Stored payload text. */
  readonly payload: string;
  /** Why it failed. */
  readonly error: string;
  /** Stack of the error, or null. */
  readonly stack: string | null;
  /** Starts of the handler. */
  readonly attempts: number;
  /** Worker deaths while running it. */
  readonly crashes: number;
  /** Dispatch time. */
  readonly createdAt: number;
  /** When it failed. */
  readonly failedAt: number;
  /** The batch it belongs to or follows up, or null. */
  readonly batchId: number | null;
  /** The chain it is a link of, or null. */
  readonly chainId: number | null;
}

/** Jobs in one queue by state. */
export interface QueueCountsRow {
  /** Queue name. */
  readonly queue: string;
  /** Due now and waiting. */
  readonly pending: number;
  /** Waiting for a later time. */
  readonly delayed: number;
  /** Leased to a worker. */
  readonly reserved: number;
  /** In the failed jobs. */
  readonly failed: number;
}

/** A slice of a listing. */
export interface Page {
  /** Rows at most. */
  readonly limit: number;
  /** Rows to skip. */
  readonly offset: number;
}
