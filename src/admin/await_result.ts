/**
 * Waiting for jobs to end, wherever they run: one registry per queue holds
 * every waiter of the process, by job id, and reads results for all of
 * them at once.
 *
 * - This process's own workers report each job that ends (one listener per
 *   event type for all waiters): only those jobs are read, gathered into
 *   one statement per turn of the event loop, so a job that ends here costs
 *   one row of one read however many others are awaited.
 * - The store's watch (the WAL file on SQLite, `NOTIFY` on PostgreSQL and
 *   the wake-up channel on Redis, sent by the settle of an awaited job) says
 *   another connection wrote, and once
 *   a second a safety net fires for a store that cannot watch: then every
 *   awaited job is read, 1,000 ids per statement. Such a sweep waits nine
 *   times as long as the last one took, at most a second, so sweeps take at
 *   most a tenth of the time until a sweep takes more than 111 ms (a few
 *   milliseconds apart for a few waiters); a read held up by a stalled
 *   server, a lock or a transaction of this process does not keep the
 *   waits from seeing the jobs that end after it for more than a second.
 *
 * One read runs at a time; what is asked meanwhile is read next. A read the
 * store cannot serve for now (an outage: the server down, the connection
 * cut, the disk full) ends no wait: it is reported once per outage as
 * `queue:error`, and the once-a-second read tries again until each wait's
 * own `timeoutMs` or signal; any other error (the queue closed or moved)
 * rejects the waits it read.
 *
 * @internal
 * @module
 */
import type { Clock } from "../clock.ts";
import { asError, JobWaitTimeoutError } from "../errors.ts";
import type { QueueEventTarget } from "../events.ts";
import { isPassingOutage } from "../stores/store_outage.ts";
import type { JobControlStore, JobResultRow, WorkerStore } from "../stores/store.ts";

/** The slowest every awaited job is read again while nothing wakes the waits. */
const SAFETY_POLL_MS = 1_000;
/** The most ids one statement reads: a SQLite read holds the event loop while it runs. */
const IDS_PER_READ = 1_000;
/** A sweep waits this many times as long as the last one took, after it ended ({@linkcode SAFETY_POLL_MS} at most). */
const SWEEP_GAP_FACTOR = 9;

/** What the waits read and listen to. */
export interface AwaitDeps {
  /** Where results are read, and whose writes wake the waits. */
  readonly store: Pick<JobControlStore, "results"> & Pick<WorkerStore, "watch">;
  /** Source of the time results are read at. */
  readonly clock: Clock;
  /** This process's job events (its own workers' settles). */
  readonly events: QueueEventTarget;
}

/** Events that say a job of this process settled for good. */
const ENDED = ["job:complete", "job:failed", "job:cancelled"] as const;

interface Waiter {
  resolve(row: JobResultRow): void;
  reject(error: unknown): void;
}

/**
 * Every wait for a job's end in one queue: a map from job id to its
 * waiters, one set of listeners and one read for all of them.
 */
export class ResultWaiters {
  readonly #deps: AwaitDeps;
  readonly #waiters = new Map<number, Set<Waiter>>();
  /** Ids to read next: new waits, and jobs this process reported ended. */
  readonly #due = new Set<number>();
  #sweepAsked = false;
  #reading = false;
  #nextSweepAt = 0;
  #sweepTimer: ReturnType<typeof setTimeout> | undefined;
  #readTimer: ReturnType<typeof setTimeout> | undefined;
  #stop: (() => void) | null = null;
  /** Set while reads fail for an outage, so it is reported once. */
  #outage = false;

  /** A registry reading `deps.store`, woken by its watch and by `deps.events`. */
  constructor(deps: AwaitDeps) {
    this.#deps = deps;
  }

  /**
   * Resolves with job `id`'s result once it completed, failed for good or
   * was cancelled; rejects `timeoutMs` after the wait began, `spentMs` ago
   * (at once when that has passed), with `JobWaitTimeoutError`, on
   * `signal`'s abort with its reason, when the job is no longer stored, or
   * when the store refuses the read for good (closed, moved); an outage
   * only delays it.
   */
  wait(
    id: number,
    timeoutMs: number | undefined,
    signal: AbortSignal | undefined,
    spentMs = 0,
  ): Promise<JobResultRow> {
    return new Promise<JobResultRow>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const onAbort = () => end(() => reject(signal!.reason));
      const waiter: Waiter = {
        resolve: (row) => end(() => resolve(row)),
        reject: (error) => end(() => reject(error)),
      };
      const end = (settle: () => void) => {
        if (!this.#remove(id, waiter)) return;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        settle();
      };
      this.#add(id, waiter);
      if (timeoutMs !== undefined) {
        timer = setTimeout(
          () => end(() => reject(new JobWaitTimeoutError(id, timeoutMs))),
          Math.max(0, timeoutMs - spentMs),
        );
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#readSoon(id);
    });
  }

  #add(id: number, waiter: Waiter): void {
    if (this.#waiters.size === 0) this.#start();
    const waiters = this.#waiters.get(id);
    if (waiters === undefined) this.#waiters.set(id, new Set([waiter]));
    else waiters.add(waiter);
  }

