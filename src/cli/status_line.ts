/**
 * What a worker process shows in a terminal: one status line (processed,
 * failed, rate, pending per queue) redrawn in place, with failures and
 * signals printed above it.
 *
 * @module
 * @internal
 */
import type { StopCause } from "./stop_signals.ts";
import type { QueueEvent } from "../events.ts";
import type { Queue } from "../queue.ts";
import type { QueueWorker, WorkerStats } from "../runner/runner.ts";
import { firstLine, printable } from "./table.ts";

/** How often the line is redrawn, and so how often it counts pending jobs. */
const REFRESH_MS = 500;
/** The rate is measured over this much recent time. */
const RATE_WINDOW_MS = 5_000;

/** What the status line shows. */
export interface StatusSnapshot {
  /** The worker's counts so far. */
  readonly stats: WorkerStats;
  /** Jobs running now. */
  readonly running: number;
  /** Jobs finished (done or failed for good) per second, recently. */
  readonly ratePerSecond: number;
  /** Pending jobs of each queue the worker takes, in its order. */
  readonly pending: readonly (readonly [queue: string, count: number])[];
}

/** The status line's text, e.g. `processed 12 · failed 1 · … · pending high 0, default 3`. */
export function formatStatusLine(
  { stats, running, ratePerSecond, pending }: StatusSnapshot,
): string {
  const queues = pending.map(([queue, count]) => `${queue} ${count}`).join(", ");
  return [
    `processed ${stats.completed + stats.failed}`,
    `failed ${stats.failed}`,
    `retried ${stats.retried}`,
    `running ${running}`,
    `${ratePerSecond.toFixed(1)}/s`,
    `pending ${queues}`,
  ].join(" · ");
}

const encoder = new TextEncoder();

function write(text: string): void {
  Deno.stdout.writeSync(encoder.encode(text));
}

/** Draws a worker's status line on stdout, a terminal, while attached. */
export class StatusLine {
  readonly #queue: Queue;
  readonly #db: string;
  #worker: QueueWorker | undefined;
  readonly #samples: { at: number; processed: number }[] = [];
  #pending: (readonly [string, number])[] = [];
  #timer: ReturnType<typeof setInterval> | undefined;
  #refreshing: Promise<void> | null = null;
  readonly #onFailed = ({ detail }: QueueEvent<"job:failed">) => {
    this.#above(
      `failed ${printable(detail.name)} #${detail.id} after ${detail.attempt} attempts: ${
        firstLine(detail.error.message, 200)
      }`,
    );
  };
  readonly #onCancelled = ({ detail }: QueueEvent<"job:cancelled">) => {
    this.#above(
      `cancelled ${printable(detail.name)} #${detail.id} while running: ${
        firstLine(detail.reason, 200)
      }`,
    );
  };
  readonly #onError = ({ detail }: QueueEvent<"queue:error">) => {
    this.#above(`error during ${detail.during}: ${firstLine(detail.error.message, 200)}`);
  };

  /** Listens to `queue`, whose one worker this process runs. */
  constructor(queue: Queue, db: string) {
    this.#queue = queue;
    this.#db = db;
    queue.addEventListener("job:failed", this.#onFailed);
    queue.addEventListener("job:cancelled", this.#onCancelled);
    queue.addEventListener("queue:error", this.#onError);
  }

  /** Prints what `worker` runs, then starts redrawing its line. */
  started(worker: QueueWorker): void {
    this.#worker = worker;
    const { queues, concurrency, executor } = worker.options;
    write(
      `Working ${queues.join(", ")} in ${
        printable(this.#db)
      } (concurrency ${concurrency}, ${executor}); Ctrl-C stops\n`,
    );
    void this.#refresh();
    this.#timer = setInterval(() => void this.#refresh(), REFRESH_MS);
  }

  /** Says that a signal came (or the supervisor is gone) and how long running jobs get. */
  stopping(cause: StopCause, graceMs: number): void {
    this.#above(
      graceMs > 0
        ? `${cause}: claiming nothing more; running jobs get ${
          graceMs / 1000
        } s (again to stop now)`
        : `${cause} again: stopping now, running jobs go back to their queues`,
    );
  }

  /** Draws the line a last time, ends it, prints why the worker stopped, and stops listening. */
  async stopped(worker: QueueWorker): Promise<void> {
    clearInterval(this.#timer);
    await this.#refreshing;
    await this.#refresh();
    this.#queue.removeEventListener("job:failed", this.#onFailed);
    this.#queue.removeEventListener("job:cancelled", this.#onCancelled);
    this.#queue.removeEventListener("queue:error", this.#onError);
    write(`\nStopped (${worker.stopReason})\n`);
  }

  #refresh(): Promise<void> {
    this.#refreshing ??= (async () => {
      try {
        const counts = await this.#queue.counts();
        this.#pending = this.#worker!.options.queues.map((queue) => [
          queue,
          counts[queue]?.pending ?? 0,
        ]);
      } catch {
        // Best effort: the worker loop reports store errors itself; keep the last counts.
      }
      this.#draw();
    })().finally(() => this.#refreshing = null);
    return this.#refreshing;
  }

  #draw(): void {
    if (this.#worker === undefined) return; // a failure or an error before the worker started
    const { stats } = this.#worker;
    const now = performance.now();
    this.#samples.push({ at: now, processed: stats.completed + stats.failed });
    while (this.#samples.length > 2 && now - this.#samples[1]!.at >= RATE_WINDOW_MS) {
      this.#samples.shift();
    }
    const first = this.#samples[0]!;
    const seconds = (now - first.at) / 1000;
    const line = formatStatusLine({
      stats,
      running: this.#worker.running,
      ratePerSecond: seconds > 0 ? (stats.completed + stats.failed - first.processed) / seconds : 0,
      pending: this.#pending,
    });
    // A line wider than the terminal wraps, and `\r` would then redraw only its last part.
    const { columns } = Deno.consoleSize(); // 0 when the terminal does not say
    const fits = columns === 0 || line.length < columns;
    write(`\r${fits ? line : `${line.slice(0, columns - 2)}…`}\x1b[K`);
  }

  #above(text: string): void {
    write(`\r\x1b[K${text}\n`);
    this.#draw();
  }
}
