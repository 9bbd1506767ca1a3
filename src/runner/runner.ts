/**
 * The worker loop: claim up to the free slots in one statement, hand the jobs
 * to an executor, settle everything that finished in one transaction, repeat.
 * Around that core, each in `src/runner/`: the lease keeper (renewals and
 * heartbeat), throttled progress writes, the middleware check between claim
 * and start, the time-boxed `failed` hooks, the sleep between polls, and the
 * stop state.
 *
 * @module
 */
import { shown } from "../shown.ts";
import { type Clock, LONGEST_TIMER_MS } from "../clock.ts";
import type { PayloadCipher } from "../encryption.ts";
import {
  asError,
  JobCancelledError,
  JobTimeoutError,
  OutdatedCodeError,
  QueueLostError,
  QueueMovedError,
  StepTimeoutError,
} from "../errors.ts";
import { StepWrites } from "./step_writes.ts";
import { QueueEventTarget, type StopReason, type WorkerStats } from "../events.ts";
import type { ExecutionResult, Executor, StepPort } from "../executors/executor.ts";
import {
  cancelled,
  expired,
  expiryBeforeStart,
  failBeforeStart,
  failWith,
  type Outcome,
  outcomeOf,
  putBack,
  putBackUnstarted,
  refusalBeforeStart,
} from "./outcomes.ts";
import type { JobRegistry } from "../registry.ts";
import { AttemptTimeouts } from "./attempt_timeouts.ts";
import { type FinishedJob, type RunningJob, STOP_MARGIN_MS } from "./attempts.ts";
import { BeginMarks } from "./begin_marks.ts";
import { ClaimAhead } from "./claim_ahead.ts";
import { FailedHooks } from "./failed_hooks.ts";
import { JobLogBuffer } from "./log_buffer.ts";
import { JobMetrics } from "./job_metrics.ts";
import { LeaseKeeper } from "./lease_keeper.ts";
import { isCancelAsked, MiddlewareCheck } from "./middleware_check.ts";
import { parkResumes } from "./park_resumes.ts";
import { PollSleep } from "./poll_sleep.ts";
import { ProgressWrites } from "./progress_writes.ts";
import type { ScheduleFirer } from "../schedules/firing.ts";
import { settleApart } from "./settle_apart.ts";
import { SettleGroup } from "./settle_group.ts";
import { isStoreOutage } from "../stores/store_outage.ts";
import { RUNNING, type StopState } from "./stop_state.ts";
import { endAttemptSpan, spanOutcomeOf, startAttemptSpan } from "./tracing.ts";
import { oneDeathSpends } from "../stores/rows/spend_limits.ts";
import type {
  ClaimedJob,
  ClaimRequest,
  SchemaNews,
  Settlement,
  SettleResult,
  SpendLimits,
  StepStore,
  WorkerStore,
} from "../stores/store.ts";
import type { ResolvedWorkOptions } from "./work_options.ts";

export type { RunnerStats, StopReason, WorkerStats } from "../events.ts";

/** What a runner needs from the queue that starts it. @internal */
export interface RunnerDeps {
  /** Where jobs are claimed and settled. */
  readonly store: WorkerStore & Pick<StepStore, "jobSteps">;
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
  /** Fires the schedules' due slots in this runner's ticks; null when it fires none. */
  readonly schedules: ScheduleFirer | null;
  /** Whether claims look up the schedule that fired each job (some schedule is defined). */
  readonly readsScheduled: boolean;
  /** How long finished jobs are kept, in ms, for jobs that do not say (`keepFinishedMs`). */
  readonly keepFinishedMs: number;
}

/** Options for {@linkcode QueueWorker.stop}. */
export interface StopOptions {
  /**
   * How long running jobs may finish before they are aborted and released.
   * @default {the worker's graceMs}
   */
  graceMs?: number;
}

/**
 * A running worker, as {@linkcode Queue.work} returns it. It sends the job
 * events of {@linkcode QueueEventMap} for its own jobs (the queue gets them
 * too) and `worker:stop` once it has stopped.
 */
export class QueueWorker extends QueueEventTarget implements AsyncDisposable {
  /** Settles once the runner has stopped and every job it held has settled. */
  readonly done: Promise<void>;
  readonly #deps: RunnerDeps;
  readonly #options: ResolvedWorkOptions;
  readonly #running = new Map<number, RunningJob>();
  readonly #startedAt = performance.now();
  readonly #leases: LeaseKeeper;
  readonly #progress: ProgressWrites;
  readonly #middleware: MiddlewareCheck;
  readonly #failedHooks: FailedHooks;
  readonly #logs: JobLogBuffer;
  readonly #metrics = new JobMetrics();
  readonly #timeouts = new AttemptTimeouts<RunningJob>((entry) => this.#timedOut(entry));
  readonly #finished = new SettleGroup();
  readonly #steps = new StepWrites();
  /** Claimed jobs past their retry deadline that resume a parked run: they start all the same. */
  readonly #parkResumes = new Set<number>();
  readonly #ahead: ClaimAhead;
  /**
   * When the next job is due (performance.now), read after a claim that took
   * every due job; the claim after that read sleeps until then. Null when
   * not read since the last claim that took jobs.
   */
  #nextDueAt: number | null = null;
  /** The jobs whose handler began, their begin marks not written yet. */
  readonly #begun = new BeginMarks(() => this.notify());
  /**
   * Jobs claimed ahead taken for slots that freed: each holds its slot until
   * the next tick confirms its start (then it starts) or refuses it (then it
   * is dropped: cancelled, taken over, or given back for a pause).
   */
  #toStart: ClaimedJob[] = [];
  /** The jobs of `#toStart` that the tick writing now is confirming: they hold their slots too. */
  #confirming: readonly ClaimedJob[] = [];
  #spendLimitsByName: Readonly<Record<string, SpendLimits>> | undefined;
  #claimed = 0;
  #state: StopState = RUNNING;
  readonly #pollSleep = new PollSleep();
  #stats = { completed: 0, failed: 0, retried: 0 };
  /** The time of the last tick that fired schedules (0: none yet). */
  #firedAt = 0;
  /** The error of a store that stopped taking writes, until a write goes through again. */
  #outage: Error | null = null;

