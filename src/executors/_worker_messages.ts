/**
 * The messages between the pool (main thread) and each Web Worker, and how
 * errors cross that boundary.
 *
 * @internal
 * @module
 */
import type { AppKeys } from "../encryption.ts";
import type { DispatchOptions } from "../job.ts";
import type { LogCall, ParkRequest } from "./executor.ts";
import type { JobStepsRow, StepWrite } from "../stores/store.ts";

/** An error as it crosses the boundary. */
export interface WireError {
  readonly name: string;
  readonly message: string;
  readonly stack: string | undefined;
}

/**
 * What an attempt sent to a Web Worker needs (its signal stays behind), with
 * the pool's id for the run first. A tuple rather than an object: cloning
 * one costs about a third as much, and every attempt crosses twice.
 */
export type WireRun = readonly [
  runId: number,
  id: number,
  name: string,
  queueName: string,
  payload: string,
  attempt: number,
  batchId: number | null,
  scheduled: { readonly name: string; readonly slot: number } | null,
  traceparent: string | null,
  flowParents: string | null,
];

/** What a failed hook sent to a Web Worker needs (its error travels beside it). */
export interface WireFailedHook {
  readonly id: number;
  readonly name: string;
  readonly queueName: string;
  readonly payload: string;
  readonly attempts: number;
}

/** Main thread to Web Worker. */
export type ToWorker =
  | {
    readonly type: "init";
    readonly jobsUrl: string;
    readonly appKeys: AppKeys | null;
    /** Write what handlers print with `console.*` into their job's log too. */
    readonly captureConsole?: boolean;
    /** The worker's `maxLogBytes`: lines waiting to be sent are capped per attempt. */
    readonly maxLogBytes: number;
  }
  | {
    /**
     * The pool heard "ready": runs may start. Until then none does, so a Web
     * Worker that dies before this failed to start, and no job made it die.
     */
    readonly type: "go";
  }
  | {
    /** The attempts one worker tick handed this Web Worker, started together. */
    readonly type: "run";
    readonly runs: WireRun[];
  }
  | { readonly type: "abort"; readonly runId: number; readonly reason: WireError }
  | {
    readonly type: "failed-hook";
    readonly runId: number;
    readonly request: WireFailedHook;
    readonly error: WireError;
  }
  | {
    /** The answer to a "steps" call: the memos read, or nothing for a write; or its error. */
    readonly type: "steps-done";
    readonly callId: number;
    readonly read?: JobStepsRow;
    readonly error?: WireError;
  }
  | {
    readonly type: "dispatched";
    readonly callId: number;
    readonly ids?: number[];
    readonly error?: WireError;
  };

/** How one attempt ended, as a Web Worker reports it, unless it succeeded without output. */
export interface WireResult {
  readonly runId: number;
  readonly kind: "success" | "release" | "park" | "error";
  readonly output?: string | null;
  /** How a sleep or a wait parked the attempt (kind "park"). */
  readonly park?: ParkRequest;
  readonly delayMs?: number;
  /** A release after `ctx.rateLimitGroup` (kind "release"). */
  readonly holdsGroup?: boolean;
  readonly error?: WireError;
  readonly permanent?: boolean;
}

/** Web Worker to main thread. */
export type FromWorker =
  | {
    /** The jobs module loaded: the Web Worker can run jobs. */
    readonly type: "ready";
  }
  | {
    /** The jobs module (or the key) failed to load: the Web Worker cannot run any job. */
    readonly type: "init-failed";
    readonly error: WireError;
  }
  | {
    /** Several results at once, so the runner settles them in one transaction. */
    readonly type: "results";
    /** The runs that succeeded without output (most do): their ids alone. */
    readonly done: number[];
    /** How every other run ended. */
    readonly results: WireResult[];
  }
  | { readonly type: "hook-done"; readonly runId: number; readonly error?: WireError }
  | {
    /** The lines attempts logged since the last message, in order (sent before their results). */
    readonly type: "logs";
    readonly lines: { readonly runId: number; readonly line: LogCall }[];
  }
  | {
    /** The attempts whose handler began since the last message and still run. */
    readonly type: "begun";
    readonly runIds: number[];
  }
  | {
    /** The latest progress of each attempt that reported some since the last message. */
    readonly type: "progress";
    readonly reports: { readonly runId: number; readonly percent: number }[];
  }
  | {
    /** An attempt's durable steps: read its memos, or record one (answered by "steps-done"). */
    readonly type: "steps";
    readonly callId: number;
    readonly runId: number;
    /** The memo to record; absent: read the memos and the mailbox. */
    readonly write?: StepWrite;
  }
  | {
    /** A step with a timeout began (`timeoutMs` set) or ended (absent) in attempt `runId`. */
    readonly type: "step-timer";
    readonly runId: number;
    readonly timerId: number;
    readonly key: string;
    readonly timeoutMs?: number;
  }
  | {
    readonly type: "dispatch";
    readonly callId: number;
    readonly name: string;
    readonly payloads: unknown[];
    readonly options: DispatchOptions | undefined;
    /** Set when the jobs join this batch (`ctx.addToBatch`). */
    readonly batchId: number | null;
    /** The trace context active where the handler dispatched, stored with the jobs. */
    readonly traceparent?: string | null;
  };

/**
 * `error` in a form that survives `postMessage`: strings only. A handler may
 * throw an error whose `name` or `stack` is a function, or whose getters
 * throw; each field is then read defensively, so one odd error can never make
 * the message carrying it (and its siblings' results) fail to clone.
 */
export function toWire(error: Error): WireError {
  const stack = text(() => error.stack, undefined);
  return {
    name: text(() => error.name, "Error"),
    message: text(() => error.message, ""),
    stack: stack === "" ? undefined : stack,
  };
}

/** A field as a string: `String()` of it, `fallback` when it is missing or cannot be read. */
function text<T extends string | undefined>(read: () => unknown, fallback: T): string | T {
  try {
    const value = read();
    if (value === undefined || value === null) return fallback;
    return typeof value === "string" ? value : String(value);
  } catch {
    return fallback;
  }
}

/** An `Error` again, with the name, message and stack it had. */
export function fromWire(wire: WireError): Error {
  const error = new Error(wire.message);
  error.name = wire.name;
  if (wire.stack !== undefined) error.stack = wire.stack;
  return error;
}
