/**
 * The workers one queue starts, whichever way: `work()`, a drain, a drain
 * after a response, a drain cron job. It checks the queue may work jobs
 * here, keeps the running ones to notify and to stop at close, and owns the
 * cron job's lifetime (a cron job left registered keeps the process alive).
 *
 * @internal
 * @module
 */
import { optionBag } from "../option_bags.ts";
import { shown } from "../shown.ts";
import { QueueClosedError } from "../errors.ts";
import type { QueueWorker } from "../runner/runner.ts";
import { startWorker, type WorkerParts } from "../runner/start.ts";
import {
  type ResolvedWorkOptions,
  resolveWorkOptions,
  type WorkOptions,
} from "../runner/work_options.ts";
import { runDrain } from "./drain.ts";
import { DrainAfterResponses } from "./after_response.ts";
import {
  DRAIN_AFTER_OPTIONS,
  type DrainAfterOptions,
  type DrainOptions,
  type DrainResult,
  maxTimeMsOf,
  resolveDrainOptions,
  SERVERLESS_OPTIONS,
  type ServerlessOptions,
} from "./options.ts";
import { registerDrainCron } from "./serverless.ts";

/** What the workers of a queue need beside what each worker is lent. */
export interface QueueWorkersParts extends WorkerParts {
  /** How the queue was opened: only `"worker"` works jobs in this process. */
  readonly mode: "worker" | "external" | "inline";
  /** Throws `QueueClosedError` naming `action` once the queue is closing. */
  readonly assertOpen: (action: string) => void;
}

/** Starts, tracks, notifies and stops the workers of one queue. */
export class QueueWorkers {
  readonly #parts: QueueWorkersParts;
  readonly #running = new Set<QueueWorker>();
  /** The running workers that are drains: the queue closing under one is its reason to stop. */
  readonly #drains = new WeakSet<QueueWorker>();
  readonly #closed = new AbortController();
  readonly #afterResponses: DrainAfterResponses;

  /** Workers on `parts`; a drain after a response that fails is told to `onError`. */
  constructor(parts: QueueWorkersParts, onError: (error: Error) => void) {
    this.#parts = parts;
    this.#afterResponses = new DrainAfterResponses((options) => this.drain(options), onError);
  }

  /** Starts a worker that runs until stopped (`queue.work()`). */
  work(options: WorkOptions): QueueWorker {
    this.#parts.assertOpen("start a worker");
    const { registry } = this.#parts;
    const canUseWorkers = typeof Worker === "function" && registry.moduleUrl !== undefined;
    return this.#start(resolveWorkOptions(options, registry.defaultQueues(), canUseWorkers));
  }

  /** Runs one drain (`queue.drain()`); its errors reject the promise. */
  drain(options: DrainOptions): Promise<DrainResult> {
    try {
      this.#parts.assertOpen("drain");
      const resolved = resolveDrainOptions(options, this.#parts.registry.defaultQueues());
      return runDrain(() => this.#start(resolved, true));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Drains once `after` settles, or on the next turn (`queue.drainAfter()`); `closing` skips it. */
  drainAfter(options: DrainAfterOptions | undefined, closing: boolean): void {
    const { after, ...drainOptions } = optionBag(options, "drainAfter", DRAIN_AFTER_OPTIONS) ?? {};
    if (after !== undefined && typeof (after as { then?: unknown } | null)?.then !== "function") {
      throw new TypeError(`drainAfter: after must be a promise (or thenable): got ${shown(after)}`);
    }
    const resolved = { ...drainOptions, maxTimeMs: maxTimeMsOf(drainOptions, 5_000) };
    resolveDrainOptions(resolved, this.#parts.registry.defaultQueues()); // a bad option throws here
    this.#assertWorks();
    if (closing) return;
    const start = () => this.#afterResponses.request(resolved);
    if (after === undefined) setTimeout(start, 0);
    else after.then(start, start); // a client that went away still leaves jobs to run
  }

  /** Registers a drain cron job (`queue.serverless()`), unregistered at {@linkcode stop}. */
  serverless(given: ServerlessOptions | undefined): Promise<void> {
    this.#parts.assertOpen("register a drain cron job");
    this.#assertWorks();
    const options = optionBag(given, "serverless", SERVERLESS_OPTIONS) ?? {};
    const queues = this.#parts.registry.defaultQueues();
    // The cron job belongs to the queue: left registered, it would keep the process alive
    // after close() (a `deno serve` app would not exit on its first signal).
    const closed = this.#closed.signal;
    const ownSignal = options.signal;
    if (ownSignal !== undefined && !(ownSignal instanceof AbortSignal)) {
      throw new TypeError(`serverless: signal must be an AbortSignal: got ${shown(ownSignal)}`);
    }
    const signal = ownSignal === undefined ? closed : AbortSignal.any([ownSignal, closed]);
    return registerDrainCron(
      { ...options, signal },
      async (drainOptions) => {
        try {
          await this.drain(drainOptions);
        } catch (error) {
          if (!(error instanceof QueueClosedError)) throw error;
        }
      },
      (drainOptions) => resolveDrainOptions(drainOptions, queues),
    );
  }

  /** Wakes every running worker: jobs may be due now. */
  notify(): void {
    for (const worker of this.#running) worker.notify();
  }

  /** Wakes every running worker and has it look for cancelled jobs it holds. */
  lookForCancels(): void {
    for (const worker of this.#running) {
      worker.notify();
      worker.lookForCancels();
    }
  }

  /** The longest grace period a running worker's stop gives its jobs, in ms; 0 when none runs. */
  get longestGraceMs(): number {
    return Math.max(0, ...[...this.#running].map((worker) => worker.options.graceMs));
  }

  /** Unregisters the drain cron job and stops every running worker. */
  async stop(): Promise<void> {
    this.#closed.abort();
    await Promise.allSettled(
      [...this.#running].map((worker) =>
        this.#drains.has(worker) ? worker.stopFor("closed") : worker.stop()
      ),
    );
  }

  #assertWorks(): void {
    const { mode } = this.#parts;
    if (mode !== "worker") {
      throw new TypeError(
        `Cannot work jobs in this process: this queue was opened with mode "${mode}" (${
          mode === "inline" ? "jobs run at dispatch" : "another process works its jobs"
        }); open it with mode "worker" to work jobs here`,
      );
    }
  }

  #start(resolved: ResolvedWorkOptions, drain = false): QueueWorker {
    this.#assertWorks();
    const worker = startWorker(this.#parts, resolved);
    this.#running.add(worker);
    if (drain) this.#drains.add(worker);
    const forget = () => this.#running.delete(worker);
    worker.done.then(forget, forget);
    return worker;
  }
}
