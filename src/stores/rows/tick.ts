/**
 * The rows of a worker's tick: what to claim, a job as a claim hands it
 * over, the middleware to check before it starts, and how each attempt
 * ended (its settlement).
 *
 * @module
 */

import type { ScheduleFiring } from "./schedules.ts";
import type { SpendLimits } from "./spend_limits.ts";
import type { StepWrite } from "./steps.ts";

/** The middleware of one claimed job, to check before it starts. */
export interface MiddlewareRequest {
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
 * A group rate limit (`defineJob({ groupRate })`, and a claim request's
 * `groupRates`): at most `max` claims of one group per window of `perMs` ms.
 */
export interface GroupRate {
  /** Most claims of one group per window: a whole number >= 1. */
  readonly max: number;
  /** The window's length in ms: a whole number >= 1. Windows start at multiples of it. */
  readonly perMs: number;
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
  /**
   * Only jobs of these names: the ones the claiming process can run, so a
   * job waits for a worker that knows it. Every name when absent.
   */
  readonly names?: readonly string[];
  /**
   * Each job name's group rate limit (`defineJob({ groupRate })`): a group
   * of such a name (its queue, name and key) is claimed at most `max` times
   * per window of `perMs` ms on the store's clock (windows start at
   * multiples of `perMs`); a group over it is passed over until its window
   * turns. The count is kept in the store, under a key of the group that
   * no `rateLimited` key can be (U+0001 first: docs/groups.md). A name absent
   * here has no limit.
   */
  readonly groupRates?: Readonly<Record<string, GroupRate>>;
  /**
   * Fire the schedules' due slots first, in the same transaction, building
   * their jobs with this; no firing when absent. With `limit` 0 the request
   * only fires.
   */
  readonly schedules?: ScheduleFiring;
  /** Look up which claimed jobs a schedule fired, for their `scheduled`. */
  readonly readsScheduled?: boolean;
  /**
   * When set, the jobs past the first `aheadFrom` in claim order are held
   * ahead: leased, not started, each marked {@linkcode ClaimedJob.ahead},
   * to start only once a settle confirms it (`TickRecords.starts`). Only
   * the first `aheadFrom` may be batch jobs: the claim stops before the
   * first batch job past them (a batch job is to wait unleased until it can
   * start, so that a cancel of its batch skips it). Absent: every job
   * claimed starts now, and no such stop.
   */
  readonly aheadFrom?: number;
  /**
   * With `aheadFrom`, each job name's `maxAttempts` and `maxCrashes`: a
   * batch job past the first `aheadFrom` that has spent them is not given
   * back (it fails without starting, so holding it costs nothing). A name
   * absent here has no such exception.
   */
  readonly spendLimits?: Readonly<Record<string, SpendLimits>>;
  /**
   * The names of jobs whose middleware the claiming worker checks before it
   * starts them ({@linkcode Store.acquire}): a job of these names that the
   * claim starts keeps a unique key held until processing until `acquire`
   * lets it start, so a job the middleware holds back keeps it. Absent:
   * the claim releases those keys of every job it starts.
   */
  readonly checkedNames?: readonly string[];
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
  /**
   * True when this claim took over an expired lease whose worker died with
   * the job's handler begun (and so charged it a crash); false for a job its
   * dead worker held ahead or had not recorded as begun.
   */
  readonly recovered: boolean;
  /** Deadline for retries, or null. */
  readonly retryUntil: number | null;
  /**
   * When it expires unless started (on the store's clock, as stored at
   * dispatch), or null or absent for never.
   */
  readonly expireAt?: number | null;
  /** The error of the last attempt, or null. */
  readonly lastError: string | null;
  /** Dispatch time. */
  readonly createdAt: number;
  /** The batch it belongs to or follows up, or null. */
  readonly batchId: number | null;
  /** The reservation token that fences this claim's settle. */
  readonly token: number;
  /** The schedule and slot (ms since the epoch) it was fired for, when a schedule fired it. */
  readonly scheduled?: { readonly name: string; readonly slot: number };
  /** The reason of a cancel asked while it ran before: it is cancelled, not run. Null or absent: none. */
  readonly cancelRequested?: string | null;
  /** How long it had been due when claimed, in ms. */
  readonly waitedMs?: number;
  /** The W3C `traceparent` active when it was dispatched, or null. */
  readonly trace?: string | null;
  /** The `traceparent` of the span of its last attempt that was retried, or null. */
  readonly lastSpan?: string | null;
  /**
   * True when it was claimed ahead of the free slots: leased but not
   * started, it may start only once a settle confirms its start
   * (`TickRecords.starts`). Absent: the claim started it.
   */
  readonly ahead?: true;
  /**
   * For a flow node, its parents' outputs and errors as stored when it was
   * queued (JSON of {@linkcode FlowParentsRow}); absent outside flows.
   */
  readonly flowParents?: string;
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
    /** The handler's stored output text (`defineJob({ output })`), or null. */
    readonly output?: string | null;
    /** Keep the job in the completed jobs until then; absent or not after `at`: not kept. */
    readonly keepUntil?: number;
  }
  | {
    /**
     * The job was cancelled while it ran: it is deleted (kept as cancelled
     * until `keepUntil`), its chain stops, its batch counts it as skipped.
     */
    readonly kind: "cancel";
    /** The job's id. */
    readonly id: number;
    /** Its reservation token. */
    readonly token: number;
    /** When it was stopped. */
    readonly at: number;
    /** Why it was cancelled. */
    readonly reason: string;
    /** Keep it in the completed jobs until then; not after `at`: not kept. */
    readonly keepUntil: number;
    /** How long the handler ran, in ms. */
    readonly durationMs?: number;
    /**
     * True when the claim it settles never started the handler (a cancel
     * asked while an earlier attempt ran, seen by the next claim; an
     * expiry): the attempt that claim counted is given back, so the kept
     * job's attempts are the handler's starts.
     */
    readonly refundAttempt?: true;
    /**
     * True when it is not a cancel but an expiry (the job was claimed past
     * its `expireAt`, unstarted, so `refundAttempt` too): kept as `expired`
     * and counted so in the metrics; the rest is a cancel's.
     */
    readonly expired?: true;
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
    /**
     * When it is due again, on the same clock as `at`: a store that goes by
     * the database's clock makes it due as long after its own now.
     */
    readonly availableAt: number;
    /** Why, kept as the job's last error, or null. */
    readonly error: string | null;
    /** True when the handler did not really run, so the attempt is given back. */
    readonly refundAttempt: boolean;
    /**
     * True when the handler started though its attempt is given back (cut
     * short by its worker stopping): like any release without
     * `refundAttempt`, the job then no longer expires (`expireAt` cleared).
     */
    readonly started?: true;
    /** True when the attempt ended because its worker died: counts a crash. */
    readonly crashed?: boolean;
    /**
     * Set when the job was claimed and never started (given back by a
     * stopping worker, because a job of its paused queue could not start, or
     * because it was held ahead past a third of its lease): the lease its
     * claim gave, in ms. A job its claim still holds ahead then goes back due
     * when the claim found it due (its lease end less this lease and less
     * what it had waited), keeping its place among the jobs of its priority;
     * `availableAt` is the worker's reckoning of that time, for a job whose
     * start was confirmed already.
     */
    readonly unclaimedLeaseMs?: number;
    /**
     * True when the handler held its own group back (`ctx.rateLimitGroup`):
     * in the same write, the job's group (as its row keeps it; none for a
     * job without one) is paused until `availableAt`, as `pauseGroup` with
     * an end pauses it.
     */
    readonly holdsGroup?: true;
    /**
     * How long the handler ran, in ms, when the attempt ran and ended in an
     * error; added to the metrics rollup's runtime.
     */
    readonly durationMs?: number;
  }
  | {
    /**
     * A durable step of the running attempt ended: its memo is written (a
     * wait that took a signal deletes it from the mailbox in the same
     * write, and one of the same `seq` is replaced: a wait that was
     * waiting). The job stays leased.
     */
    readonly kind: "step";
    /** The job's id. */
    readonly id: number;
    /** Its reservation token. */
    readonly token: number;
    /** When the step ended. */
    readonly at: number;
    /** The memo. */
    readonly step: StepWrite;
  }
  | {
    /**
     * The handler sleeps or waits for a signal without a slot: the job goes
     * back to wait until `availableAt` with its attempt given back (not a
     * retry: no error, counted nowhere), and the sleep's or wait's memo is
     * written. A wait (`step.kind` `"wait"`, not done) whose signal is
     * already in the mailbox is due at `at` instead, so no signal sent while
     * the attempt ran is missed.
     */
    readonly kind: "park";
    /** The job's id. */
    readonly id: number;
    /** Its reservation token. */
    readonly token: number;
    /** When it parked. */
    readonly at: number;
    /** When it is due again (the sleep's wake time, the wait's timeout), on the clock of `at`. */
    readonly availableAt: number;
    /** The memo of the sleep or the wait. */
    readonly step: StepWrite;
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

/** What `Store.settle` did. */
export interface SettleResult {
  /**
   * For each settlement, in order, whether it applied (false: its lease was
   * lost to another claim and nothing changed).
   */
  readonly applied: boolean[];
  /** The jobs claimed after settling, in claim order; empty without a claim request. */
  readonly claimed: ClaimedJob[];
  /** The ids of the jobs claimed ahead whose start this settle confirmed (`TickRecords.starts`). */
  readonly started: number[];
}

/** A lease to renew. */
export interface Lease {
  /** The job's id. */
  readonly id: number;
  /** Its reservation token. */
  readonly token: number;
}

/**
 * Jobs claimed ahead that a worker is about to start. Each start is
 * confirmed only while the job still holds the lease its claim gave it and
 * its queue is not paused; a job refused because its queue is paused is
 * given back unleased, charged nothing.
 */
export interface StartRequest {
  /** The jobs, each with the token of the claim that holds it. */
  readonly leases: readonly Lease[];
  /** The lease their claims gave them, in ms (a job given back is due again when it was). */
  readonly leaseMs: number;
  /** The worker's now: a pause in force at it refuses the start. */
  readonly now: number;
}
