/**
 * The messages between the pool (main thread) and each Web Worker, and how
 * errors cross that boundary.
 *
 * @internal
 * @module
 */
import type { AppKeys } from "../encryption.ts";
import {
  JobCancelledError,
  JobTimeoutError,
  JobWaitTimeoutError,
  OutdatedCodeError,
  PayloadIntegrityError,
  PermanentError,
  QueueClosedError,
  QueueLostError,
  QueueMovedError,
  StepMismatchError,
  StepTimeoutError,
  ValidationError,
} from "../errors.ts";
import type { DispatchOptions } from "../job.ts";
import type { EncodedPayload } from "../dispatch/job_rows.ts";
import type { LogCall, ParkRequest } from "./executor.ts";
import type { JobStepsRow, StepWrite } from "../stores/store.ts";

/** An error as it crosses the boundary. */
export interface WireError {
  readonly name: string;
  readonly message: string;
  readonly stack: string | undefined;
  /**
   * The class to build it again as, when it is one of {@linkcode ERROR_CLASSES}
   * (absent: a plain `Error`).
   */
  readonly type?: string;
  /** That class's own fields (`issues`, `timeoutMs`…), as they were. */
  readonly fields?: Record<string, unknown>;
  /** Its `cause`, when that is an error too. */
  readonly cause?: WireError;
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
  /** Its cell in the Web Worker's begin cells ({@linkcode BeginCell}), or -1 for none. */
  cell: number,
];

/**
 * The states of an attempt's cell in the begin cells a pool shares with each
 * Web Worker (an `Int32Array` on a `SharedArrayBuffer`, sent with "init").
 * The Web Worker moves a cell from `Queued` to `Begun` right before it calls
 * the handler, and the pool from `Queued` to `Abandoned` when it gives up on
 * an attempt that has not begun (it timed out or was cancelled while it
 * waited behind another handler); each with one compare-and-exchange, so
 * exactly one of them wins. An abandoned attempt's handler is never called,
 * so the Web Worker need not be terminated for it; and when a Web Worker
 * dies, the attempts whose handler had not begun are put back uncharged.
 * The Web Worker moves a cell to `Succeeded` when its handler succeeded
 * without output, as it queues that result: a Web Worker that ends before
 * the result is sent (a promise its handler left rejects) still counts it.
 */
export const BeginCell = { Queued: 0, Begun: 1, Abandoned: 2, Succeeded: 3 } as const;

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
    /** The queue's `maxPayloadBytes`: what handlers dispatch is checked here against it. */
    readonly maxPayloadBytes: number;
    /** The begin cells, an `Int32Array`'s buffer ({@linkcode BeginCell}). */
    readonly beginCells: SharedArrayBuffer;
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
    /**
     * When the pool posted it (`performance.timeOrigin + performance.now()`,
     * which both threads read alike): one that waited behind a busy thread
     * lets the aborts that came meanwhile in before its handlers start.
     */
    readonly sentAt: number;
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
    /** The attempt had ended: nothing was read or recorded, and the call never settles. */
    readonly ended?: true;
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
    /** Checked and encoded in the Web Worker, as the isolate's dispatch would. */
    readonly payloads: EncodedPayload[];
    readonly options: DispatchOptions | undefined;
    /** Set when the jobs join this batch (`ctx.addToBatch`). */
    readonly batchId: number | null;
    /** The trace context active where the handler dispatched, stored with the jobs. */
    readonly traceparent?: string | null;
  };

/**
 * The error classes that cross the boundary as themselves, most specific
 * first (a subclass before its parent), each with the fields it documents:
 * the library's own and the built-in ones. Any other error crosses as a
 * plain `Error` with its name, message and stack.
 */
