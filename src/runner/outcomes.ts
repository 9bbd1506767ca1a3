/**
 * The rules that decide a job's fate: whether a claimed job may start, and
 * what an attempt's result does to it. Pure functions of their inputs.
 *
 * @internal
 * @module
 */
import { MAX_DELAY_MS, retryDelayMs } from "../backoff.ts";
import type { ExecutionResult } from "../executors/executor.ts";
import type { JobDefinition } from "../job.ts";
import type { ClaimedJob, Settlement, StoredError } from "../stores/store.ts";
import { attemptsSpent, crashesSpent } from "../stores/rows/spend_limits.ts";

type Fail = Extract<Settlement, { kind: "fail" }>;
type Release = Extract<Settlement, { kind: "release" }>;

/** What settling an attempt means, for the store and for the events sent after it. */
export type Outcome =
  | { readonly kind: "complete"; readonly settlement: Extract<Settlement, { kind: "complete" }> }
  | {
    readonly kind: "retry";
    readonly settlement: Release;
    /** Why; null when the handler released the job (`ctx.release()`, `ctx.rateLimitGroup()`). */
    readonly error: Error | null;
    readonly delayMs: number;
  }
  | { readonly kind: "fail"; readonly settlement: Fail; readonly error: Error }
  | {
    /** Held back by its middleware before it started: put back, attempt given back. */
    readonly kind: "heldBack";
    readonly settlement: Release;
  }
  | {
    /** Claimed (ahead) and never started: put back, attempt given back, not a retry. */
    readonly kind: "notStarted";
    readonly settlement: Release;
  }
  | {
    /** A sleep or a wait parked it: due again later, attempt given back, not a retry. */
    readonly kind: "parked";
    readonly settlement: Extract<Settlement, { kind: "park" }>;
  }
  | {
    /** Cancelled (`queue.cancel()`): not retried, no `failed` hook. */
    readonly kind: "cancelled";
    readonly settlement: Extract<Settlement, { kind: "cancel" }>;
    readonly reason: string;
  };

/**
 * The outcome of a job cancelled while it ran, or claimed with a cancel
 * asked while an earlier attempt ran (`handler` `"not started"`: the
 * attempt the claim counted is given back): deleted, kept as cancelled
 * until `keepUntil`.
 */
export function cancelled(
  job: ClaimedJob,
  reason: string,
  now: number,
  keepUntil: number,
  handler: "started" | "not started",
): Outcome {
  const marks: CancelMarks = handler === "not started" ? { refundAttempt: true } : {};
  return cancelOutcome(job, reason, now, keepUntil, marks);
}

/**
 * Why a claimed job expires instead of starting, or null when it may start:
 * it has a stored expiry (`expireInMs`), has never started (this claim is
 * its first start, not a recovery), and the expiry has passed.
 */
export function expiryBeforeStart(job: ClaimedJob, now: number): string | null {
  const expireAt = job.expireAt ?? null;
  if (expireAt === null || now < expireAt || job.attempts > 1 || job.recovered) return null;
  return `expired: not started by ${new Date(expireAt).toISOString()}`;
}

/**
 * The outcome of a claimed job past its expiry: settled as a cancel (deleted
 * unrun, its chain stopped and its catch queued, its batch counting it
 * skipped) that is kept and counted as `expired`.
 */
export function expired(job: ClaimedJob, reason: string, now: number, keepUntil: number): Outcome {
  return cancelOutcome(job, reason, now, keepUntil, { refundAttempt: true, expired: true });
}

/** What marks a cancel settlement: an attempt given back, an expiry. */
type CancelMarks = Pick<Extract<Settlement, { kind: "cancel" }>, "refundAttempt" | "expired">;

/** A cancel settlement of `job`'s claim, with `marks`. */
function cancelOutcome(
  job: ClaimedJob,
  reason: string,
  now: number,
  keepUntil: number,
  marks: CancelMarks,
): Outcome {
  const { id, token } = job;
  return {
    kind: "cancelled",
    reason,
    settlement: { kind: "cancel", id, token, at: now, reason, keepUntil, ...marks },
  };
}

/**
 * Why a claimed job must fail before its handler starts, or null when it may
 * run. `job.attempts` includes this claim, so the starts so far are one less.
 * `resumesPark`: the claim resumes a run that parked in a sleep or a wait,
 * not a new attempt, so a retry deadline passed meanwhile does not refuse it.
 */
