/**
 * Job definitions: what a job is called, what its payload looks like, how it
 * runs and how it is retried; and the dispatch contract every dispatcher
 * (the queue, a transaction, a handler's `ctx.queue`, the test fake) keeps.
 *
 * @module
 */
import { optionBag, optionNames } from "./option_bags.ts";
import { jsonUnsafePart } from "./json_safe.ts";
import { shown } from "./shown.ts";
import { assertBackoff, type Backoff, defaultBackoff, MAX_DELAY_MS } from "./backoff.ts";
import type { JobMiddleware } from "./middleware.ts";
import { assertName, assertQueueName } from "./names.ts";
import type { StepOptions, WaitOptions } from "./steps.ts";
import type { GroupRate } from "./stores/rows/tick.ts";

export type { GroupRate };

/** Options for one dispatch. */
export interface DispatchOptions {
  /**
   * Wait this long before the job is due.
   * @default {0}
   */
  delayMs?: number;
  /**
   * Make the job due at this time instead (a time already past is due at
   * once). Not together with `delayMs`.
   */
  at?: Date;
  /**
   * Queue to put the job on.
   * @default {the job's own queue}
   */
  queue?: string;
  /**
   * Higher runs first within a queue.
   * @default {the job's own priority}
   */
  priority?: number;
  /**
   * A job not started this long after its dispatch never starts: it ends as
   * `expired` (kept in the history like a cancel, counted in the metrics,
   * skipped by its batch, its chain's `catch` queued). Once started, it
   * never expires. At most about 100 years.
   * @default {the job's own expireInMs, else none}
   */
  expireInMs?: number;
  /**
   * A budget across every attempt, counted from the dispatch: once it has
   * passed, no new attempt starts and a failure is final. It sets the same
   * retry deadline as the job's `retryUntil`; when both are given the
   * earlier wins. At most about 100 years.
   * @default {the job's own deadlineMs, else none}
   */
  deadlineMs?: number;
}

/** Something jobs can be dispatched to. */
export interface Dispatcher {
  /** Stores one job and returns its id. */
  dispatch<J extends JobDefinition>(
    job: J,
    payload: PayloadOf<J>,
    options?: DispatchOptions,
  ): Promise<number>;
  /** Stores many jobs of one kind, all or none, and returns their ids in order. */
  dispatchMany<J extends JobDefinition>(
    job: J,
    payloads: readonly PayloadOf<J>[],
    options?: DispatchOptions,
  ): Promise<number[]>;
}

/** Jobs of one kind that a chain or batch builder gathered, dispatched later in one go. */
export interface PlannedJobs {
  /** Their definition (checked when dispatched). */
  readonly job: JobDefinition;
  /** Their payloads (checked when dispatched). */
  readonly payloads: readonly unknown[];
  /** Their dispatch options. */
  readonly options: DispatchOptions | undefined;
}

/** {@linkcode DispatchOptions} checked, with the job's defaults filled in. */
export interface ResolvedDispatch {
  /** Queue to put the jobs on. */
  readonly queue: string;
  /** When they are due, in ms since the epoch: `at`, or `delayMs` after the dispatch's now. */
  readonly availableAt: number;
  /** Their priority. */
  readonly priority: number;
  /** When they expire unstarted, in ms since the epoch, or null for never. */
  readonly expireAt: number | null;
  /** Their retry deadline (`retryUntil` and `deadlineMs`, the earlier), or null for none. */
  readonly retryUntil: number | null;
}

/** Every key {@linkcode defineJob} reads ({@linkcode JobConfig}): any other is refused by name. */
const JOB_OPTIONS = optionNames<JobConfig<PayloadSchema, PayloadSchema | undefined, ParentJobs>>()([
  "name",
  "schema",
  "queue",
  "maxAttempts",
  "maxCrashes",
  "backoff",
  "jitter",
  "timeoutMs",
  "retryUntil",
  "expireInMs",
  "deadlineMs",
  "priority",
  "encrypted",
  "uniqueForMs",
  "uniqueId",
  "uniqueUntil",
  "debounceMs",
  "debounceMaxWaitMs",
  "group",
  "groupConcurrency",
  "ordered",
  "groupRate",
  "middleware",
  "output",
  "parents",
  "maxOutputBytes",
  "keepFinishedMs",
  "keepCompletedMs",
  "handle",
  "failed",
]);

/** Every option a dispatch takes ({@linkcode DispatchOptions}): any other is refused by name. @internal */
export const DISPATCH_OPTIONS = optionNames<DispatchOptions>()([
  "delayMs",
  "at",
  "queue",
  "priority",
  "expireInMs",
  "deadlineMs",
]);

/**
 * Checks dispatch options for `job` dispatched at `now` and fills in its
 * defaults; `where` starts each error message (e.g. `Cannot dispatch
 * "send-receipt"`). `delayMs` and `at` are held to the same cap: at most
 * {@linkcode MAX_DELAY_MS} (about 100 years) after `now`.
 */
