/**
 * The events a queue and its workers send, in one typed map.
 *
 * @module
 */
import { asError } from "./errors.ts";

/** Counts of what a worker has done so far. */
export interface WorkerStats {
  /** Jobs that succeeded. */
  readonly completed: number;
  /** Jobs that failed for good. */
  readonly failed: number;
  /**
   * Attempts that ended in a retry or a release, or were cut short and put
   * back with their attempt given back (a stop's grace ran out, their Web
   * Worker was terminated for another job): each sent `job:retry`.
   */
  readonly retried: number;
}

/** @deprecated Use {@linkcode WorkerStats}. */
export type RunnerStats = WorkerStats;

/**
 * Why a worker or a drain stopped: `"requested"` by `stop()`, `"empty"` once
 * nothing was due (`stopWhenEmpty`, a drain), `"time"` at `maxTimeMs`, `"jobs"`
 * at `maxJobs`, `"stuck"` when a Web Worker stuck in synchronous code could not
 * be terminated (the process should exit and be restarted: the `work` command
 * exits with code 3), `"closed"` when the queue closed under a drain, or
 * `"outdated"` when its heartbeat found a contract schema step newer than
 * its code (it claimed nothing more and let its running jobs finish; the
 * process should be restarted on the new code: the `work` command exits
 * with code 75, docs/upgrading.md), `"moved"` when its store refused a
 * write because the queue was moved to another store (a `QueueMovedError`:
 * it stopped at once, its running jobs aborted, as they run again on the
 * new store; docs/moving.md), or `"lost"` when its store lost its data (a
 * `QueueLostError`: a Redis server restarted without persistence; it
 * stopped at once, its running jobs aborted, and the `work` command exits
 * with code 1 so that its supervisor starts a worker on the empty store;
 * docs/redis.md).
 */
export type StopReason =
  | "requested"
  | "empty"
  | "time"
  | "jobs"
  | "stuck"
  | "closed"
  | "outdated"
  | "moved"
  | "lost";

/** What every job event says about the job. */
export interface JobEventDetail {
  /** The job's id. */
  readonly id: number;
  /** The job's name. */
  readonly name: string;
  /** The queue it is on. */
  readonly queue: string;
  /**
   * The attempt concerned: 1 for the first start of the handler; 0 for a job
   * whose handler never started (`job:queued`, and `job:cancelled` for a
   * job that expired). `job:cancelled` gives the starts of the handler, as
   * `queue.result()` counts its attempts: a job cancelled at a claim that
   * did not start it (the cancel was asked while an earlier attempt ran,
   * which then ended) counts the starts before that claim.
   */
  readonly attempt: number;
}

/** Every event name with the `detail` its `CustomEvent` carries. */
export interface QueueEventMap {
  /**
   * This process stored a job it dispatched (not one a store made on its
   * own: a chain link, a callback, a retry, a schedule slot). `attempt` is 0.
   */
  "job:queued": JobEventDetail & {
    /** When it is due, in ms since the epoch. */ readonly availableAt: number;
  };
  /** A handler started. */
  "job:start": JobEventDetail;
  /** A handler succeeded and the job was deleted. */
  "job:complete": JobEventDetail & {
    /** How long the attempt ran. */ readonly durationMs: number;
  };
  /** An attempt ended without success and the job will run again. */
  "job:retry": JobEventDetail & {
    /**
     * Why: the handler's error, or why the attempt was cut short and put
     * back (a stop's grace ran out, its Web Worker was terminated for
     * another job); null when the handler released the job.
     */
    readonly error: Error | null;
    /** Wait before the next attempt. */ readonly delayMs: number;
  };
  /** The job failed for good and moved to the failed jobs. */
  "job:failed": JobEventDetail & {
    /** Why. */ readonly error: Error;
  };
  /**
   * A job was cancelled while its handler ran (`queue.cancel()`), and
   * settled as cancelled; or it was claimed past its `expireInMs` and
   * settled as expired, unrun (its reason then starts with `expired:`). A
   * job cancelled before it started, claimed ahead by a worker or not, is
   * removed by the cancel itself: no event (`cancel()` returns
   * `"cancelled"`).
   */
  "job:cancelled": JobEventDetail & {
    /** Why. */ readonly reason: string;
  };
  /** This queue paused one of its queues (`queue.pause()`): claims skip it. */
  "queue:paused": {
    /** The queue paused. */ readonly queue: string;
    /** When it resumes on its own, in ms since the epoch, or null. */
    readonly until: number | null;
    /** Why, or null. */ readonly reason: string | null;
  };
  /** This queue resumed one of its queues (`queue.resume()`). */
  "queue:resumed": {
    /** The queue resumed. */ readonly queue: string;
  };
  /** A worker stopped claiming and every job it held has settled. */
  "worker:stop": WorkerStats & {
    /** Why it stopped. */ readonly reason: StopReason;
  };
  /**
   * Something went wrong that no caller can catch: the store failed in the
   * worker loop, or a `failed` hook threw. Logged to stderr when nobody listens.
   */
  "queue:error": {
    /** What failed. */ readonly error: Error;
    /** Where: e.g. `"claim"`, `"settle"`, `"failed hook of send-receipt"`. */
    readonly during: string;
  };
}

