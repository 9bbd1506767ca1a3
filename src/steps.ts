/**
 * Durable steps: the options of `ctx.step`, `ctx.waitFor`, and what
 * `queue.steps(id)` lists. A handler's steps are recorded as memos on its
 * job; a later attempt (after a retry, a crash, a sleep or a wait) returns
 * each recorded step's output instead of running it again, so the handler
 * resumes where it stopped. See docs/steps.md.
 *
 * @module
 */
import type { PayloadSchema } from "./job.ts";

/**
 * How one `ctx.step` runs. `T` is what the step's function returns, `O`
 * what the step resolves with: the output of its `output` schema, else `T`.
 */
export interface StepOptions<T = unknown, O = T> {
  /**
   * Past this many ms the step's signal aborts with a `StepTimeoutError` and
   * the attempt ends with it (counted as an attempt, retried by the job's
   * `backoff`); a Web Worker whose step does not stop within the worker's
   * `graceMs` more is terminated. The next attempt resumes at this step.
   * Absent: only the job's `timeoutMs` bounds it.
   */
  readonly timeoutMs?: number;
  /**
   * How many times `fn` runs within one attempt before the step's error
   * ends the attempt (default 1: no retry inside the attempt). A
   * `PermanentError` is not retried. Across attempts the job's own
   * `maxAttempts` and `backoff` apply.
   */
  readonly maxAttempts?: number;
  /**
   * The wait before each retry inside the attempt, in ms: a list (per retry,
   * the last repeated) or a function of the retry number (from 1); default
   * 1 s × the retry number.
   */
  readonly backoff?: readonly number[] | ((retry: number) => number);
  /**
   * Parses what the step's function returned; its output is what is
   * recorded and what the step resolves with on every run, the first
   * included (keys it strips stay stripped, a transform's result is kept).
   * A schema without a transform or a pipe checks the output again when a
   * later run reads it back.
   */
  // deno-lint-ignore no-explicit-any
  readonly output?: PayloadSchema<O, any>;
}

/** How one `ctx.waitFor` waits. */
export interface WaitOptions<T = unknown> {
  /** Past this many ms without a signal the wait resolves `null`; absent: it waits for ever. */
  readonly timeoutMs?: number;
  /**
   * Checks the signal's payload; a payload that fails it fails the job for
   * good (a `PayloadIntegrityError` naming the wait's schema).
   */
  readonly schema?: PayloadSchema<T>;
}

/** A step a job's handler recorded, as `queue.steps(id)` lists it. */
export interface JobStep {
  /** Its call position in the handler, from 1. */
  readonly seq: number;
  /** Its name, numbered from the second use of one name in a run (`send`, `send#2`). */
  readonly key: string;
  /** A step's output, a sleep, or a wait for a signal. */
  readonly kind: "step" | "sleep" | "wait";
  /** `"parked"` for a wait still parked for its signal (or its timeout); else `"done"`. */
  readonly state: "done" | "parked";
  /**
   * A step's output or a wait's signal payload (null when it timed out),
   * read back from JSON; undefined for a sleep, a wait still waiting, and
   * an encrypted job's outputs (see `encrypted`).
   */
  readonly output?: unknown;
  /** True when the output is encrypted (an encrypted job's, or a signal sealed with the app key). */
  readonly encrypted: boolean;
  /** A sleep's wake time, or a wait's timeout; null for a step and a wait without one. */
  readonly until: Date | null;
  /** The attempt that recorded it. */
  readonly attempt: number;
  /** How long the step ran, in ms (0 for sleeps and waits). */
  readonly durationMs: number;
  /** When it was recorded. */
  readonly at: Date;
}

/** What became of `queue.signal()`; see {@linkcode SignalOutcome} in the store rows. */
export type { SignalOutcome } from "./stores/rows/steps.ts";