export function resolveDispatch(
  job: JobDefinition,
  options: DispatchOptions | undefined,
  where: string,
  now: number,
): ResolvedDispatch {
  options = optionBag(options, where, DISPATCH_OPTIONS);
  const queue = options?.queue ?? job.queue;
  assertQueueName(queue, where);
  const delayMs = options?.delayMs ?? 0;
  if (typeof delayMs !== "number" || !(delayMs >= 0 && delayMs <= MAX_DELAY_MS)) {
    throw new RangeError(
      `${where}: delayMs must be a number of ms from 0 to ${MAX_DELAY_MS}: got ${shown(delayMs)}`,
    );
  }
  const at = options?.at;
  if (at !== undefined) {
    if (options?.delayMs !== undefined) {
      throw new TypeError(`${where}: give either at or delayMs, not both`);
    }
    if (!(at instanceof Date) || !Number.isFinite(at.getTime())) {
      throw new TypeError(
        `${where}: at must be a valid Date: got ${shown(at)}`,
      );
    }
    if (at.getTime() - now > MAX_DELAY_MS) {
      throw new RangeError(
        `${where}: at must be at most ${MAX_DELAY_MS} ms (about 100 years) from now: got ${at.toISOString()}`,
      );
    }
  }
  const priority = options?.priority ?? job.priority;
  assertPriority(priority, where);
  const expireInMs = options?.expireInMs === undefined
    ? job.expireInMs
    : assertLifetimeMs(options.expireInMs, where, "expireInMs");
  const deadlineMs = options?.deadlineMs === undefined
    ? job.deadlineMs
    : assertLifetimeMs(options.deadlineMs, where, "deadlineMs");
  let retryUntil = job.retryUntil === undefined ? null : retryDeadline(job, now, where);
  if (deadlineMs !== undefined) {
    retryUntil = Math.min(retryUntil ?? Infinity, now + deadlineMs);
  }
  return {
    queue,
    availableAt: at?.getTime() ?? now + Math.round(delayMs),
    priority,
    expireAt: expireInMs === undefined ? null : now + expireInMs,
    retryUntil,
  };
}

/**
 * Throws a `RangeError` naming `where` and `field` unless `value` is a
 * number of ms from 0 to {@linkcode MAX_DELAY_MS} (about 100 years); the
 * value rounded to whole ms. @internal
 */
export function assertLifetimeMs(value: unknown, where: string, field: string): number {
  if (typeof value !== "number" || !(value >= 0 && value <= MAX_DELAY_MS)) {
    throw new RangeError(
      `${where}: ${field} must be a number of ms from 0 to ${MAX_DELAY_MS} (about 100 years): got ${
        shown(value)
      }`,
    );
  }
  return Math.round(value);
}

/** The slot a scheduled job was fired for, as `ctx.scheduled` gives it. */
export interface ScheduledRun {
  /** The schedule's name. */
  readonly name: string;
  /** The slot: when the schedule was due (for a triggered job, when it was triggered). */
  readonly slot: Date;
}

/**
 * The jobs a flow node's parents run, by each parent's key: what
 * `defineJob({ parents })` declares, to read their outputs typed.
 */
export type ParentJobs = Readonly<Record<string, JobDefinition>>;

/**
 * What `ctx.parents` holds for one parent running `J`: its output as its
 * `output` schema gives it, or null for a job without one.
 */
// deno-lint-ignore no-explicit-any
export type ParentOutput<J> = J extends JobDefinition<any, infer O>
  ? O extends PayloadSchema ? PayloadOutput<O> : null
  : never;

/**
 * `ctx.parents` for a node whose job declares parents `P`: each declared
 * key with its job's output, typed; any other key (a parent not declared)
 * as `unknown`.
 */
export type ParentOutputs<P extends ParentJobs> =
  & { readonly [K in keyof P]: ParentOutput<P[K]> }
  & Readonly<Record<string, unknown>>;

/**
 * What a handler learns about the attempt it is running. `P`: the parents
 * its job declares (`defineJob({ parents })`), which type `parents`.
 */
