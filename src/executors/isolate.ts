/**
 * Runs handlers in this isolate, on the event loop. The executor for hosts
 * without Web Workers: a timeout aborts `ctx.signal`, but a handler that
 * ignores it keeps running in the background.
 *
 * @internal
 * @module
 */
import { MAX_PAUSE_MS } from "../admin/job_control.ts";
import { MAX_DELAY_MS } from "../backoff.ts";
import { asError, PayloadIntegrityError, PermanentError } from "../errors.ts";
import type { JobContext } from "../job.ts";
import type { PayloadCipher } from "../encryption.ts";
import { encodeOutput } from "../output.ts";
import { openPayload } from "../payload.ts";
import { NO_PARENTS, openParents } from "./flow_parents.ts";
// A full specifier, as for zod: an app importing this from another folder need not list it.
// deno-lint-ignore no-import-prefix
import { context } from "npm:@opentelemetry/api@1";
import { withTraceparent } from "../trace_context.ts";
import type { JobRegistry } from "../registry.ts";
import { DurableSteps } from "./durable_steps.ts";
import type {
  ExecutionRequest,
  ExecutionResult,
  Executor,
  FailedHookRequest,
  HandlerQueue,
  LogCall,
  ParkRequest,
} from "./executor.ts";
import { shown } from "../shown.ts";

/** The result of an attempt that `ctx.release` or `ctx.rateLimitGroup` (`holdsGroup`) ended. */
function released(delayMs: number, holdsGroup: boolean): ExecutionResult {
  return holdsGroup ? { kind: "release", delayMs, holdsGroup } : { kind: "release", delayMs };
}

/** Marks the race's winner when a sleep or a wait parked the attempt. */
const PARKED = Symbol("parked");

function isParked(value: unknown): value is { [PARKED]: ParkRequest } {
  return typeof value === "object" && value !== null && PARKED in value;
}

/** Runs handlers in the calling isolate. */
export class IsolateExecutor implements Executor {
  /** Handlers run on this isolate's event loop. */
  readonly inThisIsolate = true;
  readonly #registry: JobRegistry;
  readonly #queue: HandlerQueue;
  readonly #cipher: PayloadCipher | null;

  /**
   * `queue` serves each handler's `ctx.queue` and `ctx.addToBatch`; `cipher`
   * opens encrypted payloads (null where no `APP_KEY` is set).
   */
  constructor(registry: JobRegistry, queue: HandlerQueue, cipher: PayloadCipher | null) {
    this.#registry = registry;
    this.#queue = queue;
    this.#cipher = cipher;
  }

