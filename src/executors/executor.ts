/**
 * The boundary between the runner, which decides a job's fate, and the place
 * its handler runs (this isolate, or a pool of Web Workers). Everything that
 * crosses it can be structured-cloned.
 *
 * @module
 */
// A full specifier, as for zod: an app importing this from another folder need not list it.
// deno-lint-ignore no-import-prefix
import type { Context } from "npm:@opentelemetry/api@1";
import type { Dispatcher, DispatchOptions, JobDefinition } from "../job.ts";
import type { JobStepsRow, StepWrite } from "../stores/store.ts";

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
  /** The batch the job belongs to or follows up, or null. */
  readonly batchId: number | null;
  /** The schedule and slot (ms since the epoch) that fired the job, or null. */
  readonly scheduled: { readonly name: string; readonly slot: number } | null;
  /**
   * A flow node's parents' outputs and errors, as its job carries them
   * (JSON of `FlowParentsRow`); null or absent outside flows.
   */
  readonly flowParents?: string | null;
  /** Aborted on timeout, on stop and when the lease is lost; its reason says which. */
  readonly signal: AbortSignal;
  /** Receives the progress the handler reports (already checked to be 0 to 100). */
  readonly onProgress: (percent: number) => void;
  /**
   * Called once the handler began (it was called), at most once, maybe a
   * moment later (a Web Worker says so with its next message); never for
   * an attempt whose handler was not called. The runner records it, so a
   * worker death from then on charges the job a crash.
   */
  readonly onBegin?: () => void;
  /**
   * Asked just before the handler is called: a promise to wait for first,
   * or undefined to call it at once. A Web Worker whose thread the handlers
   * of the same message held for long answers with one macrotask hop, in
   * which the results ready by then go out (`_worker_entry.ts`).
   */
  readonly beforeHandler?: () => Promise<void> | undefined;
  /**
   * The `traceparent` of the attempt's span, made active while the handler
   * runs so its own spans nest under it; null or absent outside a trace.
   */
  readonly traceparent?: string | null;
  /**
   * The same span as a context, for an executor in this isolate (which then
   * need not read `traceparent`); it never crosses to a Web Worker. Absent
   * or undefined without a span (no SDK installed).
   */
  readonly traceContext?: Context | undefined;
  /** Receives the lines the handler writes with `ctx.log()` (and, when captured, prints). */
  readonly onLog?: (line: LogCall) => void;
  /**
   * Where the attempt's durable steps are read and recorded; absent for a
   * job run now without being stored (its steps then run unrecorded, and it
   * cannot sleep or wait).
   */
  readonly steps?: StepPort;
}

/** How an attempt's durable steps reach the store, through the runner that claimed the job. */
export interface StepPort {
  /** The job's memos and mailbox (read when the attempt reaches its first step). */
  load(): Promise<JobStepsRow>;
  /**
   * Records a memo, fenced by the claim's token, with the runner's next
   * tick; resolves once it is written, rejects when the lease was lost or
   * the write failed.
   */
  record(write: StepWrite): Promise<void>;
  /**
   * A step with a `timeoutMs` began: past it the runner ends the attempt
   * with a `StepTimeoutError` (aborting its signal; a Web Worker that does
   * not stop within `graceMs` more is terminated). Call what it returns when
   * the step ends, with whether it ran past `timeoutMs` by the clock of the
   * isolate that ran it: in the runner's own isolate, a synchronous step
   * holds the timer back, and one that ran past ends the attempt all the
   * same (a Web Worker's step is timed by the runner's timer alone).
   */
  timeStep(key: string, timeoutMs: number): (ranPast: boolean) => void;
}

/** How a sleep or a wait parks its attempt. */
export interface ParkRequest {
  /**
   * How long until the job is due again (the sleep's wake time, the wait's
   * timeout); null with `untilMs` (a sleep until a time), or for a wait
   * without a timeout.
   */
  readonly delayMs: number | null;
  /** A sleep until this time (ms since the epoch), on the runner's clock. */
  readonly untilMs?: number;
  /** Its memo; the runner sets `until` from `delayMs` on its clock. */
  readonly step: Omit<StepWrite, "until" | "takesSignal">;
}

/** One line a handler wrote, checked, as it crosses to the runner. */
export interface LogCall {
  /** `"info"` for `ctx.log()`, else the `console` method it came from. */
  readonly level: string;
  /** The text. */
  readonly message: string;
  /** The fields as JSON text, or null. */
  readonly fields: string | null;
}

/** What handlers reach through their context: dispatch, and growing their batch. */
export interface HandlerQueue extends Dispatcher {
  /** Adds counted jobs to batch `batchId`; returns their ids. */
  addToBatch(
    batchId: number,
    job: JobDefinition,
    payloads: readonly unknown[],
    options: DispatchOptions | undefined,
  ): Promise<number[]>;
}

/** How an attempt ended, as the handler saw it. */
export type ExecutionResult =
  | {
    /** The handler returned. */
    readonly kind: "success";
    /** Its output as stored (checked, capped, sealed for an encrypted job); null or absent without one. */
    readonly output?: string | null;
  }
  | ({
    /** A sleep or a wait parked the attempt: the job waits without a slot, its attempt given back. */
    readonly kind: "park";
  } & ParkRequest)
  | {
    /** The handler called `ctx.release(delayMs)`, or `ctx.rateLimitGroup(delayMs)`. */
    readonly kind: "release";
    /** Wait before the next attempt. */
    readonly delayMs: number;
    /**
     * True after `ctx.rateLimitGroup`: its group is held as long, and the
     * attempt is given back.
     */
    readonly holdsGroup?: boolean;
  }
  | {
    /** The handler threw, or its payload could not be used. */
    readonly kind: "error";
    /** What was thrown, as an `Error`. */
    readonly error: Error;
    /** True when no retry can help (`PermanentError`, `PayloadIntegrityError`). */
    readonly permanent: boolean;
  }
  | {
    /** The Web Worker running it died: the attempt ends and counts a crash. */
    readonly kind: "crash";
    /** What happened to the Web Worker. */
    readonly error: Error;
  }
  | {
    /** Stopped through no fault of its own (its Web Worker was terminated for another job): put back, attempt given back. */
    readonly kind: "interrupted";
    /** Why. */
    readonly error: Error;
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
  /**
   * Resolves once the executor can call handlers at once (a pool's Web
   * Workers loaded the jobs module, or it fell back); absent when it always
   * can. The runner claims nothing before: a claimed job's lease and
   * timeout would run while the threads load.
   */
  readonly ready?: Promise<void>;
  /**
   * Resolves if the executor has a thread it cannot stop (a Web Worker in a
   * synchronous loop): the process should stop claiming, finish, and exit.
   */
  readonly stuck?: Promise<Error>;
  /**
   * Whether handlers run on this isolate's event loop now, where a
   * handler's synchronous stretch can hold back its timeout's timer: the
   * runner then reads an attempt that ran past `timeoutMs` as timed out,
   * whatever it returned. False or absent when they run on threads of their
   * own (a pool that fell back runs them here).
   */
  readonly inThisIsolate?: boolean;
}
