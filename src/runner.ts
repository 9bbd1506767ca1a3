/**
 * The worker loop: claim up to the free slots in one statement, hand the jobs
 * to an executor, settle everything that finished in one transaction, repeat.
 *
 * @module
 */
import type { Clock } from "./clock.ts";
import { asError, JobTimeoutError } from "./errors.ts";
import { QueueEventTarget, type RunnerStats, type StopReason } from "./events.ts";

export type { RunnerStats, StopReason } from "./events.ts";
import type { ExecutionResult, Executor } from "./executors/executor.ts";
import type { PayloadCipher } from "./encryption.ts";
import type { JobDefinition } from "./job.ts";
import { assertMiddleware, describeRules, guardRequest, type JobMiddleware } from "./middleware.ts";
import { openPayload } from "./payload.ts";
import {
  failBeforeStart,
  failWith,
  holdBack,
  type Outcome,
  outcomeOf,
  putBack,
  refusalBeforeStart,
} from "./lifecycle.ts";
import type { JobRegistry } from "./registry.ts";
import type { ClaimedJob, ClaimRequest, Settlement, SettleResult, Store } from "./stores/store.ts";
import type { ResolvedWorkOptions } from "./work_options.ts";

/** What a runner needs from the queue that starts it. @internal */
export interface RunnerDeps {
  /** Where jobs are claimed and settled. */
  readonly store: Store;
  /** The job definitions, for their retry rules. */
  readonly registry: JobRegistry;
  /** Where handlers run; the runner closes it when it stops. */
  readonly executor: Executor;
  /** Source of stored times. */
  readonly clock: Clock;
  /** Receives every event the runner sends. */
  readonly events: QueueEventTarget;
  /** Source of jitter. */
  readonly random: () => number;
  /** Opens encrypted payloads for middleware; null without `APP_KEY`. */
  readonly cipher: PayloadCipher | null;
}

/** Options for {@linkcode Runner.stop}. */
export interface StopOptions {
  /**
   * How long running jobs may finish before they are aborted and released.
   * @default {the worker's graceMs}
   */
  graceMs?: number;
}

/** The longest the loop runs on microtasks alone before it lets timers run. */
const YIELD_EVERY_MS = 20;
/** The most often a running job's progress is written to the store. */
const PROGRESS_INTERVAL_MS = 1_000;
/**
 * The longest wait between two heartbeats: they ride on the lease-renewal
 * timer (every third of the lease), capped so a long lease still shows the
 * worker alive.
 */
const MAX_HEARTBEAT_MS = 10_000;
/** A worker row not written for this long belongs to a worker that died: the next heartbeat drops it. */
const STALE_WORKER_MS = 24 * 60 * 60 * 1_000;

interface RunningJob {
  readonly job: ClaimedJob;
  readonly definition: JobDefinition;
  readonly controller: AbortController;
  readonly startedAt: number;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** The latest progress the handler reported and not yet written, or null. */
  progress: number | null;
  /** When its progress was last written (performance.now), or -Infinity. */
  progressWrittenAt: number;
  /** Set while a progress write waits for its turn. */
  progressTimer: ReturnType<typeof setTimeout> | undefined;
}

interface Finished {
  readonly job: ClaimedJob;
  readonly outcome: Outcome;
  readonly durationMs: number;
  /** True when the handler ran: its duration goes to the metrics rollup. */
  readonly ran?: boolean;
}

/**
 * A running worker, as {@linkcode Queue.work} returns it. It sends the job
 * events of {@linkcode QueueEventMap} for its own jobs (the queue gets them
 * too) and `worker:stop` once it has stopped.
 */
export class Runner extends QueueEventTarget implements AsyncDisposable {
  /** Settles once the runner has stopped and every job it held has settled. */
  readonly done: Promise<void>;
  readonly #deps: RunnerDeps;
  readonly #options: ResolvedWorkOptions;
  readonly #running = new Map<number, RunningJob>();
  readonly #hooks = new Set<Promise<void>>();
  readonly #startedAt = performance.now();
  #finished: Finished[] = [];
  /** Running jobs whose progress is due to be written with the next tick. */
  readonly #progressDue = new Set<RunningJob>();
  #claimed = 0;
  #stopping = false;
  #graceExpired = false;
  #graceDeadline = Infinity;
  #graceTimer: ReturnType<typeof setTimeout> | undefined;
  #renewing = false;
  #renewal: Promise<void> = Promise.resolve();
  #wake: (() => void) | null = null;
  #wakeRequested = false;
  #stats = { completed: 0, failed: 0, retried: 0 };
  #stopReason: StopReason | null = null;
  /** When the loop last let timers run. */
  #yieldedAt = performance.now();
  readonly #workerId = crypto.randomUUID();
  readonly #workerStartedAt: number;