export function refusalBeforeStart(
  job: ClaimedJob,
  definition: JobDefinition | undefined,
  now: number,
  resumesPark = false,
): string | null {
  // Claims ask only for known names; a store that ignores them still cannot run an unknown job.
  if (definition === undefined) {
    return `no job named "${job.name}" is registered in the process that claimed it`;
  }
  const started = job.attempts - 1;
  const limits = { attempts: definition.maxAttempts, crashes: definition.maxCrashes };
  if (crashesSpent(job, limits)) {
    return `worker crashed while running it: ${job.crashes} of ${definition.maxCrashes} crashes allowed`;
  }
  if (attemptsSpent(job, limits)) {
    return job.recovered
      ? "attempts spent: worker died during its last attempt"
      : `attempts spent: released ${started} times`;
  }
  if (job.retryUntil !== null && now >= job.retryUntil && !resumesPark) {
    return `retry deadline passed at ${new Date(job.retryUntil).toISOString()}`;
  }
  return null;
}

/** The settlement of a job refused before start: it fails without running. */
export function failBeforeStart(job: ClaimedJob, reason: string, now: number): Outcome {
  const error = new Error(reason);
  // The stack would point into this module, not at anything the job did.
  const stored = { message: `${error.name}: ${reason}`, stack: null };
  return failure(job, error, stored, job.attempts - 1, now, false);
}

/** The outcome that moves a job to the failed jobs. */
function failure(
  job: ClaimedJob,
  error: Error,
  stored: StoredError,
  attempts: number,
  now: number,
  crashed: boolean,
): Outcome {
  return {
    kind: "fail",
    error,
    settlement: {
      kind: "fail",
      id: job.id,
      token: job.token,
      error: stored,
      attempts,
      at: now,
      ...(crashed && { crashed }),
    },
  };
}

/** What an attempt's result does to its job. */
export function outcomeOf(
  job: ClaimedJob,
  definition: JobDefinition,
  result: ExecutionResult,
  now: number,
  random: () => number = Math.random,
): Outcome {
  const { id, token } = job;
  switch (result.kind) {
    case "success":
      return {
        kind: "complete",
        settlement: {
          kind: "complete",
          id,
          token,
          at: now,
          ...(result.output !== undefined && result.output !== null && { output: result.output }),
        },
      };
    case "release":
      if (result.holdsGroup === true) {
        // ctx.rateLimitGroup: the group waits as long as the job, and the attempt is given back.
        const availableAt = now + Math.round(result.delayMs);
        return {
          kind: "retry",
          error: null,
          delayMs: Math.round(result.delayMs),
          settlement: {
            ...giveBack(
              job,
              now,
              availableAt,
              "held back: its group was rate-limited by its handler",
            ),
            started: true,
            holdsGroup: true,
          },
        };
      }
      return {
        kind: "retry",
        error: null,
        delayMs: Math.round(result.delayMs),
        settlement: {
          kind: "release",
          id,
          token,
          at: now,
          availableAt: now + Math.round(result.delayMs),
          error: null,
          refundAttempt: false,
        },
      };
    case "interrupted":
      return putBack(job, now, result.error);
    case "park": {
      // A sleep until a time is as long as that time is ahead of now; a wait without a timeout
      // waits as long as any delay may be.
      const until = result.untilMs !== undefined
        ? Math.min(now + MAX_DELAY_MS, Math.max(now, result.untilMs))
        : result.delayMs === null
        ? null
        : now + result.delayMs;
      return {
        kind: "parked",
        settlement: {
          kind: "park",
          id,
          token,
          at: now,
          availableAt: until ?? now + MAX_DELAY_MS,
          step: { ...result.step, until },
        },
      };
    }
    case "crash":
    case "error": {
      const crashed = result.kind === "crash";
      const crashesSpent = crashed && job.crashes + 1 >= definition.maxCrashes;
      const error = crashesSpent
        ? new Error(
          `worker crashed while running it: ${
            job.crashes + 1
          } of ${definition.maxCrashes} crashes allowed (${result.error.message})`,
          { cause: result.error },
        )
        : result.error;
      const stored = storedError(error);
      const final = (result.kind === "error" && result.permanent) || crashesSpent ||
        job.attempts >= definition.maxAttempts ||
        (job.retryUntil !== null && now >= job.retryUntil);
      if (final) return failure(job, error, stored, job.attempts, now, crashed);
      let delayMs: number;
      try {
        delayMs = retryDelayMs(definition.backoff, job.attempts, definition.jitter, random);
      } catch (backoffError) {
        const broken = backoffFailure(job, backoffError, error);
        return failure(job, broken, storedError(broken), job.attempts, now, crashed);
      }
      return {
        kind: "retry",
        error,
        delayMs,
        settlement: {
          kind: "release",
          id,
          token,
          at: now,
          availableAt: now + delayMs,
          error: stored.message,
          refundAttempt: false,
          ...(crashed && { crashed }),
        },
      };
    }
  }
}

/**
 * A job whose attempt was cut short through no fault of its own (the worker
 * stopping, its Web Worker terminated for another job): it goes back at once
 * and gets its attempt back, since the handler did not get to finish.
 * `error` says why; its message is stored as the job's last error.
 */
