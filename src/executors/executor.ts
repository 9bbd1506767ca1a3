/**
 * The boundary between the runner, which decides a job's fate, and the place
 * its handler runs (this isolate, or a pool of Web Workers). Everything that
 * crosses it can be structured-cloned.
 *
 * @module
 */

/** One attempt to run. */
export interface ExecutionRequest {
  /** The job's id. */
  readonly id: number;
  /** The job's name. */
  readonly name: string;
  /** The queue it was taken from. */
  readonly queueName: string;
  /** The stored payload text. */
  readonly payload: string;
  /** This attempt's number. */
  readonly attempt: number;
  /** Aborted on timeout, on stop and when the lease is lost; its reason says which. */
  readonly signal: AbortSignal;
}

/** How an attempt ended, as the handler saw it. */
export type ExecutionResult =
  | {
    /** The handler returned. */
    readonly kind: "success";
  }
  | {
    /** The handler called `ctx.release(delayMs)`. */
    readonly kind: "release";
    /** Wait before the next attempt. */
    readonly delayMs: number;
  }
  | {
    /** The handler threw, or its payload could not be used. */
    readonly kind: "error";
    /** What was thrown, as an `Error`. */
    readonly error: Error;
    /** True when no retry can help (`PermanentError`, `PayloadIntegrityError`). */
    readonly permanent: boolean;
  };

/** A job's `failed` hook to run. */
export interface FailedHookRequest {
  /** The job's id. */
  readonly id: number;
  /** The job's name. */
  readonly name: string;
  /** The queue it ran on. */
  readonly queueName: string;
  /** The stored payload text. */
  readonly payload: string;
  /** How many times its handler started. */
  readonly attempts: number;
  /** Why it failed. */
  readonly error: Error;
}

/** Runs handlers. */
export interface Executor {
  /** Runs one attempt; never rejects (a handler's error is an `"error"` result). */
  run(request: ExecutionRequest): Promise<ExecutionResult>;
  /** Runs a job's `failed` hook; rejects with what the hook threw. */
  runFailedHook(request: FailedHookRequest): Promise<void>;
  /** Frees what the executor holds. */
  close(): Promise<void>;
}