export interface JobContext<P extends ParentJobs = NoParents> {
  /** The job's id, the same across its attempts. */
  readonly id: number;
  /** The job's name, as given to {@linkcode defineJob}. */
  readonly name: string;
  /** The queue the job was taken from. */
  readonly queueName: string;
  /** This attempt's number: 1 for the first start of the handler. */
  readonly attempt: number;
  /**
   * Aborted when the attempt passes its `timeoutMs` (reason: a
   * `JobTimeoutError`), when the worker stops, or when the job's lease was lost.
   */
  readonly signal: AbortSignal;
  /** Dispatches more jobs from inside the handler. */
  readonly queue: Dispatcher;
  /**
   * The batch this job belongs to, or whose `then`/`catch`/`finally` it is;
   * null outside batches.
   */
  readonly batchId: number | null;
  /**
   * The schedule that fired this job and the slot it was fired for (for
   * `triggerSchedule`, the time it was triggered); null for a job not fired
   * by a schedule.
   */
  readonly scheduled: ScheduledRun | null;
  /**
   * In a flow, the outputs of this node's parents that succeeded, keyed by
   * each parent's key (`null` for a parent without an `output` schema);
   * `{}` outside flows and for a node without parents. Typed by the
   * parents its job declares (`defineJob({ parents })`), else `unknown`.
   */
  readonly parents: ParentOutputs<P>;
  /**
   * In a flow, for a node added with `continueOnFailure`, the error
   * message of each parent that failed for good, was cancelled or skipped,
   * keyed by its key (such a parent is absent from `parents`); `{}` otherwise.
   */
  readonly parentErrors: Readonly<Record<string, string>>;
  /**
   * Adds a job to this job's batch, counted like the others (an import that
   * discovers more work). Rejects outside a batch, or once the batch was
   * cancelled or has finished.
   */
  addToBatch<J extends JobDefinition>(
    job: J,
    payload: PayloadOf<J>,
    options?: DispatchOptions,
  ): Promise<number>;
  /**
   * Reports how far this attempt has got, 0 to 100. Stored on the running
   * job at most once a second (the latest value wins) and shown by
   * `queue.counts()`; it is cleared when the job is claimed again.
   */
  progress(percent: number): void;
  /**
   * Appends a line to this job's log, kept with the job (per attempt, read
   * back with `queue.logs(id)`, the `logs` command and the dashboard). Lines
   * are written with the worker's next tick, so they survive a crash of the
   * attempt up to then; an encrypted job's lines are encrypted with its key.
   * `fields` must be a JSON-serializable object. A job keeps at most the
   * worker's `maxLogBytes` (64 KiB by default), dropping its oldest lines.
   *
   * @example Log a step with fields
   * ```ts ignore
   * ctx.log("charged the card", { orderId: payload.orderId, cents: 1_250 });
   * ```
   */
  log(message: string, fields?: Record<string, unknown>): void;
  /**
   * Ends this attempt without failing it once the handler returns: the job
   * comes back after `delayMs` (default 0). It still counts as an attempt.
   * An error thrown after it keeps the release and goes into the job's log;
   * a `PermanentError` thrown after it fails the job.
   */
  release(delayMs?: number): void;
  /**
   * Holds back this job's group for `ms` (a tenant's API answered 429 with
   * a `Retry-After`, say), then ends this attempt without failing it once
   * the handler returns: the group is paused until then in every process,
   * as `queue.pauseGroup(job, key, { forMs: ms })` pauses it (its other
   * jobs running now finish; the other groups go on), and this job comes
   * back when the hold ends, its attempt given back. The hold is written
   * with the job's put back, when the handler returns (or throws, unless it
   * throws a `PermanentError`, which fails the job and holds nothing), so
   * return soon after. Throws a `TypeError` in a job without `group`, a
   * `RangeError` for an `ms` that is not a positive number of ms up to
   * about 69 years (2^41).
   *
   * @example Hold back a tenant whose API said to wait
   * ```ts ignore
   * const response = await fetch(url, { signal: ctx.signal });
   * if (response.status === 429) {
   *   ctx.rateLimitGroup(Number(response.headers.get("retry-after") ?? 60) * 1_000);
   *   return;
   * }
   * ```
   */
  rateLimitGroup(ms: number): void;
  /**
   * Runs `fn` once, durably: its return value (JSON; with an `output`
   * schema, what the schema outputs) is recorded on the job before the step
   * resolves, and every later attempt of this job returns the recorded
   * value without running `fn` again; this run resolves with the recorded
   * value read back too, so every run sees the same. A step that throws is
   * not recorded; the attempt fails as usual and the next one resumes at
   * this step. A name used again in one run is numbered (`send`, `send#2`);
   * `#` is reserved. `fn` gets a signal that aborts with the attempt or at
   * the step's `timeoutMs`. Steps started together (`Promise.all`) take
   * their positions in call order, so the calls must come in the same order
   * on every attempt.
   */
  step<T, O = T>(
    name: string,
    fn: (signal: AbortSignal) => T | Promise<T>,
    options?: StepOptions<T, O>,
  ): Promise<O>;
  /**
   * Sleeps `ms` without holding a slot: the attempt ends, and the job is due
   * again at the wake time (recorded, so a restart in between changes
   * nothing). Sleeping does not count as an attempt; the handler runs again
   * from the top, its recorded steps returned as they were.
   */
  sleep(name: string, ms: number): Promise<void>;
  /**
   * As {@linkcode JobContext.sleep}, until `until`. A time past the longest
   * sleep, about 100 years from the runner's now, wakes at that longest
   * sleep; a time already past wakes at once.
   */
  sleepUntil(name: string, until: Date | number): Promise<void>;
  /**
   * Waits for a signal named `name` (`queue.signal(id, name, payload)`)
   * without holding a slot, and resolves its payload, or null once
   * `timeoutMs` passed without one. A signal sent before the wait began is
   * kept in the job's mailbox; each wait takes the oldest of its name.
   */
  waitFor<T = unknown>(name: string, options?: WaitOptions<T>): Promise<T | null>;
}

/** What a `failed` hook learns about the job that failed for good. */
export interface FailedJobContext {
  /** The job's id. */
  readonly id: number;
  /** The job's name. */
  readonly name: string;
  /** The queue the job ran on. */
  readonly queueName: string;
  /** How many times the handler started. */
  readonly attempts: number;
  /** Dispatches more jobs, e.g. a notification. */
  readonly queue: Dispatcher;
}

/** One problem a schema found, as zod reports it. */
export interface SchemaIssue {
  /** Where in the value. */
  readonly path: readonly PropertyKey[];
  /** What is wrong there. */
  readonly message: string;
}

/** What a schema's `safeParse` returns. */
export type SchemaResult<Output> =
  | {
    /** The value passed. */ readonly success: true;
    /** The parsed value. */ readonly data: Output;
  }
  | {
    /** The value failed. */ readonly success: false;
    /** Why. */ readonly error: { readonly issues: readonly SchemaIssue[] };
  };

