/**
 * Throttled progress writes: a handler may report progress as often as it
 * likes; the latest value of each running job is written at most once a
 * second, with the next tick's settles, fenced like a settle.
 *
 * @internal
 * @module
 */
import type { Clock } from "../clock.ts";
import type { Settlement } from "../stores/store.ts";
import type { RunningJob } from "./attempts.ts";

/** The most often a running job's progress is written to the store. */
const PROGRESS_INTERVAL_MS = 1_000;

/** Keeps the progress running jobs report until it is due to be written. */
export class ProgressWrites {
  readonly #running: ReadonlyMap<number, RunningJob>;
  readonly #clock: Clock;
  readonly #wake: () => void;
  /** Running jobs whose progress is due to be written with the next tick. */
  readonly #due = new Set<RunningJob>();

  /**
   * `running` tells which attempts still run (a late report is ignored);
   * `wake` asks the loop for a tick once a write is due.
   */
  constructor(running: ReadonlyMap<number, RunningJob>, clock: Clock, wake: () => void) {
    this.#running = running;
    this.#clock = clock;
    this.#wake = wake;
  }

  /** Whether some progress is due to be written now. */
  get due(): boolean {
    return this.#due.size > 0;
  }

  /** Keeps the latest progress and has it written once its interval has passed. */
  report(entry: RunningJob, percent: number): void {
    if (this.#running.get(entry.job.id) !== entry) return;
    entry.progress = percent;
    if (entry.progressTimer !== undefined || this.#due.has(entry)) return;
    const waitMs = entry.progressWrittenAt + PROGRESS_INTERVAL_MS - performance.now();
    entry.progressTimer = setTimeout(() => {
      entry.progressTimer = undefined;
      this.#due.add(entry);
      this.#wake();
    }, Math.max(0, waitMs));
  }

  /** The progress writes due now, each fenced like a settle; the jobs stay leased. */
  take(): Settlement[] {
    const at = this.#clock.now();
    const writes: Settlement[] = [];
    for (const entry of this.#due) {
      if (entry.progress === null) continue;
      const { id, token } = entry.job;
      writes.push({ kind: "progress", id, token, at, percent: entry.progress });
      entry.progress = null;
      entry.progressWrittenAt = performance.now();
    }
    this.#due.clear();
    return writes;
  }

  /** Drops what an attempt that no longer runs had still to write. */
  forget(entry: RunningJob): void {
    clearTimeout(entry.progressTimer);
    this.#due.delete(entry);
  }
}
