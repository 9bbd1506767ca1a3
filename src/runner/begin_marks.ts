/**
 * The begin marks a worker owes the store: the jobs whose handler began
 * (their executor said so) and whose begin is not written yet. They go
 * with the next tick, whatever it writes; when no tick comes within
 * {@linkcode BEGIN_MARK_WAIT_MS}, the worker writes one for them alone. A
 * worker that dies before a job's mark is written is taken to have died
 * before its handler began: the job is charged nothing and becomes
 * suspect (see `src/stores/sql/handler_begun.ts`).
 *
 * @internal
 * @module
 */
import type { ClaimedJob } from "../stores/store.ts";

/**
 * How long a begin mark waits for a tick that is written anyway before the
 * worker writes one for it alone (ms). Quick jobs end before it (their
 * settle says more); a busy worker's ticks come sooner. A worker death in
 * this time leaves the job suspect, not charged: a job that kills its
 * worker is then charged from its second death on, for both.
 */
export const BEGIN_MARK_WAIT_MS = 5;

/** The jobs whose handler began and whose begin mark is not written yet. */
export class BeginMarks {
  readonly #wake: () => void;
  #jobs: ClaimedJob[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  #due = false;

  /** Marks to write; `wake` asks the worker for a tick once one waited long enough. */
  constructor(wake: () => void) {
    this.#wake = wake;
  }

  /** Whether a mark waited {@linkcode BEGIN_MARK_WAIT_MS}: the worker writes a tick for it. */
  get due(): boolean {
    return this.#due && this.#jobs.length > 0;
  }

  /**
   * Keeps the begin of `job`'s handler for the next tick. One timer serves
   * every mark of its wait (a quick drain starts thousands of jobs a
   * second): when it fires, the marks kept since are due, and a tick taken
   * meanwhile has carried the others.
   */
  add(job: ClaimedJob): void {
    this.#jobs.push(job);
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      if (this.#jobs.length === 0) return;
      this.#due = true;
      this.#wake();
    }, BEGIN_MARK_WAIT_MS);
  }

  /**
   * The jobs whose marks to write now: those that `running` says still run
   * (the settle of one that ended says more than its mark).
   */
  take(running: (job: ClaimedJob) => boolean): ClaimedJob[] {
    if (this.#jobs.length === 0) return [];
    const jobs = this.#jobs;
    this.#jobs = [];
    this.#due = false;
    return jobs.filter(running);
  }

  /** Keeps the marks of `jobs`, which a tick failed to write, for a later one. */
  restore(jobs: readonly ClaimedJob[]): void {
    for (const job of jobs) this.add(job);
  }

  /** Stops the wait's timer. */
  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