/**
 * The schema of a job's payload: any zod 4 schema (`z.object({...})`) fits.
 * `_input` is what dispatch takes, `_output` what the handler gets.
 */
// deno-lint-ignore no-explicit-any
export interface PayloadSchema<Output = any, Input = any> {
  /** The parsed type (zod's `z.output`); only read by the type checker. */
  readonly _output: Output;
  /** The accepted type (zod's `z.input`); only read by the type checker. */
  readonly _input: Input;
  /** Checks a value without throwing. */
  safeParse(value: unknown): SchemaResult<Output>;
}

/** The payload a handler receives for schema `S`. */
export type PayloadOutput<S extends PayloadSchema> = S["_output"];
/** The payload dispatch takes for schema `S`. */
export type PayloadInput<S extends PayloadSchema> = S["_input"];

/**
 * What a handler returns: with an `output` schema, a value of its input
 * type (checked and stored as the job's result); without one, anything,
 * which is ignored.
 */
export type HandlerReturn<O extends PayloadSchema | undefined> = O extends PayloadSchema
  ? PayloadInput<O> | Promise<PayloadInput<O>>
  : unknown;

/**
 * The output a job's result holds (its `output` schema's type), or
 * `undefined` without one. (Matched against `JobDefinition<any, …>`: a
 * definition of a particular schema is not a `JobDefinition<PayloadSchema>`,
 * whose hooks take any payload.)
 */
// deno-lint-ignore no-explicit-any
export type OutputOf<J> = J extends JobDefinition<any, infer O>
  ? O extends PayloadSchema ? PayloadOutput<O> : undefined
  : never;

/** The default cap on a stored output: 256 KiB of JSON. */
export const DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024;

/** No declared parents: the default of {@linkcode JobContext} and {@linkcode JobConfig}. */
export type NoParents = Record<never, never>;

/** The settings {@linkcode defineJob} takes. */
export interface JobConfig<
  S extends PayloadSchema,
  O extends PayloadSchema | undefined = undefined,
  P extends ParentJobs = NoParents,