const ERROR_CLASSES: readonly {
  readonly type: string;
  readonly class: abstract new (...args: never[]) => Error;
  readonly fields: readonly string[];
  /** A built-in class, made with `new` (the library's build their message from their arguments). */
  readonly builtIn?: true;
}[] = [
  { type: "ValidationError", class: ValidationError, fields: ["jobName", "issues"] },
  { type: "StepMismatchError", class: StepMismatchError, fields: ["seq", "recorded", "asked"] },
  { type: "PermanentError", class: PermanentError, fields: [] },
  { type: "JobTimeoutError", class: JobTimeoutError, fields: ["timeoutMs"] },
  { type: "StepTimeoutError", class: StepTimeoutError, fields: ["key", "timeoutMs"] },
  { type: "QueueClosedError", class: QueueClosedError, fields: [] },
  { type: "PayloadIntegrityError", class: PayloadIntegrityError, fields: [] },
  { type: "JobCancelledError", class: JobCancelledError, fields: ["jobId", "reason"] },
  { type: "JobWaitTimeoutError", class: JobWaitTimeoutError, fields: ["jobId", "timeoutMs"] },
  {
    type: "OutdatedCodeError",
    class: OutdatedCodeError,
    fields: ["codeStep", "databaseStep", "contractStep"],
  },
  { type: "QueueMovedError", class: QueueMovedError, fields: ["to", "fencedAt"] },
  { type: "QueueLostError", class: QueueLostError, fields: [] },
  { type: "TypeError", class: TypeError, fields: [], builtIn: true },
  { type: "RangeError", class: RangeError, fields: [], builtIn: true },
  { type: "SyntaxError", class: SyntaxError, fields: [], builtIn: true },
  { type: "ReferenceError", class: ReferenceError, fields: [], builtIn: true },
  { type: "EvalError", class: EvalError, fields: [], builtIn: true },
  { type: "URIError", class: URIError, fields: [], builtIn: true },
  { type: "DOMException", class: DOMException, fields: [], builtIn: true },
];

/** How deep a chain of causes crosses. */
const MAX_CAUSES = 4;

/**
 * `error` in a form that survives `postMessage`: strings, and the fields of
 * the classes in {@linkcode ERROR_CLASSES} (data those classes build
 * themselves). A handler may throw an error whose `name` or `stack` is a
 * function, or whose getters throw; each field is then read defensively, so
 * one odd error can never make the message carrying it (and its siblings'
 * results) fail to clone.
 */
export function toWire(error: Error, depth = 0): WireError {
  const stack = text(() => error.stack, undefined);
  const wire: {
    -readonly [K in keyof WireError]: WireError[K];
  } = {
    name: text(() => error.name, "Error"),
    message: text(() => error.message, ""),
    stack: stack === "" ? undefined : stack,
  };
  const known = ERROR_CLASSES.find((each) => safely(() => error instanceof each.class, false));
  if (known !== undefined) {
    wire.type = known.type;
    const fields = safely(() => clonedFields(error, known.fields), undefined);
    if (fields !== undefined) wire.fields = fields;
  }
  const cause = safely(() => (error as { cause?: unknown }).cause, undefined);
  if (cause instanceof Error && depth < MAX_CAUSES) wire.cause = toWire(cause, depth + 1);
  return wire;
}

/**
 * `names` of `error`, cloned. A field that does not clone as it is (a zod
 * issue's path may hold a `Symbol`) crosses as JSON with each symbol as its
 * description (`Symbol(key)`); one that neither clones nor makes JSON is
 * dropped with the rest of the fields.
 */
function clonedFields(error: Error, names: readonly string[]): Record<string, unknown> | undefined {
  if (names.length === 0) return undefined;
  const fields = Object.fromEntries(
    names.map((name) => [name, (error as unknown as Record<string, unknown>)[name]]),
  );
  try {
    return structuredClone(fields);
  } catch {
    const described = (_key: string, value: unknown) =>
      typeof value === "symbol" ? value.toString() : value;
    return JSON.parse(JSON.stringify(fields, described));
  }
}

function safely<T, F>(read: () => T, fallback: F): T | F {
  try {
    return read();
  } catch {
    return fallback;
  }
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

/**
 * An `Error` again, with the name, message, stack and cause it had: of its
 * class and with its fields when that is one of {@linkcode ERROR_CLASSES},
 * so `instanceof ValidationError` holds on both sides.
 */
export function fromWire(wire: WireError): Error {
  const options = wire.cause === undefined ? undefined : { cause: fromWire(wire.cause) };
  const known = ERROR_CLASSES.find((each) => each.type === wire.type);
  let error: Error;
  if (known === undefined) {
    error = new Error(wire.message, options);
  } else if (known.class === DOMException) {
    error = new DOMException(wire.message, wire.name);
    if (options !== undefined) Object.defineProperty(error, "cause", { value: options.cause });
  } else if (known.builtIn) {
    error = new (known.class as ErrorConstructor)(wire.message, options);
  } else {
    // The library's classes build their message from their arguments: an Error of their
    // class is made with the message as it came instead, then given the fields it had.
    error = Reflect.construct(Error, [wire.message, options], known.class);
  }
  if (!(error instanceof DOMException) && error.name !== wire.name) error.name = wire.name;
  for (const [field, value] of Object.entries(wire.fields ?? {})) {
    Object.defineProperty(error, field, { value, enumerable: true, configurable: true });
  }
  if (wire.stack !== undefined) error.stack = wire.stack;
  return error;
}
