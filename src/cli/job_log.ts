/**
 * What a worker process prints when its output is not a terminal: one JSON
 * line per job outcome, and one when the worker starts, is asked to stop,
 * and stops. Log collectors read them as they are.
 *
 * @module
 * @internal
 */
import type { StopCause } from "./stop_signals.ts";
import type { QueueEvent } from "../events.ts";
import type { Queue } from "../queue.ts";
import type { QueueWorker } from "../runner/runner.ts";

function write(record: Record<string, unknown>): void {
  console.log(JSON.stringify(record));
}

/** The longest error text a log line carries (the stored error is capped at 64 KiB too). */
const MAX_LOGGED_CHARS = 2_000;

/** `Name: message`, first line only, cut to {@linkcode MAX_LOGGED_CHARS}: one log line per event. */
function describe(error: Error): string {
  const line = `${error.name}: ${error.message}`.split("\n", 1)[0]!;
  return line.length <= MAX_LOGGED_CHARS ? line : `${line.slice(0, MAX_LOGGED_CHARS - 1)}…`;
}

/**
 * Writes the events of a queue's worker as JSON lines on stdout while
 * attached. `worker:stop` carries the runner's counts and the jobs cancelled
 * while this worker held them, which the runner does not count.
 */
export class JsonLog {
  readonly #queue: Queue;
  readonly #db: string;
  #cancelled = 0;
  readonly #onComplete = ({ detail }: QueueEvent<"job:complete">) => {
    const { durationMs, ...job } = detail;
    write({ event: "job:complete", ...job, durationMs: Math.round(durationMs * 10) / 10 });
  };
  readonly #onRetry = ({ detail }: QueueEvent<"job:retry">) => {
    const { error, ...job } = detail;
    write({ event: "job:retry", ...job, error: error === null ? null : describe(error) });
  };
  readonly #onFailed = ({ detail }: QueueEvent<"job:failed">) => {
    write({ event: "job:failed", ...detail, error: describe(detail.error) });
  };
  readonly #onCancelled = ({ detail }: QueueEvent<"job:cancelled">) => {
    this.#cancelled++;
    write({ event: "job:cancelled", ...detail });
  };
  readonly #onError = ({ detail }: QueueEvent<"queue:error">) => {
    write({ event: "queue:error", during: detail.during, error: describe(detail.error) });
  };

  /** Listens to `queue`, whose one worker this process runs. */
  constructor(queue: Queue, db: string) {
    this.#queue = queue;
    this.#db = db;
    queue.addEventListener("job:complete", this.#onComplete);
    queue.addEventListener("job:retry", this.#onRetry);
    queue.addEventListener("job:failed", this.#onFailed);
    queue.addEventListener("job:cancelled", this.#onCancelled);
    queue.addEventListener("queue:error", this.#onError);
  }

  /** Writes `worker:start` with what the worker runs. */
  started(worker: QueueWorker): void {
    const { queues, concurrency, executor, workers } = worker.options;
    write({
      event: "worker:start",
      pid: Deno.pid,
      db: this.#db,
      queues,
      concurrency,
      executor,
      workers,
    });
  }

  /**
   * Writes `worker:stopping`: a signal came (`signal`) or the supervisor is
   * gone (`reason`), running jobs get `graceMs` to finish.
   */
  stopping(cause: StopCause, graceMs: number): void {
    write({
      event: "worker:stopping",
      ...(cause === "supervisor gone" ? { reason: cause } : { signal: cause }),
      graceMs,
    });
  }

  /** Writes `worker:stop` with why and what the worker did, and stops listening. */
  stopped(worker: QueueWorker): Promise<void> {
    this.#queue.removeEventListener("job:complete", this.#onComplete);
    this.#queue.removeEventListener("job:retry", this.#onRetry);
    this.#queue.removeEventListener("job:failed", this.#onFailed);
    this.#queue.removeEventListener("job:cancelled", this.#onCancelled);
    this.#queue.removeEventListener("queue:error", this.#onError);
    write({
      event: "worker:stop",
      reason: worker.stopReason,
      ...worker.stats,
      cancelled: this.#cancelled,
    });
    return Promise.resolve();
  }
}
