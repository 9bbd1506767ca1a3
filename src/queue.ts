/**
 * The queue: open it on a database, dispatch jobs, run workers, and look
 * after failed jobs.
 *
 * @module
 */
import {
  assertId,
  cutoff,
  type FailedJob,
  type ListOptions,
  page,
  type PruneOptions,
  type QueueCounts,
  toFailedJob,
  toRunningJob,
} from "./admin_views.ts";
import { type BatchBuilder, type BatchStatus, toBatchStatus } from "./batch.ts";
import type { ChainBuilder, ChainOptions } from "./chain.ts";
import { type Clock, systemClock } from "./clock.ts";
import { CommitBuffer, Dispatch, type DispatchRules, type StoreTarget } from "./dispatch.ts";
import { type AppKeys, PayloadCipher } from "./encryption.ts";
import { awaitResult } from "./await_result.ts";
import { JobCancelledError, QueueClosedError } from "./errors.ts";
import { QueueEventTarget } from "./events.ts";
import type { HandlerQueue } from "./executors/executor.ts";
import { IsolateExecutor } from "./executors/isolate.ts";
import { WebWorkerPool } from "./executors/web_workers.ts";
import type { Dispatcher, DispatchOptions, JobDefinition, OutputOf, PayloadOf } from "./job.ts";
import { InlineTarget } from "./inline_target.ts";
import {
  type CancelOptions,
  cancelReason,
  type CancelResult,
  type CompletedJob,
  type CompletedOptions,
  type DispatchAndWaitOptions,
  type JobResult,
  keepCompletedMsOf,
  type PausedQueue,
  type PauseOptions,
  resolvePause,
  storedErrorToError,
  toCompletedJob,
  toPausedQueue,
  waitTimeoutMs,
} from "./job_control.ts";
import { decodeOutput } from "./output.ts";
import { type JobLogLine, type LogsOptions, openLogLines } from "./job_logs.ts";
import { QueueGauges } from "./queue_gauges.ts";
import { assertQueueName } from "./names.ts";
import { jobFilter, type JobList, type JobListOptions, toJobList } from "./job_list.ts";
import {
  type MetricsOptions,
  metricsWindow,
  type QueueMetrics,
  summarizeMetrics,
} from "./metrics.ts";
import { JobRows } from "./job_rows.ts";
import { JobRegistry } from "./registry.ts";
import {
  maxPayloadBytesOf,
  modeOf,
  type QueueMode,
  type QueueOptions,
  readAppKeys,
} from "./queue_options.ts";
import { runNow } from "./run_now.ts";
import { Runner } from "./runner.ts";
import { ScheduleFirer } from "./runner/schedule_firing.ts";
import { type ScheduleDefinition, timesOf } from "./schedule.ts";
import { jobRow, scheduleRows } from "./schedule_jobs.ts";
import { slotsBetween } from "./schedule_times.ts";
import {
  type BackfillOptions,
  type BackfillResult,
  type ScheduleInfo,
  toScheduleInfo,
} from "./schedule_views.ts";
import { openStore } from "./store_options.ts";
import type { JobResultRow, NewJobRow, Store, StoreTransaction } from "./stores/store.ts";
import { type ResolvedWorkOptions, resolveWorkOptions, type WorkOptions } from "./work_options.ts";
import {
  type DrainAfterOptions,
  type DrainOptions,
  type DrainResult,
  resolveDrainOptions,
  type ServerlessOptions,
} from "./drain_options.ts";
import { runDrain } from "./runner/drain.ts";
import { DrainAfterResponses } from "./runner/drain_after.ts";
import { registerDrainCron } from "./serverless.ts";
import {
  seenSince,
  toWorkerInfo,
  type UnclaimedJobs,
  unclaimedJobs,
  type WorkerInfo,
  type WorkersOptions,
} from "./workers_seen.ts";

export type { QueueMode, QueueOptions } from "./queue_options.ts";

/** The handle {@linkcode Queue.transaction} passes to its callback. */
export interface QueueTransaction extends Dispatcher {
  /** Builds a chain stored as part of the transaction. */
  chain(options?: ChainOptions): ChainBuilder;
  /** Builds a batch stored as part of the transaction. */
  batch(name: string): BatchBuilder;
  /**
   * Runs the app's own statement in the same transaction (`?` placeholders on
   * SQLite) and returns its rows.
   */
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
}

/**
 * A queue of jobs kept in a database. Open one per process and share it.
 *
 * @example Dispatch a job and work the queue until it is empty
 * ```ts
 * import { defineJob, Queue } from "@renox/queue";
 * import { z } from "zod";
 *
 * const greet = defineJob({
 *   name: "greet",
 *   schema: z.object({ who: z.string() }),
 *   handle({ who }) {
 *     console.log(`hello, ${who}`);
 *   },
 * });
 *
 * await using queue = await Queue.open({ path: ":memory:", jobs: [greet] });
 * await queue.dispatch(greet, { who: "world" });
 * await queue.work({ stopWhenEmpty: true }).done;
 * ```
 */