export function putBack(job: ClaimedJob, now: number, error: Error): Outcome {
  const settlement: Release = { ...giveBack(job, now, now, error.message), started: true };
  return { kind: "retry", error, delayMs: 0, settlement };
}

/**
 * A job claimed and not started (claimed ahead when its worker stopped, or
 * when a job of its queue could not start, or held ahead past a third of its
 * lease), by a claim at `claim.now` of `claim.leaseMs`: given back due when
 * that claim found it due, its wait before the claim before `claim.now` (so
 * it keeps its place among the jobs of its priority, ahead of those due
 * later; the store reads that time from the row exactly for a job still held
 * ahead, see `unclaimedLeaseMs`), never later than now (nor now when the
 * claim is not known); its attempt given back, neither an attempt nor a
 * retry.
 */
export function putBackUnstarted(
  job: ClaimedJob,
  now: number,
  claim: { readonly now: number | undefined; readonly leaseMs: number },
  reason: string,
): Outcome {
  const dueAt = Math.min(now, (claim.now ?? now) - (job.waitedMs ?? 0));
  const settlement: Release = {
    ...giveBack(job, now, dueAt, reason),
    unclaimedLeaseMs: claim.leaseMs,
  };
  return { kind: "notStarted", settlement };
}

/**
 * A job its middleware held back (a lock held elsewhere, a rate limit
 * reached): it is due again at `retryAt` and gets its attempt back, since
 * its handler never ran.
 */
export function holdBack(job: ClaimedJob, now: number, retryAt: number, reason: string): Outcome {
  return { kind: "heldBack", settlement: giveBack(job, now, retryAt, reason) };
}

/** The release of a job whose handler did not get to finish: due at `availableAt`, attempt given back. */
function giveBack(job: ClaimedJob, now: number, availableAt: number, reason: string): Release {
  return {
    kind: "release",
    id: job.id,
    token: job.token,
    at: now,
    availableAt,
    error: storable(reason),
    refundAttempt: true,
  };
}

/** An error in the form the store keeps. */
export function storedError(error: Error): StoredError {
  const stack = error.stack === undefined || error.stack === null ? null : storable(error.stack);
  return { message: storable(`${String(error.name)}: ${String(error.message)}`), stack };
}

/** The most of an error's message, and of its stack, that is stored: 64 KiB of UTF-8 each. */
export const MAX_ERROR_BYTES = 64 * 1024;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Text every store keeps as given: NUL (which PostgreSQL text refuses) and
 * lone surrogates become U+FFFD, so no error message can make a settle fail;
 * past {@linkcode MAX_ERROR_BYTES} it is cut, saying so, as payloads are
 * capped (a 10 MB message would otherwise be stored, logged and served whole).
 */
function storable(text: unknown): string {
  const clean = String(text).replaceAll("\0", "\uFFFD").toWellFormed();
  // A UTF-16 unit is at most 3 bytes of UTF-8, so short text needs no count.
  if (clean.length * 3 <= MAX_ERROR_BYTES) return clean;
  const bytes = encoder.encode(clean);
  if (bytes.length <= MAX_ERROR_BYTES) return clean;
  const note = `\n… [cut: ${bytes.length} bytes, the first ${MAX_ERROR_BYTES} kept]`;
  // A character cut in two decodes as U+FFFD, which the stores keep.
  const kept = decoder.decode(bytes.subarray(0, MAX_ERROR_BYTES - encoder.encode(note).length));
  return kept + note;
}

/**
 * The error a job fails for good with when its backoff, asked for the delay
 * before its next attempt, threw or gave no delay: it names the job and the
 * backoff's fault, and keeps the attempt's own `error` (its message, its
 * stack, as the cause), which is what the job failed of, then the backoff's
 * own stack.
 */
function backoffFailure(job: ClaimedJob, backoffError: unknown, error: Error): Error {
  const fault = backoffError instanceof Error ? backoffError.message : String(backoffError);
  const message =
    `Job "${job.name}" is not retried: its backoff failed after attempt ${job.attempts} (${fault}); the attempt failed with ${
      String(error.name)
    }: ${String(error.message)}`;
  const broken = new Error(message, { cause: error });
  const backoffStack = backoffError instanceof Error ? backoffError.stack ?? fault : fault;
  broken.stack = `Error: ${message}\n${error.stack ?? ""}\nThe backoff's error: ${backoffStack}`;
  return broken;
}

/** A job whose outcome could not be made (a rule of its own threw): it fails for good. */
export function failWith(job: ClaimedJob, error: Error, now: number): Outcome {
  return failure(job, error, storedError(error), job.attempts, now, false);
}
