/**
 * Job control as the queue offers it: a job's result and the kept history
 * of finished jobs, waiting for a job dispatched elsewhere to end, cancel
 * outcomes, and paused queues and groups, with the rules that check their options.
 * "Finished" means succeeded or cancelled (kept in the completed jobs for
 * `keepFinishedMs`); a job that failed for good is in the failed jobs.
 *
 * @module
 */
import { shown } from "../shown.ts";
import { DISPATCH_OPTIONS, keepMsOption } from "../job.ts";
import { optionBag, optionNames } from "../option_bags.ts";
import type { DispatchOptions } from "../job.ts";
import { assertName, assertQueueName } from "../names.ts";
import type { CancelOutcome, FinishedJob } from "../stores/store.ts";

export type { CancelOutcome, FinishedJob, PausedGroup, PausedQueue } from "../stores/store.ts";

/** How long finished jobs are kept unless the queue or the job says: 24 hours. */
export const DEFAULT_KEEP_FINISHED_MS = 24 * 60 * 60 * 1_000;

/** Where a job stands: see {@linkcode JobResult}. */
export type JobResultState =
  | "pending"
  | "running"
  | "completed"
  | "failed"
  | "cancelled"
  | "expired";

/** Where a job stands, as `queue.result(id)` reads it. */
export interface JobResult<Output = unknown> {
  /**
   * `"pending"` (waiting, delayed, or due again after a retry), `"running"`,
   * `"completed"`, `"failed"` (for good), `"cancelled"`, or `"expired"`
   * (not started within its `expireInMs`).
   */
  readonly state: JobResultState;
  /** Its output, once completed, for a job defined with `output` (decrypted if it was encrypted). */
  readonly output?: Output;
  /**
   * Why `output` is missing though the job completed with one: its output
   * is encrypted and this process has no `APP_KEY` (`"encrypted, and this
   * process has no APP_KEY to open it"`). The state is still given.
   */
  readonly outputWithheld?: string;
  /** Why it failed (`ErrorName: message`) or was cancelled. */
  readonly error?: string;
  /** How many times its handler started. */
  readonly attempts: number;
}

/** Options for `Queue.completed`. */
export interface FinishedOptions {
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
  /** Only jobs of this name. */
  name?: string;
  /** Only jobs of this queue. */
  queue?: string;
}

/** Options for `Queue.dispatchAndWait`: the dispatch's, and how long to wait. */
export interface DispatchAndWaitOptions extends DispatchOptions {
  /**
   * Give up waiting after this long, rejecting with `JobWaitTimeoutError`
   * (the job keeps its course).
   * @default {no limit}
   */
  timeoutMs?: number;
  /** Stops waiting when aborted, rejecting with its reason (the job keeps its course). */
  signal?: AbortSignal;
}

/** Every option of `Queue.dispatchAndWait`. @internal */
export const DISPATCH_AND_WAIT_OPTIONS = optionNames<DispatchAndWaitOptions>()([
  ...DISPATCH_OPTIONS,
  "timeoutMs",
  "signal",
]);

/** Options for `Queue.cancel`. */
export interface CancelOptions {
  /**
   * Why, kept with the cancelled job and passed to the `JobCancelledError`.
   * @default {"cancelled"}
   */
  reason?: string;
}

/** Options for `Queue.pause`. */
export interface PauseOptions {
  /**
   * Resume on its own after this long, in ms.
   * @default {until resumed}
   */
  forMs?: number;
  /** Why, shown by `paused()`, the CLI and the dashboard. */
  reason?: string;
}

/**
 * Options for `Queue.pauseGroup`: a pause that ends on its own (a "hold"),
 * after `forMs` or at `until`; neither: until `resumeGroup()`. At most one
 * of the two.
 */
export interface PauseGroupOptions {
  /**
   * End the pause on its own after this long, in ms (as `Queue.pause`'s
   * `forMs`): a positive number of at most 2^41.
   * @default {until resumed}
   */
  forMs?: number;
  /**
   * End the pause on its own at this time (an HTTP `Retry-After` date, say):
   * a valid `Date` after now, at most 2^41 ms ahead.
   * @default {until resumed}
   */
  until?: Date;
}

/**
 * The longest pause or hold anything takes: 2^41 ms (about 69 years), as
 * `forMs` or `until` of `pause`/`pauseGroup`, `pause --for`, and
 * `ctx.rateLimitGroup(ms)`.
 */