  /** Starts the loop at once. @internal */
  constructor(deps: RunnerDeps, options: ResolvedWorkOptions) {
    super(deps.events);
    this.#deps = deps;
    this.#options = options;
    this.#workerStartedAt = deps.clock.now();
    this.done = this.#loop();
    deps.executor.stuck?.then((error) => this.#onStuck(error));
  }

  /** The options this runner runs with, defaults filled in. */
  get options(): ResolvedWorkOptions {
    return this.#options;
  }

  /** What the runner has done so far. */
  get stats(): RunnerStats {
    return { ...this.#stats };
  }

  /** Why the runner stopped or is stopping; null while it runs. */
  get stopReason(): StopReason | null {
    return this.#stopReason;
  }

  /** Jobs running now. */
  get running(): number {
    return this.#running.size;
  }

  /** Looks for due jobs now instead of at the next poll. */
  notify(): void {
    this.#wakeRequested = true;
    this.#wake?.();
  }

  /**
   * Claims nothing more, lets running jobs finish within the grace period,
   * then aborts them and releases them for a retry. Calling it again with a
   * shorter grace (e.g. 0 on a second signal) cuts the wait short.
   */
  stop(options: StopOptions = {}): Promise<void> {
    const graceMs = options.graceMs ?? this.#options.graceMs;
    if (!(graceMs >= 0 && graceMs <= 2_147_483_647)) {
      return Promise.reject(
        new RangeError(`stop: graceMs must be a number of ms from 0 to 2147483647: got ${graceMs}`),
      );
    }
    this.#stopping = true;
    this.#stopReason ??= "requested";
    const deadline = performance.now() + graceMs;
    if (deadline < this.#graceDeadline && !this.#graceExpired) {
      this.#graceDeadline = deadline;
      clearTimeout(this.#graceTimer);
      this.#graceTimer = setTimeout(() => this.#abortRunning(), graceMs);
    }
    this.notify();
    return this.done;
  }

  /** Same as {@linkcode Runner.stop} with the default grace. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }

  async #loop(): Promise<void> {
    const { leaseMs, pollMs, stopWhenEmpty } = this.#options;
    const renewEveryMs = Math.max(1, Math.floor(Math.min(leaseMs / 3, MAX_HEARTBEAT_MS)));
    const renewal = setInterval(() => void this.#renew(), renewEveryMs);
    const changes = this.#deps.store.watch(() => this.notify());
    this.#renew(); // the first heartbeat: the worker is seen from its start
    try {
      for (;;) {
        const free = this.#freeSlots();
        const busy = this.#finished.length > 0 || this.#progressDue.size > 0;
        const claimed = busy || free > 0 ? await this.#tick(free) : 0;
        // After grace: leave once every settle was written, or once writing them failed.
        const unsettled = this.#finished.length > 0 && claimed !== null;
        if (this.#graceExpired && this.#running.size === 0 && !unsettled) break;
        const idle = this.#running.size === 0 && this.#finished.length === 0;
        if (idle && !this.#mayClaim()) break;
        if (idle && stopWhenEmpty && claimed === 0) {
          this.#stopReason ??= "empty";
          break;
        }
        if (performance.now() - this.#yieldedAt > YIELD_EVERY_MS) await this.#yieldToTimers();
        if (this.#finished.length === 0) await this.#sleep(pollMs);
      }
    } finally {
      clearInterval(renewal);
      changes[Symbol.dispose]();
      await this.#renewal;
      await this.#deps.store.removeWorker(this.#workerId).catch((error) =>
        this.emit("queue:error", { error: asError(error), during: "worker heartbeat" })
      );
      this.#stopReason ??= "limit"; // the only way out that sets no reason of its own
      this.#stopping = true;
      this.#graceExpired = true; // nothing is left to abort: a later stop() starts no timer
      clearTimeout(this.#graceTimer);
      await Promise.allSettled(this.#hooks);
      await this.#deps.executor.close();
      this.emit("worker:stop", { ...this.stats, reason: this.#stopReason });
    }
  }

  #freeSlots(): number {
    if (!this.#mayClaim()) return 0;
    const { concurrency, maxJobs } = this.#options;
    return Math.min(concurrency - this.#running.size, maxJobs - this.#claimed);
  }

  /** A thread that cannot be stopped: finish what runs, then stop so the process can exit. */
  #onStuck(error: Error): void {
    if (this.#graceExpired) return; // already stopped
    this.#stopReason = "stuck";
    this.emit("queue:error", { error, during: "Web Worker pool" });
    void this.stop();
  }

  #mayClaim(): boolean {
    return !this.#stopping && this.#claimed < this.#options.maxJobs &&
      performance.now() - this.#startedAt < this.#options.maxTimeMs;
  }

  /**
   * One write per tick: settles every finished job, writes due progress and
   * claims up to `free` jobs in the same transaction, then starts them.
   * Returns how many were claimed, or null when the store failed (the
   * finished jobs are kept).
   */
  async #tick(free: number): Promise<number | null> {
    const { store, clock } = this.#deps;
    const settling = this.#finished;
    this.#finished = [];
    const settlements: Settlement[] = settling.map(timedSettlement);
    settlements.push(...this.#takeDueProgress());
    const request: ClaimRequest | undefined = free > 0
      ? {
        queues: this.#options.queues,
        limit: free,
        now: clock.now(),
        leaseMs: this.#options.leaseMs,
        token: newToken(),
        names: this.#deps.registry.names(),
      }
      : undefined;
    let result: SettleResult;
    try {
      result = settlements.length > 0
        ? await store.settle(settlements, request)
        : { applied: [], claimed: await store.claim(request!) };
    } catch (error) {
      this.#finished = settling.concat(this.#finished);
      this.emit("queue:error", {
        error: asError(error),
        during: settling.length > 0 ? "settle" : "claim",
      });
      if (!this.#graceExpired) await this.#sleep(this.#options.pollMs);
      return null;
    }
    settling.forEach((finished, index) => {
      if (result.applied[index]) this.#report(finished);
    });
    this.#claimed += result.claimed.length;
    // A stop that came while the claim waited on the store: start nothing, put it back.
    if (this.#stopping) {
      this.#putBackUnstarted(result.claimed, "worker stopped before the attempt began");
    } else for (const job of await this.#guard(result.claimed)) this.#start(job);
    return result.claimed.length;
  }

  #putBackUnstarted(jobs: readonly ClaimedJob[], reason: string): void {
    const now = this.#deps.clock.now();
    for (const job of jobs) {
      this.#finished.push({ job, outcome: putBack(job, now, reason), durationMs: 0 });
    }
  }

  /**
   * Checks the middleware of claimed jobs in one store call and returns the
   * jobs that may start; those held back are put back without using an attempt.
   */
  async #guard(claimed: readonly ClaimedJob[]): Promise<ClaimedJob[]> {
    const { registry, clock, store } = this.#deps;
    const now = clock.now();
    const guarded: { job: ClaimedJob; rules: readonly JobMiddleware[] }[] = [];
    const free: ClaimedJob[] = [];
    for (const job of claimed) {
      const definition = registry.get(job.name);
      if (definition?.middleware === undefined) {
        free.push(job);
        continue;
      }
      let payload: unknown;
      try {
        payload = await openPayload(definition, job.payload, this.#deps.cipher);
      } catch {
        free.push(job); // its attempt fails at once with the same PayloadIntegrityError
        continue;
      }
      try {
        const rules = assertMiddleware(definition.middleware(payload), job.name);
        if (rules.length === 0) free.push(job);
        else guarded.push({ job, rules });
      } catch (error) {
        const outcome = outcomeOf(
          job,
          definition,
          { kind: "error", error: asError(error), permanent: false },
          now,
          this.#deps.random,
        );
        this.#finished.push({ job, outcome, durationMs: 0 });
      }
    }
    if (guarded.length === 0) return free;
    let verdicts: (number | null)[];
    try {
      const expireMs = (job: ClaimedJob) =>
        registry.get(job.name)!.timeoutMs + this.#options.graceMs;
      verdicts = await store.acquire(
        guarded.map(({ job, rules }) => guardRequest(job, rules, now, expireMs(job))),
        now,
      );
    } catch (error) {
      this.emit("queue:error", { error: asError(error), during: "middleware" });
      // Back after a poll, not at once: a store that keeps refusing must not spin the loop.
      const retryAt = now + this.#options.pollMs;
      for (const { job } of guarded) {
        const outcome = holdBack(job, now, retryAt, "middleware could not be checked");
        this.#finished.push({ job, outcome, durationMs: 0 });
      }
      return free;
    }
    guarded.forEach(({ job, rules }, index) => {
      const retryAt = verdicts[index];
      if (retryAt === null || retryAt === undefined) free.push(job);
      else {
        const outcome = holdBack(job, now, retryAt, `held back by ${describeRules(rules)}`);
        this.#finished.push({ job, outcome, durationMs: 0 });
      }
    });
    return free;
  }

  #start(job: ClaimedJob): void {
    const definition = this.#deps.registry.get(job.name);
    const now = this.#deps.clock.now();
    const refusal = refusalBeforeStart(job, definition, now);
    if (refusal !== null || definition === undefined) {
      this.#finished.push({
        job,
        outcome: failBeforeStart(job, refusal ?? "", now),
        durationMs: 0,
      });
      return;
    }
    const controller = new AbortController();
    const entry: RunningJob = {
      job,
      definition,
      controller,
      startedAt: performance.now(),
      timer: undefined,
      progress: null,
      progressWrittenAt: -Infinity,
      progressTimer: undefined,
    };
    this.#running.set(job.id, entry);
    this.emit("job:start", { id: job.id, name: job.name, queue: job.queue, attempt: job.attempts });
    entry.timer = setTimeout(() => {
      const error = new JobTimeoutError(job.name, definition.timeoutMs);
      controller.abort(error);
      this.#finish(entry, { kind: "error", error, permanent: false });
    }, definition.timeoutMs);
    this.#deps.executor.run({
      id: job.id,
      name: job.name,
      queueName: job.queue,
      payload: job.payload,
      attempt: job.attempts,
      batchId: job.batchId,
      signal: controller.signal,
      onProgress: (percent) => this.#onProgress(entry, percent),
    }).then(
      (result) => this.#finish(entry, result),
      (error) => this.#finish(entry, { kind: "error", error: asError(error), permanent: false }),
    );
  }

  #finish(entry: RunningJob, result: ExecutionResult): void {
    if (!this.#forget(entry)) return; // already timed out, released on stop, or lost
    const now = this.#deps.clock.now();
    let outcome: Outcome;
    try {
      outcome = outcomeOf(entry.job, entry.definition, result, now, this.#deps.random);
    } catch (error) {
      outcome = failWith(entry.job, asError(error), now); // e.g. a backoff function that threw
    }
    this.#finished.push({
      job: entry.job,
      outcome,
      durationMs: performance.now() - entry.startedAt,
      ran: true,
    });
    this.notify();
  }

  /** Removes a running job; false if it was no longer running. */
  #forget(entry: RunningJob): boolean {
    if (this.#running.get(entry.job.id) !== entry) return false;
    this.#running.delete(entry.job.id);
    clearTimeout(entry.timer);
    clearTimeout(entry.progressTimer);
    this.#progressDue.delete(entry);
    return true;
  }

  /** Keeps the latest progress and has it written once its interval has passed. */
  #onProgress(entry: RunningJob, percent: number): void {
    if (this.#running.get(entry.job.id) !== entry) return;
    entry.progress = percent;
    if (entry.progressTimer !== undefined || this.#progressDue.has(entry)) return;
    const waitMs = entry.progressWrittenAt + PROGRESS_INTERVAL_MS - performance.now();
    entry.progressTimer = setTimeout(() => {
      entry.progressTimer = undefined;
      this.#progressDue.add(entry);
      this.notify();
    }, Math.max(0, waitMs));
  }

  /** The progress writes due now, each fenced like a settle; the job stays leased. */
  #takeDueProgress(): Settlement[] {
    const at = this.#deps.clock.now();
    const writes: Settlement[] = [];
    for (const entry of this.#progressDue) {
      if (entry.progress === null) continue;
      const { id, token } = entry.job;
      writes.push({ kind: "progress", id, token, at, percent: entry.progress });
      entry.progress = null;
      entry.progressWrittenAt = performance.now();
    }
    this.#progressDue.clear();
    return writes;
  }

  #abortRunning(): void {
    this.#graceExpired = true;
    const now = this.#deps.clock.now();
    for (const entry of [...this.#running.values()]) {
      this.#forget(entry);
      entry.controller.abort(new Error("Job aborted: the worker is stopping"));
      this.#finished.push({
        job: entry.job,
        outcome: putBack(entry.job, now, "worker stopped during the attempt"),
        durationMs: 0,
      });
    }
    this.notify();
  }

  #report({ job, outcome, durationMs }: Finished): void {
    const detail = { id: job.id, name: job.name, queue: job.queue, attempt: job.attempts };
    switch (outcome.kind) {
      case "complete":
        this.#stats.completed++;
        this.emit("job:complete", { ...detail, durationMs });
        return;
      case "retry":
        this.#stats.retried++;
        this.emit("job:retry", { ...detail, error: outcome.error, delayMs: outcome.delayMs });
        return;
      case "held":
        return; // not an attempt: the handler never ran
      case "fail": {
        this.#stats.failed++;
        const { attempts } = outcome.settlement;
        this.emit("job:failed", { ...detail, attempt: attempts, error: outcome.error });
        this.#runFailedHook(job, attempts, outcome.error);
        return;
      }
    }
  }

  #runFailedHook(job: ClaimedJob, attempts: number, error: Error): void {
    if (this.#deps.registry.get(job.name)?.failed === undefined) return;
    const limitMs = this.#deps.registry.get(job.name)!.timeoutMs;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const overtime = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`The failed hook of job ${job.id} ran past ${limitMs} ms`)),
        limitMs,
      );
    });
    const run = this.#deps.executor.runFailedHook({
      id: job.id,
      name: job.name,
      queueName: job.queue,
      payload: job.payload,
      attempts,
      error,
    });
    const hook = Promise.race([run, overtime]).catch((thrown) => {
      this.emit("queue:error", { error: asError(thrown), during: `failed hook of ${job.name}` });
    }).finally(() => {
      clearTimeout(timer);
      this.#hooks.delete(hook);
    });
    this.#hooks.add(hook);
  }

  /** Renews the leases of running jobs, if any, then writes the worker's heartbeat. */
  #renew(): void {
    if (this.#renewing) return;
    this.#renewing = true;
    this.#renewal = (async () => {
      if (this.#running.size > 0) await this.#renewLeases();
      await this.#heartbeat();
    })().finally(() => this.#renewing = false);
  }

  /** Records this worker as seen now, with how many jobs it runs. */
  async #heartbeat(): Promise<void> {
    const { clock, store } = this.#deps;
    const now = clock.now();
    try {
      await store.heartbeat({
        id: this.#workerId,
        host: hostName(),
        pid: Deno.pid,
        queues: this.#options.queues,
        concurrency: this.#options.concurrency,
        startedAt: this.#workerStartedAt,
        lastSeenAt: now,
        running: this.#running.size,
        names: this.#deps.registry.names(),
      }, now - STALE_WORKER_MS);
    } catch (error) {
      this.emit("queue:error", { error: asError(error), during: "worker heartbeat" });
    }
  }

  async #renewLeases(): Promise<void> {
    try {
      const renewed = [...this.#running.values()];
      const leases = renewed.map(({ job }) => ({ id: job.id, token: job.token }));
      const until = this.#deps.clock.now() + this.#options.leaseMs;
      for (const id of await this.#deps.store.renew(leases, until)) {
        // Only the attempt whose lease was renewed: the job may have settled and come back meanwhile.
        const entry = renewed.find(({ job }) => job.id === id);
        if (entry === undefined || !this.#forget(entry)) continue;
        const error = new Error(`Lost the lease of job ${id}: another worker may run it now`);
        entry.controller.abort(error);
        this.emit("queue:error", { error, during: "lease renewal" });
      }
    } catch (error) {
      this.emit("queue:error", { error: asError(error), during: "lease renewal" });
    }
  }

  /**
   * Lets timers run (lease renewals, timeouts, a stop's grace): a loop that
   * always has work to settle would otherwise run on microtasks alone.
   */
  #yieldToTimers(): Promise<void> {
    return new Promise((resolve) =>
      setTimeout(() => {
        this.#yieldedAt = performance.now();
        resolve();
      }, 0)
    );
  }

  /** Waits `ms`, or less when woken; a wake-up that came while the loop was busy ends it at once. */
  #sleep(ms: number): Promise<void> {
    if (this.#wakeRequested) {
      this.#wakeRequested = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#wake = null;
        this.#wakeRequested = false;
        resolve();
      };
      const timer = setTimeout(() => {
        this.#yieldedAt = performance.now();
        done();
      }, ms);
      this.#wake = done;
    });
  }
}

/**
 * A finished attempt's settlement, with the handler's runtime when it ran and
 * ended in a success, a failure for good, or an error it is retried after.
 */
function timedSettlement({ outcome, durationMs, ran }: Finished): Settlement {
  const settlement = outcome.settlement;
  if (ran !== true) return settlement;
  if (settlement.kind === "release" && (settlement.error === null || settlement.refundAttempt)) {
    return settlement;
  }
  return { ...settlement, durationMs };
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

/** A random reservation token that fits a JavaScript number exactly. */
function newToken(): number {
  const [high, low] = crypto.getRandomValues(new Uint32Array(2));
  return (high! & 0x1fffff) * 0x1_0000_0000 + low!;
}