> {
  /** Stable name, stored with each job; 1 to 255 characters. */
  name: string;
  /** Schema the payload is checked against at dispatch and again before each run. */
  schema: S;
  /**
   * Queue the job goes to unless dispatch names another.
   * @default {"default"}
   */
  queue?: string;
  /**
   * Starts of the handler before the job fails for good; `Infinity` with `retryUntil`.
   * @default {3}
   */
  maxAttempts?: number;
  /**
   * Times a worker may die while running the job before it fails for good.
   * @default {2}
   */
  maxCrashes?: number;
  /**
   * Delay before each retry.
   * @default {(attempt) => 10_000 * attempt}
   */
  backoff?: Backoff;
  /**
   * Spread of each retry delay, as a fraction (0.5 = ±50 %), so that jobs that
   * failed together come back spread out rather than all at once.
   * @default {0.5}
   */
  jitter?: number;
  /**
   * Limit for one attempt; at this point `ctx.signal` aborts and the attempt fails.
   * @default {60_000}
   */
  timeoutMs?: number;
  /**
   * Deadline for retries, computed at dispatch from the dispatch time: once it
   * has passed, a failure is final even if attempts remain.
   */
  retryUntil?: (dispatchedAt: Date) => Date;
  /**
   * A job not started this long after its dispatch never starts: it ends as
   * `expired`. A dispatch's `expireInMs` overrides it.
   * @default {undefined (never expires)}
   */
  expireInMs?: number;
  /**
   * A budget across every attempt, counted from the dispatch: past it no new
   * attempt starts (a retry deadline, as `retryUntil` sets; the earlier of
   * the two wins). A dispatch's `deadlineMs` overrides it.
   * @default {undefined (no budget)}
   */
  deadlineMs?: number;
  /**
   * Default priority; higher runs first within a queue.
   * @default {0}
   */
  priority?: number;
  /**
   * Keep the payload encrypted at rest with `APP_KEY` (AES-256-GCM): the
   * database, failed jobs, logs and errors never hold its plaintext. The
   * job's name may then not hold `#` or start with `job-log:` (docs/encryption.md).
   * @default {false}
   */
  encrypted?: boolean;
  /**
   * While a job of this kind with the same `uniqueId` is queued or running,
   * for at most this long, dispatching another returns the holder's id and
   * stores nothing.
   */
  uniqueForMs?: number;
  /**
   * The id that makes two dispatches the same job, for `uniqueForMs` or
   * `debounceMs` (one of them is needed); 1 to 255 characters.
   * @default {() => "" (one per job name)}
   */
  uniqueId?: (payload: PayloadInput<S>) => string;
  /**
   * When a unique job lets the next one in: `"completed"` once it succeeded
   * or failed for good, `"processing"` as soon as it starts. Needs
   * `uniqueForMs`.
   * @default {"completed"}
   */
  uniqueUntil?: "completed" | "processing";
  /**
   * Dispatching again with the same `uniqueId` while the job still waits
   * replaces its payload and moves its start to this long from now.
   */
  debounceMs?: number;
  /** With `debounceMs`: the job starts at the latest this long after the first dispatch. */
  debounceMaxWaitMs?: number;
  /**
   * The job's group (its fairness key), computed from each payload at
   * dispatch and stored with the job: a non-empty string of at most 255
   * characters. Claims take due jobs round robin across the groups that
   * have any, so a group with a long backlog does not starve the others.
   * See docs/groups.md.
   */
  group?: (payload: PayloadInput<S>) => string;
  /**
   * With `group`: at most this many jobs of one group leased at once,
   * across every process (a job claimed ahead holds a slot too).
   * @default {no limit}
   */
  groupConcurrency?: number;
  /**
   * With `groupConcurrency: 1`: each group's jobs run one at a time in
   * dispatch order; a job that fails holds its group until it succeeds,
   * fails for good or is cancelled (its backoff delay blocks the group).
   * @default {false}
   */
  ordered?: boolean;
  /**
   * With `group`: at most `max` jobs of one group claimed per window of
   * `perMs` ms, across every process, every group of the job limited
   * alike. A group over its limit is passed over by the round robin until
   * its window turns, while the other groups go on. Each claim counts (a
   * retry's too). See docs/groups.md.
   * @default {no limit}
   */
  groupRate?: GroupRate;
  /**
   * Rules checked before each attempt: {@linkcode withoutOverlapping},
   * {@linkcode rateLimited}. A job they hold back is put back without using an attempt.
   */
  middleware?: (payload: PayloadOutput<S>) => readonly JobMiddleware[];
  /**
   * Schema of the handler's return value, the job's output: checked when the
   * handler returns (a mismatch fails the attempt with a `ValidationError`),
   * then stored with the job's settle, encrypted for an encrypted job, and
   * read back by `queue.result()` and `queue.dispatchAndWait()`. Without it
   * the return value is ignored.
   *
   * It is stored as JSON, so it must hold only what JSON gives back as it
   * was: `defineJob` refuses a schema with a `Date`, `Map`, `Set`, BigInt,
   * symbol, function, Promise, File or NaN in it, or `undefined` other than
   * an optional object property, naming the part (use `z.iso.datetime()`
   * and return `date.toISOString()`; `z.record()` or arrays for maps and
   * sets). A value a transform or a custom schema returns that JSON would
   * change fails the attempt with a `ValidationError` naming where.
   */
  output?: O;
  /**
   * The parents this job reads as a flow node, by the key each has in its
   * flow: `{ "fetch-sales": fetchSales, refunds: fetchRefunds }` types
   * `ctx.parents["fetch-sales"]` as `fetchSales`'s output (null for a job
   * without `output`). Such a job runs only as a flow node:
   * `flow.dispatch()` checks that each declared key is a parent of the node
   * running that job, and refuses the node with `continueOnFailure` (a
   * parent's output could then be absent); any other dispatch of it is
   * refused. See docs/flows.md.
   * @default {none: ctx.parents is untyped}
   */
  parents?: P;
  /**
   * Largest output stored, in bytes of JSON; a bigger one fails the attempt.
   * @default {262_144}
   */
  maxOutputBytes?: number;
  /**
   * How long a finished job (its output, or its cancel) is kept in the
   * completed jobs, in ms; 0 keeps none.
   * @default {the queue's keepFinishedMs}
   */
  keepFinishedMs?: number;
  /** @deprecated Use `keepFinishedMs`; still accepted (`keepFinishedMs` wins when both are given). */
  keepCompletedMs?: number;
  /** Runs the job. Throw to fail the attempt; throw `PermanentError` to fail for good. */
  handle(payload: PayloadOutput<S>, ctx: JobContext<P>): HandlerReturn<O>;
  /** Runs once when the job fails for good. An error it throws is logged, never retried. */
  failed?(payload: PayloadOutput<S>, error: Error, ctx: FailedJobContext): void | Promise<void>;
}

/** A job as {@linkcode defineJob} returns it: every setting resolved. */
// `any` as the default keeps `JobDefinition` (no argument) assignable from every definition:
// the schema type sits in both argument and result positions, which would make it invariant.
export interface JobDefinition<
  // deno-lint-ignore no-explicit-any
  S extends PayloadSchema = any,
  // deno-lint-ignore no-explicit-any
  O extends PayloadSchema | undefined = any,