  /** Decodes the payload and runs the handler. */
  async run(request: ExecutionRequest): Promise<ExecutionResult> {
    let releaseDelayMs: number | undefined;
    let holdsGroup = false;
    let output: string | null = null;
    // Made on the first step, sleep or wait: most handlers have none.
    let steps: DurableSteps | undefined;
    try {
      const job = this.#definition(request.name);
      const payload = await openPayload(job, request.payload, this.#cipher);
      const { batchId } = request;
      const queue = this.#queue;
      /** Ends the attempt as parked, once the handler runs. */
      let parkListener: ((park: ParkRequest) => void) | undefined;
      const durable = (): DurableSteps => {
        if (steps !== undefined) return steps;
        steps = new DurableSteps(
          request.steps,
          job,
          request.id,
          request.attempt,
          request.signal,
          this.#cipher,
        );
        steps.onPark = (park) => parkListener?.(park);
        return steps;
      };
      // No await outside flows: a plain job's start costs no extra turn of the event loop.
      const parents = request.flowParents === null || request.flowParents === undefined
        ? NO_PARENTS
        : await openParents(request.flowParents, this.#cipher, this.#registry);
      const ctx: JobContext = {
        id: request.id,
        name: request.name,
        queueName: request.queueName,
        attempt: request.attempt,
        signal: request.signal,
        queue,
        batchId,
        scheduled: request.scheduled === null
          ? null
          : { name: request.scheduled.name, slot: new Date(request.scheduled.slot) },
        parents: parents.parents,
        parentErrors: parents.parentErrors,
        async addToBatch(job, payload, options) {
          if (batchId === null) {
            throw new Error(
              `ctx.addToBatch: job ${request.id} (${request.name}) is not in a batch`,
            );
          }
          return (await queue.addToBatch(batchId, job, [payload], options))[0]!;
        },
        progress(percent) {
          if (typeof percent !== "number" || !(percent >= 0 && percent <= 100)) {
            throw new RangeError(
              `ctx.progress: percent must be a number from 0 to 100: got ${shown(percent)}`,
            );
          }
          request.onProgress(percent);
        },
        log(message, fields) {
          request.onLog?.(checkedLogLine("info", message, fields));
        },
        release(delayMs = 0) {
          if (!(typeof delayMs === "number" && delayMs >= 0 && delayMs <= MAX_DELAY_MS)) {
            throw new RangeError(
              `ctx.release: delayMs must be a number of ms from 0 to ${MAX_DELAY_MS}: got ${
                shown(delayMs)
              }`,
            );
          }
          releaseDelayMs = delayMs;
          holdsGroup = false;
        },
        rateLimitGroup(ms) {
          if (job.group === undefined) {
            throw new TypeError(
              `ctx.rateLimitGroup: job "${request.name}" has no group (defineJob({ group }))`,
            );
          }
          if (!(typeof ms === "number" && ms > 0 && ms <= MAX_PAUSE_MS)) {
            throw new RangeError(
              `ctx.rateLimitGroup: ms must be a positive number of ms up to 2^41: got ${shown(ms)}`,
            );
          }
          releaseDelayMs = Math.ceil(ms);
          holdsGroup = true;
        },
        step: (name, fn, options) => durable().step(name, fn, options),
        sleep: (name, ms) => durable().sleep(name, ms),
        sleepUntil: (name, until) => durable().sleepUntil(name, until),
        waitFor: (name, options) => durable().waitFor(name, options),
      };
      const handle = () => job.handle(payload, ctx);
      const waiting = request.beforeHandler?.();
      if (waiting !== undefined) await waiting;
      // Aborted before it began (timed out while it waited for a busy Web Worker, or stopped):
      // the attempt already ended, so its handler is not called.
      if (request.signal.aborted) throw request.signal.reason;
      request.onBegin?.();
      const handled = request.traceContext === undefined
        ? withTraceparent(request.traceparent, handle)
        : context.with(request.traceContext, handle);
      // A sleep or a wait that parks ends the attempt: the handler's call never returns.
      const returned = handled instanceof Promise
        ? await new Promise<unknown>((resolve, reject) => {
          parkListener = (park) => resolve({ [PARKED]: park });
          if (steps?.parkRequest) parkListener(steps.parkRequest);
          handled.then(resolve, reject);
        })
        : handled;
      if (isParked(returned)) return { kind: "park", ...returned[PARKED] };
      if (releaseDelayMs === undefined) {
        output = await encodeOutput(job, returned, this.#cipher);
      }
    } catch (thrown) {
      const error = asError(thrown);
      const permanent = error instanceof PermanentError || error instanceof PayloadIntegrityError;
      // Thrown after ctx.release() or ctx.rateLimitGroup(): the job goes back as asked, as Laravel
      // keeps a release that an exception follows, and the error goes into the job's log rather
      // than nowhere; a PermanentError still fails the job, as it says.
      if (releaseDelayMs !== undefined && !permanent) {
        // The attempt's own abort (a stop, a timeout) rethrown is no error of the handler's.
        if (thrown === request.signal.reason) return released(releaseDelayMs, holdsGroup);
        request.onLog?.({
          level: "error",
          message: `released, then threw: ${error.stack ?? `${error.name}: ${error.message}`}`,
          fields: null,
        });
        return released(releaseDelayMs, holdsGroup);
      }
      return { kind: "error", error, permanent };
    } finally {
      steps?.end();
    }
    return releaseDelayMs === undefined
      ? { kind: "success", output }
      : released(releaseDelayMs, holdsGroup);
  }

  /** Runs the `failed` hook with the decoded payload; skipped when the payload no longer decodes. */
  async runFailedHook(request: FailedHookRequest): Promise<void> {
    const job = this.#definition(request.name);
    if (job.failed === undefined) return;
    let payload: unknown;
    try {
      payload = await openPayload(job, request.payload, this.#cipher);
    } catch {
      return; // The hook is typed for a valid payload; the failure itself is recorded.
    }
    await job.failed(payload, request.error, {
      id: request.id,
      name: request.name,
      queueName: request.queueName,
      attempts: request.attempts,
      queue: this.#queue,
    });
  }

  /** Nothing to free. */
  close(): Promise<void> {
    return Promise.resolve();
  }

  #definition(name: string) {
    const job = this.#registry.get(name);
    if (job === undefined) throw new PermanentError(`No job named "${name}" is registered here`);
    return job;
  }
}

/** A `ctx.log()` call as a line, or a `TypeError` naming what was wrong with it. */
export function checkedLogLine(level: string, message: unknown, fields: unknown): LogCall {
  if (typeof message !== "string") {
    throw new TypeError(`ctx.log: message must be a string: got ${describe(message)}`);
  }
  if (fields === undefined || fields === null) return { level, message, fields: null };
  if (typeof fields !== "object" || Array.isArray(fields)) {
    throw new TypeError(`ctx.log: fields must be an object: got ${describe(fields)}`);
  }
  let text: string | undefined;
  try {
    text = JSON.stringify(fields);
  } catch (error) {
    throw new TypeError(
      `ctx.log: fields must be JSON-serializable: ${
        error instanceof Error ? error.message : error
      }`,
    );
  }
  // A toJSON() that gives undefined (or a function) leaves no JSON text at all.
  if (typeof text !== "string" || !text.startsWith("{")) {
    throw new TypeError(
      `ctx.log: fields must be JSON-serializable to an object: its toJSON() gave ${
        text === undefined ? "undefined" : text
      }`,
    );
  }
  return { level, message, fields: text };
}

function describe(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
}