  /** Starts the loop at once. @internal */
  constructor(deps: RunnerDeps, options: ResolvedWorkOptions) {
    super(deps.events);
    this.#deps = deps;
    this.#options = options;
    this.#ahead = new ClaimAhead(options);
    const { store, registry, clock, executor } = deps;
    this.#leases = new LeaseKeeper({
      store,
      clock,
      events: this,
      running: this.#running,
      forget: (entry) => {
        if (!this.#forget(entry)) return false;
        endAttemptSpan(entry.span, "lost", null, entry.definition.encrypted);
        return true;
      },
      cancel: (entry, reason) => this.#cancel(entry, reason),
      names: deps.registry.names(),
      outdated: (news) => this.#onOutdated(news),
      gone: (error) => this.#onGone(error, "worker heartbeat"),
    }, options);
    this.#progress = new ProgressWrites(this.#running, clock, () => this.notify());
    this.#middleware = new MiddlewareCheck({
      ...deps,
      events: this,
      settleLater: (finished) => this.#settleLater(finished),
    }, options);
    this.#failedHooks = new FailedHooks(registry, executor, this);
    this.#logs = new JobLogBuffer(deps.cipher, options.maxLogBytes, () => this.notify());
    this.done = this.#loop();
    executor.stuck?.then((error) => this.#onStuck(error));
  }

  /** The options this runner runs with, defaults filled in. */
  get options(): ResolvedWorkOptions {
    return this.#options;
  }

  /** What the runner has done so far. */
  get stats(): WorkerStats {
    return { ...this.#stats };
  }

  /** Why the runner stopped or is stopping; null while it runs. */
  get stopReason(): StopReason | null {
    return this.#state.phase === "running" ? null : this.#state.reason;
  }

  /** Jobs running now. */
  get running(): number {
    return this.#running.size;
  }

  /** Looks for due jobs now instead of at the next poll. */
  notify(): void {
    this.#pollSleep.wake();
  }

  /** Looks soon for cancels asked of the jobs it runs (a `queue.cancel()` in this process). @internal */
  lookForCancels(): void {
    this.#leases.lookForCancels();
  }

  /**
   * Claims nothing more, lets running jobs finish within the grace period,
   * then aborts them and releases them for a retry. Calling it again with a
   * shorter grace (e.g. 0 on a second signal) cuts the wait short.
   */
  stop(options: StopOptions = {}): Promise<void> {
    const graceMs = options.graceMs ?? this.#options.graceMs;
    if (!(graceMs >= 0 && graceMs <= LONGEST_TIMER_MS)) {
      return Promise.reject(
        new RangeError(
          `stop: graceMs must be a number of ms from 0 to 2147483647: got ${shown(graceMs)}`,
        ),
      );
    }
    this.#stopWithin(graceMs);
    this.notify();
    return this.done;
  }

  /**
   * {@linkcode QueueWorker.stop} for a reason of the caller's (a drain's
   * `"time"`, or `"closed"` for a drain the queue closes under), which
   * `stopReason` and `worker:stop` then carry; a runner already stopping
   * keeps the reason it stops for.
   * @internal
   */
  stopFor(reason: StopReason, graceMs: number = this.#options.graceMs): Promise<void> {
    this.#stopWithin(graceMs, this.#state.phase === "running" ? reason : undefined);
    this.notify();
    return this.done;
  }

  /** Same as {@linkcode QueueWorker.stop} with the default grace. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }

  async #loop(): Promise<void> {
    const { pollMs, stopWhenEmpty } = this.#options;
    const changes = this.#deps.store.watch(() => {
      this.notify();
      this.#leases.lookForCancels();
    });
    this.#leases.start();
    let emptied = false;
    /** The last empty claim passed a due job over: a row locked then may be free by now. */
    let passedOver = false;
    try {
      await this.#untilExecutorReady();
      for (;;) {
        this.#startAhead();
        const free = this.#freeSlots();
        const settleDue = this.#settleDue() || this.#logs.due || this.#begun.due;
        const starts = this.#toStart.length > 0;
        const limit = this.#claimLimit(free, settleDue || starts);
        // A tick only for starts leaves the plain successes to their group: a start cannot wait.
        const claimed = settleDue || starts || limit > 0 || this.#slotDue()
          ? await this.#tick(limit, free, settleDue || limit > 0 || !starts)
          : 0;
        // After grace: leave once every settle was written, or once writing them failed.
        const unsettled = this.#finished.size > 0 && claimed !== null;
        if (this.#state.phase === "grace over" && this.#running.size === 0 && !unsettled) break;
        const idle = this.#running.size === 0 && this.#finished.size === 0 &&
          this.#ahead.size === 0 && this.#toStart.length === 0;
        if (idle && !this.#mayClaim()) break;
        const sealing = this.#deps.schedules?.missedRows === true; // a slot waits for its row
        if (claimed !== 0) passedOver = false;
        if (idle && stopWhenEmpty && claimed === 0 && !sealing) {
          const passedBefore = passedOver;
          passedOver = await this.#claimPassedOver();
          // After a claim that passed a locked row over, the row may have been freed between this
          // claim and its answer (a dispatch's transaction committed): claim once more first.
          if (!passedOver && !passedBefore) {
            emptied = true;
            break;
          }
          if (passedOver) await this.#pollSleep.sleep(Math.min(pollMs, PASSED_OVER_RETRY_MS));
          continue;
        }
        if (this.#pollSleep.timersStarved) await this.#pollSleep.yieldToTimers();
        if (this.#toStart.length > 0) continue; // slots wait for the next tick to confirm their starts
        if (claimed !== 0) this.#nextDueAt = null;
        if (this.#finished.size === 0) {
          // Took every due job the free slots allowed: sleep until the next one is due. That time
          // is read after the claim, and a job that became due in between (a loaded machine
          // stretches the gap) is not in it: claim once more after the read, then sleep.
          const allDueTaken = claimed !== null && claimed < limit && this.#mayClaim();
          if (allDueTaken && this.#nextDueAt === null) {
            this.#nextDueAt = performance.now() + await this.#untilNextDue(pollMs);
            continue;
          }
          const untilDueMs = allDueTaken
            ? Math.max(0, this.#nextDueAt! - performance.now())
            : pollMs;
          this.#nextDueAt = null;
          await this.#pollSleep.sleep(this.#sleepMs(untilDueMs));
        } else if (!this.#settleDue()) {
          // Finished jobs wait for their group: until a slot frees, or the group's time is up.
          await this.#pollSleep.sleep(this.#finished.waitMs());
        }
      }
    } finally {
      const state = this.#state;
      if (state.phase === "stopping") clearTimeout(state.graceTimer);
      // Stopped with nothing left to abort: a later stop() starts no timer.
      const reason = state.phase !== "running"
        ? state.reason
        : emptied
        ? "empty"
        : performance.now() - this.#startedAt >= this.#options.maxTimeMs
        ? "time"
        : "jobs";
      this.#state = { phase: "stopped", reason };
      changes[Symbol.dispose]();
      this.#timeouts.close();
      this.#logs.close();
      this.#metrics.close();
      this.#begun.close();
      await this.#leases.stop();
      await this.#failedHooks.ended();
      await this.#deps.executor.close();
      this.emit("worker:stop", { ...this.stats, reason });
    }
  }

  /**
   * Waits until the executor can call handlers at once (Web Workers load the
   * jobs module first), or until a stop or `maxTimeMs`: a job claimed before
   * would spend its lease and its timeout waiting.
   */
  async #untilExecutorReady(): Promise<void> {
    const { ready } = this.#deps.executor;
    if (ready === undefined) return;
    let isReady = false;
    void ready.then(() => {
      isReady = true;
      this.notify();
    });
    while (!isReady && this.#state.phase === "running" && this.#withinTime()) {
      await this.#pollSleep.sleep(this.#options.pollMs);
    }
  }

  /**
   * How long to sleep so that the next job of the worker's queues to become
   * due (a delayed job, a retry, a lease that runs out) starts on time:
   * `pollMs` at most, and `pollMs` when the store cannot say.
   */
  async #untilNextDue(pollMs: number): Promise<number> {
    const { store, clock } = this.#deps;
    let next: number | null;
    try {
      next = await store.nextDueAt(
        this.#options.queues,
        clock.now(),
        this.#deps.registry.groupRates(),
      );
    } catch {
      return pollMs; // the next claim reports what is wrong with the store
    }
    return next === null ? pollMs : Math.min(pollMs, Math.max(0, next - clock.now()));
  }

  /**
   * Whether finished jobs are to be settled now: at once while nothing is
   * claimed ahead, else once their group is full or its time is up; always
   * when progress is due or the worker stops.
   */
  #settleDue(): boolean {
    if (this.#progress.due || this.#steps.due) return true;
    return this.#finished.due(this.#ahead.size > 0 && this.#state.phase === "running");
  }

  /** Each known job's `maxAttempts` and `maxCrashes`, for claims that take jobs ahead. */
  #spendLimits(): Readonly<Record<string, SpendLimits>> {
    const { registry } = this.#deps;
    return this.#spendLimitsByName ??= Object.fromEntries(
      registry.names().map((name) => {
        const { maxAttempts, maxCrashes } = registry.get(name)!;
        return [name, { attempts: maxAttempts, crashes: maxCrashes }];
      }),
    );
  }

  /** Jobs a claim may take beyond the `free` slots, within `maxJobs`. */
  #aheadAllowance(free: number): number {
    return this.#ahead.allowance(this.#options.maxJobs - this.#claimed - free);
  }

  /**
   * Takes jobs claimed ahead for the free slots, to start once the next tick
   * confirms their start; once the worker stops claiming (a stop,
   * `maxTimeMs`), puts them all back instead.
   */
  #startAhead(): void {
    if (this.#ahead.size === 0 && this.#toStart.length === 0) return;
    if (this.#state.phase !== "running" || !this.#withinTime()) {
      const unstarted = this.#toStart.concat(this.#ahead.takeAll());
      this.#toStart = [];
      this.#putBackUnstarted(unstarted, "worker stopped before the attempt began");
      return;
    }
    while (this.#slotsTaken < this.#options.concurrency) {
      const taken = this.#ahead.take();
      if (taken === undefined) return;
      if (taken.fresh) this.#toStart.push(taken.job);
      else {
        // Its lease was not renewed while it waited: another worker may take it, so run it later.
        this.#claimed--;
        this.#putBackUnstarted([taken.job], "claimed ahead and not started within its lease");
      }
    }
  }

  /**
   * Starts the jobs claimed ahead whose start the tick confirmed, in claim
   * order, once their middleware lets them, and drops the others: each was
   * cancelled, taken over by another worker, or given back because its
   * queue is paused. The jobs still held ahead of a paused queue are put
   * back too: they would be refused alike.
   */
  async #confirmed(starting: readonly ClaimedJob[], started: readonly number[]): Promise<void> {
    if (starting.length === 0) return;
    const confirmed = new Set(started);
    const refusedQueues = new Set<string>();
    const starts: ClaimedJob[] = [];
    for (const job of starting) {
      if (confirmed.has(job.id)) starts.push(job);
      else {
        this.#claimed--;
        refusedQueues.add(job.queue);
      }
    }
    if (refusedQueues.size > 0) {
      const held = this.#ahead.takeWhere((job) => refusedQueues.has(job.queue));
      this.#claimed -= held.length;
      this.#putBackUnstarted(
        held,
        "claimed ahead and not started: a job of its queue could not start",
      );
    }
    await this.#startChecked(starts);
  }

  /**
   * Starts `jobs` once their middleware lets them; the others are held back
   * (put back without using an attempt). A job's middleware is checked at
   * its start, not at its claim: a job claimed ahead may wait for a slot,
   * and a lock taken at its claim would expire that much before its end, a
   * rate window count a start that came in a later window.
   */
  async #startChecked(jobs: readonly ClaimedJob[]): Promise<void> {
    if (jobs.length === 0) return;
    const startable = await this.#middleware.check(jobs);
    if (startable.some((job) => job.retryUntil !== null)) await this.#findParkResumes(startable);
    for (const job of startable) this.#start(job);
  }

  /** Slots running a job, or held by a job claimed ahead until its start is confirmed. */
  get #slotsTaken(): number {
    return this.#running.size + this.#toStart.length + this.#confirming.length;
  }

  #freeSlots(): number {
    if (!this.#mayClaim()) return 0;
    const { concurrency, maxJobs } = this.#options;
    return Math.min(concurrency - this.#slotsTaken, maxJobs - this.#claimed);
  }

  /** The schedules this runner fires, while it may claim; null otherwise. */
  #firing(): ScheduleFirer | null {
    return this.#mayClaim() ? this.#deps.schedules : null;
  }

  /** Whether a schedule's slot came since the last tick that fired (a busy worker still fires it). */
  #slotDue(): boolean {
    const firing = this.#firing();
    if (firing === null) return false;
    const next = firing.nextSlot(this.#firedAt);
    return next !== null && next <= this.#deps.clock.now();
  }

  /** The poll, or less when a schedule's next slot comes sooner. */
  #sleepMs(pollMs: number): number {
    const firing = this.#firing();
    if (firing === null) return pollMs;
    const now = this.#deps.clock.now();
    const next = firing.nextSlot(now);
    return next === null ? pollMs : Math.max(0, Math.min(pollMs, next - now + 1));
  }

  /**
   * Whether the claim that came back empty may have passed over a due job
   * (see `WorkerStore.claimPassedOver`): the queues are not empty then. A
   * store that cannot answer is taken to say yes: the next claim meets its
   * outage.
   */
  async #claimPassedOver(): Promise<boolean> {
    try {
      return await this.#deps.store.claimPassedOver({
        queues: this.#options.queues,
        names: this.#deps.registry.names(),
        now: this.#deps.clock.now(),
      });
    } catch {
      return true;
    }
  }

  #mayClaim(): boolean {
    return this.#state.phase === "running" && this.#claimed < this.#options.maxJobs &&
      this.#withinTime();
  }

  #withinTime(): boolean {
    return performance.now() - this.#startedAt < this.#options.maxTimeMs;
  }

  /** Moves to stopping, or to an earlier grace deadline; `reason` overrides the one already set. */
  #stopWithin(graceMs: number, reason?: StopReason): void {
    const state = this.#state;
    if (state.phase === "grace over" || state.phase === "stopped") return;
    const graceDeadline = performance.now() + graceMs;
    if (state.phase === "stopping") {
      if (graceDeadline >= state.graceDeadline) {
        if (reason !== undefined) this.#state = { ...state, reason };
        return;
      }
      clearTimeout(state.graceTimer);
    }
    this.#state = {
      phase: "stopping",
      reason: reason ?? (state.phase === "stopping" ? state.reason : "requested"),
      graceDeadline,
      graceTimer: setTimeout(() => this.#abortRunning(), graceMs),
    };
  }

  /**
   * The database has a contract schema step newer than this code: claim
   * nothing more, let the running jobs finish (their own timeouts bound
   * them), then stop, so the process can be restarted on the new code.
   */
  #onOutdated(news: SchemaNews): void {
    if (this.#state.phase !== "running") return;
    const { codeStep, databaseStep, contractStep } = news;
    const error = new OutdatedCodeError("go on claiming jobs", {
      codeStep,
      databaseStep,
      contractStep: contractStep ?? databaseStep,
    });
    this.#stopWithin(LONGEST_TIMER_MS, "outdated");
    this.emit("queue:error", { error, during: "worker heartbeat" });
    this.notify();
  }

  /**
   * The store refused a write for good: the queue was moved to another
   * store (docs/moving.md), or the store lost its data (docs/redis.md). No
   * write will go through again, so stop at once; the running jobs are
   * aborted (their settles would be refused: a moved queue's run again on
   * the new store, copied there as pending; a lost store's are gone).
   */
  #onGone(error: QueueMovedError | QueueLostError, during: string): void {
    if (this.#state.phase !== "running") return;
    this.#stopWithin(0, error instanceof QueueMovedError ? "moved" : "lost");
    this.emit("queue:error", { error, during });
    this.notify();
  }

  /** A thread that cannot be stopped: finish what runs, then stop so the process can exit. */
  #onStuck(error: Error): void {
    const { phase } = this.#state;
    if (phase === "grace over" || phase === "stopped") return;
    this.#stopWithin(this.#options.graceMs, "stuck");
    this.emit("queue:error", { error, during: "Web Worker pool" });
    this.notify();
  }

  /**
   * One write per tick: settles every finished job (with `settle`), writes
   * due progress, confirms the starts of the jobs claimed ahead that took
   * freed slots and claims up to `limit` jobs in the same transaction, then
   * starts the jobs confirmed and up to `free` of those claimed, and keeps
   * the rest claimed ahead. Returns how many were claimed, or null when the
   * store failed (the finished jobs and the starts are kept).
   */
  async #tick(limit: number, free: number, settle: boolean): Promise<number | null> {
    const { store, clock } = this.#deps;
    const group = settle ? this.#finished.take() : null;
    const settling = group?.jobs ?? [];
    // Memos of steps that ended, each step resolving once its memo is written: first, so that a
    // step of an attempt that ended since is written while its claim still holds the job.
    const steps = this.#steps.due ? this.#steps.take() : null;
    const stepCount = steps?.settlements.length ?? 0;
    const settlements: Settlement[] = [
      ...steps?.settlements ?? [],
      ...settling.map(timedSettlement),
    ];
    const starting = this.#toStart;
    this.#toStart = [];
    this.#confirming = starting;
    if (this.#progress.due) settlements.push(...this.#progress.take());
    const schedules = this.#firing() ?? undefined;
    if (schedules?.needsPreparing) await schedules.prepare(clock.now());
    const now = clock.now();
    const groupRates = this.#deps.registry.groupRates();
    const checkedNames = this.#deps.registry.keptUntilChecked();
    // While the store is out, claim nothing until the settles kept in memory are written.
    const claiming = !(this.#outage !== null && settlements.length > 0);
    const request: ClaimRequest | undefined = claiming && (limit > 0 || schedules !== undefined)
      ? {
        queues: this.#options.queues,
        limit,
        now,
        leaseMs: this.#options.leaseMs,
        token: newToken(),
        names: this.#deps.registry.names(),
        ...(groupRates !== undefined && { groupRates }),
        ...(checkedNames !== undefined && { checkedNames }),
        ...(limit > free && { aheadFrom: free, spendLimits: this.#spendLimits() }),
        ...(schedules === undefined ? {} : { schedules }),
        readsScheduled: this.#deps.readsScheduled,
      }
      : undefined;
    if (request?.schedules !== undefined) this.#firedAt = now;
    const logs = await this.#logs.take();
    const spans = settling.flatMap(({ job, outcome, traceparent }) =>
      outcome.kind === "retry" && typeof traceparent === "string"
        ? [{ id: job.id, traceparent }]
        : []
    );
    const starts = starting.length === 0 ? undefined : {
      leases: starting.map(({ id, token }) => ({ id, token })),
      leaseMs: this.#options.leaseMs,
      now,
    };
    // Begin marks ride on every tick; a tick for them alone comes only when none came meanwhile.
    const begun = this.#begun.take((job) => this.#running.get(job.id)?.job === job);
    const writes = settlements.length > 0 || logs !== null || starts !== undefined ||
      begun.length > 0;
    // Woken for begin marks of jobs that have ended since: nothing to write, nothing to claim.
    if (!writes && request === undefined) {
      this.#confirming = [];
      return 0;
    }
    let result: SettleResult;
    const sentAt = performance.now();
    try {
      result = writes
        ? await store.settle(settlements, request, {
          spans,
          ...(logs !== null && { logs }),
          ...(starts !== undefined && { starts }),
          ...(begun.length > 0 && { begun: begun.map(({ id, token }) => ({ id, token })) }),
        })
        : { applied: [], claimed: await store.claim(request!), started: [] };
    } catch (error) {
      this.#confirming = [];
      this.#begun.restore(begun); // written with a later tick
      const failure = asError(error);
      steps?.failed(failure); // each step rejects, and its attempt ends as a handler's error would
      this.#logs.putBack(logs); // written with a later tick
      this.#toStart = starting.concat(this.#toStart); // confirmed with a later tick
      // A refusal of one row is looked for job by job; an outage, a move's fence or a store that
      // lost its data holds for all.
      const refusesAll = isStoreOutage(failure) || failure instanceof QueueMovedError ||
        failure instanceof QueueLostError;
      if (settling.length > 0 && !refusesAll) return await this.#settleApart(settling);
      if (group !== null) this.#finished.restore(group);
      this.#storeOut(failure, settling.length > 0 ? "settle" : "claim");
      if (this.#state.phase !== "grace over") await this.#pollSleep.sleep(this.#outageRetryMs);
      return null;
    }
    this.#outage = null;
    this.#ahead.noteClaimed(result.claimed, { sentAt, now });
    steps?.written(result.applied.slice(0, stepCount));
    settling.forEach((finished, index) => {
      if (result.applied[stepCount + index]) this.#report(finished);
    });
    this.#metrics.flush();
    if (schedules?.missedRows) this.notify(); // tick again once their rows are sealed
    this.#claimed += result.claimed.length;
    // A stop that came while the claim waited on the store: start nothing, put it back.
    if (this.#state.phase !== "running") {
      this.#confirming = [];
      const confirmed = new Set(result.started);
      this.#putBackUnstarted(
        starting.filter((job) => confirmed.has(job.id)).concat(result.claimed),
        "worker stopped before the attempt began",
      );
    } else {
      // The confirmed jobs hold their slots until they started or were held back.
      await this.#confirmed(starting, result.started);
      this.#confirming = [];
      // Short of jobs ahead (none more due, or batch jobs given back): claim none ahead a while.
      if (limit > free && result.claimed.length < limit) this.#ahead.pause();
      // The claim started the jobs of the free slots; those claimed ahead wait for a confirmation.
      await this.#startChecked(result.claimed.filter((job) => job.ahead !== true));
      this.#ahead.add(result.claimed.filter((job) => job.ahead === true));
      this.#startAhead();
    }
    return result.claimed.length;
  }

  /**
   * The tick's settles, refused together, written one by one: the others
   * settle, a poisoned one fails or is put back with the database's error.
   * Returns 0 (nothing claimed), or null when the store went out meanwhile.
   */
  async #settleApart(settling: readonly FinishedJob[]): Promise<number | null> {
    const { store, clock } = this.#deps;
    const apart = await settleApart(store, settling, timedSettlement, clock.now());
    apart.settled.forEach((finished) => this.#report(finished));
    for (const { finished, error, instead } of apart.poisoned) {
      this.emit("queue:error", { error, during: `settle of job ${finished.job.id}` });
      if (instead !== null) this.#report(instead);
    }
    this.#metrics.flush();
    if (apart.outage === null) {
      this.#outage = null;
      return 0;
    }
    // Written as soon as the store takes writes again.
    this.#finished.restore({ jobs: apart.kept, since: performance.now(), first: true });
    this.#storeOut(apart.outage, "settle");
    return null;
  }

  /** The store refused a write for a reason that holds for every job: say so once per outage. */
  #storeOut(error: Error, during: string): void {
    if (error instanceof QueueMovedError || error instanceof QueueLostError) {
      return this.#onGone(error, during);
    }
    if (this.#outage === null || !isStoreOutage(error)) this.emit("queue:error", { error, during });
    this.#outage = isStoreOutage(error) ? error : null;
  }

  /** How soon a tick the store refused is tried again: often enough to resume soon after a fix. */
  get #outageRetryMs(): number {
    return Math.min(this.#options.pollMs, OUTAGE_RETRY_MS);
  }

  /**
   * Keeps how an attempt ended for the next settle. Only plain successes
   * wait for a group: a batch job's, a retry's or a failure's settle is
   * written before the next job starts, so the next job sees its batch
   * counters, and its events and hooks come at once.
   */
  #settleLater(finished: FinishedJob): void {
    const { job, outcome } = finished;
    this.#finished.add(
      finished,
      outcome.kind !== "complete" || job.batchId !== null || this.#oneDeathSpends(job),
    );
  }

  /**
   * Whether one worker death before `job`'s settle is written would fail
   * it (its next claim counts one more attempt and crash): such a success
   * is written at once, not with its group, so it is never failed for a
   * death that came after it succeeded.
   */
  #oneDeathSpends(job: ClaimedJob): boolean {
    const limits = this.#spendLimits()[job.name];
    return limits !== undefined && oneDeathSpends(job, limits);
  }

  /** Gives back jobs claimed and not started, each where it was in claim order: not an attempt, nor a retry. */
  #putBackUnstarted(jobs: readonly ClaimedJob[], reason: string): void {
    const now = this.#deps.clock.now();
    for (const job of jobs) {
      const claim = { now: this.#ahead.claimNow(job), leaseMs: this.#options.leaseMs };
      const outcome = putBackUnstarted(job, now, claim, reason);
      this.#settleLater({ job, outcome, durationMs: 0 });
    }
  }

  /** Notes which of `claimed` resume a parked run past their retry deadline (see park_resumes.ts). */
  async #findParkResumes(claimed: readonly ClaimedJob[]): Promise<void> {
    if (this.#parkResumes.size > 0) { for (const job of claimed) this.#parkResumes.delete(job.id); }
    const now = this.#deps.clock.now();
    const resumes = await parkResumes(this.#deps.store, claimed, now, this.#options.leaseMs);
    for (const id of resumes) this.#parkResumes.add(id);
  }

  #start(job: ClaimedJob): void {
    const definition = this.#deps.registry.get(job.name);
    const now = this.#deps.clock.now();
    const expiry = definition === undefined ? null : expiryBeforeStart(job, now);
    if (expiry !== null) {
      this.#settleLater({
        job,
        outcome: expired(job, expiry, now, now + this.#keepMs(definition!)),
        durationMs: 0,
      });
      return;
    }
    const refusal = refusalBeforeStart(job, definition, now, this.#parkResumes.delete(job.id));
    if (refusal !== null || definition === undefined) {
      this.#settleLater({
        job,
        outcome: failBeforeStart(job, refusal ?? "", now),
        durationMs: 0,
      });
      return;
    }
    if (isCancelAsked(job)) {
      // Cancelled while an earlier attempt ran, which ended before its worker saw it.
      const keepUntil = now + this.#keepMs(definition);
      this.#settleLater({
        job,
        outcome: cancelled(job, job.cancelRequested, now, keepUntil, "not started"),
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
      deadline: null,
      progress: null,
      progressWrittenAt: -Infinity,
      progressTimer: undefined,
      span: startAttemptSpan(job),
    };
    this.#running.set(job.id, entry);
    const { span } = entry;
    this.#metrics.started(job);
    if (this.hasListeners("job:start")) {
      this.emit("job:start", {
        id: job.id,
        name: job.name,
        queue: job.queue,
        attempt: job.attempts,
      });
    }
    entry.deadline = this.#timeouts.add(entry, definition.timeoutMs);
    this.#deps.executor.run({
      get traceparent() {
        return span?.traceparent ?? null;
      },
      traceContext: span?.context,
      id: job.id,
      name: job.name,
      queueName: job.queue,
      payload: job.payload,
      attempt: job.attempts,
      batchId: job.batchId,
      scheduled: job.scheduled ?? null,
      flowParents: job.flowParents ?? null,
      signal: controller.signal,
      onProgress: (percent) => this.#progress.report(entry, percent),
      onBegin: () => {
        if (this.#running.get(job.id) === entry) this.#begun.add(job);
      },
      onLog: (line) => this.#logs.add(job, definition.encrypted, this.#deps.clock.now(), line),
      steps: this.#stepPort(entry),
    }).then(
      (result) => this.#handlerEnded(entry, result),
      (error) =>
        this.#handlerEnded(entry, { kind: "error", error: asError(error), permanent: false }),
    );
  }

  /**
   * How many jobs the next tick claims: when slots are free and nothing
   * claimed ahead is left to fill them, those slots and what may be claimed
   * ahead; when a settle is due anyway while every slot is taken and the
   * jobs claimed ahead have run down to half of what may be claimed ahead,
   * what tops them up, in the same transaction (one round of statements
   * then serves a group in and a group out); else none. Ticks come often
   * (each confirms the starts of the jobs claimed ahead that took the slots
   * freed since the last), so a top-up waits for half a group: one claim
   * then still serves many jobs, and the slots never wait for a claim of
   * their own.
   */
  #claimLimit(free: number, settleDue: boolean): number {
    if (free > 0 && this.#ahead.size === 0) return free + this.#aheadAllowance(free);
    if (settleDue && free === 0 && !this.#finished.first && this.#mayClaim()) {
      const allowance = this.#aheadAllowance(0);
      return this.#ahead.size * 2 <= allowance ? allowance - this.#ahead.size : 0;
    }
    return 0;
  }

  /**
   * Where attempt `entry`'s durable steps are read and written: memos go
   * with the next tick (a step resolves once it applied), and a step with a
   * timeout ends the attempt when it runs past it.
   */
  #stepPort(entry: RunningJob): StepPort {
    // A step its handler did not await, going on after the attempt ended: its read or record
    // never settles (as a park's calls), so its fn does not run and nothing is recorded; a
    // rejection nobody awaits would end the process.
    const ended = () => this.#running.get(entry.job.id) !== entry;
    return {
      load: () => ended() ? new Promise<never>(() => {}) : this.#deps.store.jobSteps(entry.job.id),
      record: (write) => {
        if (ended()) return new Promise<never>(() => {});
        const recorded = this.#steps.add(entry.job, write, this.#deps.clock.now());
        this.notify();
        return recorded;
      },
      timeStep: (key, timeoutMs) => {
        const timers = entry.stepTimers ??= new Set();
        const timer = setTimeout(() => {
          timers.delete(timer);
          this.#stepTimedOut(entry, key, timeoutMs);
        }, timeoutMs);
        timers.add(timer);
        return (ranPast) => {
          clearTimeout(timer);
          // A step that held this isolate's event loop past its timeout (a synchronous one)
          // ended before its timer could fire: it timed out all the same, and is not recorded.
          if (timers.delete(timer) && ranPast) {
            this.#stepTimedOut(entry, key, timeoutMs);
          }
        };
      },
    };
  }

  /**
   * A step ran past its `timeoutMs`: the attempt's signal aborts with a
   * `StepTimeoutError` and the attempt ends with it (a Web Worker that does
   * not stop within `graceMs` is terminated); the next attempt resumes at
   * that step.
   */
  #stepTimedOut(entry: RunningJob, key: string, timeoutMs: number): void {
    if (entry.afterStop !== undefined) return; // its end is decided already
    const error = new StepTimeoutError(key, timeoutMs);
    entry.controller.abort(error);
    this.#endOnceStopped(
      entry,
      () => this.#finish(entry, { kind: "error", error, permanent: false }),
    );
  }

  /** The attempt ran out of its `timeoutMs`: its signal aborts and it ends with a timeout error. */
  #timedOut(entry: RunningJob): void {
    if (entry.afterStop !== undefined) return; // its end is decided already
    const result = this.#timeoutResult(entry);
    this.#endOnceStopped(entry, () => this.#finish(entry, result));
  }

  /** Aborts attempt `entry` with a `JobTimeoutError`, and gives the result it ends with. */
  #timeoutResult(entry: RunningJob): ExecutionResult {
    const error = new JobTimeoutError(entry.job.name, entry.definition.timeoutMs);
    entry.controller.abort(error);
    return { kind: "error", error, permanent: false };
  }

  /**
   * Ends an attempt whose end a timeout, a cancel or a stop decided, with
   * `end`, once its handler stopped: the executor's run ended (the handler
   * returned, or its Web Worker was terminated `graceMs` after the abort), at
   * most `graceMs` + {@linkcode STOP_MARGIN_MS} later. Until then the job
   * keeps its slot, its lease and its `withoutOverlapping` locks: neither its
   * next attempt, nor a job of the same key, nor another job in its slot
   * starts beside a handler that still runs. Where handlers run in this
   * isolate nothing stops one that ignores its signal, and waiting would only
   * put its overlap off: there only a job with middleware waits, its lock
   * kept for a handler that stops late.
   */
  #endOnceStopped(entry: RunningJob, end: () => void): void {
    if (this.#deps.executor.inThisIsolate === true && entry.definition.middleware === undefined) {
      return end();
    }
    let ended = false;
    const once = () => {
      if (ended) return;
      ended = true;
      clearTimeout(cap);
      end();
    };
    const cap = setTimeout(
      once,
      Math.min(this.#options.graceMs + STOP_MARGIN_MS, LONGEST_TIMER_MS),
    );
    entry.afterStop = once;
  }

  /**
   * The executor says the handler ended with `result`: settled, unless a
   * timeout, a cancel or a stop decided. Where handlers run in this isolate
   * (the isolate executor, or a Web Worker pool that fell back) a handler
   * that ran past its `timeoutMs` ends with the timeout whatever it returned
   * (a synchronous stretch that held this isolate's event loop kept the
   * timeout's timer from firing), unless it parked (its steps are recorded)
   * or failed for good.
   */
  #handlerEnded(entry: RunningJob, result: ExecutionResult): void {
    if (entry.afterStop !== undefined) return entry.afterStop();
    const ranPast = this.#deps.executor.inThisIsolate === true &&
      performance.now() - entry.startedAt > entry.definition.timeoutMs &&
      result.kind !== "park" && !(result.kind === "error" && result.permanent);
    this.#finish(entry, ranPast ? this.#timeoutResult(entry) : result);
  }

  #finish(entry: RunningJob, result: ExecutionResult): void {
    if (!this.#forget(entry)) return; // already timed out, released on stop, or lost
    if (result.kind === "park") {
      // Steps started beside the sleep or wait stop: none of them can be recorded any more.
      entry.controller.abort(new Error(`Job ${entry.job.id} parked: its attempt ended`));
    }
    const now = this.#deps.clock.now();
    let outcome: Outcome;
    try {
      outcome = outcomeOf(entry.job, entry.definition, result, now, this.#deps.random);
      if (outcome.kind === "complete") {
        const keepUntil = now + this.#keepMs(entry.definition);
        outcome = { ...outcome, settlement: { ...outcome.settlement, keepUntil } };
      }
    } catch (error) {
      outcome = failWith(entry.job, asError(error), now); // a rule of the job threw
    }
    const error = "error" in outcome ? outcome.error : null;
    endAttemptSpan(entry.span, spanOutcomeOf(outcome), error, entry.definition.encrypted);
    const durationMs = performance.now() - entry.startedAt;
    this.#ahead.noteRun(durationMs);
    const beyond = this.#ahead.takeBeyondBudget();
    if (beyond.length > 0) {
      this.#claimed -= beyond.length;
      this.#putBackUnstarted(beyond, "claimed ahead beyond what the recent run times fit");
    }
    this.#settleLater({
      job: entry.job,
      outcome,
      durationMs,
      ran: true,
      traceparent: outcome.kind === "retry" ? entry.span?.traceparent ?? null : null,
    });
    // The next job claimed ahead takes the slot now, so the next tick (which writes this settle
    // first) confirms its start.
    this.#startAhead();
    this.notify();
  }

  /**
   * A cancel was asked of a running job: its signal aborts with a
   * `JobCancelledError` (a Web Worker that does not stop within `graceMs` is
   * terminated, as on a timeout), and it settles as cancelled, where its
   * handler can be stopped once it stopped, its span ending as `cancelled`.
   */
  #cancel(entry: RunningJob, reason: string): void {
    if (this.#running.get(entry.job.id) !== entry || entry.afterStop !== undefined) return;
    const { job, definition } = entry;
    entry.controller.abort(new JobCancelledError(job.id, job.name, reason));
    this.#endOnceStopped(entry, () => {
      if (!this.#forget(entry)) return;
      endAttemptSpan(entry.span, "cancelled", null, definition.encrypted);
      const now = this.#deps.clock.now();
      this.#settleLater({
        job,
        outcome: cancelled(job, reason, now, now + this.#keepMs(definition), "started"),
        durationMs: performance.now() - entry.startedAt,
        ran: true,
      });
      this.notify();
    });
  }

  #keepMs(definition: { readonly keepFinishedMs: number | undefined }): number {
    return definition.keepFinishedMs ?? this.#deps.keepFinishedMs;
  }

  /** Removes a running job; false if it was no longer running. */
  #forget(entry: RunningJob): boolean {
    if (this.#running.get(entry.job.id) !== entry) return false;
    this.#running.delete(entry.job.id);
    if (entry.deadline !== null) this.#timeouts.end(entry.deadline);
    this.#progress.forget(entry);
    if (entry.stepTimers !== undefined) {
      for (const timer of entry.stepTimers) clearTimeout(timer);
      entry.stepTimers.clear();
    }
    return true;
  }

  /**
   * The stop's grace is over: every running attempt is aborted and put back
   * without using an attempt; a job with middleware once its handler
   * stopped (as after a timeout), so that its lock is not released beside a
   * handler that still runs. The others at once, and an attempt whose end a
   * timeout or a cancel decided ends now with it: the worker takes no job
   * into their slots any more, and its executor's close terminates their
   * Web Workers right after their settles are written, where waiting would
   * add up to another `graceMs` to a stop, whatever grace it asked for.
   */
  #abortRunning(): void {
    const state = this.#state;
    if (state.phase !== "stopping") return;
    this.#state = { phase: "grace over", reason: state.reason };
    for (const entry of [...this.#running.values()]) {
      if (entry.afterStop !== undefined) {
        // A timeout or a cancel decided its end: a lock (middleware) waits for its handler.
        if (entry.definition.middleware === undefined) entry.afterStop();
        continue;
      }
      entry.controller.abort(new Error("Job aborted: the worker is stopping"));
      const putBackNow = () => {
        if (!this.#forget(entry)) return;
        const why = new Error("worker stopped during the attempt");
        const outcome = putBack(entry.job, this.#deps.clock.now(), why);
        endAttemptSpan(entry.span, spanOutcomeOf(outcome), why, entry.definition.encrypted);
        this.#settleLater({ job: entry.job, outcome, durationMs: 0 });
        this.notify();
      };
      if (entry.definition.middleware === undefined) putBackNow();
      else this.#endOnceStopped(entry, putBackNow);
    }
    this.notify();
  }

  #report({ job, outcome, durationMs, ran }: FinishedJob): void {
    const detail = () => ({ id: job.id, name: job.name, queue: job.queue, attempt: job.attempts });
    const counted = spanOutcomeOf(outcome); // only a success, an error and a failure are counted
    if (counted === "complete" || counted === "retry" || counted === "fail") {
      this.#metrics.settled(job, counted, ran === true ? durationMs : null);
    }
    switch (outcome.kind) {
      case "complete":
        this.#stats.completed++;
        // A quick job's events cost more than its handler: make them only for a listener.
        if (this.hasListeners("job:complete")) {
          this.emit("job:complete", { ...detail(), durationMs });
        }
        return;
      case "retry":
        this.#stats.retried++;
        this.emit("job:retry", { ...detail(), error: outcome.error, delayMs: outcome.delayMs });
        return;
      case "heldBack":
      case "notStarted":
      case "parked": // a sleep or a wait: not an attempt, nor a retry
        return; // not an attempt: the handler never ran (held back, or claimed and not started)
      case "cancelled": {
        // A job this claim never started (expired, or cancelled while an earlier attempt ran): the
        // attempt its claim counted is given back, as stored.
        const attempt = outcome.settlement.refundAttempt === true ? job.attempts - 1 : job.attempts;
        this.emit("job:cancelled", { ...detail(), attempt, reason: outcome.reason });
        return;
      }
      case "fail": {
        this.#stats.failed++;
        const { attempts } = outcome.settlement;
        this.emit("job:failed", { ...detail(), attempt: attempts, error: outcome.error });
        this.#failedHooks.run(job, attempts, outcome.error);
        return;
      }
    }
  }
}

/** The longest pause before a refused tick is tried again, in ms. */
const OUTAGE_RETRY_MS = 250;

/**
 * How long a worker that stops when its queues are empty waits before it
 * claims again after an empty claim passed over a due job (ms): the
 * transaction holding that job's row ends in a moment (the one marking it
 * awaited also wakes the worker).
 */
const PASSED_OVER_RETRY_MS = 50;

/**
 * A finished attempt's settlement, with the handler's runtime when it ran and
 * ended in a success, a failure for good, or an error it is retried after.
 */
function timedSettlement({ outcome, durationMs, ran }: FinishedJob): Settlement {
  const settlement = outcome.settlement;
  if (ran !== true) return settlement;
  if (settlement.kind === "release" && (settlement.error === null || settlement.refundAttempt)) {
    return settlement;
  }
  if (settlement.kind === "park") return settlement;
  return { ...settlement, durationMs };
}

/** A random reservation token that fits a JavaScript number exactly. */
function newToken(): number {
  const [high, low] = crypto.getRandomValues(new Uint32Array(2));
  return (high! & 0x1fffff) * 0x1_0000_0000 + low!;
}

/** @deprecated Use {@linkcode QueueWorker}. */
export type Runner = QueueWorker;
