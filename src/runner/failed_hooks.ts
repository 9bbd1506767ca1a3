/**
 * The `failed` hooks of jobs that failed for good: each runs once, time-boxed
 * by its job's `timeoutMs`, and what it throws is reported, never rethrown.
 *
 * @internal
 * @module
 */
import { asError } from "../errors.ts";
import type { QueueEventTarget } from "../events.ts";
import type { Executor } from "../executors/executor.ts";
import type { JobRegistry } from "../registry.ts";
import type { ClaimedJob } from "../stores/store.ts";

/** Runs `failed` hooks and keeps track of those still running. */
export class FailedHooks {
  readonly #registry: JobRegistry;
  readonly #executor: Pick<Executor, "runFailedHook">;
  readonly #events: Pick<QueueEventTarget, "emit">;
  readonly #running = new Set<Promise<void>>();

  /** Hooks run on `executor`; their errors and overruns go to `events` as `queue:error`. */
  constructor(
    registry: JobRegistry,
    executor: Pick<Executor, "runFailedHook">,
    events: Pick<QueueEventTarget, "emit">,
  ) {
    this.#registry = registry;
    this.#executor = executor;
    this.#events = events;
  }

  /** Starts the hook of `job`, if its definition has one, past its `attempts`. */
  run(job: ClaimedJob, attempts: number, error: Error): void {
    const definition = this.#registry.get(job.name);
    if (definition?.failed === undefined) return;
    const limitMs = definition.timeoutMs;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const overtime = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`The failed hook of job ${job.id} ran past ${limitMs} ms`)),
        limitMs,
      );
    });
    const run = this.#executor.runFailedHook({
      id: job.id,
      name: job.name,
      queueName: job.queue,
      payload: job.payload,
      attempts,
      error,
    });
    const hook = Promise.race([run, overtime]).catch((thrown) => {
      this.#events.emit("queue:error", {
        error: asError(thrown),
        during: `failed hook of ${job.name}`,
      });
    }).finally(() => {
      clearTimeout(timer);
      this.#running.delete(hook);
    });
    this.#running.add(hook);
  }

  /** Settles once every hook started so far has ended. */
  async ended(): Promise<void> {
    await Promise.allSettled(this.#running);
  }
}
