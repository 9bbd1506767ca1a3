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
import { QueueClosedError } from "./errors.ts";
import { QueueEventTarget } from "./events.ts";
import type { HandlerQueue } from "./executors/executor.ts";
import { IsolateExecutor } from "./executors/isolate.ts";
import { WebWorkerPool } from "./executors/web_workers.ts";
import { type JobLogLine, type LogsOptions, openLogLines } from "./job_logs.ts";
import { QueueGauges } from "./queue_gauges.ts";
import type { Dispatcher, DispatchOptions, JobDefinition, PayloadOf } from "./job.ts";
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
import { maxPayloadBytesOf, type QueueOptions, readAppKeys } from "./queue_options.ts";
import { runNow } from "./run_now.ts";
import { Runner } from "./runner.ts";
import { openStore } from "./store_options.ts";
import type { NewJobRow, Store, StoreTransaction } from "./stores/store.ts";
import { resolveWorkOptions, type WorkOptions } from "./work_options.ts";
import {
  seenSince,
  toWorkerInfo,
  type UnclaimedJobs,
  unclaimedJobs,
  type WorkerInfo,
  type WorkersOptions,
} from "./workers_seen.ts";

export type { QueueOptions } from "./queue_options.ts";

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
  #closing: Promise<void> | null = null;
  readonly #gauges: QueueGauges;

  private constructor(parts: {
    store: Store;
    registry: JobRegistry;
    clock: Clock;
    maxPayloadBytes: number;
    appKeys: AppKeys | null;
    cipher: PayloadCipher | null;
  }) {
    super();
    this.#store = parts.store;
    this.#registry = parts.registry;
    this.#clock = parts.clock;
    const jobRows = new JobRows(parts.registry, parts.clock, parts.maxPayloadBytes, parts.cipher);
    const rules = { jobRows, registry: parts.registry, clock: parts.clock };
    this.#dispatchRules = rules;
    const sink = (rows: readonly NewJobRow[], ids: readonly number[]) => this.#queued(rows, ids);
    const assertOpen = () => this.#assertOpen("dispatch");
    this.#dispatch = new Dispatch(rules, { target: parts.store, sink, assertOpen });
    this.#handlerDispatch = new Dispatch(rules, { target: parts.store, sink, assertOpen() {} });
    this.#appKeys = parts.appKeys;
    this.#cipher = parts.cipher;
    this.#executor = new IsolateExecutor(parts.registry, this.#handlerQueue, parts.cipher);
    this.#gauges = new QueueGauges(parts.store, parts.clock);
  }

  /** Loads the job definitions, opens the database and brings its schema up to date. */
  static async open(options: QueueOptions): Promise<Queue> {
    const maxPayloadBytes = maxPayloadBytesOf(options);
    const registry = await JobRegistry.load(options.jobs);
    const appKeys = readAppKeys(options, registry.encryptedJobs());
    const cipher = appKeys === null ? null : await PayloadCipher.fromKeys(appKeys);
    const store = await openStore(options);
    const clock = options.clock ?? systemClock;
    return new Queue({ store, registry, clock, maxPayloadBytes, appKeys, cipher });
  }

  /**
   * Stores one job and returns its id.
   *
   * Throws `ValidationError` when the payload fails the job's schema or the
   * size cap, `TypeError`/`RangeError` for an unregistered job or a bad
   * option, and `QueueClosedError` after close; nothing is stored then.
   */
  async dispatch<J extends JobDefinition>(
    job: J,
    payload: PayloadOf<J>,
    options?: DispatchOptions,
  ): Promise<number> {
    return await this.#dispatch.dispatch(job, payload, options);
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
    const jobsUrl = this.#registry.moduleUrl;
    const canUseWorkers = typeof Worker === "function" && jobsUrl !== undefined;
    const resolved = resolveWorkOptions(options, this.#registry.defaultQueues(), canUseWorkers);
    const executor = resolved.executor === "workers"
      ? new WebWorkerPool({
        jobsUrl: jobsUrl!,
        size: resolved.workers,
        graceMs: resolved.graceMs,
        appKeys: this.#appKeys,
        captureConsole: resolved.captureConsole,
        dispatch: (name, payloads, options, batchId) =>
          this.#handlerDispatch.byName(name, payloads, options, batchId),
        fallback: () => new IsolateExecutor(this.#registry, this.#handlerQueue, this.#cipher),
        onFallback: (error) => this.emit("queue:error", { error, during: "starting Web Workers" }),
      })
      : new IsolateExecutor(this.#registry, this.#handlerQueue, this.#cipher);
    const runner = new Runner({
      store: this.#store,
      registry: this.#registry,
      executor,
      clock: this.#clock,
      events: this,
      random: Math.random,
      cipher: this.#cipher,
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
    const workers = await this.#store.workers(seenSince(now, options));
    if (workers.length === 0) return [];
    return unclaimedJobs(await this.#store.pendingByName(now), workers);
  }

  /**
   * Workers that wrote a heartbeat in the last `seenWithinMs` (default 30 s),
   * in this process or any other on the same database, earliest started first.
   */
  async workers(options: WorkersOptions = {}): Promise<WorkerInfo[]> {
    this.#assertOpen("list workers");
    const since = seenSince(this.#clock.now(), options);
    return (await this.#store.workers(since)).map(toWorkerInfo);
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
    return await this.#store.pruneBatches(cutoff(this.#clock.now(), options, "pruneBatches"));
  }

  /**
   * A job's log: the lines its handler wrote with `ctx.log()` (and, with
   * `captureConsole`, printed), across its attempts, oldest first. An
   * encrypted job's lines are opened with the queue's keys. Empty when the
   * job wrote none, or its log was pruned (a day after the job is gone).
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
    return await this.#store.pruneFailed(cutoff(this.#clock.now(), options, "pruneFailed"));
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
