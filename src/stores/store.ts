/**
 * The one interface every storage engine implements. A store owns its SQL;
 * nothing outside a store builds a statement.
 *
 * @module
 */

/** A job to insert, already validated and encoded. */
export interface NewJobRow {
  /** Queue name (validated). */
  readonly queue: string;
  /** Job name. */
  readonly name: string;
  /** Encoded payload text. */
  readonly payload: string;
  /** Higher runs first within a queue. */
  readonly priority: number;
  /** When the job is due, in ms since the epoch. */
  readonly availableAt: number;
  /** Deadline for retries, in ms since the epoch, or null. */
  readonly retryUntil: number | null;
  /** Dispatch time, in ms since the epoch. */
  readonly createdAt: number;
}

/** What makes a dispatch the same job as one already stored. */
export type JobKey =
  | {
    /** While a job holds the key (until it settles, or starts with `releaseOnStart`), no other is stored. */
    readonly kind: "unique";
    /** The job's name and its unique id. */
    readonly key: string;
    /** When the hold ends on its own. */
    readonly expiresAt: number;
    /** Whether the hold ends when the job is claimed rather than when it settles. */
    readonly releaseOnStart: boolean;
  }
  | {
    /** While the job holding the key has not started, a new dispatch replaces its payload and due time. */
    readonly kind: "debounce";
    /** The job's name and its unique id. */
    readonly key: string;
    /** The latest due time, counted from the first dispatch; null for no cap. */
    readonly latestAt: number | null;
  };

/** A job to insert unless its key already names one. */
export interface KeyedJobRow extends NewJobRow {
  /** The key that makes two dispatches the same job. */
  readonly key: JobKey;
}

/** What {@linkcode Store.pushKeyed} did with one row. */
export interface KeyedPush {
  /** The id of the job that now stands for the row. */
  readonly id: number;
  /**
   * `"stored"`: a new job. `"held"`: a unique job holds the key; nothing was
   * stored and `id` is the holder's. `"debounced"`: the waiting job took the
   * row's payload and due time.
   */
  readonly outcome: "stored" | "held" | "debounced";
}

/** The middleware of one claimed job, to check before it starts. */
export interface GuardRequest {
  /** The job's id. */
  readonly id: number;
  /** Its reservation token: the locks it takes are released with its settle. */
  readonly token: number;
  /** Overlap locks to take: fewer than `limit` live holders of `key`, or wait until `retryAt`. */
  readonly locks: readonly {
    readonly key: string;
    readonly limit: number;
    readonly expiresAt: number;
    readonly retryAt: number;
  }[];
  /** Rate limits to count against: fewer than `max` starts in the current window of `perMs`. */
  readonly rates: readonly { readonly key: string; readonly max: number; readonly perMs: number }[];
}

/**
 * A job that waits for another job's outcome (a chain's next link or catch, a
 * batch's callback) and is queued when that outcome is settled. Its delay and
 * retry window count from that moment.
 */
export interface HeldJobRow {
  /** Queue name (validated). */
  readonly queue: string;
  /** Job name. */
  readonly name: string;
  /** Encoded payload text. */
  readonly payload: string;
  /** Higher runs first within a queue. */
  readonly priority: number;
  /** Wait after it is queued before it is due, in ms. */
  readonly delayMs: number;
  /** Retry window from when it is queued, in ms, or null for none. */
  readonly retryForMs: number | null;
}

/** A chain to insert: its first link is queued now, the rest wait. */
export interface NewChainRow {
  /** The first link, queued at once; its id becomes the chain's id. */
  readonly first: NewJobRow;
  /** The later links in order, each queued when the one before succeeds. */
  readonly next: readonly HeldJobRow[];
  /** Queued once, when a link fails for good. */
  readonly onFailure: readonly HeldJobRow[];
}

/** A batch to insert with its jobs and callbacks. */
export interface NewBatchRow {
  /** The batch's name, for people. */
  readonly name: string;
  /** When false, the first failure cancels the batch. */
  readonly allowFailures: boolean;
  /** Dispatch time, in ms since the epoch. */
  readonly createdAt: number;
  /** The batch's jobs, queued at once. */
  readonly jobs: readonly NewJobRow[];
  /** Queued when every job has succeeded, unless the batch was cancelled. */
  readonly then: readonly HeldJobRow[];
  /** Queued at the first job that fails for good. */
  readonly catch: readonly HeldJobRow[];
  /** Queued once nothing in the batch is pending. */
  readonly finally: readonly HeldJobRow[];
}

