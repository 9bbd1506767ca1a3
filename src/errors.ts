/**
 * The error classes a caller may want to catch. Every class sets `name` and
 * passes `cause` through.
 *
 * @module
 */

/** One problem zod found in a payload, as reported in {@linkcode ValidationError.issues}. */
export interface ValidationIssue {
  /** Where in the payload the problem is, e.g. `["orderId"]`. */
  readonly path: readonly PropertyKey[];
  /** What is wrong there. */
  readonly message: string;
}

/**
 * A payload or an option was refused before anything was stored.
 *
 * @example Catching a payload that fails its schema
 * ```ts
 * import { ValidationError } from "@renox/queue";
 * try {
 *   throw new ValidationError("send-receipt", "payload.orderId: expected number", []);
 * } catch (error) {
 *   if (error instanceof ValidationError) console.log(error.jobName, error.issues.length);
 * }
 * ```
 */
export class ValidationError extends Error {
  /** The job whose payload was refused, or `undefined` for a bad option. */
  readonly jobName: string | undefined;
  /**
   * zod's issues, when a schema refused the payload; empty otherwise. Of an
   * encrypted job, one per issue with no path and only zod's code, as the
   * rest may quote the data.
   */
  readonly issues: readonly ValidationIssue[];

  /**
   * Builds the error; `detail` follows `Cannot dispatch "<job>"<role>: `,
   * where `options.role` places the job (` as link 2 of a chain`) and
   * `options.action` replaces `dispatch` (`store the output of`).
   */
  constructor(
    jobName: string | undefined,
    detail: string,
    issues: readonly ValidationIssue[] = [],
    options?: ErrorOptions & { role?: string; action?: string },
  ) {
    super(
      jobName === undefined
        ? detail
        : `Cannot ${options?.action ?? "dispatch"} "${jobName}"${options?.role ?? ""}: ${detail}`,
      options,
    );
    this.name = "ValidationError";
    this.jobName = jobName;
    this.issues = issues;
  }
}

/**
 * Thrown by a handler to fail the job now, without further attempts.
 *
 * @example Failing for good
 * ```ts
 * import { PermanentError } from "@renox/queue";
 * function charge(cardValid: boolean) {
 *   if (!cardValid) throw new PermanentError("card was declined: no retry can help");
 * }
 * charge(true);
 * ```
 */
export class PermanentError extends Error {
  /** Builds the error with a message saying why no retry can help. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "PermanentError";
  }
}

/** An attempt ran past its job's `timeoutMs`. */
export class JobTimeoutError extends Error {
  /** The limit that was passed, in milliseconds. */
  readonly timeoutMs: number;

  /** Builds the error for a job that ran past `timeoutMs`. */
  constructor(jobName: string, timeoutMs: number, options?: ErrorOptions) {
    super(`Job "${jobName}" timed out: ran past ${timeoutMs} ms`, options);
    this.name = "JobTimeoutError";
    this.timeoutMs = timeoutMs;
  }
}

/**
 * A job's recorded steps no longer match what its code asks for (the code
 * changed under a running job): the step at one call position has another
 * name than the memo recorded there, or a name recorded at another
 * position. The job fails for good: no memo is ever handed to the wrong
 * step.
 */
export class StepMismatchError extends PermanentError {
  /** The call position (from 1) where they differ. */
  readonly seq: number;
  /** The kind and key recorded there (`step "a"`), or null when `asked` was recorded elsewhere. */
  readonly recorded: string | null;
  /** The kind and key the code asked for there (`sleep "a"`). */
  readonly asked: string;