> {
  /** Stable name, stored with each job. */
  readonly name: string;
  /** Schema the payload is checked against. */
  readonly schema: S;
  /** Default queue. */
  readonly queue: string;
  /** Starts of the handler before the job fails for good. */
  readonly maxAttempts: number;
  /** Worker deaths tolerated before the job fails for good. */
  readonly maxCrashes: number;
  /** Delay before each retry. */
  readonly backoff: Backoff;
  /** Spread of each retry delay, as a fraction. */
  readonly jitter: number;
  /** Limit for one attempt, in milliseconds. */
  readonly timeoutMs: number;
  /** Deadline for retries, from the dispatch time. */
  readonly retryUntil: ((dispatchedAt: Date) => Date) | undefined;
  /** How long after its dispatch an unstarted job expires, in ms, or undefined for never. */
  readonly expireInMs: number | undefined;
  /** The budget across attempts from the dispatch, in ms, or undefined for none. */
  readonly deadlineMs: number | undefined;
  /** Default priority. */
  readonly priority: number;
  /** Whether the payload is encrypted at rest. */
  readonly encrypted: boolean;
  /** How long a unique job keeps others out, or undefined when it is not unique. */
  readonly uniqueForMs: number | undefined;
  /** The id that makes two dispatches the same job. */
  readonly uniqueId: (payload: PayloadInput<S>) => string;
  /** When a unique job lets the next one in. */
  readonly uniqueUntil: "completed" | "processing";
  /** The debounce delay, or undefined when the job is not debounced. */
  readonly debounceMs: number | undefined;
  /** The longest a debounced job waits after its first dispatch, or undefined. */
  readonly debounceMaxWaitMs: number | undefined;
  /** The group (fairness key) of a payload, or undefined when the job has none. */
  readonly group: ((payload: PayloadInput<S>) => string) | undefined;
  /** Most jobs of one group leased at once, or undefined for no limit. */
  readonly groupConcurrency: number | undefined;
  /** Whether each group's jobs run one at a time in dispatch order. */
  readonly ordered: boolean;
  /** Most claims of one group per window, or undefined for no limit. */
  readonly groupRate: GroupRate | undefined;
  /** Rules checked before each attempt, or undefined. */
  readonly middleware: ((payload: PayloadOutput<S>) => readonly JobMiddleware[]) | undefined;
  /** Schema of the handler's return value, or undefined when its return value is ignored. */
  readonly output: O;
  /** The parents it declares as a flow node, by key, or undefined. */
  readonly parents: ParentJobs | undefined;
  /** Largest output stored, in bytes of JSON. */
  readonly maxOutputBytes: number;
  /** How long a finished job is kept, in ms, or undefined for the queue's default. */
  readonly keepFinishedMs: number | undefined;
  /** Runs the job. */
  readonly handle: (payload: PayloadOutput<S>, ctx: JobContext) => HandlerReturn<O>;
  /** Runs once when the job fails for good. */
  readonly failed:
    | ((payload: PayloadOutput<S>, error: Error, ctx: FailedJobContext) => void | Promise<void>)
    | undefined;
}

/** The payload a job's dispatch takes (its schema's input type). */
export type PayloadOf<J> = J extends JobDefinition<infer S> ? PayloadInput<S> : never;

const DEFINITIONS = new WeakSet<object>();

/**
 * Defines a job. Export it from your jobs module so that every process (the
 * app, the `work` command, each Web Worker) knows it by name.
 *
 * @example Defining a job
 * ```ts
 * import { defineJob } from "@renox/queue";
 * import { z } from "zod";
 *
 * export const sendReceipt = defineJob({
 *   name: "send-receipt",
 *   schema: z.object({ orderId: z.number().int() }),
 *   maxAttempts: 5,
 *   backoff: [1_000, 5_000, 30_000],
 *   async handle({ orderId }, ctx) {
 *     console.log(`receipt for order ${orderId}, attempt ${ctx.attempt}`);
 *   },
 * });
 * ```
 */
export function defineJob<
  S extends PayloadSchema,
  O extends PayloadSchema | undefined = undefined,
  P extends ParentJobs = NoParents,