export const MAX_PAUSE_MS = 2 ** 41;

/** Every option of `Queue.pauseGroup`. */
const PAUSE_GROUP_OPTIONS = optionNames<PauseGroupOptions>()(["forMs", "until"]);

/**
 * When a group's pause ends (null: until resumed), from `pauseGroup`'s
 * options, checked; throws naming what was wrong. @internal
 */
export function groupPauseEnd(
  options: PauseGroupOptions | undefined,
  now: number,
  method: string,
): number | null {
  const bag = optionBag(options, method, PAUSE_GROUP_OPTIONS);
  if (bag === undefined) return null;
  const { forMs, until } = bag;
  if (forMs !== undefined && until !== undefined) {
    throw new TypeError(`${method}: give forMs or until, not both`);
  }
  if (forMs !== undefined) return now + pauseForMs(forMs, method);
  if (until !== undefined) {
    if (!(until instanceof Date) || Number.isNaN(until.getTime())) {
      throw new TypeError(`${method}: until must be a valid Date: got ${shown(until)}`);
    }
    const at = until.getTime();
    if (at <= now || at - now > MAX_PAUSE_MS) {
      throw new RangeError(
        `${method}: until must be after now and at most 2^41 ms ahead: got ${until.toISOString()}`,
      );
    }
    return at;
  }
  return null;
}

/** The queue's `keepFinishedMs` option (or its deprecated `keepCompletedMs`), checked. @internal */
export function keepFinishedMsOf(
  options: { readonly keepFinishedMs?: number; readonly keepCompletedMs?: number },
): number {
  return keepMsOption(options, "Queue.open") ?? DEFAULT_KEEP_FINISHED_MS;
}

/** The cancel's reason, checked. @internal */
export function cancelReason(options: CancelOptions | undefined): string {
  const reason = optionBag(options, "cancel", ["reason"])?.reason ?? "cancelled";
  return assertName(reason, "cancel", "reason");
}

/** A pause's queue, end and reason, checked; throws naming what was wrong. @internal */
export function resolvePause(
  queue: unknown,
  options: PauseOptions | undefined,
  now: number,
): { queue: string; until: number | null; reason: string | null } {
  assertQueueName(queue, "pause");
  options = optionBag(options, "pause", ["forMs", "reason"]);
  const forMs = options?.forMs;
  const until = forMs === undefined ? null : now + pauseForMs(forMs, "pause");
  const reason = options?.reason === undefined
    ? null
    : assertName(options.reason, "pause", "reason");
  return { queue, until, reason };
}

/**
 * A pause's `forMs` (of a queue or a group), checked and rounded up to a
 * whole ms; throws naming `method` and the limit.
 */
function pauseForMs(forMs: unknown, method: string): number {
  if (typeof forMs !== "number" || !Number.isFinite(forMs) || forMs <= 0 || forMs > MAX_PAUSE_MS) {
    throw new RangeError(
      `${method}: forMs must be a positive number of ms up to 2^41: got ${shown(forMs)}`,
    );
  }
  return Math.ceil(forMs);
}

/** The wait's timeout, checked. @internal */
export function waitTimeoutMs(options: DispatchAndWaitOptions | undefined): number | undefined {
  const timeoutMs = options?.timeoutMs;
  if (
    timeoutMs !== undefined &&
    (typeof timeoutMs !== "number" || !(timeoutMs > 0 && timeoutMs <= 2_147_483_647))
  ) {
    throw new RangeError(
      `dispatchAndWait: timeoutMs must be a positive number of ms up to 2147483647: got ${
        shown(timeoutMs)
      }`,
    );
  }
  const signal = options?.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new TypeError("dispatchAndWait: signal must be an AbortSignal");
  }
  return timeoutMs;
}

/** An `Error` again from its stored text (`Name: message`). @internal */
export function storedErrorToError(stored: string): Error {
  const match = /^([A-Za-z_$][\w$]*): ([\s\S]*)$/.exec(stored);
  const error = new Error(match === null ? stored : match[2]);
  if (match !== null) error.name = match[1]!;
  return error;
}

/** @deprecated Use {@linkcode CancelOutcome}. */
export type CancelResult = CancelOutcome;

/** @deprecated Use {@linkcode FinishedJob}. */
export type CompletedJob = FinishedJob;

/** @deprecated Use {@linkcode FinishedOptions}. */
export type CompletedOptions = FinishedOptions;
