/**
 * Lease renewal and the worker heartbeat: every third of the lease (at most
 * 10 s apart) the leases of the running jobs are renewed and the worker's
 * row is written; a job whose lease was lost is aborted. When the runner
 * stops, its worker row is removed.
 *
 * @internal
 * @module
 */
import type { Clock } from "../clock.ts";
import { asError, QueueLostError, QueueMovedError } from "../errors.ts";
import type { QueueEventTarget } from "../events.ts";
import type { SchemaNews, WorkerStore } from "../stores/store.ts";
import type { ResolvedWorkOptions } from "./work_options.ts";
import type { RunningJob } from "./attempts.ts";

/**
 * The longest wait between two heartbeats: they ride on the lease-renewal
 * timer (every third of the lease), capped so a long lease still shows the
 * worker alive.
 */
const MAX_HEARTBEAT_MS = 10_000;
/** The shortest time between two looks for cancels that other writes set off. */
const CANCEL_LOOK_MS = 100;
/** A worker row not written for this long belongs to a worker that died: the next heartbeat drops it. */
const STALE_WORKER_MS = 24 * 60 * 60 * 1_000;

/** What the lease keeper needs. */
export interface LeaseKeeperDeps {
  /** Where leases are renewed and the worker's row is kept. */
  readonly store: Pick<WorkerStore, "renew" | "heartbeat" | "removeWorker" | "cancelsAsked">;
  /** Source of stored times. */
  readonly clock: Clock;
  /** Receives `queue:error` when a renewal or heartbeat fails, or a lease is lost. */
  readonly events: Pick<QueueEventTarget, "emit">;
  /** The attempts running now, by job id. */
  readonly running: ReadonlyMap<number, RunningJob>;
  /** Stops tracking an attempt whose lease was lost; false if it was no longer running. */
  readonly forget: (entry: RunningJob) => boolean;
  /** Stops an attempt whose job had a cancel asked (`queue.cancel()`). */
  readonly cancel: (entry: RunningJob, reason: string) => void;
  /** The job names this worker's process knows, shown in its row. */
  readonly names: readonly string[];
  /** Called when a heartbeat found a contract schema step newer than this code. */
  readonly outdated: (news: SchemaNews) => void;
  /**
   * Called when the store refused the heartbeat for good: the queue was
   * moved (docs/moving.md), or the store lost its data (docs/redis.md).
   */
  readonly gone: (error: QueueMovedError | QueueLostError) => void;
}

/** How long leases last, and how the worker's row shows it. */
export type LeaseKeeperOptions = Pick<ResolvedWorkOptions, "leaseMs" | "queues" | "concurrency">;

/** Renews the leases of running jobs and writes the worker's heartbeat. */
export class LeaseKeeper {
  readonly #deps: LeaseKeeperDeps;
  readonly #options: LeaseKeeperOptions;
  readonly #workerId = crypto.randomUUID();
  readonly #workerStartedAt: number;
  #interval: ReturnType<typeof setInterval> | undefined;
  #renewing = false;
  #renewal: Promise<void> = Promise.resolve();
  /** Set while a look for cancels runs; `#lookAgain` asks for one more after it. */
  #looking = false;
  #lookAgain = false;
  #lookTimer: ReturnType<typeof setTimeout> | undefined;
  #lookedAt = -Infinity;

  /** Starts nothing yet: {@linkcode LeaseKeeper.start} does. */
  constructor(deps: LeaseKeeperDeps, options: LeaseKeeperOptions) {
    this.#deps = deps;
    this.#options = options;
    this.#workerStartedAt = deps.clock.now();
  }

  /** Writes the first heartbeat now, so the worker is seen from its start, then renews on a timer. */
  start(): void {
    const { leaseMs } = this.#options;
    const renewEveryMs = Math.max(1, Math.floor(Math.min(leaseMs / 3, MAX_HEARTBEAT_MS)));
    this.#interval = setInterval(() => this.#renew(), renewEveryMs);
    this.#renew();
  }