>(given: JobConfig<S, O, P>): JobDefinition<S, O> {
  if (typeof given !== "object" || given === null || Array.isArray(given)) {
    throw new TypeError(
      `defineJob: give an object with name, schema and handle: got ${shown(given)}`,
    );
  }
  const name = assertName(given.name, "defineJob", "name");
  const where = `Job "${name}"`;
  const config = optionBag(given, where, JOB_OPTIONS)!;
  assertSchema(config.schema, where, "schema");
  if (config.output !== undefined) assertSchema(config.output, where, "output");
  const unsafeOutput = config.output === undefined ? null : jsonUnsafePart(config.output, "output");
  if (unsafeOutput !== null) {
    throw new TypeError(
      `${where}: output is stored as JSON, and its schema has a part that does not survive it: ${unsafeOutput}`,
    );
  }
  const maxOutputBytes = config.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  if (!Number.isSafeInteger(maxOutputBytes) || maxOutputBytes < 2) {
    throw new RangeError(
      `${where}: maxOutputBytes must be an integer >= 2: got ${shown(maxOutputBytes)}`,
    );
  }
  const keepFinishedMs = keepMsOption(config, where);
  for (
    const hook of ["handle", "failed", "retryUntil", "uniqueId", "middleware", "group"] as const
  ) {
    const value = config[hook];
    if (typeof value !== "function" && (hook === "handle" || value !== undefined)) {
      throw new TypeError(`${where}: ${hook} must be a function`);
    }
  }
  const queue = config.queue ?? "default";
  assertQueueName(queue, where);
  const definition: JobDefinition<S, O> = {
    name,
    schema: config.schema,
    queue,
    maxAttempts: positive(where, "maxAttempts", config.maxAttempts ?? 3, true),
    maxCrashes: positive(where, "maxCrashes", config.maxCrashes ?? 2, true),
    backoff: config.backoff ?? defaultBackoff,
    jitter: config.jitter ?? 0.5,
    timeoutMs: positive(where, "timeoutMs", config.timeoutMs ?? 60_000, false),
    retryUntil: config.retryUntil,
    expireInMs: config.expireInMs === undefined
      ? undefined
      : assertLifetimeMs(config.expireInMs, where, "expireInMs"),
    deadlineMs: config.deadlineMs === undefined
      ? undefined
      : assertLifetimeMs(config.deadlineMs, where, "deadlineMs"),
    priority: config.priority ?? 0,
    encrypted: config.encrypted ?? false,
    uniqueForMs: optionalMs(where, "uniqueForMs", config.uniqueForMs),
    uniqueId: config.uniqueId ?? (() => ""),
    uniqueUntil: config.uniqueUntil ?? "completed",
    debounceMs: optionalMs(where, "debounceMs", config.debounceMs),
    debounceMaxWaitMs: optionalMs(where, "debounceMaxWaitMs", config.debounceMaxWaitMs),
    ...groupSettings(where, config),
    middleware: config.middleware,
    output: config.output as O,
    parents: declaredParents(config.parents, where),
    maxOutputBytes,
    keepFinishedMs,
    // Its ctx.parents typed by `parents`, which flow.dispatch() checks against the node's parents.
    handle: config.handle as JobDefinition<S, O>["handle"],
    failed: config.failed,
  };
  if (typeof definition.encrypted !== "boolean") {
    throw new TypeError(
      `${where}: encrypted must be true or false: got ${shown(config.encrypted)}`,
    );
  }
  if (definition.group !== undefined && definition.parents !== undefined) {
    throw new TypeError(
      `${where}: group and parents cannot go together: a job that declares parents runs only as a flow's node, and a job with a group cannot be one (docs/groups.md)`,
    );
  }
  if (definition.encrypted && /#|^job-log:/.test(definition.name)) {
    throw new TypeError(
      `${where}: an encrypted job's name cannot hold "#" or start with "job-log:": its payload is sealed for its name, and those mark what its other sealed values (outputs, step outputs, signals, log lines) are sealed for, which a copied ciphertext could then pass for`,
    );
  }
  if (definition.uniqueUntil !== "completed" && definition.uniqueUntil !== "processing") {
    throw new TypeError(
      `${where}: uniqueUntil must be "completed" or "processing": got ${shown(config.uniqueUntil)}`,
    );
  }
  if (definition.uniqueForMs !== undefined && definition.debounceMs !== undefined) {
    throw new TypeError(
      `${where}: a job is either unique (uniqueForMs) or debounced (debounceMs), not both`,
    );
  }
  if (definition.debounceMaxWaitMs !== undefined && definition.debounceMs === undefined) {
    throw new TypeError(`${where}: debounceMaxWaitMs needs debounceMs`);
  }
  // Without the option they serve, these would be ignored and every dispatch stored.
  if (
    config.uniqueId !== undefined && definition.uniqueForMs === undefined &&
    definition.debounceMs === undefined
  ) {
    throw new TypeError(`${where}: uniqueId needs uniqueForMs or debounceMs`);
  }
  if (config.uniqueUntil !== undefined && definition.uniqueForMs === undefined) {
    throw new TypeError(`${where}: uniqueUntil needs uniqueForMs`);
  }
  assertBackoff(name, definition.backoff);
  if (
    definition.maxAttempts === Infinity && definition.retryUntil === undefined &&
    definition.deadlineMs === undefined
  ) {
    throw new RangeError(
      `${where}: maxAttempts Infinity needs retryUntil or deadlineMs, or the job would retry forever`,
    );
  }
  if (
    typeof definition.jitter !== "number" || !(definition.jitter >= 0 && definition.jitter <= 1)
  ) {
    throw new RangeError(
      `${where}: jitter must be a number from 0 to 1: got ${shown(config.jitter)}`,
    );
  }
  assertPriority(definition.priority, where);
  DEFINITIONS.add(definition);
  return Object.freeze(definition);
}

/**
 * A job's group settings, checked: `groupConcurrency`, `groupRate` and
 * `ordered` need a `group`, and `ordered` needs `groupConcurrency: 1`.
 */
function groupSettings(
  where: string,
  config: Pick<JobConfig<PayloadSchema>, "group" | "groupConcurrency" | "ordered" | "groupRate">,
): Pick<JobDefinition, "group" | "groupConcurrency" | "ordered" | "groupRate"> {
  const { group, groupConcurrency, ordered = false } = config;
  const groupRate = config.groupRate === undefined
    ? undefined
    : assertGroupRate(config.groupRate, where);
  if (groupRate !== undefined && group === undefined) {
    throw new TypeError(`${where}: groupRate needs group`);
  }
  if (groupConcurrency !== undefined) {
    if (!Number.isSafeInteger(groupConcurrency) || groupConcurrency < 1) {
      throw new RangeError(
        `${where}: groupConcurrency must be a whole number >= 1: got ${shown(groupConcurrency)}`,
      );
    }
    if (group === undefined) throw new TypeError(`${where}: groupConcurrency needs group`);
  }
  if (typeof ordered !== "boolean") {
    throw new TypeError(`${where}: ordered must be true or false: got ${shown(ordered)}`);
  }
  if (ordered && groupConcurrency !== 1) {
    throw new TypeError(
      `${where}: ordered needs groupConcurrency: 1 (one job of a group at a time, in dispatch order): got groupConcurrency ${
        shown(groupConcurrency)
      }`,
    );
  }
  return { group, groupConcurrency, ordered, groupRate };
}