export class Queue extends QueueEventTarget implements Dispatcher, AsyncDisposable {
  readonly #store: Store;
  readonly #registry: JobRegistry;
  readonly #jobRows: JobRows;
  readonly #clock: Clock;
  readonly #dispatchRules: DispatchRules;
  /** Dispatch by the app: refused once the queue closes. */
  readonly #dispatch: Dispatch<StoreTarget>;
  /** Dispatch by handlers and failed hooks (`ctx.queue`, `ctx.addToBatch`, Web Workers). */
  readonly #handlerDispatch: Dispatch<StoreTarget>;
  readonly #appKeys: AppKeys | null;
  readonly #cipher: PayloadCipher | null;
  readonly #executor: IsolateExecutor;
  readonly #runners = new Set<Runner>();
  readonly #keepCompletedMs: number;
  readonly #mode: QueueMode;
  #closing: Promise<void> | null = null;
  readonly #afterResponses = new DrainAfterResponses(
    (options) => this.drain(options),
    (error) => this.emit("queue:error", { error, during: "drain after a response" }),
  );
  readonly #gauges: QueueGauges;

  private constructor(parts: {
    store: Store;
    registry: JobRegistry;
    clock: Clock;
    maxPayloadBytes: number;
    appKeys: AppKeys | null;
    cipher: PayloadCipher | null;
    jobRows: JobRows;
    keepCompletedMs: number;
    mode: QueueMode;
  }) {
    super();
    this.#store = parts.store;
    this.#registry = parts.registry;
    this.#clock = parts.clock;
    this.#keepCompletedMs = parts.keepCompletedMs;
    this.#mode = parts.mode;
    const jobRows = parts.jobRows;
    this.#jobRows = jobRows;
    const rules = { jobRows, registry: parts.registry, clock: parts.clock };
    this.#dispatchRules = rules;
    const sink = (rows: readonly NewJobRow[], ids: readonly number[]) => this.#queued(rows, ids);
    const assertOpen = () => this.#assertOpen("dispatch");
    this.#executor = new IsolateExecutor(parts.registry, this.#handlerQueue, parts.cipher);
    const target = parts.mode === "inline"
      ? new InlineTarget(parts.registry, this.#executor)
      : parts.store;
    this.#dispatch = new Dispatch(rules, { target, sink, assertOpen });
    this.#handlerDispatch = new Dispatch(rules, { target, sink, assertOpen() {} });
    this.#appKeys = parts.appKeys;
    this.#cipher = parts.cipher;
    this.#gauges = new QueueGauges(parts.store, parts.clock);
  }

  /**
   * Loads the job definitions and schedules, opens the database, brings its
   * schema up to date and syncs the schedules into it (adds new ones,
   * updates changed ones, deletes those no longer defined; paused state is
   * kept); a queue opened with no jobs (`jobs: []`, as the CLI's admin
   * commands do) leaves the stored schedules as they are. A schedule that is
   * wrong (its job not registered, its payload refused by the job's schema,
   * two with one name) is refused here, with an error naming it, before
   * anything is written. With `mode: "inline"` no database is opened: jobs
   * run at dispatch, and schedules are not synced.
   */
  static async open(options: QueueOptions): Promise<Queue> {
    const maxPayloadBytes = maxPayloadBytesOf(options);
    const mode = modeOf(options);
    const keepCompletedMs = keepCompletedMsOf(options.keepCompletedMs);
    const registry = await JobRegistry.load(options.jobs);
    const appKeys = readAppKeys(options, registry.encryptedJobs());
    const cipher = appKeys === null ? null : await PayloadCipher.fromKeys(appKeys);
    const clock = options.clock ?? systemClock;
    const jobRows = new JobRows(registry, clock, maxPayloadBytes, cipher);
    const schedules = scheduleRows(registry, jobRows, clock.now());
    // Inline: nothing is stored; an empty store in memory answers the admin reads.
    const store = await openStore(mode === "inline" ? { path: ":memory:" } : options);
    // A queue with no jobs (the CLI's admin commands) reads schedules; it does not define them.
    if (registry.names().length > 0 && mode !== "inline") {
      try {
        await store.syncSchedules(schedules, clock.now());
      } catch (error) {
        if (options.store === undefined) await store.close();
        throw error;
      }
    }
    return new Queue({
      store,
      registry,
      clock,
      maxPayloadBytes,
      appKeys,
      cipher,
      jobRows,
      keepCompletedMs,
      mode,
    });
  }

  /** What this process does with jobs: `"worker"`, `"external"` or `"inline"`. */
  get mode(): QueueMode {
    return this.#mode;
  }

  /**
   * Stores one job and returns its id.
   *
   * Throws `ValidationError` when the payload fails the job's schema or the
   * size cap, `TypeError`/`RangeError` for an unregistered job or a bad
   * option, and `QueueClosedError` after close; nothing is stored then.
   */
  dispatch<J extends JobDefinition>(
    job: J,
    payload: PayloadOf<J>,
    options?: DispatchOptions,
  ): Promise<number> {
    return this.#dispatch.dispatch(job, payload, options);
  }

  /** Stores many jobs of one kind in one transaction (all or none) and returns their ids. */
  dispatchMany<J extends JobDefinition>(
    job: J,
    payloads: readonly PayloadOf<J>[],
    options?: DispatchOptions,
  ): Promise<number[]> {
    return this.#dispatch.dispatchMany(job, payloads, options);
  }

  /**
   * Stores one job named `name` (a job registered with this queue) and
   * returns its id: for callers that know a job by its stored name (a CLI,
   * a webhook). The payload is checked against that job's schema; an
   * unknown name is refused with a `TypeError`.
   */
  async dispatchByName(name: string, payload: unknown, options?: DispatchOptions): Promise<number> {
    this.#assertOpen("dispatch");
    if (typeof name !== "string" || this.#registry.get(name) === undefined) {
      throw new TypeError(
        `Cannot dispatch ${JSON.stringify(name)}: no job of that name is registered`,
      );
    }
    return (await this.#dispatch.byName(name, [payload], options, null))[0]!;
  }

  /**
   * Starts a chain: jobs that run one after another, each queued when the
   * one before succeeds. See {@linkcode ChainBuilder}.
   */
  chain(options: ChainOptions = {}): ChainBuilder {
    this.#assertOpen("dispatch a chain");
    return this.#dispatch.chain(options);
  }

  /**
   * Starts a batch: jobs tracked together, with callbacks when they all
   * succeed, at the first failure, and when they are done. See
   * {@linkcode BatchBuilder}.
   */
  batch(name: string): BatchBuilder {
    this.#assertOpen("dispatch a batch");
    return this.#dispatch.batch(name);
  }

  /**
   * `ctx.queue` and `ctx.addToBatch` of handlers and failed hooks: they keep
   * working while the queue closes, so a job finishing within the grace
   * period can still dispatch its follow-ups.
   */
  readonly #handlerQueue: HandlerQueue = {
    dispatch: (job, payload, options) => this.#handlerDispatch.dispatch(job, payload, options),
    dispatchMany: (job, payloads, options) =>
      this.#handlerDispatch.dispatchMany(job, payloads, options),
    addToBatch: (batchId, job, payloads, options) =>
      this.#handlerDispatch.addToBatch(batchId, job, payloads, options),
  };

  /**
   * Runs `fn` in one database transaction: the app's own statements
   * (`tx.query`) and the jobs it dispatches (`tx.dispatch`) commit together or
   * not at all. Other work on this queue waits until it ends, so await only
   * `tx` inside, never `queue.dispatch`.
   *
   * @example An order and its receipt job, together
   * ```ts
   * import { defineJob, Queue } from "@renox/queue";
   * import { z } from "zod";
   *
   * const receipt = defineJob({ name: "receipt", schema: z.object({ orderId: z.number() }), handle() {} });
   * await using queue = await Queue.open({ path: ":memory:", jobs: [receipt] });
   * await queue.transaction(async (tx) => {
   *   await tx.query("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY)");
   *   const [order] = await tx.query<{ id: number }>("INSERT INTO orders DEFAULT VALUES RETURNING id");
   *   await tx.dispatch(receipt, { orderId: order!.id });
   * });
   * ```
   */
  async transaction<T>(fn: (tx: QueueTransaction) => T | Promise<T>): Promise<T> {
    this.#assertOpen("start a transaction");
    if (this.#mode === "inline") {
      throw new TypeError(
        'Cannot start a transaction: an inline queue (mode "inline") has no database to share',
      );
    }
    const committed = new CommitBuffer();
    const result = await this.#store.transaction((storeTx: StoreTransaction) => {
      const dispatch = new Dispatch(this.#dispatchRules, {
        target: storeTx,
        sink: committed.sink,
        assertOpen: () => this.#assertOpen("dispatch"),
      });
      return fn({
        dispatch: (job, payload, options) => dispatch.dispatch(job, payload, options),
        dispatchMany: (job, payloads, options) => dispatch.dispatchMany(job, payloads, options),
        query: (sql, params) => storeTx.query(sql, params),
        chain: (options) => dispatch.chain(options),
        batch: (name) => dispatch.batch(name),
      });
    });
    committed.flush((rows, ids) => this.#queued(rows, ids));
    return result;
  }

  /**
   * Runs a job now, in this isolate, without storing it: one attempt, no
   * retries. Rejects with the handler's error, or `JobTimeoutError` past the
   * job's `timeoutMs` (the handler is aborted but, in this isolate, may keep running).
   */
  async dispatchSync<J extends JobDefinition>(job: J, payload: PayloadOf<J>): Promise<void> {
    this.#assertOpen("dispatch");
    const [row] = await this.#dispatchRules.jobRows.rows(job, [payload], undefined);
    await runNow(this.#executor, job, row!);
  }

  /**
   * Starts a worker that runs due jobs in this process until stopped.
   *
   * @example A worker that stops once the queue is empty
   * ```ts
   * import { defineJob, Queue } from "@renox/queue";
   * import { z } from "zod";
   *
   * const noop = defineJob({ name: "noop", schema: z.null(), handle() {} });
   * await using queue = await Queue.open({ path: ":memory:", jobs: [noop] });
   * await queue.dispatchMany(noop, [null, null, null]);
   * const worker = queue.work({ concurrency: 4, stopWhenEmpty: true });
   * await worker.done;
   * console.log(worker.stats.completed); // 3
   * ```
   */
  work(options: WorkOptions = {}): Runner {
    this.#assertOpen("start a worker");
    const canUseWorkers = typeof Worker === "function" && this.#registry.moduleUrl !== undefined;
    const resolved = resolveWorkOptions(options, this.#registry.defaultQueues(), canUseWorkers);
    return this.#startRunner(resolved);
  }

  /**
   * Runs due jobs in this isolate until nothing is due now, or the time or
   * job budget is spent, and resolves with what ran. Jobs still running when
   * `maxMs` is spent are aborted and put back on their queue without using
   * an attempt, as `stop()` does. A drain is a worker that stops by itself:
   * claims, settles, leases and events are the same as with
   * {@linkcode Queue.work}, and it shows among the workers while it runs.
   * For hosts that run code only while serving requests (see
   * {@linkcode Queue.serverless} and {@linkcode Queue.drainAfter}).
   *
   * @example Run what is due, for up to two seconds
   * ```ts
   * import { defineJob, Queue } from "@renox/queue";
   * import { z } from "zod";
   *
   * const noop = defineJob({ name: "noop", schema: z.null(), handle() {} });
   * await using queue = await Queue.open({ path: ":memory:", jobs: [noop] });
   * await queue.dispatchMany(noop, [null, null, null]);
   * const result = await queue.drain({ maxMs: 2_000, concurrency: 2 });
   * console.log(result); // { completed: 3, failed: 0, retried: 0, stoppedBecause: "empty" }
   * ```
   */
  drain(options: DrainOptions = {}): Promise<DrainResult> {
    try {
      this.#assertOpen("drain");
      const resolved = resolveDrainOptions(options, this.#registry.defaultQueues());
      return runDrain(() => this.#startRunner(resolved));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Returns `response` as it is, and drains briefly once it was sent (see
   * {@linkcode Queue.drain}; `maxMs` defaults to 5 s here), so a job a
   * request dispatched usually runs while the host keeps this isolate alive
   * for that request, instead of at the next cron tick. At most one such
   * drain runs at a time; one asked for meanwhile runs after it. Errors go
   * to `queue:error`; after close it drains nothing.
   *
   * @example Drain after each response of a `deno serve` app
   * ```ts
   * import { defineJob, Queue } from "@renox/queue";
   * import { z } from "zod";
   *
   * const receipt = defineJob({ name: "receipt", schema: z.number(), handle() {} });
   * const queue = await Queue.open({ path: ":memory:", jobs: [receipt] });
   * const app = {
   *   async fetch(_req: Request, info: Deno.ServeHandlerInfo): Promise<Response> {
   *     await queue.dispatch(receipt, 7);
   *     return queue.drainAfter(new Response("ordered"), { after: info.completed });
   *   },
   * };
   * const remoteAddr = { transport: "tcp" as const, hostname: "127.0.0.1", port: 50_000 };
   * const response = await app.fetch(new Request("http://localhost/"), {
   *   remoteAddr,
   *   completed: Promise.resolve(),
   * });
   * console.log(response.status); // 200
   * await queue.close();
   * ```
   */
  drainAfter<R extends Response>(response: R, options: DrainAfterOptions = {}): R {
    const { after, ...drainOptions } = options;
    const resolved = { ...drainOptions, maxMs: drainOptions.maxMs ?? 5_000 };
    resolveDrainOptions(resolved, this.#registry.defaultQueues()); // a bad option throws here
    if (this.#closing !== null) return response;
    const start = () => this.#afterResponses.request(resolved);
    if (after === undefined) setTimeout(start, 0);
    else after.then(start, start); // a client that went away still leaves jobs to run
    return response;
  }

  /**
   * Registers a top-level `Deno.cron` job that drains the queue for up to
   * `drainMs` every tick (every minute by default), for hosts that keep an
   * isolate alive only while it serves requests and cron ticks. Call it at
   * the top level of the app's main module, as Deno Deploy finds cron jobs
   * there. Throws when `Deno.cron` is missing: run with `--unstable-cron`, or
   * add `"unstable": ["cron"]` to the app's `deno.json` (Deno Deploy has it).
   * Returns `Deno.cron`'s promise, which settles once the job is unregistered
   * (`signal` aborted); do not await it at the top level.
   *
   * @example Drain every minute on Deno Deploy
   * ```ts ignore
   * import { Queue } from "@renox/queue";
   * import "./jobs.ts"; // in the app's graph: the URL below loads without --allow-read
   *
   * const url = Deno.env.get("DATABASE_URL")!;
   * const queue = await Queue.open({ url, jobs: import.meta.resolve("./jobs.ts") });
   * queue.serverless({ cron: "* * * * *", drainMs: 50_000 });
   * ```
   */
  serverless(options: ServerlessOptions = {}): Promise<void> {
    this.#assertOpen("register a drain cron job");
    const queues = this.#registry.defaultQueues();
    return registerDrainCron(
      options,
      async (drainOptions) => {
        try {
          await this.drain(drainOptions);
        } catch (error) {
          if (!(error instanceof QueueClosedError)) throw error;
        }
      },
      (drainOptions) => resolveDrainOptions(drainOptions, queues),
    );
  }

  #startRunner(resolved: ResolvedWorkOptions): Runner {
    if (this.#mode !== "worker") {
      throw new TypeError(
        `Cannot work jobs in this process: this queue was opened with mode "${this.#mode}" (${
          this.#mode === "inline" ? "jobs run at dispatch" : "another process works its jobs"
        }); open it with mode "worker" to work jobs here`,
      );
    }
    const jobsUrl = this.#registry.moduleUrl;
    const executor = resolved.executor === "workers"
      ? new WebWorkerPool({
        jobsUrl: jobsUrl!,
        size: resolved.workers,
        graceMs: resolved.graceMs,
        appKeys: this.#appKeys,
        captureConsole: resolved.captureConsole,
        maxLogBytes: resolved.maxLogBytes,
        dispatch: (name, payloads, options, batchId) =>
          this.#handlerDispatch.byName(name, payloads, options, batchId),
        fallback: () => new IsolateExecutor(this.#registry, this.#handlerQueue, this.#cipher),
        onFallback: (error) => this.emit("queue:error", { error, during: "starting Web Workers" }),
      })
      : new IsolateExecutor(this.#registry, this.#handlerQueue, this.#cipher);
    const schedules = this.#registry.schedules();
    const runner = new Runner({
      store: this.#store,
      registry: this.#registry,
      executor,
      clock: this.#clock,
      events: this,
      random: Math.random,
      cipher: this.#cipher,
      schedules: resolved.schedules && schedules.length > 0
        ? new ScheduleFirer(
          schedules,
          this.#jobRows,
          Math.random,
          (error) => this.emit("queue:error", { error, during: "firing a schedule" }),
        )
        : null,
      readsScheduled: schedules.length > 0,
      keepCompletedMs: this.#keepCompletedMs,
    }, resolved);
    this.#runners.add(runner);
    const forget = () => this.#runners.delete(runner);
    runner.done.then(forget, forget);
    return runner;
  }

  /**
   * Jobs per queue by state, keyed by queue name, with the running jobs and
   * their progress. Every queue the registered jobs name is there, with zeros
   * when idle, and so is every other queue that holds a job.
   */
  async counts(): Promise<Record<string, QueueCounts>> {
    this.#assertOpen("count jobs");
    const now = this.#clock.now();
    const [rows, running] = [await this.#store.counts(now), await this.#store.running(now)];
    const idle = { pending: 0, delayed: 0, reserved: 0, failed: 0 };
    const byQueue = new Map(this.#registry.defaultQueues().map((queue) => [queue, idle]));
    for (const { queue, ...counts } of rows) byQueue.set(queue, counts);
    return Object.fromEntries(
      [...byQueue].map(([queue, counts]) => [
        queue,
        { ...counts, running: running.filter((job) => job.queue === queue).map(toRunningJob) },
      ]),
    );
  }

  /**
   * Jobs that have not finished (pending, delayed, running), filtered by
   * state, queue and name, in dispatch order, a page at a time; running jobs
   * carry their progress.
   */
  async jobs(options: JobListOptions = {}): Promise<JobList> {
    this.#assertOpen("list jobs");
    const filter = jobFilter(options);
    const listing = await this.#store.jobs(filter, page(options, "jobs"), this.#clock.now());
    return toJobList(listing);
  }

  /**
   * What settled in the last `windowMs` (default an hour), from the metrics
   * rollup the workers' settles write: jobs per minute, and per queue and per
   * job type the runs, failures, average and p95 runtime, and average wait.
   * The rollup keeps 7 days.
   */
  async metrics(options: MetricsOptions = {}): Promise<QueueMetrics> {
    this.#assertOpen("read metrics");
    const window = metricsWindow(this.#clock.now(), options);
    return summarizeMetrics(await this.#store.metrics(window.since, window.until), window);
  }

  /**
   * Due jobs that no worker seen within `seenWithinMs` can claim, by queue
   * and name: no such worker lists their queue and has a definition of their
   * name (no worker runs, or the jobs module that defines them is not
   * deployed yet). They wait; a worker claims only jobs it knows. Empty
   * while no worker is seen at all: then nothing is claimed, which
   * {@linkcode Queue.workers} shows.
   */
  async unclaimed(options: WorkersOptions = {}): Promise<UnclaimedJobs[]> {
    this.#assertOpen("list unclaimed jobs");
    const now = this.#clock.now();
    const workers = await this.#store.workers(seenSince(now, options), now);
    if (workers.length === 0) return [];
    return unclaimedJobs(await this.#store.pendingByName(now), workers);
  }

  /**
   * Workers that wrote a heartbeat in the last `seenWithinMs` (default 30 s),
   * in this process or any other on the same database, earliest started first.
   */
  async workers(options: WorkersOptions = {}): Promise<WorkerInfo[]> {
    this.#assertOpen("list workers");
    const now = this.#clock.now();
    return (await this.#store.workers(seenSince(now, options), now)).map(toWorkerInfo);
  }

  /** Failed jobs, newest first. */
  async failed(options: ListOptions = {}): Promise<FailedJob[]> {
    this.#assertOpen("list failed jobs");
    return (await this.#store.failed(page(options, "failed"))).map(toFailedJob);
  }

  /** Where a batch stands, or null if there is no batch with that id (or it was pruned). */
  async batchStatus(id: number): Promise<BatchStatus | null> {
    this.#assertOpen("read a batch");
    const row = await this.#store.batch(assertId(id, "A batch id"));
    return row === null ? null : toBatchStatus(row);
  }

  /** Batches, newest first. */
  async batches(options: ListOptions = {}): Promise<BatchStatus[]> {
    this.#assertOpen("list batches");
    return (await this.#store.batches(page(options, "batches"))).map(toBatchStatus);
  }

  /**
   * Cancels a batch: its jobs that are not running are skipped, running ones
   * finish, `then` never fires, `finally` fires once nothing is pending.
   * False if the batch is not there, was cancelled already or has finished.
   */
  async cancelBatch(id: number): Promise<boolean> {
    this.#assertOpen("cancel a batch");
    const cancelled = await this.#store.cancelBatch(assertId(id, "A batch id"), this.#clock.now());
    this.#notifyRunners(); // its finally jobs may be due now
    return cancelled;
  }

  /** Puts every failed job of a batch back, pending in the batch again; returns how many. */
  async retryBatch(id: number): Promise<number> {
    this.#assertOpen("retry a batch");
    const moved = await this.#store.retry(
      { batchId: assertId(id, "A batch id") },
      this.#clock.now(),
    );
    this.#notifyRunners();
    return moved.length;
  }

  /** Deletes batches that finished or were cancelled more than `olderThanMs` ago; returns how many. */
  async pruneBatches(options: PruneOptions): Promise<number> {
    this.#assertOpen("prune batches");
    const now = this.#clock.now();
    return await this.#store.pruneBatches(cutoff(now, options, "pruneBatches"), now);
  }

  /**
   * A job's log: the lines its handler wrote with `ctx.log()` (and, with
   * `captureConsole`, printed), across its attempts, oldest first. An
   * encrypted job's lines are opened with the queue's keys. Empty when the
   * job wrote none, or its log was pruned (with the job's history: once it is in neither the
   * jobs, the failed jobs nor the kept finished jobs).
   *
   * @example Read what a failed attempt wrote
   * ```ts ignore
   * for (const line of await queue.logs(id)) {
   *   console.log(line.attempt, line.at.toISOString(), line.message, line.fields);
   * }
   * ```
   */
  async logs(id: number, options: LogsOptions = {}): Promise<JobLogLine[]> {
    this.#assertOpen("read a job's log");
    const open = options.open ?? true;
    if (typeof open !== "boolean") {
      throw new TypeError(`logs: open must be true or false: got ${String(open)}`);
    }
    return await openLogLines(await this.#store.logs(assertId(id)), open ? this.#cipher : null);
  }

  /** One failed job by id, or null. */
  async failedJob(id: number): Promise<FailedJob | null> {
    this.#assertOpen("read a failed job");
    const row = await this.#store.failedJob(assertId(id));
    return row === null ? null : toFailedJob(row);
  }

  /**
   * Puts a failed job back on its queue, due now, with fresh attempts; false
   * if it is not there. A batch job is pending in its batch again; a chain
   * link resumes its chain.
   */
  async retry(id: number): Promise<boolean> {
    this.#assertOpen("retry a job");
    const moved = await this.#store.retry([assertId(id)], this.#clock.now());
    this.#notifyRunners();
    return moved.length === 1;
  }

  /** Puts every failed job back; returns how many. */
  async retryAll(): Promise<number> {
    this.#assertOpen("retry jobs");
    const moved = await this.#store.retry("all", this.#clock.now());
    this.#notifyRunners();
    return moved.length;
  }

  /** Deletes one failed job; false if it was not there. A chain it stopped is dropped. */
  async forget(id: number): Promise<boolean> {
    this.#assertOpen("forget a job");
    return await this.#store.forget(assertId(id));
  }

  /** Deletes every failed job; returns how many. */
  async flushFailed(): Promise<number> {
    this.#assertOpen("flush failed jobs");
    return await this.#store.flushFailed();
  }

  /** Deletes failed jobs that failed more than `olderThanMs` ago; returns how many. */
  async pruneFailed(options: PruneOptions): Promise<number> {
    this.#assertOpen("prune failed jobs");
    const now = this.#clock.now();
    return await this.#store.pruneFailed(cutoff(now, options, "pruneFailed"), now);
  }

  /**
   * Deletes the jobs of one queue (of every queue when omitted) that have not
   * finished; batch jobs among them count as skipped in their batch.
   */
  async clear(queue?: string): Promise<number> {
    this.#assertOpen("clear jobs");
    if (queue !== undefined) assertQueueName(queue, "clear");
    const cleared = await this.#store.clear(queue, this.#clock.now());
    this.#notifyRunners(); // a batch it finished may have queued its callbacks
    return cleared;
  }

  /**
   * The stored schedules, by name: each with its rule, policies, paused
   * state, next slot and next 5 runs, and its last fired slot and job.
   */
  async schedules(): Promise<ScheduleInfo[]> {
    this.#assertOpen("list schedules");
    const now = this.#clock.now();
    return (await this.#store.schedules()).map((row) => toScheduleInfo(row, now));
  }

  /**
   * Pauses a schedule: no slot fires until it is resumed, in any process,
   * across restarts and syncs. False when no schedule has that name.
   */
  async pauseSchedule(name: string): Promise<boolean> {
    this.#assertOpen("pause a schedule");
    return await this.#store.setSchedulePaused(
      assertScheduleName(name),
      true,
      this.#clock.now(),
    );
  }

  /**
   * Resumes a paused schedule. The slots it missed while paused are fired
   * by its `missed` policy at the next tick. False when no schedule has that name.
   */
  async resumeSchedule(name: string): Promise<boolean> {
    this.#assertOpen("resume a schedule");
    const resumed = await this.#store.setSchedulePaused(
      assertScheduleName(name),
      false,
      this.#clock.now(),
    );
    this.#notifyRunners();
    return resumed;
  }

  /**
   * Stores one job of a schedule now, outside its slot sequence (the next
   * slot still fires), even while it is paused or its last job runs; its
   * `ctx.scheduled.slot` is now. Returns the job's id, or null when the
   * job's own unique key is held. Refuses a name no schedule here defines.
   */
  async triggerSchedule(name: string): Promise<number | null> {
    this.#assertOpen("trigger a schedule");
    const schedule = this.#schedule(name, "trigger");
    const now = this.#clock.now();
    const row = await this.#jobRows.seal(schedule.job, jobRow(schedule, this.#jobRows, now, now));
    const [id] = await this.#store.runSchedule(name, [{ slot: now, manual: true, row }], now);
    this.#notifyRunners();
    return id ?? null;
  }

  /**
   * Stores one job for every slot of a schedule in `[from, to]`, oldest
   * first, each due now, skipping slots already fired (each slot is one job
   * ever, whoever fires it). Refuses a range of more than the schedule's
   * `maxCatchUp` slots (nothing is stored then), a range that ends after
   * now, and a name no schedule here defines.
   */
  async backfillSchedule(name: string, options: BackfillOptions): Promise<BackfillResult> {
    this.#assertOpen("backfill a schedule");
    const schedule = this.#schedule(name, "backfill");
    const where = `Cannot backfill schedule "${name}"`;
    const { from, to } = options ?? {};
    for (const [key, value] of [["from", from], ["to", to]] as const) {
      if (!(value instanceof Date) || !Number.isFinite(value.getTime())) {
        throw new TypeError(`${where}: ${key} must be a valid Date: got ${String(value)}`);
      }
    }
    const now = this.#clock.now();
    if (from!.getTime() > to!.getTime()) throw new RangeError(`${where}: from is after to`);
    if (to!.getTime() > now) {
      throw new RangeError(`${where}: to is in the future (slots to come fire on their own)`);
    }
    const cap = schedule.maxCatchUp;
    const slots = slotsBetween(timesOf(schedule), from!.getTime(), to!.getTime(), cap);
    if (slots.length > cap) {
      throw new RangeError(
        `${where}: the range holds more than ${cap} slots (its maxCatchUp): narrow it`,
      );
    }
    const runs = [];
    for (const slot of slots) {
      const row = await this.#jobRows.seal(
        schedule.job,
        jobRow(schedule, this.#jobRows, slot, now),
      );
      runs.push({ slot, manual: false, row });
    }
    const ids = runs.length === 0 ? [] : await this.#store.runSchedule(name, runs, now);
    this.#notifyRunners();
    const jobIds = ids.filter((id): id is number => id !== null);
    return { jobIds, skipped: ids.length - jobIds.length };
  }

  /**
   * Dispatches a job and waits until it ends, wherever it runs (another
   * process included: the wait wakes on the store's watch, not by polling).
   * Resolves with its output (undefined for a job without an `output`
   * schema); rejects with its final error once it failed for good, a
   * `JobCancelledError` if it was cancelled, or a `JobWaitTimeoutError`
   * after `timeoutMs` (the job keeps its course). On an inline queue the job
   * runs here and now.
   *
   * @example Waiting for a job's output
   * ```ts
   * import { defineJob, Queue } from "@renox/queue";
   * import { z } from "zod";
   *
   * const add = defineJob({
   *   name: "add",
   *   schema: z.object({ a: z.number(), b: z.number() }),
   *   output: z.object({ sum: z.number() }),
   *   handle: ({ a, b }) => ({ sum: a + b }),
   * });
   * await using queue = await Queue.open({ path: ":memory:", jobs: [add] });
   * const worker = queue.work({ executor: "isolate" });
   * const { sum } = await queue.dispatchAndWait(add, { a: 2, b: 3 }, { timeoutMs: 10_000 });
   * console.log(sum); // 5
   * await worker.stop();
   * ```
   */
  async dispatchAndWait<J extends JobDefinition>(
    job: J,
    payload: PayloadOf<J>,
    options?: DispatchAndWaitOptions,
  ): Promise<OutputOf<J>> {
    this.#assertOpen("dispatch");
    const timeoutMs = waitTimeoutMs(options);
    const { timeoutMs: _timeout, signal, ...dispatchOptions } = options ?? {};
    if (this.#mode === "inline") {
      const [row] = await this.#dispatchRules.jobRows.rows(job, [payload], dispatchOptions);
      const output = await runNow(this.#executor, job, row!);
      return (output === null
        ? undefined
        : await decodeOutput(job.name, output, this.#cipher)) as OutputOf<J>;
    }
    const id = await this.#dispatch.dispatch(job, payload, dispatchOptions);
    await this.#store.markAwaited(id);
    this.#notifyRunners(); // a claim that ran while the mark held the row skipped it
    const row = await awaitResult(
      { store: this.#store, clock: this.#clock, events: this },
      id,
      timeoutMs,
      signal,
    );
    return (await this.#output(id, row)) as OutputOf<J>;
  }

  /**
   * Where a job stands: pending, running, completed (with its output),
   * failed (with its error) or cancelled; null if no job has that id (or it
   * finished and is no longer kept: see `keepCompletedMs`).
   */
  async result(id: number): Promise<JobResult | null> {
    this.#assertOpen("read a job's result");
    const row = await this.#store.result(assertId(id), this.#clock.now());
    if (row === null) return null;
    const output = row.state === "completed" && row.output !== null
      ? { output: await decodeOutput(row.name, row.output, this.#cipher) }
      : {};
    const error = row.error === null ? {} : { error: row.error };
    return { state: row.state, attempts: row.attempts, ...output, ...error };
  }

  /** Finished jobs kept in the completed jobs (succeeded or cancelled), last finished first. */
  async completed(options: CompletedOptions = {}): Promise<CompletedJob[]> {
    this.#assertOpen("list completed jobs");
    if (options.queue !== undefined) assertQueueName(options.queue, "completed");
    if (options.name !== undefined && typeof options.name !== "string") {
      throw new TypeError(`completed: name must be a string: got ${typeof options.name}`);
    }
    const rows = await this.#store.completed(
      { name: options.name, queue: options.queue },
      page(options, "completed"),
    );
    return rows.map(toCompletedJob);
  }

  /** One kept finished job by id, or null. */
  async completedJob(id: number): Promise<CompletedJob | null> {
    this.#assertOpen("read a completed job");
    const row = await this.#store.completedJob(assertId(id));
    return row === null ? null : toCompletedJob(row);
  }

  /** Deletes kept finished jobs that finished more than `olderThanMs` ago; returns how many. */
  async pruneCompleted(options: PruneOptions): Promise<number> {
    this.#assertOpen("prune completed jobs");
    const now = this.#clock.now();
    return await this.#store.pruneCompleted(cutoff(now, options, "pruneCompleted"), now);
  }

  /**
   * Cancels one job. A job that has not started (pending or delayed) is
   * removed at once and kept as cancelled: `"cancelled"`; in a batch it
   * counts as skipped, a chain stops at it (its `catch` is queued), its
   * unique key and locks are released. A running job is asked to stop:
   * `"cancelling"`; its worker sees it within about a second, aborts
   * `ctx.signal` with a `JobCancelledError`, terminates its Web Worker if it
   * does not stop within `graceMs`, and settles it as cancelled (not
   * retried, no `failed` hook). `"finished"` if it had already ended,
   * `"not-found"` if no job has that id.
   */
  async cancel(id: number, options?: CancelOptions): Promise<CancelResult> {
    this.#assertOpen("cancel a job");
    const reason = cancelReason(options);
    const jobId = assertId(id);
    const now = this.#clock.now();
    const name = (await this.#store.result(jobId, now))?.name;
    const keepMs = (name === undefined ? undefined : this.#registry.get(name)?.keepCompletedMs) ??
      this.#keepCompletedMs;
    const outcome = await this.#store.cancel({
      id: jobId,
      reason,
      now,
      keepUntil: now + keepMs,
    });
    for (const runner of this.#runners) {
      runner.notify();
      runner.lookForCancels();
    }
    return outcome;
  }

  /**
   * Pauses a queue for every process on this database: claims skip it until
   * `resume()`, or for `forMs`. Dispatch still stores its jobs; running
   * jobs finish. Sends `queue:paused`.
   */
  async pause(queue: string, options?: PauseOptions): Promise<void> {
    this.#assertOpen("pause a queue");
    const now = this.#clock.now();
    const pause = resolvePause(queue, options, now);
    await this.#store.pause(pause.queue, now, pause.until, pause.reason);
    this.emit("queue:paused", pause);
  }

  /**
   * Resumes a paused queue and wakes idle workers at once; false if it was
   * not paused. Sends `queue:resumed` when it was.
   */
  async resume(queue: string): Promise<boolean> {
    this.#assertOpen("resume a queue");
    assertQueueName(queue, "resume");
    const resumed = await this.#store.resume(queue, this.#clock.now());
    this.#notifyRunners();
    if (resumed) this.emit("queue:resumed", { queue });
    return resumed;
  }

  /** The queues paused now, by name. */
  async paused(): Promise<PausedQueue[]> {
    this.#assertOpen("list paused queues");
    return (await this.#store.paused(this.#clock.now())).map(toPausedQueue);
  }

  /** Stops every worker of this queue (each with its grace period), then closes the database. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await Promise.allSettled([...this.#runners].map((runner) => runner.stop()));
      this.#gauges.remove();
      await this.#store.close();
    })();
    return this.#closing;
  }

  /** Same as {@linkcode Queue.close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** The schedule this process defines by `name`; a `TypeError` naming it otherwise. */
  #schedule(name: string, action: string): ScheduleDefinition {
    const schedule = this.#registry.schedules().find((each) => each.name === name);
    if (schedule === undefined) {
      throw new TypeError(
        `Cannot ${action} schedule ${
          JSON.stringify(name)
        }: no schedule of that name is defined in the jobs module`,
      );
    }
    return schedule;
  }

  /** The output of a job that ended, or its final error. */
  async #output(id: number, row: JobResultRow): Promise<unknown> {
    if (row.state === "failed") throw storedErrorToError(row.error ?? "Error: failed");
    if (row.state === "cancelled") {
      throw new JobCancelledError(id, row.name, row.error ?? "cancelled");
    }
    return row.output === null ? undefined : await decodeOutput(row.name, row.output, this.#cipher);
  }

  #assertOpen(action: string): void {
    if (this.#closing !== null) throw new QueueClosedError(action);
  }

  #queued(rows: readonly NewJobRow[], ids: readonly number[]): void {
    if (this.hasListeners("job:queued")) {
      rows.forEach((row, index) =>
        this.emit("job:queued", {
          id: ids[index]!,
          name: row.name,
          queue: row.queue,
          attempt: 0,
          availableAt: row.availableAt,
        })
      );
    }
    this.#notifyRunners();
  }

  #notifyRunners(): void {
    for (const runner of this.#runners) runner.notify();
  }
}

/** `name` when it is a string; a `TypeError` otherwise. */
function assertScheduleName(name: unknown): string {
  if (typeof name !== "string") {
    throw new TypeError(`A schedule name must be a string: got ${typeof name}`);
  }
  return name;
}
