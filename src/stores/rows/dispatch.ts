/**
 * The rows a dispatch hands a store: new jobs, keyed jobs, chains and
 * batches with the follow-ups that wait for them, and what the store says
 * it did with them.
 *
 * @module
 */

/**
 * The group a job belongs to (`defineJob({ group })`), with its
 * definition's settings as they were at dispatch.
 */
export interface JobGroup {
  /** The group key: 1 to 255 characters. A group is its queue, job name and key. */
  readonly key: string;
  /** Most jobs of the group leased at once, or null for no limit. */
  readonly limit: number | null;
  /** Whether the group's jobs run one at a time in dispatch order (with `limit` 1). */
  readonly ordered: boolean;
}

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
  /**
   * When it expires if not started by then, in ms since the epoch; null or
   * absent: never. Moved onto the store's clock as `availableAt` is.
   */
  readonly expireAt?: number | null;
  /** Dispatch time, in ms since the epoch. */
  readonly createdAt: number;
  /**
   * The W3C `traceparent` active at dispatch, which each attempt's span is
   * parented to; null (or absent) outside a trace.
   */
  readonly trace?: string | null;
  /** Its group (`defineJob({ group })`); null or absent: none. */
  readonly group?: JobGroup | null;
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

/** What `Store.insertKeyed` did with one row. */
export interface KeyedInsert {
  /** The id of the job that now stands for the row. */
  readonly id: number;
  /**
   * `"stored"`: a new job. `"duplicate"`: a unique job holds the key; nothing was
   * stored and `id` is the holder's. `"debounced"`: the waiting job took the
   * row's payload and due time.
   */
  readonly outcome: "stored" | "duplicate" | "debounced";
}

/**
 * A job that waits for another job's outcome (a chain's next link or catch, a
 * batch's callback) and is queued when that outcome is settled. Its delay and
 * retry window count from that moment.
 */
export interface WaitingJobRow {
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
  /** How long after it is queued it expires unless started, in ms; null or absent: never. */
  readonly expireInMs?: number | null;
  /** The W3C `traceparent` active at dispatch, or null (or absent). */
  readonly trace?: string | null;
}

/**
 * The stored payload of a chain link that takes the previous link's output
 * as its payload; the settle of that link puts the output in its place.
 * Neither JSON nor an encrypted payload, so no real payload is ever taken for it.
 */
export const FROM_PREVIOUS_OUTPUT = "<previous output>";

/** A chain to insert: its first link is queued now, the rest wait. */
export interface NewChainRow {
  /** The first link, queued at once; its id becomes the chain's id. */
  readonly first: NewJobRow;
  /** The later links in order, each queued when the one before succeeds. */
  readonly next: readonly WaitingJobRow[];
  /** Queued once, when a link fails for good. */
  readonly onFailure: readonly WaitingJobRow[];
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
  readonly then: readonly WaitingJobRow[];
  /** Queued at the first job that fails for good. */
  readonly catch: readonly WaitingJobRow[];
  /** Queued once nothing in the batch is pending. */
  readonly finally: readonly WaitingJobRow[];
}

/** The ids a stored batch got. */
export interface InsertedBatch {
  /** The batch's id. */
  readonly id: number;
  /** Its jobs' ids, in order. */
  readonly jobIds: number[];
}