/** The ids a stored batch got. */
export interface PushedBatch {
  /** The batch's id. */
  readonly id: number;
  /** Its jobs' ids, in order. */
  readonly jobIds: number[];
}

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
}

/**
 * A job's state in a listing, at the listing's `now`: `"pending"` when due
 * (`available_at <= now`, which includes a job whose worker's lease expired),
 * `"delayed"` when not leased and due later, `"running"` when leased with a
 * live lease. The same rule as {@linkcode Store.counts}.
 */
export type JobState = "pending" | "delayed" | "running";

/** Which jobs {@linkcode Store.jobs} lists; a null field matches every job. */
export interface JobFilter {
  /** Only jobs in this state. */
  readonly state: JobState | null;
  /** Only jobs of this queue. */
  readonly queue: string | null;
  /** Only jobs of this name. */
  readonly name: string | null;
}

/** A job not yet finished, as {@linkcode Store.jobs} lists it. */
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

/** A page of {@linkcode Store.jobs}. */
export interface JobListing {
  /** Jobs matching the filter, on every page. */
  readonly total: number;
  /** The page's jobs, in id order. */
  readonly rows: ListedJobRow[];
}

/** What to claim in one statement. */
export interface ClaimRequest {
  /** Queues in the order they are looked at: every job of the first before the second. */
  readonly queues: readonly string[];
  /** How many jobs at most. */
  readonly limit: number;
  /** The current time: jobs due at or before it are taken. */
  readonly now: number;
  /** The lease each claimed job gets, in ms from `now`. */
  readonly leaseMs: number;
  /** The reservation token written on each claimed row; settles must present it. */
  readonly token: number;
}

/** A job as a claim hands it over: leased to the claimer. */
export interface ClaimedJob {
  /** The job's id. */
  readonly id: number;
  /** Queue it was taken from. */
  readonly queue: string;
  /** Job name. */
  readonly name: string;
  /** Stored payload text. */
  readonly payload: string;
  /** Its priority. */
  readonly priority: number;
  /** Starts of the handler, this claim included. */
  readonly attempts: number;
  /** Worker deaths so far, the one this claim recovered from included. */
  readonly crashes: number;
  /** True when this claim took over an expired lease (its last worker died). */
  readonly recovered: boolean;
  /** Deadline for retries, or null. */
  readonly retryUntil: number | null;
  /** The error of the last attempt, or null. */
  readonly lastError: string | null;
  /** Dispatch time. */
  readonly createdAt: number;
  /** The batch it belongs to or follows up, or null. */
  readonly batchId: number | null;
  /** The reservation token that fences this claim's settle. */
  readonly token: number;
}

/** An error as it is stored. */
export interface StoredError {
  /** `Name: message`. */
  readonly message: string;
  /** The stack, when there was one. */
  readonly stack: string | null;
}

/**
 * A write about a claimed job: how its attempt ended, or the progress of an
 * attempt still running. Every kind is fenced by `id` + `token`; `at` is when
 * it happened, the time follow-up jobs are queued at.
 */
export type Settlement =
  | {
    /** The handler succeeded: the job is deleted, its chain or batch moves on. */
    readonly kind: "complete";
    /** The job's id. */
    readonly id: number;
    /** Its reservation token. */
    readonly token: number;
    /** When it ended. */
    readonly at: number;
    /** How long the handler ran, in ms; added to the metrics rollup's runtime. */
    readonly durationMs?: number;
  }
  | {
    /** The handler, still running, reported progress: the job stays leased. */
    readonly kind: "progress";
    /** The job's id. */
    readonly id: number;
    /** Its reservation token. */
    readonly token: number;
    /** When it was reported. */
    readonly at: number;
    /** 0 to 100. */
    readonly percent: number;
  }
  | {
    /** The job goes back to wait until `availableAt`. */
    readonly kind: "release";
    /** The job's id. */
    readonly id: number;
    /** Its reservation token. */
    readonly token: number;
    /** When it ended. */
    readonly at: number;
    /** When it is due again. */
    readonly availableAt: number;
    /** Why, kept as the job's last error, or null. */
    readonly error: string | null;
    /** True when the handler did not really run, so the attempt is given back. */
    readonly refundAttempt: boolean;
    /** True when the attempt ended because its worker died: counts a crash. */
    readonly crashed?: boolean;
    /**
     * How long the handler ran, in ms, when the attempt ran and ended in an
     * error; added to the metrics rollup's runtime.
     */
    readonly durationMs?: number;
  }
  | {
    /** The job fails for good: it moves to the failed jobs. */
    readonly kind: "fail";
    /** The job's id. */
    readonly id: number;
    /** Its reservation token. */
    readonly token: number;
    /** Why. */
    readonly error: StoredError;
    /** Starts of the handler to record. */
    readonly attempts: number;
    /** When it failed. */
    readonly at: number;
    /** True when the attempt ended because its worker died: counts a crash. */
    readonly crashed?: boolean;
    /**
     * How long the handler ran, in ms, when it ran (absent when the job was
     * refused before its start); added to the metrics rollup's runtime.
     */
    readonly durationMs?: number;
  };