  /**
   * Looks soon for cancels asked of the running jobs: called when another
   * connection wrote (the WAL watch, NOTIFY), so a cancel is seen within
   * moments rather than at the next renewal. At most one look every
   * {@linkcode CANCEL_LOOK_MS}, the last call always followed by one.
   */
  lookForCancels(): void {
    if (this.#deps.running.size === 0 || this.#lookTimer !== undefined) return;
    if (this.#looking) {
      this.#lookAgain = true;
      return;
    }
    const waitMs = Math.max(0, this.#lookedAt + CANCEL_LOOK_MS - performance.now());
    this.#lookTimer = setTimeout(() => {
      this.#lookTimer = undefined;
      void this.#lookNow();
    }, waitMs);
  }

  async #lookNow(): Promise<void> {
    const { store, running, events, cancel } = this.#deps;
    if (running.size === 0) return;
    this.#looking = true;
    this.#lookedAt = performance.now();
    try {
      const looked = [...running.values()];
      const leases = looked.map(({ job }) => ({ id: job.id, token: job.token }));
      for (const asked of await store.cancelsAsked(leases)) {
        const entry = looked.find(({ job }) => job.id === asked.id && job.token === asked.token);
        if (entry !== undefined) cancel(entry, asked.reason);
      }
    } catch (error) {
      events.emit("queue:error", { error: asError(error), during: "looking for cancels" });
    } finally {
      this.#looking = false;
      if (this.#lookAgain) {
        this.#lookAgain = false;
        this.lookForCancels();
      }
    }
  }

  /** Stops renewing, waits for a renewal under way, then removes the worker's row. */
  async stop(): Promise<void> {
    clearTimeout(this.#lookTimer);
    this.#lookTimer = undefined;
    clearInterval(this.#interval);
    await this.#renewal;
    await this.#deps.store.removeWorker(this.#workerId).catch((error) =>
      this.#deps.events.emit("queue:error", { error: asError(error), during: "worker heartbeat" })
    );
  }

  /** Renews the leases of running jobs, if any, then writes the worker's heartbeat. */
  #renew(): void {
    if (this.#renewing) return;
    this.#renewing = true;
    this.#renewal = (async () => {
      if (this.#deps.running.size > 0) await this.#renewLeases();
      if (this.#deps.running.size > 0 && !this.#looking) await this.#lookNow();
      await this.#heartbeat();
    })().finally(() => this.#renewing = false);
  }

  /**
   * Records this worker as seen now, with how many jobs it runs, and passes
   * on a newer contract schema step the write read back.
   */
  async #heartbeat(): Promise<void> {
    const { clock, store } = this.#deps;
    const now = clock.now();
    try {
      const news = await store.heartbeat({
        id: this.#workerId,
        host: hostName(),
        pid: Deno.pid,
        queues: this.#options.queues,
        concurrency: this.#options.concurrency,
        startedAt: this.#workerStartedAt,
        lastSeenAt: now,
        running: this.#deps.running.size,
        names: this.#deps.names,
      }, now - STALE_WORKER_MS);
      if (news.contractStep !== null) this.#deps.outdated(news);
    } catch (error) {
      if (error instanceof QueueMovedError || error instanceof QueueLostError) {
        this.#deps.gone(error);
      } else {this.#deps.events.emit("queue:error", {
          error: asError(error),
          during: "worker heartbeat",
        });}
    }
  }

  async #renewLeases(): Promise<void> {
    const { clock, store, events, running, forget } = this.#deps;
    try {
      const renewed = [...running.values()];
      const leases = renewed.map(({ job }) => ({ id: job.id, token: job.token }));
      const now = clock.now();
      for (const id of await store.renew(leases, now + this.#options.leaseMs, now)) {
        // Only the attempt whose lease was renewed: the job may have settled and come back meanwhile.
        const entry = renewed.find(({ job }) => job.id === id);
        if (entry === undefined || !forget(entry)) continue;
        const error = new Error(`Lost the lease of job ${id}: another worker may run it now`);
        entry.controller.abort(error);
        events.emit("queue:error", { error, during: "lease renewal" });
      }
    } catch (error) {
      events.emit("queue:error", { error: asError(error), during: "lease renewal" });
    }
  }
}

/** The machine's name where the process may read it without a permission prompt, else "unknown". */
function hostName(): string {
  try {
    const sys = Deno.permissions.querySync({ name: "sys", kind: "hostname" });
    return sys.state === "granted" ? Deno.hostname() : "unknown";
  } catch {
    return "unknown";
  }
}
