/**
 * What a store reads back for people: batches, running, listed and failed
 * jobs, counts per queue, the metrics rollup and the workers seen. The
 * public read models (`FailedJob`, `RunningJob`, `ListedJob`, `WorkerInfo`)
 * are what a store returns: each is mapped once, from its stored row.
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

/** A job running now. */
export interface RunningJob {
  /** The job's id. */
  readonly id: number;
  /** The job's name. */
  readonly name: string;
  /** The attempt running: 1 for the first start of the handler. */
  readonly attempt: number;
  /** What its handler last reported through `ctx.progress()`, 0 to 100, or null. */
  readonly progress: number | null;
  /** When its lease ends unless its worker renews it. */
  readonly leasedUntil: Date;
  /** Its batch, or null. */
  readonly batchId: number | null;
}

/** A job running now, with the queue it was taken from, as `Store.running` lists it. */
export interface RunningJobOnQueue extends RunningJob {
  /** Queue it was taken from. */
  readonly queue: string;
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

/**
 * The "minute" of the metrics rollup's carried totals: the rows a prune
 * deletes are added to the row of this minute (per queue and job name), so
 * the rollup's totals never fall. The last minute a `Date` can hold, which
 * no settle reaches, and which code of earlier versions (whose prunes delete
 * every minute before a cutoff, and whose reads look at a window up to now)
 * never deletes nor reads.
 */
export const METRICS_CARRIED_MINUTE = 8_640_000_000_000_000;

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
  /** Jobs that expired before they started (`expireInMs`). */
  readonly expired: number;
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

/** What rollup rows add up to: {@linkcode MetricsRow}'s counts, its runtime buckets as `buckets`. */
export interface MetricsTotals {
  /** Attempts that succeeded. */
  completed: number;
  /** Jobs that failed for good. */
  failed: number;
  /** Attempts that ended in an error and were released for a retry. */
  retried: number;
  /** Jobs that expired before they started. */
  expired: number;
  /** Total runtime of the timed attempts, in ms. */
  runtimeMs: number;
  /** Total wait of the same attempts, in ms. */
  waitMs: number;
  /** Runs per runtime bucket, in the order of {@linkcode RUNTIME_BUCKETS_MS}. */
  readonly buckets: number[];
}

/** Totals of no row: every count 0, one bucket per runtime bucket and one for longer runs. */
export function emptyMetricsTotals(): MetricsTotals {
  const buckets = Array<number>(RUNTIME_BUCKETS_MS.length + 1).fill(0);
  return { completed: 0, failed: 0, retried: 0, expired: 0, runtimeMs: 0, waitMs: 0, buckets };
}

/** Adds rollup row `row`'s counts to `totals`. */
export function addMetricsRow(totals: MetricsTotals, row: MetricsRow): void {
  totals.completed += row.completed;
  totals.failed += row.failed;
  totals.retried += row.retried;
  totals.expired += row.expired;
  totals.runtimeMs += row.runtimeMs;
  totals.waitMs += row.waitMs;
  row.runtimeBuckets.forEach((count, index) =>
    totals.buckets[index] = (totals.buckets[index] ?? 0) + count
  );
}

/** What a worker writes at each heartbeat: {@linkcode WorkerInfo} with times in ms since the epoch. */
export interface WorkerHeartbeat
  extends Omit<WorkerInfo, "startedAt" | "lastSeenAt" | "schemaStep"> {
  /** When it started, in ms since the epoch. */
  readonly startedAt: number;
  /** Now, in ms since the epoch. */
  readonly lastSeenAt: number;
}

/** A worker, in this process or another, as its last heartbeat described it. */
export interface WorkerInfo {
  /** A random id, unique per worker. */
  readonly id: string;
  /** The machine it runs on, or `"unknown"` where the process may not read its name. */
  readonly host: string;
  /** Its process id. */
  readonly pid: number;
  /** The queues it claims from, in order. */
  readonly queues: readonly string[];
  /** Jobs it runs at once at most. */
  readonly concurrency: number;
  /** When it started. */
  readonly startedAt: Date;
  /** Its last heartbeat. */
  readonly lastSeenAt: Date;
  /** Jobs it was running at its last heartbeat. */
  readonly running: number;
  /** The job names its process has definitions for: the only jobs it claims. */
  readonly names: readonly string[];
  /**
   * The schema step its code was built for (docs/upgrading.md); null for
   * code older than step 18, which did not record it.
   */
  readonly schemaStep: number | null;
}

/**
 * A job's state in a listing, at the listing's `now`: `"pending"` when due
 * (`available_at <= now`, which includes a job whose worker's lease expired)
 * or claimed ahead (leased by a worker that has not started it), `"delayed"`
 * when not leased and due later, `"running"` when leased with a live lease
 * and started. The same rule as `Store.counts`.
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

/** A job that has not finished. */
export interface ListedJob {
  /** The job's id. */
  readonly id: number;
  /** The queue it is on. */
  readonly queue: string;
  /** The job's name. */
  readonly name: string;
  /** Its state now. */
  readonly state: JobState;
  /** Higher runs first within its queue. */
  readonly priority: number;
  /** Starts of its handler so far, the running one included. */
  readonly attempts: number;
  /** When it is due; for a running job, when its lease ends unless renewed. */
  readonly availableAt: Date;
  /** When it was dispatched. */
  readonly createdAt: Date;
  /** For a running job, what its handler last reported through `ctx.progress()`; else null. */
  readonly progress: number | null;
  /** The batch it belongs to or follows up, or null. */
  readonly batchId: number | null;
  /** The error of its last attempt, or why it was put back, or null. */
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

/** A page of `Queue.jobs` (and of `Store.jobs`). */
export interface JobList {
  /** Jobs matching the filter, on every page. */
  readonly total: number;
  /** This page's jobs, in id order (dispatch order). */
  readonly jobs: ListedJob[];
}

/** A job that failed for good. */
export interface FailedJob {
  /** The job's id, kept from when it was queued; `retry(id)` brings it back under it. */
  readonly id: number;
  /** The queue it ran on. */
  readonly queue: string;
  /** The job's name. */
  readonly name: string;
  /** The stored payload text (still encrypted if it was). */
  readonly payload: string;
  /** Why it failed: `ErrorName: message`. */
  readonly error: string;
  /** The error's stack, when there was one. */
  readonly stack: string | null;
  /** How many times its handler started. */
  readonly attempts: number;
  /** How many times its worker died while running it. */
  readonly crashes: number;
  /** When it was first dispatched. */
  readonly createdAt: Date;
  /** When it failed. */
  readonly failedAt: Date;
  /** The batch it belongs to or follows up, or null. */
  readonly batchId: number | null;
  /** The chain it is a link of, or null; retrying it resumes the chain. */
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
