/**
 * Starting a worker, for `queue.work()` and the drains: the executor its
 * handlers run on (a pool of Web Workers, or this isolate), the firer of
 * the schedules' due slots when any schedule is defined, and the worker.
 *
 * @internal
 * @module
 */
import type { Clock } from "../clock.ts";
import type { Dispatch, StoreTarget } from "../dispatch/dispatch.ts";
import type { JobRows } from "../dispatch/job_rows.ts";
import type { AppKeys, PayloadCipher } from "../encryption.ts";
import type { QueueEventTarget } from "../events.ts";
import type { HandlerQueue } from "../executors/executor.ts";
import { IsolateExecutor } from "../executors/isolate.ts";
import { WebWorkerPool } from "../executors/web_workers.ts";
import type { JobRegistry } from "../registry.ts";
import { ScheduleFirer } from "../schedules/firing.ts";
import type { Store } from "../stores/store.ts";
import { QueueWorker } from "./runner.ts";
import type { ResolvedWorkOptions } from "./work_options.ts";

/** What a queue lends the workers it starts. */
export interface WorkerParts {
  /** Where jobs are claimed and settled. */
  readonly store: Store;
  /** The job and schedule definitions. */
  readonly registry: JobRegistry;
  /** Builds the rows the schedules' slots dispatch. */
  readonly jobRows: JobRows;
  /** Source of stored times. */
  readonly clock: Clock;
  /** Receives every event the worker sends (the queue). */
  readonly events: QueueEventTarget;
  /** The keys Web Workers open encrypted payloads with; null without `APP_KEY`. */
  readonly appKeys: AppKeys | null;
  /** Opens encrypted payloads in this isolate; null without `APP_KEY`. */
  readonly cipher: PayloadCipher | null;
  /** What a handler's `ctx.queue` dispatches through. */
  readonly handlerQueue: HandlerQueue;
  /** Dispatches for handlers running in Web Workers, by job name. */
  readonly handlerDispatch: Dispatch<StoreTarget>;
  /** How long finished jobs are kept, in ms, for jobs that do not say. */
  readonly keepFinishedMs: number;
}

/** Starts a worker with `resolved` options on the queue's `parts`. */
export function startWorker(parts: WorkerParts, resolved: ResolvedWorkOptions): QueueWorker {
  const { registry, handlerQueue, cipher, events } = parts;
  const executor = resolved.executor === "workers"
    ? new WebWorkerPool({
      jobsUrl: registry.moduleUrl!,
      size: resolved.workers,
      graceMs: resolved.graceMs,
      appKeys: parts.appKeys,
      captureConsole: resolved.captureConsole,
      maxLogBytes: resolved.maxLogBytes,
      dispatch: (name, payloads, options, batchId) =>
        parts.handlerDispatch.encodedByName(name, payloads, options, batchId),
      maxPayloadBytes: parts.jobRows.maxPayloadBytes,
      fallback: () => new IsolateExecutor(registry, handlerQueue, cipher),
      onFallback: (error) => events.emit("queue:error", { error, during: "starting Web Workers" }),
      onShrink: (error) => events.emit("queue:error", { error, during: "replacing a Web Worker" }),
    })
    : new IsolateExecutor(registry, handlerQueue, cipher);
  const schedules = registry.schedules();
  return new QueueWorker({
    store: parts.store,
    registry,
    executor,
    clock: parts.clock,
    events,
    random: Math.random,
    cipher,
    schedules: resolved.schedules && schedules.length > 0
      ? new ScheduleFirer(
        schedules,
        parts.jobRows,
        Math.random,
        (error) => events.emit("queue:error", { error, during: "firing a schedule" }),
      )
      : null,
    readsScheduled: schedules.length > 0,
    keepFinishedMs: parts.keepFinishedMs,
  }, resolved);
}
