/**
 * The rows of job control: a finished job kept in `completed_jobs`, where a
 * job stands (its result), what a cancel did, and a paused queue. The read
 * models (`FinishedJob`, `PausedQueue`) are what a store returns.
 *
 * @module
 */

/** How a kept job ended: it succeeded, it was cancelled, or it expired before it started. */
export type FinishedState = "completed" | "cancelled" | "expired";

/** A finished job kept in the completed jobs. */
export interface FinishedJob {
  /** The job's id. */
  readonly id: number;
  /** The queue it ran on. */
  readonly queue: string;
  /** The job's name. */
  readonly name: string;
  /** `"completed"` (it succeeded), `"cancelled"` or `"expired"` (not started in time). */
  readonly state: FinishedState;
  /** The stored payload text (still encrypted if it was). */
  readonly payload: string;
  /** The stored output text (JSON, or sealed for an encrypted job), or null. */
  readonly output: string | null;
  /** Why it was cancelled, or null. */
  readonly error: string | null;
  /** How many times its handler started. */
  readonly attempts: number;
  /** When it was dispatched. */
  readonly createdAt: Date;
  /** When its last attempt started, or null if it never started. */
  readonly startedAt: Date | null;
  /** When it finished. */
  readonly finishedAt: Date;
  /** How long its last attempt ran, in ms, or null. */
  readonly durationMs: number | null;
}

/** Where one job stands, as the store finds it. */
export interface JobResultRow {
  /** Its state now. */
  readonly state: "pending" | "running" | "completed" | "failed" | "cancelled" | "expired";
  /** Job name. */
  readonly name: string;
  /** Starts of its handler so far. */
  readonly attempts: number;
  /** The stored output text, when it completed with one. */
  readonly output: string | null;
  /** The stored error (`Name: message`), when it failed or was cancelled. */
  readonly error: string | null;
  /** The reason of a cancel asked of it while it runs, or null. */
  readonly cancelRequested: string | null;
}

/** Which kept jobs to list. */
export interface FinishedFilter {
  /** Only jobs of this name. */
  readonly name?: string | undefined;
  /** Only jobs of this queue. */
  readonly queue?: string | undefined;
}

/**
 * What a cancel did: `"cancelled"` (the job had not started: removed and
 * recorded), `"cancelling"` (it runs: its worker was asked to stop it),
 * `"finished"` (it had already ended: completed, failed or cancelled) or
 * `"not-found"`.
 */
export type CancelOutcome = "cancelled" | "cancelling" | "finished" | "not-found";

/** A cancel to record. */
export interface CancelRequest {
  /** The job's id. */
  readonly id: number;
  /** Why, kept as its error. */
  readonly reason: string;
  /** Now. */
  readonly now: number;
  /** Keep the record until then; at or before `now`, record nothing. */
  readonly keepUntil: number;
}

/** A running job whose cancel was asked. */
export interface CancelRequested {
  /** The job's id. */
  readonly id: number;
  /** The reservation token of the attempt that runs it. */
  readonly token: number;
  /** Why. */
  readonly reason: string;
}

/** A queue that is paused. */
export interface PausedQueue {
  /** The queue. */
  readonly queue: string;
  /** When it was paused. */
  readonly pausedAt: Date;
  /** When it resumes on its own, or null. */
  readonly until: Date | null;
  /** Why, or null. */
  readonly reason: string | null;
}

/**
 * A group of a job that is paused or held now (`Queue.pauseGroup()`, or a
 * handler's `ctx.rateLimitGroup()`): its jobs are not claimed, in any queue.
 */
export interface PausedGroup {
  /** The job's name. */
  readonly name: string;
  /** The group's key. */
  readonly key: string;
  /** When it was paused (a pause or hold that was lengthened keeps its start). */
  readonly pausedAt: Date;
  /** When it resumes on its own (a hold), or null: until resumed. */
  readonly until: Date | null;
}