  /**
   * Builds the error naming both and the position; `recorded` and `asked`
   * are each a kind and a key (`step "charge"`, `sleep "nap"`).
   */
  constructor(jobName: string, seq: number, recorded: string | null, asked: string) {
    super(
      recorded === null
        ? `Job "${jobName}": ${asked} at position ${seq} was recorded at another position: the code changed under a running job`
        : `Job "${jobName}": ${asked} at position ${seq}, but ${recorded} was recorded there: the code changed under a running job`,
    );
    this.name = "StepMismatchError";
    this.seq = seq;
    this.recorded = recorded;
    this.asked = asked;
  }
}

/** A durable step ran past its `timeoutMs`: the attempt ends, and the next resumes at that step. */
export class StepTimeoutError extends Error {
  /** The step's key. */
  readonly key: string;
  /** The limit that was passed, in milliseconds. */
  readonly timeoutMs: number;

  /** Builds the error for step `key` that ran past `timeoutMs`. */
  constructor(key: string, timeoutMs: number, options?: ErrorOptions) {
    super(`Step ${JSON.stringify(key)} timed out after ${timeoutMs} ms`, options);
    this.name = "StepTimeoutError";
    this.key = key;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * `thrown` as an `Error`, wrapping anything else that was thrown: an object
 * shown as its JSON (its first 1,000 code points, then `…`, when longer), so
 * that a thrown `{ message }` keeps its message. @internal
 */
export function asError(thrown: unknown): Error {
  if (thrown instanceof Error) return thrown;
  return new Error(`Non-error thrown: ${thrownShown(thrown)}`, { cause: thrown });
}

/** How {@linkcode asError} shows a thrown value that is no `Error`. */
function thrownShown(thrown: unknown): string {
  if (typeof thrown !== "object" || thrown === null) return String(thrown);
  let json: string | undefined;
  try {
    json = JSON.stringify(thrown);
  } catch {
    // a cycle, a BigInt, a throwing toJSON: shown as the object's string
  }
  if (json === undefined || json === "{}") return String(thrown);
  if (json.length <= 1_000) return json;
  // 2,000 UTF-16 units hold the first 1,000 code points whole.
  const points = [...json.slice(0, 2_000)];
  return points.length > 1_000 ? `${points.slice(0, 1_000).join("")}…` : json;
}

/** The queue was used after {@linkcode Queue.close}. */
export class QueueClosedError extends Error {
  /** Builds the error naming what was attempted. */
  constructor(action: string, options?: ErrorOptions) {
    super(`Cannot ${action}: the queue is closed`, options);
    this.name = "QueueClosedError";
  }
}

/**
 * A stored payload (or output) no longer decodes, or fails authentication;
 * for a payload, the job fails for good.
 */
export class PayloadIntegrityError extends Error {
  /**
   * Builds the error; `detail` says what did not decode, `options.of` what
   * was stored (default `"payload"`).
   */
  constructor(
    jobName: string,
    detail: string,
    options?: ErrorOptions & { readonly of?: "payload" | "output" | "step output" | "signal" },
  ) {
    super(`Stored ${options?.of ?? "payload"} of "${jobName}" cannot be used: ${detail}`, options);
    this.name = "PayloadIntegrityError";
  }
}

/**
 * A job was cancelled (`queue.cancel()`): the reason `ctx.signal` aborts
 * with, and the error `dispatchAndWait` rejects with for a cancelled job.
 *
 * @example Telling a cancel from a timeout
 * ```ts
 * import { JobCancelledError } from "@renox/queue";
 * const error = new JobCancelledError(7, "export", "asked by the user");
 * console.log(error instanceof JobCancelledError, error.reason);
 * ```
 */
export class JobCancelledError extends Error {
  /** The job's id. */
  readonly jobId: number;
  /** Why it was cancelled. */
  readonly reason: string;

  /** Builds the error for job `jobId` of `jobName`, cancelled for `reason`. */
  constructor(jobId: number, jobName: string, reason: string, options?: ErrorOptions) {
    super(`Job ${jobId} ("${jobName}") was cancelled: ${reason}`, options);
    this.name = "JobCancelledError";
    this.jobId = jobId;
    this.reason = reason;
  }
}

/** `dispatchAndWait` gave up waiting; the job itself keeps its course. */
export class JobWaitTimeoutError extends Error {
  /** The job's id. */
  readonly jobId: number;
  /** How long it waited, in ms. */
  readonly timeoutMs: number;

  /** Builds the error for job `jobId`, waited on for `timeoutMs`. */
  constructor(jobId: number, timeoutMs: number, options?: ErrorOptions) {
    super(
      `Gave up waiting for job ${jobId} after ${timeoutMs} ms: the job is not cancelled and keeps its course (queued, delayed or running); see queue.result(${jobId})`,
      options,
    );
    this.name = "JobWaitTimeoutError";
    this.jobId = jobId;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * This process's code is older than the queue's database, past a contract
 * schema step: the schema changed in a way this code cannot work with. A
 * worker that learns it stops claiming, finishes what it runs and stops
 * (the `work` command then exits 75); `Queue.open` throws it. Restart the
 * process on the new code (docs/upgrading.md).
 */
export class OutdatedCodeError extends Error {
  /** The schema step this code was built for. */
  readonly codeStep: number;
  /** The newest step applied to the database. */
  readonly databaseStep: number;
  /** The first contract step newer than this code. */
  readonly contractStep: number;

  /** Builds the error naming the steps; `action` is what could not be done (`open the queue database`). */
  constructor(
    action: string,
    steps: { codeStep: number; databaseStep: number; contractStep: number },
    options?: ErrorOptions,
  ) {
    super(
      `Cannot ${action}: the database has contract schema step ${steps.contractStep} (it is at step ${steps.databaseStep}), newer than the step this code was built for (${steps.codeStep}); restart this process on the new version of @renox/queue`,
      options,
    );
    this.name = "OutdatedCodeError";
    this.codeStep = steps.codeStep;
    this.databaseStep = steps.databaseStep;
    this.contractStep = steps.contractStep;
  }
}

/**
 * The queue was moved to another store (`moveQueue`, the `move` command;
 * docs/moving.md): this store refuses every write of the queue from the
 * moment the move fenced it. Point the app and its workers at the new
 * store; a worker that meets it stops. A move given up is undone with
 * `move --abort` (or `abortMove()`), which lifts the fence.
 *
 * @example Telling a moved queue from other failures
 * ```ts
 * import { QueueMovedError } from "@renox/queue";
 * const error = new QueueMovedError("postgres://db.internal/app", 0);
 * console.log(error instanceof QueueMovedError, error.to);
 * ```
 */
export class QueueMovedError extends Error {
  /** Where the queue went, as the move was given it (a URL's password hidden). */
  readonly to: string;
  /** When the move fenced this store, in ms since the epoch. */
  readonly fencedAt: number;

  /** Builds the error naming where the queue went, and when. */
  constructor(to: string, fencedAt: number, options?: ErrorOptions) {
    super(
      `Cannot write to this queue: it was moved to ${to} (fenced at ${
        new Date(fencedAt).toISOString()
      }); point the app and its workers at ${to}, or lift the fence of a move given up with move --abort`,
      options,
    );
    this.name = "QueueMovedError";
    this.to = to;
    this.fencedAt = fencedAt;
  }
}

/**
 * The store lost the queue's data since this queue opened it: a Redis
 * server restarted without persistence, or the queue's keys were deleted
 * (docs/redis.md). Every call of the queue fails with it rather than run
 * on an empty store, and a worker that meets it stops (`stopReason`
 * `"lost"`; the `work` command exits with code 1, so its supervisor starts
 * another). A queue opened again (a new process) starts on the empty store.
 *
 * @example Telling a store that lost its data from other failures
 * ```ts
 * import { QueueLostError } from "@renox/queue";
 * const error = new QueueLostError("the Redis store lost its data");
 * console.log(error instanceof QueueLostError, error.name);
 * ```
 */
export class QueueLostError extends Error {
  /** Builds the error with the store's `message` saying what it found. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "QueueLostError";
  }
}