/** What {@linkcode Store.settle} did. */
export interface SettleResult {
  /**
   * For each settlement, in order, whether it applied (false: its lease was
   * lost to another claim and nothing changed).
   */
  readonly applied: boolean[];
  /** The jobs claimed after settling, in claim order; empty without a claim request. */
  readonly claimed: ClaimedJob[];
}

/** A lease to renew. */
export interface Lease {
  /** The job's id. */
  readonly id: number;
  /** Its reservation token. */
  readonly token: number;
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

/** The part of a store usable inside {@linkcode Store.transaction}. */
export interface StoreTransaction {
  /** Inserts jobs as part of the transaction; returns their ids in order. */
  push(rows: readonly NewJobRow[]): Promise<number[]>;
  /** Inserts keyed jobs as part of the transaction. */
  pushKeyed(rows: readonly KeyedJobRow[]): Promise<KeyedPush[]>;
  /** Inserts a chain as part of the transaction; returns its id. */
  pushChain(chain: NewChainRow): Promise<number>;
  /** Inserts a batch as part of the transaction. */
  pushBatch(batch: NewBatchRow): Promise<PushedBatch>;
  /**
   * Runs the app's own statement inside the transaction and returns its rows.
   * Parameters use the engine's placeholders (`?` for SQLite).
   */
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
}

/** A storage engine for jobs. */
export interface Store extends AsyncDisposable {
  /** Brings the schema up to date; safe to call from several processes at once. */
  migrate(): Promise<void>;
  /** Inserts jobs in one transaction; returns their ids in order. */
  push(rows: readonly NewJobRow[]): Promise<number[]>;
  /**
   * Inserts unique or debounced jobs in one transaction, each unless its key
   * already names a job that holds it; says what happened to each row.
   */
  pushKeyed(rows: readonly KeyedJobRow[]): Promise<KeyedPush[]>;
  /**
   * Checks the middleware of claimed jobs in one transaction, in order: a job
   * whose every rule passes takes its locks and counts its starts and gets
   * null; another takes nothing and gets the time to try again. Locks are
   * released by the job's settle, whatever its kind, or expire.
   */
  acquire(requests: readonly GuardRequest[], now: number): Promise<(number | null)[]>;
  /** Inserts a chain's first link and its waiting links in one transaction; returns the chain's id. */
  pushChain(chain: NewChainRow): Promise<number>;
  /**
   * Inserts a batch, its jobs and its callbacks in one transaction. A batch
   * without jobs is finished at once and queues its callbacks.
   */
  pushBatch(batch: NewBatchRow): Promise<PushedBatch>;
  /**
   * Adds jobs to a batch that is neither cancelled nor finished, counting
   * them, in one transaction; returns their ids. Rejects naming the reason otherwise.
   */
  addToBatch(batchId: number, rows: readonly NewJobRow[]): Promise<number[]>;
  /** One batch, or null. */
  batch(id: number): Promise<BatchRow | null>;
  /** Batches, newest first. */
  batches(page: Page): Promise<BatchRow[]>;
  /**
   * Cancels a batch that is neither cancelled nor finished: its jobs that are
   * not running are skipped, and its finally callbacks are queued if nothing
   * is left pending. Returns false (changing nothing) otherwise.
   */
  cancelBatch(id: number, now: number): Promise<boolean>;
  /** Deletes batches finished or cancelled before `before`, with their waiting callbacks; how many. */
  pruneBatches(before: number): Promise<number>;
  /** Jobs leased now, with their progress, in id order. */
  running(now: number): Promise<RunningJobRow[]>;
  /** Runs `fn` in one transaction: its pushes and queries commit or roll back together. */
  transaction<T>(fn: (tx: StoreTransaction) => T | Promise<T>): Promise<T>;
  /**
   * Leases up to `limit` due jobs in one statement, in claim order. Each
   * claimed job keeps how long it had been due (`now` less the due time the
   * claim replaced: its dispatch or release time, or the end of a dead
   * worker's lease) until it settles, for the metrics rollup.
   */
  claim(request: ClaimRequest): Promise<ClaimedJob[]>;
  /**
   * Applies settlements in one transaction and, when `then` is given, claims
   * the next jobs in that same transaction (one commit per worker tick).
   *
   * The same transaction adds to the metrics rollup, one upsert per (minute
   * of `at`, queue, name): each applied `complete` counts in `completed`,
   * `fail` in `failed`, and `release` with a non-null `error` and no
   * `refundAttempt` in `retried`. Each of those three that carries
   * `durationMs` adds it to `runtimeMs` and to its bucket
   * ({@linkcode runtimeBucket}), and adds the job's wait (see
   * {@linkcode Store.claim}) to `waitMs`. Progress writes and settlements
   * that did not apply count nowhere. Rows of minutes more than
   * {@linkcode METRICS_RETENTION_MS} before `at` are deleted, at most once a
   * minute (of `at`) per store instance.
   */
  settle(settlements: readonly Settlement[], then?: ClaimRequest): Promise<SettleResult>;
  /** Extends leases to `until`; returns the ids whose lease was lost. */
  renew(leases: readonly Lease[], until: number): Promise<number[]>;
  /** Jobs per queue by state, at `now`. */
  counts(now: number): Promise<QueueCountsRow[]>;
  /**
   * Jobs not yet finished that match `filter` (states as of `now`, see
   * {@linkcode JobState}), in id order, one page of them, with how many match
   * in all.
   */
  jobs(filter: JobFilter, page: Page, now: number): Promise<JobListing>;
  /** The metrics rollup's rows with `since <= minute < until`, by minute, then queue, then name. */
  metrics(since: number, until: number): Promise<MetricsRow[]>;
  /**
   * Writes a worker's row, replacing the one with its id, and deletes the
   * rows of workers last seen before `staleBefore` (those that died
   * without removing theirs).
   */
  heartbeat(worker: WorkerRow, staleBefore: number): Promise<void>;
  /** Deletes a worker's row; whether it was there. */
  removeWorker(id: string): Promise<boolean>;
  /** Workers last seen at or after `seenSince`, earliest started first, then by id. */
  workers(seenSince: number): Promise<WorkerRow[]>;
  /** Failed jobs, newest first. */
  failed(page: Page): Promise<FailedJobRow[]>;
  /** One failed job, or null. */
  failedJob(id: number): Promise<FailedJobRow | null>;
  /**
   * Moves failed jobs back to their queues, due at `now`, with fresh attempts;
   * `"all"` for every one, `{ batchId }` for the failed jobs of one batch.
   * A batch job moved back is pending in its batch again. Returns the ids
   * moved; an id already gone is skipped.
   */
  retry(
    ids: readonly number[] | "all" | { readonly batchId: number },
    now: number,
  ): Promise<number[]>;
  /** Deletes one failed job; whether it existed. A chain it was a link of loses its waiting links. */
  forget(id: number): Promise<boolean>;
  /** Deletes every failed job; how many. */
  flushFailed(): Promise<number>;
  /** Deletes failed jobs that failed before `before`; how many. */
  pruneFailed(before: number): Promise<number>;
  /**
   * Deletes jobs waiting in `queue` (every queue when omitted), leased ones
   * included; batch jobs among them count as skipped, and a batch left with
   * nothing pending finishes at `now`. Returns how many.
   */
  clear(queue: string | undefined, now: number): Promise<number>;
  /**
   * Calls `listener` soon after another connection (maybe another process)
   * may have added or freed jobs, so idle workers look at once instead of at
   * their next poll. Best effort: a store that cannot watch never calls it,
   * and workers keep polling. Dispose the result to stop.
   */
  watch(listener: () => void): Disposable;
  /** Closes the connection; later calls fail. */
  close(): Promise<void>;
}