/** `defineJob({ parents })` checked: an object of job definitions, frozen; undefined when absent. */
function declaredParents(parents: unknown, where: string): ParentJobs | undefined {
  if (parents === undefined) return undefined;
  if (typeof parents !== "object" || parents === null || Array.isArray(parents)) {
    throw new TypeError(
      `${where}: parents must be an object of job definitions by key: got ${shown(parents)}`,
    );
  }
  for (const [key, job] of Object.entries(parents)) {
    if (!isJobDefinition(job)) {
      throw new TypeError(
        `${where}: parents["${key}"] must be a job definition (made by defineJob): got ${
          shown(job)
        }`,
      );
    }
  }
  return Object.freeze({ ...parents as ParentJobs });
}

/** The fields of `defineJob({ groupRate })`. */
const GROUP_RATE_FIELDS = optionNames<GroupRate>()(["max", "perMs"]);

/** A `groupRate` checked: `max` a whole number >= 1, `perMs` a whole number of ms >= 1. */
function assertGroupRate(rate: unknown, where: string): GroupRate {
  if (typeof rate !== "object" || rate === null || Array.isArray(rate)) {
    throw new TypeError(`${where}: groupRate must be { max, perMs }: got ${shown(rate)}`);
  }
  const { max, perMs } = optionBag(rate, `${where}: groupRate`, GROUP_RATE_FIELDS) as Record<
    string,
    unknown
  >;
  for (const [field, value] of [["max", max], ["perMs", perMs]] as const) {
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1) {
      throw new RangeError(
        `${where}: groupRate.${field} must be a whole number >= 1: got ${shown(value)}`,
      );
    }
  }
  return Object.freeze({ max: max as number, perMs: perMs as number });
}

/** Whether `value` was made by {@linkcode defineJob}. */
export function isJobDefinition(value: unknown): value is JobDefinition {
  return typeof value === "object" && value !== null && DEFINITIONS.has(value);
}

/** Throws a `RangeError` naming `where` unless `priority` is a 32-bit integer (what every store keeps). */
export function assertPriority(priority: unknown, where: string): void {
  if (!Number.isSafeInteger(priority) || Math.abs(priority as number) > 2_147_483_647) {
    throw new RangeError(
      `${where}: priority must be an integer from -2147483647 to 2147483647: got ${
        shown(priority)
      }`,
    );
  }
}

/**
 * The `keepFinishedMs` option of a job or a queue, checked: or its deprecated
 * name `keepCompletedMs`; undefined when neither is given. @internal
 */
export function keepMsOption(
  options: { readonly keepFinishedMs?: number; readonly keepCompletedMs?: number },
  where: string,
): number | undefined {
  if (options.keepFinishedMs !== undefined) return assertKeepMs(options.keepFinishedMs, where);
  if (options.keepCompletedMs === undefined) return undefined;
  return assertKeepMs(options.keepCompletedMs, where, "keepCompletedMs");
}

/**
 * Throws a `RangeError` naming `where` unless `keepMs` is a whole number of
 * ms from 0 (keep nothing) to 10 years.
 */
export function assertKeepMs(keepMs: unknown, where: string, field = "keepFinishedMs"): number {
  if (!Number.isSafeInteger(keepMs) || (keepMs as number) < 0 || (keepMs as number) > MAX_KEEP_MS) {
    throw new RangeError(
      `${where}: ${field} must be a whole number of ms from 0 to ${MAX_KEEP_MS}: got ${
        shown(keepMs)
      }`,
    );
  }
  return keepMs as number;
}

/** The longest a finished job can be kept: ten years. */
const MAX_KEEP_MS = 10 * 365 * 24 * 60 * 60 * 1_000;

/**
 * Throws a `TypeError` naming `where` and `option` unless `schema` is a zod
 * schema (it parses with `safeParse`): what every option that takes a
 * schema checks (a job's `schema` and `output`, a step's `output`, a
 * wait's `schema`).
 */
export function assertSchema(schema: unknown, where: string, option: string): void {
  if (typeof (schema as { safeParse?: unknown } | null)?.safeParse !== "function") {
    throw new TypeError(`${where}: ${option} must be a zod schema: got ${typeOf(schema)}`);
  }
}

function typeOf(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
}

/** An optional positive duration in ms, checked like `timeoutMs`. */
function optionalMs(where: string, field: string, value: number | undefined): number | undefined {
  return value === undefined ? undefined : Math.round(positive(where, field, value, false));
}

function positive(where: string, field: string, value: number, integer: boolean): number {
  const ok = integer
    ? value === Infinity || (Number.isSafeInteger(value) && value > 0)
    : Number.isFinite(value) && value > 0 && value <= 2_147_483_647;
  if (!ok) {
    const kind = integer
      ? "a positive integer up to 9007199254740991, or Infinity"
      : "a positive number of ms up to 2147483647";
    throw new RangeError(`${where}: ${field} must be ${kind}: got ${shown(value)}`);
  }
  return value;
}

/** When the job's `retryUntil` says its retries end, for a dispatch at `now`; `where` starts the error. */
function retryDeadline(job: JobDefinition, now: number, where: string): number {
  let until: unknown;
  try {
    until = job.retryUntil!(new Date(now));
  } catch (error) {
    throw new TypeError(`${where}: its retryUntil threw: ${(error as Error)?.message ?? error}`, {
      cause: error,
    });
  }
  if (!(until instanceof Date)) {
    throw new TypeError(`${where}: retryUntil must return a Date: got ${shown(until)}`);
  }
  if (!Number.isFinite(until.getTime())) {
    throw new RangeError(`${where}: retryUntil returned an invalid date`);
  }
  return until.getTime();
}