/** An event of the map, typed by name. */
export type QueueEvent<K extends keyof QueueEventMap> = CustomEvent<QueueEventMap[K]>;

type AnyListener = EventListenerOrEventListenerObject | ((event: CustomEvent<never>) => void);

/**
 * An `EventTarget` with the events of {@linkcode QueueEventMap}. A listener
 * that throws is reported as `queue:error` instead of ending the process, and
 * an event is built only when someone listens, so a busy worker pays nothing
 * for events nobody reads.
 */
export class QueueEventTarget extends EventTarget {
  readonly #listeners = new Map<string, number>();
  readonly #wrapped = new WeakMap<AnyListener, Map<string, EventListener>>();
  readonly #forwardTo: QueueEventTarget | undefined;

  /** `forwardTo` also receives every event this target sends. */
  constructor(forwardTo?: QueueEventTarget) {
    super();
    this.#forwardTo = forwardTo;
  }

  /** Listens for one event of the map. */
  override addEventListener<K extends keyof QueueEventMap>(
    type: K,
    listener: ((event: QueueEvent<K>) => void) | null,
    options?: boolean | AddEventListenerOptions,
  ): void;
  /** Listens for any event. */
  override addEventListener(
    type: string,
    listener: EventListenerOrEventListenerObject | null,
    options?: boolean | AddEventListenerOptions,
  ): void;
  override addEventListener(
    type: string,
    listener: AnyListener | null,
    options?: boolean | AddEventListenerOptions,
  ): void {
    if (listener === null) return;
    if (typeof options === "object" && options.signal?.aborted) return; // EventTarget adds none
    let byType = this.#wrapped.get(listener);
    if (byType === undefined) this.#wrapped.set(listener, byType = new Map());
    if (byType.has(type)) return; // already listening, as EventTarget would ignore it too
    const once = typeof options === "object" && options.once === true;
    const guarded = (event: Event) => {
      if (once) this.removeEventListener(type, listener as EventListener);
      this.#call(listener, event);
    };
    byType.set(type, guarded);
    this.#listeners.set(type, (this.#listeners.get(type) ?? 0) + 1);
    const signal = typeof options === "object" ? options.signal : undefined;
    signal?.addEventListener(
      "abort",
      () => this.removeEventListener(type, listener as EventListener),
      {
        once: true,
      },
    );
    super.addEventListener(type, guarded, options);
  }

  /** Stops a listener added with {@linkcode QueueEventTarget.addEventListener}. */
  override removeEventListener<K extends keyof QueueEventMap>(
    type: K,
    listener: ((event: QueueEvent<K>) => void) | null,
    options?: boolean | EventListenerOptions,
  ): void;
  /** Stops a listener of any event. */
  override removeEventListener(
    type: string,
    listener: EventListenerOrEventListenerObject | null,
    options?: boolean | EventListenerOptions,
  ): void;
  override removeEventListener(
    type: string,
    listener: AnyListener | null,
    options?: boolean | EventListenerOptions,
  ): void {
    const byType = listener === null ? undefined : this.#wrapped.get(listener);
    const guarded = byType?.get(type);
    if (byType === undefined || guarded === undefined) return;
    super.removeEventListener(type, guarded, options);
    byType.delete(type);
    this.#listeners.set(type, (this.#listeners.get(type) ?? 1) - 1);
  }

  /** Whether anyone listens for `type` here or on the target this one forwards to. */
  hasListeners(type: keyof QueueEventMap): boolean {
    return (this.#listeners.get(type) ?? 0) > 0 || (this.#forwardTo?.hasListeners(type) ?? false);
  }

  /** Sends `type` with `detail` here and to the target this one forwards to. */
  emit<K extends keyof QueueEventMap>(type: K, detail: QueueEventMap[K]): void {
    // Decided before dispatching: a listener that removes itself still counts as having heard it.
    const heard = this.hasListeners(type);
    if ((this.#listeners.get(type) ?? 0) > 0) this.dispatchEvent(new CustomEvent(type, { detail }));
    if (this.#forwardTo !== undefined) this.#forwardTo.emit(type, detail);
    else if (type === "queue:error" && !heard) {
      const { error, during } = detail as QueueEventMap["queue:error"];
      console.error(`@renox/queue: ${during}:`, error);
    }
  }

  #call(listener: AnyListener, event: Event): void {
    const report = (thrown: unknown) => {
      const during = `a listener of ${event.type}`;
      const error = asError(thrown);
      if (event.type === "queue:error") console.error(`@renox/queue: ${during}:`, error);
      else this.emit("queue:error", { error, during });
    };
    try {
      const result: unknown = typeof listener === "function"
        ? (listener as EventListener).call(this, event)
        : listener.handleEvent(event);
      // An async listener that rejects must not become an unhandled rejection either.
      if (result instanceof Promise) result.catch(report);
    } catch (error) {
      report(error);
    }
  }
}