  /** Removes `waiter` of job `id`; false when it had ended already. */
  #remove(id: number, waiter: Waiter): boolean {
    const waiters = this.#waiters.get(id);
    if (waiters === undefined || !waiters.delete(waiter)) return false;
    if (waiters.size === 0) {
      this.#waiters.delete(id);
      this.#due.delete(id);
      if (this.#waiters.size === 0) this.#halt();
    }
    return true;
  }

  /** Listens while someone waits: the store's watch, this process's events, the safety poll. */
  #start(): void {
    const { store, events } = this.#deps;
    const watch = store.watch(() => this.#askSweep());
    const poll = setInterval(() => this.#askSweep(), SAFETY_POLL_MS);
    const onEnded = (event: Event) => {
      const { id } = (event as CustomEvent<{ id: number }>).detail;
      if (this.#waiters.has(id)) this.#readSoon(id);
    };
    for (const type of ENDED) events.addEventListener(type, onEnded);
    this.#stop = () => {
      watch[Symbol.dispose]();
      clearInterval(poll);
      for (const type of ENDED) events.removeEventListener(type, onEnded);
    };
  }

  #halt(): void {
    this.#stop?.();
    this.#stop = null;
    this.#sweepAsked = false;
    clearTimeout(this.#sweepTimer);
    clearTimeout(this.#readTimer);
    this.#sweepTimer = undefined;
    this.#readTimer = undefined;
  }

  /** Reads job `id` with the others due in this turn of the event loop. */
  #readSoon(id: number): void {
    this.#due.add(id);
    if (this.#readTimer === undefined && !this.#reading) {
      this.#readTimer = setTimeout(() => {
        this.#readTimer = undefined;
        void this.#pump();
      }, 0);
    }
  }

  #askSweep(): void {
    this.#sweepAsked = true;
    void this.#pump();
  }

  /** Runs the reads asked for, one at a time, until none is due. */
  async #pump(): Promise<void> {
    if (this.#reading) return;
    this.#reading = true;
    try {
      for (;;) {
        const sweepWaitMs = this.#nextSweepAt - performance.now();
        const sweep = this.#sweepAsked && sweepWaitMs <= 0;
        if (this.#sweepAsked && !sweep && this.#sweepTimer === undefined) {
          this.#sweepTimer = setTimeout(() => {
            this.#sweepTimer = undefined;
            void this.#pump();
          }, sweepWaitMs);
        }
        if (!sweep && this.#due.size === 0) return;
        const ids = sweep ? [...this.#waiters.keys()] : [...this.#due];
        if (sweep) this.#sweepAsked = false;
        for (const id of ids) this.#due.delete(id);
        const startedAt = performance.now();
        let answered = true;
        for (let from = 0; from < ids.length && answered; from += IDS_PER_READ) {
          answered = await this.#read(ids.slice(from, from + IDS_PER_READ));
        }
        // A read that failed for an outage says nothing of how long reads take: the next
        // safety read tries again, and finds the jobs that ended meanwhile.
        if (sweep && answered) {
          const tookMs = performance.now() - startedAt;
          this.#nextSweepAt = performance.now() +
            Math.min(tookMs * SWEEP_GAP_FACTOR, SAFETY_POLL_MS);
        }
      }
    } finally {
      this.#reading = false;
    }
  }

  /**
   * Reads jobs `ids` and ends the waits of those that ended or are gone;
   * false when the store could not answer for now (the waits go on).
   */
  async #read(ids: readonly number[]): Promise<boolean> {
    const waited = ids.filter((id) => this.#waiters.has(id));
    if (waited.length === 0) return true;
    let rows: Map<number, JobResultRow>;
    try {
      rows = await this.#deps.store.results(waited, this.#deps.clock.now());
    } catch (error) {
      if (isPassingOutage(error)) {
        if (!this.#outage) {
          this.#deps.events.emit("queue:error", {
            error: asError(error),
            during: "reading the results of awaited jobs",
          });
        }
        this.#outage = true;
        return false;
      }
      for (const id of waited) this.#settle(id, (waiter) => waiter.reject(error));
      return true;
    }
    this.#outage = false;
    for (const id of waited) {
      const row = rows.get(id);
      if (row === undefined) {
        const gone = new Error(
          `Job ${id} is no longer stored, so it may have completed: it finished and its kept history was pruned (pruneFinished(), or its keepFinishedMs passed) or never kept (keepFinishedMs 0), it failed for good and was forgotten (forget(), flushFailed(), pruneFailed()), or it was cleared (clear()) before it finished`,
        );
        this.#settle(id, (waiter) => waiter.reject(gone));
      } else if (row.state !== "pending" && row.state !== "running") {
        this.#settle(id, (waiter) => waiter.resolve(row));
      }
    }
    return true;
  }

  #settle(id: number, end: (waiter: Waiter) => void): void {
    for (const waiter of [...this.#waiters.get(id) ?? []]) end(waiter);
  }
}
