/**
 * The queue: open it on a database, dispatch jobs, run workers, and look
 * after failed jobs.
 *
 * @module
 */
import { Batches } from "./admin/batches.ts";
import { countJobs } from "./admin/counts.ts";
import { FailedJobs } from "./admin/failed_jobs.ts";
import { FinishedJobs } from "./admin/finished_jobs.ts";
import type {
  CancelOptions,
  CancelOutcome,
  DispatchAndWaitOptions,
  FinishedJob,
  FinishedOptions,
  JobResult,
  PausedGroup,
  PausedQueue,
  PauseGroupOptions,
  PauseOptions,
} from "./admin/job_control.ts";
import { groupPauseEnd, resolvePause } from "./admin/job_control.ts";
import {
  type JobList,
  type JobListOptions,
  listJobs,
  type UnfinishedJob,
} from "./admin/job_list.ts";
import {
  assertId,
  type FailedJob,
  type ListOptions,
  page,
  type PruneOptions,
  type QueueCounts,
} from "./admin/listing.ts";
import { type MetricsOptions, type QueueMetrics, readMetrics } from "./admin/metrics.ts";
import { QueueGauges } from "./admin/queue_gauges.ts";
import { JobResults } from "./admin/results.ts";
import { readSteps, sendSignal } from "./admin/steps.ts";
import type { JobStep, SignalOutcome } from "./steps.ts";
import {
  listUnclaimed,
  listWorkers,
  type UnclaimedJobs,
  type WorkerInfo,
  type WorkersOptions,
} from "./admin/workers.ts";
import type { BatchBuilder, BatchStatus } from "./batch.ts";
import type { ChainBuilder, ChainOptions } from "./chain.ts";
import type { FlowBuilder, FlowStatus } from "./flow.ts";
import { Flows } from "./admin/flows.ts";
import type { Clock } from "./clock.ts";
import { Dispatch, type DispatchRules, type StoreTarget } from "./dispatch/dispatch.ts";
import { groupTarget } from "./dispatch/group_key.ts";
import { InlineTarget } from "./dispatch/inline_target.ts";
import type { JobRows } from "./dispatch/job_rows.ts";
import { runNow } from "./dispatch/run_now.ts";
import { shown } from "./shown.ts";
import { type QueueTransaction, runTransaction } from "./dispatch/transaction.ts";
import type {
  DrainAfterOptions,
  DrainOptions,
  DrainResult,
  ServerlessOptions,
} from "./drains/options.ts";
import { QueueWorkers } from "./drains/workers.ts";
import type { PayloadCipher } from "./encryption.ts";
import { QueueClosedError } from "./errors.ts";
import { QueueEventTarget } from "./events.ts";
import type { HandlerQueue } from "./executors/executor.ts";
import { IsolateExecutor } from "./executors/isolate.ts";
import type { Dispatcher, DispatchOptions, JobDefinition, OutputOf, PayloadOf } from "./job.ts";
import { type JobLogLine, type LogsOptions, readJobLog } from "./job_logs.ts";
import { assertQueueName } from "./names.ts";
import { openQueueParts, type QueueParts } from "./queue_open.ts";
import type { QueueMode, QueueOptions } from "./queue_options.ts";
import type { JobRegistry } from "./registry.ts";
import type { QueueWorker } from "./runner/runner.ts";
import type { WorkOptions } from "./runner/work_options.ts";
import { ManualRuns } from "./schedules/manual_runs.ts";
import type { BackfillOptions, BackfillResult, ScheduleInfo } from "./schedules/views.ts";
import type { BackupResult, NewJobRow, Store } from "./stores/store.ts";
import { CLOSE_WAITS_MS } from "./stores/close_wait.ts";

export type { QueueMode, QueueOptions } from "./queue_options.ts";

export type { QueueTransaction } from "./dispatch/transaction.ts";

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
  readonly #cipher: PayloadCipher | null;
  readonly #mode: QueueMode;
  readonly #jobRows: JobRows;
  readonly #dispatchRules: DispatchRules;
  /** Dispatch by the app: refused once the queue closes. */
  readonly #dispatch: Dispatch<StoreTarget>;
  /** Dispatch by handlers and failed hooks (`ctx.queue`, `ctx.addToBatch`, Web Workers). */
  readonly #handlerDispatch: Dispatch<StoreTarget>;
  readonly #executor: IsolateExecutor;
  readonly #workers: QueueWorkers;
  readonly #failedJobs: FailedJobs;
  readonly #batches: Batches;
  readonly #flows: Flows;
  readonly #finishedJobs: FinishedJobs;
  readonly #results: JobResults;
  readonly #schedules: ManualRuns;
  readonly #gauges: QueueGauges;
  #closing: Promise<void> | null = null;

  private constructor(parts: QueueParts) {
    super();
    const { store, registry, clock, cipher, jobRows, mode } = parts;
    this.#store = store;
    this.#registry = registry;
    this.#clock = clock;
    this.#cipher = cipher;
    this.#mode = mode;
    this.#jobRows = jobRows;
    const rules = { jobRows, registry, clock };
    this.#dispatchRules = rules;
    const sink = (rows: readonly NewJobRow[], ids: readonly number[]) => this.#queued(rows, ids);
    const assertOpen = (action: string) => this.#assertOpen(action);
    this.#executor = new IsolateExecutor(registry, this.#handlerQueue, cipher);
    const target = mode === "inline" ? new InlineTarget(registry, this.#executor) : store;
    this.#dispatch = new Dispatch(rules, {
      target,
      sink,
      assertOpen: () => assertOpen("dispatch"),
    });
    this.#handlerDispatch = new Dispatch(rules, { target, sink, assertOpen() {} });
    this.#workers = new QueueWorkers({
      ...parts,
      events: this,
      handlerQueue: this.#handlerQueue,
      handlerDispatch: this.#handlerDispatch,
      assertOpen,
    }, (error) => this.emit("queue:error", { error, during: "drain after a response" }));
    const notify = () => this.#workers.notify();
    const inline = mode === "inline";
    const executor = this.#executor;
    this.#failedJobs = new FailedJobs({ store, clock, notify });
    this.#batches = new Batches({ store, clock, notify }, this.#failedJobs);
    this.#finishedJobs = new FinishedJobs(parts);
    this.#flows = new Flows({ store, clock, notify }, this.#finishedJobs);
    this.#results = new JobResults({
      ...parts,
      events: this,
      executor,
      dispatch: this.#dispatch,
      inline,
      notify,
    });
    this.#schedules = new ManualRuns({ ...parts, executor, inline, notify });
    this.#gauges = new QueueGauges(store, clock);
  }

  /**
   * Loads the job definitions and schedules, opens the database, brings its
   * schema up to date and stores the schedules it defines (adds new ones,
   * updates changed ones; a schedule's paused state and last run are kept).
   * Stored schedules it does not define are left as they are: another
   * process (a worker with the full jobs module, another app) may define
   * them; {@linkcode Queue.forgetSchedule} removes one. A schedule that is
   * wrong (its job not registered, its payload refused by the job's schema,
   * two with one name) is refused here, with an error naming it, before
   * anything is written. With `mode: "inline"` no database is opened (a
   * `store` given is refused): jobs run at dispatch, and schedules are not
   * synced.
   */
  static async open(options: QueueOptions): Promise<Queue> {
    return new Queue(await openQueueParts(options));
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
    if (typeof name !== "string") {
      throw new TypeError(`dispatchByName: the job's name must be a string: got ${shown(name)}`);
    }
    if (this.#registry.get(name) === undefined) {
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
  chain(options?: ChainOptions): ChainBuilder {
    this.#assertOpen("dispatch a chain");
    return this.#dispatch.chain(options);
  }

  /**
   * Starts a flow: jobs that wait for other jobs (their parents) and take
   * their outputs as `ctx.parents`. See {@linkcode FlowBuilder}.
   */
  flow(name: string): FlowBuilder {
    this.#assertOpen("dispatch a flow");
    return this.#dispatch.flow(name);
  }

  /**
   * Where a flow stands: its state and every node's key, job, state and
   * parents; null if there is no flow with that id. A flow is finished when
   * no node can run any more.
   */
  async flowStatus(id: number): Promise<FlowStatus | null> {
    this.#assertOpen("read a flow");
    return await this.#flows.status(id);
  }

  /** Flows, newest first, each with every node. */
  async flows(options: ListOptions = {}): Promise<FlowStatus[]> {
    this.#assertOpen("list flows");
    return await this.#flows.list(options);
  }

  /**
   * Deletes the flows that ended more than `olderThanMs` ago, with their
   * nodes and kept outputs; returns how many. A flow ends when no node is
   * left waiting, queued or running, cancelled or not, and its age counts
   * from then, however long it ran. Their jobs (finished, failed) are not
   * touched; a failed node retried after its flow was pruned runs on its own.
   */
  async pruneFlows(options: PruneOptions): Promise<number> {
    this.#assertOpen("prune flows");
    return await this.#flows.prune(options);
  }

  /**
   * Cancels a flow: its waiting nodes never run, its queued nodes are
   * cancelled and its running ones asked to stop (as {@linkcode Queue.cancel}
   * does), in the one write that marks the flow, so no worker starts a
   * queued node after it; its catch does not run. False if the flow is not
   * there or has finished.
   */
  async cancelFlow(id: number): Promise<boolean> {
    this.#assertOpen("cancel a flow");
    const cancelled = await this.#flows.cancel(id);
    this.#workers.lookForCancels();
    return cancelled;
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
    if (typeof fn !== "function") {
      throw new TypeError(`transaction: fn must be a function: got ${shown(fn)}`);
    }
    if (this.#mode === "inline") {
      throw new TypeError(
        'Cannot start a transaction: an inline queue (mode "inline") has no database to share',
      );
    }
    return await runTransaction(this.#store, {
      rules: this.#dispatchRules,
      assertOpen: () => this.#assertOpen("dispatch"),
      committed: (rows, ids) => this.#queued(rows, ids),
    }, fn);
  }

  /**
   * Runs a job now, in this isolate, without storing it: one attempt, no
   * retries. Rejects with the handler's error, or `JobTimeoutError` past the
   * job's `timeoutMs` (the handler is aborted but, in this isolate, may keep running).
   */
  async dispatchSync<J extends JobDefinition>(job: J, payload: PayloadOf<J>): Promise<void> {
    this.#assertOpen("dispatch");
    const [row] = await this.#jobRows.rows(job, [payload], undefined);
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
  work(options: WorkOptions = {}): QueueWorker {
    return this.#workers.work(options);
  }

  /**
   * Runs due jobs in this isolate until nothing is due now, or the time or
   * job budget is spent, and resolves with what ran. Jobs still running when
   * `maxTimeMs` is spent are aborted and put back on their queue without using
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
   * const result = await queue.drain({ maxTimeMs: 2_000, concurrency: 2 });
   * console.log(result); // { completed: 3, failed: 0, retried: 0, stoppedBecause: "empty" }
   * ```
   */
  drain(options: DrainOptions = {}): Promise<DrainResult> {
    return this.#workers.drain(options);
  }

  /**
   * Returns `response` as it is, and drains briefly once it was sent (see
   * {@linkcode Queue.drain}; `maxTimeMs` defaults to 5 s here), so a job a
   * request dispatched usually runs while the host keeps this isolate alive
   * for that request, instead of at the next cron tick. At most one such
   * drain runs at a time; one asked for meanwhile runs after it. Errors go
   * to `queue:error`; after close it drains nothing. A bad option, or a
   * queue not opened in mode `"worker"`, throws at the call, as with
   * {@linkcode Queue.drain}.
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
    this.#workers.drainAfter(options, this.#closing !== null);
    return response;
  }

  /**
   * Registers a top-level `Deno.cron` job that drains the queue for up to
   * `maxTimeMs` every tick (every minute by default), for hosts that keep an
   * isolate alive only while it serves requests and cron ticks. Call it at
   * the top level of the app's main module, as Deno Deploy finds cron jobs
   * there. Throws when `Deno.cron` is missing: run with `--unstable-cron`, or
   * add `"unstable": ["cron"]` to the app's `deno.json` (Deno Deploy has it).
   * Returns `Deno.cron`'s promise, which settles once the job is unregistered
   * (`signal` aborted, or the queue closed); do not await it at the top level.
   * Throws at the call on a queue not opened in mode `"worker"`.
   *
   * @example Drain every minute on Deno Deploy
   * ```ts ignore
   * import { Queue } from "@renox/queue";
   * import "./jobs.ts"; // in the app's graph: the URL below loads without --allow-read
   *
   * const url = Deno.env.get("DATABASE_URL")!;
   * const queue = await Queue.open({ url, jobs: import.meta.resolve("./jobs.ts") });
   * queue.serverless({ cron: "* * * * *", maxTimeMs: 50_000 });
   * ```
   */
  serverless(options: ServerlessOptions = {}): Promise<void> {
    return this.#workers.serverless(options);
  }

  /**
   * Jobs per queue by state, keyed by queue name, with the running jobs and
   * their progress. Every queue the registered jobs name is there, with zeros
   * when idle, and so is every other queue that holds a job.
   */
  async counts(): Promise<Record<string, QueueCounts>> {
    this.#assertOpen("count jobs");
    return await countJobs(this.#store, this.#clock, this.#registry.defaultQueues());
  }

  /**
   * Jobs that have not finished (pending, delayed, running), filtered by
   * state, queue and name, in dispatch order, a page at a time; running jobs
   * carry their progress.
   */
  async jobs(options: JobListOptions = {}): Promise<JobList> {
    this.#assertOpen("list jobs");
    return await listJobs(this.#store, this.#clock, options);
  }

  /**
   * What settled in the last `windowMs` (default an hour), from the metrics
   * rollup the workers' settles write: jobs per minute, and per queue and per
   * job type the runs, failures, average and p95 runtime, and average wait.
   * The rollup keeps 7 days of minutes, and carries the totals of older ones:
   * `windowMs: Infinity` adds those to the per-queue and per-job figures.
   */
  async metrics(options: MetricsOptions = {}): Promise<QueueMetrics> {
    this.#assertOpen("read metrics");
    return await readMetrics(this.#store, this.#clock, options);
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
    return await listUnclaimed(this.#store, this.#clock, options);
  }

  /**
   * Workers that wrote a heartbeat in the last `seenWithinMs` (default 30 s),
   * in this process or any other on the same database, earliest started first.
   */
  async workers(options: WorkersOptions = {}): Promise<WorkerInfo[]> {
    this.#assertOpen("list workers");
    return await listWorkers(this.#store, this.#clock, options);
  }

  /** Failed jobs, newest first. */
  async failed(options: ListOptions = {}): Promise<FailedJob[]> {
    this.#assertOpen("list failed jobs");
    return await this.#failedJobs.list(options);
  }

  /** Where a batch stands, or null if there is no batch with that id (or it was pruned). */
  async batchStatus(id: number): Promise<BatchStatus | null> {
    this.#assertOpen("read a batch");
    return await this.#batches.status(id);
  }

  /** Batches, newest first. */
  async batches(options: ListOptions = {}): Promise<BatchStatus[]> {
    this.#assertOpen("list batches");
    return await this.#batches.list(options);
  }

  /**
   * Cancels a batch: its jobs that are not running are skipped, running ones
   * finish, `then` never fires, `finally` fires once nothing is pending.
   * False if the batch is not there, was cancelled already or has finished.
   */
  async cancelBatch(id: number): Promise<boolean> {
    this.#assertOpen("cancel a batch");
    return await this.#batches.cancel(id);
  }

  /** Puts every failed job of a batch back, pending in the batch again; returns how many. */
  async retryBatch(id: number): Promise<number> {
    this.#assertOpen("retry a batch");
    return await this.#batches.retry(id);
  }

  /**
   * Deletes batches that ended more than `olderThanMs` ago; returns how many.
   * A batch ends when nothing is left pending, cancelled or not: a cancelled
   * batch with a job still running is kept until that job settles and its
   * `finally` fires, and counts its age from then.
   */
  async pruneBatches(options: PruneOptions): Promise<number> {
    this.#assertOpen("prune batches");
    return await this.#batches.prune(options);
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
    return await readJobLog(this.#store, assertId(id), options, this.#cipher);
  }

  /**
   * The durable steps job `id` recorded (`ctx.step`, `ctx.sleep`,
   * `ctx.waitFor`), by call position; empty when it has none or they were
   * pruned with its history. Outputs are read back from JSON; an encrypted
   * one is only flagged (`encrypted`), never opened here.
   *
   * @example List what a job has done so far
   * ```ts ignore
   * for (const step of await queue.steps(id)) console.log(step.seq, step.key, step.state);
   * ```
   */
  async steps(id: number): Promise<JobStep[]> {
    this.#assertOpen("read a job's steps");
    return await readSteps(this.#store, id);
  }

  /**
   * Sends signal `name` with `payload` (JSON) to job `id`, for its
   * `ctx.waitFor(name)`: `"delivered"` when the job was waiting for it (it
   * is due at once), `"buffered"` when it is kept in the job's mailbox for a
   * wait to come (the job has not reached it yet, or runs now),
   * `"finished"` when the job already ended, `"not-found"` when there is no
   * such job (nothing is stored for those two). A signal to an encrypted
   * job is sealed with the app key (refused, storing nothing, without one).
   *
   * @example Answer a job waiting for a survey
   * ```ts ignore
   * await queue.signal(jobId, "survey", { score: 9 }); // "delivered"
   * ```
   */
  async signal(id: number, name: string, payload?: unknown): Promise<SignalOutcome> {
    this.#assertOpen("send a signal");
    return await sendSignal(this.#store, this.#cipher, this.#clock, id, name, payload);
  }

  /** One failed job by id, or null. */
  async failedJob(id: number): Promise<FailedJob | null> {
    this.#assertOpen("read a failed job");
    return await this.#failedJobs.one(id);
  }

  /**
   * A job not yet finished (pending, delayed or running) by id: its payload
   * as stored (JSON text, still encrypted if its job is, as
   * {@linkcode FailedJob.payload}) and the error of its last attempt; null
   * once it finished, or when there is no such job.
   */
  async unfinishedJob(id: number): Promise<UnfinishedJob | null> {
    this.#assertOpen("read a job");
    return await this.#store.unfinishedJob(assertId(id));
  }

  /**
   * Puts a failed job back on its queue, due now, with fresh attempts; false
   * if it is not there. A batch job is pending in its batch again; a chain
   * link resumes its chain.
   */
  async retry(id: number): Promise<boolean> {
    this.#assertOpen("retry a job");
    return (await this.#failedJobs.retry([assertId(id)])) === 1;
  }

  /** Puts every failed job back; returns how many. */
  async retryAll(): Promise<number> {
    this.#assertOpen("retry jobs");
    return await this.#failedJobs.retry("all");
  }

  /** Deletes one failed job; false if it was not there. A chain it stopped is dropped. */
  async forget(id: number): Promise<boolean> {
    this.#assertOpen("forget a job");
    return await this.#failedJobs.forget(id);
  }

  /** Deletes every failed job; returns how many. */
  async flushFailed(): Promise<number> {
    this.#assertOpen("flush failed jobs");
    return await this.#failedJobs.flush();
  }

  /** Deletes failed jobs that failed more than `olderThanMs` ago; returns how many. */
  async pruneFailed(options: PruneOptions): Promise<number> {
    this.#assertOpen("prune failed jobs");
    return await this.#failedJobs.prune(options);
  }

  /**
   * Deletes the jobs of one queue (of every queue when omitted) that are not
   * running: waiting, delayed, held ahead by a worker that has not started
   * them, or whose worker died; batch jobs among them count as skipped in
   * their batch. A running job is left to finish, keeping its unique key,
   * its locks and its group's slot (`cancel()` stops one).
   */
  async clear(queue?: string): Promise<number> {
    this.#assertOpen("clear jobs");
    if (queue !== undefined) assertQueueName(queue, "clear");
    const cleared = await this.#store.clear(queue, this.#clock.now());
    this.#workers.notify(); // a batch it finished may have queued its callbacks
    return cleared;
  }

  /**
   * The stored schedules, by name: each with its rule, policies, paused
   * state, next slot and next 5 runs, and its last fired slot and job.
   */
  async schedules(): Promise<ScheduleInfo[]> {
    this.#assertOpen("list schedules");
    return await this.#schedules.list();
  }

  /**
   * Pauses a schedule: no slot fires until it is resumed, in any process,
   * across restarts and syncs. False when no schedule has that name.
   */
  async pauseSchedule(name: string): Promise<boolean> {
    this.#assertOpen("pause a schedule");
    return await this.#schedules.setPaused(name, true);
  }

  /**
   * Resumes a paused schedule. The slots it missed while paused are fired
   * by its `missed` policy at the next tick. False when no schedule has that name.
   */
  async resumeSchedule(name: string): Promise<boolean> {
    this.#assertOpen("resume a schedule");
    return await this.#schedules.setPaused(name, false);
  }

  /**
   * Removes a stored schedule that no process defines any more: its paused
   * state and the record of the slots it fired go with it (the jobs it
   * stored and that have not ended stay, and run). Opening a queue never
   * removes a schedule it does not define, so this is how one leaves the
   * store; a process that still defines it stores it again when it opens,
   * as a new schedule. No process fires a schedule it does not define, so
   * one removed from every jobs module stops firing even before it is
   * forgotten. False when no schedule has that name; refuses one this
   * queue's jobs module defines.
   */
  async forgetSchedule(name: string): Promise<boolean> {
    this.#assertOpen("forget a schedule");
    return await this.#schedules.forget(name);
  }

  /**
   * Whether the jobs this queue opened with define the schedule `name`: only
   * then can {@linkcode Queue.triggerSchedule} and
   * {@linkcode Queue.backfillSchedule} store its jobs here (a queue opened
   * with no jobs, as the CLI's admin commands do, reads stored schedules only).
   */
  definesSchedule(name: string): boolean {
    return this.#schedules.defines(name);
  }

  /**
   * Stores one job of a schedule now, outside its slot sequence (the next
   * slot still fires), even while it is paused or its last job runs; its
   * `ctx.scheduled.slot` is now. With `overlap: "skip"` it takes the
   * schedule's overlap key only when no job holds it, so the slot job still
   * running keeps the next slots out. Returns the job's id, or null when
   * the job's own unique key is held. Refuses a name no schedule here
   * defines. On an inline queue the job runs here and now (its id is 0).
   */
  async triggerSchedule(name: string): Promise<number | null> {
    this.#assertOpen("trigger a schedule");
    return await this.#schedules.trigger(name);
  }

  /**
   * Stores one job for every slot of a schedule in `[from, to]`, oldest
   * first, each due now, skipping slots already fired (each slot is one job
   * ever, whoever fires it). Refuses a range of more than the schedule's
   * `maxCatchUp` slots (nothing is stored then), a range that starts before
   * the Unix epoch or ends after now, a name no schedule here defines, and
   * any backfill on an inline queue.
   */
  async backfillSchedule(name: string, options: BackfillOptions): Promise<BackfillResult> {
    this.#assertOpen("backfill a schedule");
    return await this.#schedules.backfill(name, options);
  }

  /**
   * Dispatches a job and waits until it ends, wherever it runs (another
   * process included: the wait wakes on the store's watch, not by polling).
   * Resolves with its output (undefined for a job without an `output`
   * schema); rejects with its final error once it failed for good (an
   * `Error` with its stored `name` and message, not its class), a
   * `JobCancelledError` if it was cancelled, or a `JobWaitTimeoutError`
   * after `timeoutMs` (the job keeps its course). A job no longer stored
   * when the wait reads it (its kept history pruned, say) rejects it with an
   * error naming every way it can be gone: the job may have completed. On an
   * inline queue the job runs here and now.
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
    return await this.#results.dispatchAndWait(job, payload, options);
  }

  /**
   * Where a job stands: pending, running, completed (with its output),
   * failed (with its error) or cancelled; null if no job has that id (or it
   * finished and is no longer kept: see `keepFinishedMs`).
   */
  async result(id: number): Promise<JobResult | null> {
    this.#assertOpen("read a job's result");
    return await this.#results.result(id);
  }

  /** Finished jobs kept in the finished jobs (succeeded or cancelled), last finished first. */
  async finished(options: FinishedOptions = {}): Promise<FinishedJob[]> {
    this.#assertOpen("list finished jobs");
    return await this.#finishedJobs.list(options);
  }

  /** @deprecated Use {@linkcode Queue.finished}. */
  completed(options: FinishedOptions = {}): Promise<FinishedJob[]> {
    return this.finished(options);
  }

  /** One kept finished job by id, or null. */
  async finishedJob(id: number): Promise<FinishedJob | null> {
    this.#assertOpen("read a finished job");
    return await this.#finishedJobs.one(id);
  }

  /** @deprecated Use {@linkcode Queue.finishedJob}. */
  completedJob(id: number): Promise<FinishedJob | null> {
    return this.finishedJob(id);
  }

  /** Deletes kept finished jobs that finished more than `olderThanMs` ago; returns how many. */
  async pruneFinished(options: PruneOptions): Promise<number> {
    this.#assertOpen("prune finished jobs");
    return await this.#finishedJobs.prune(options);
  }

  /** @deprecated Use {@linkcode Queue.pruneFinished}. */
  pruneCompleted(options: PruneOptions): Promise<number> {
    return this.pruneFinished(options);
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
  async cancel(id: number, options?: CancelOptions): Promise<CancelOutcome> {
    this.#assertOpen("cancel a job");
    const outcome = await this.#finishedJobs.cancel(id, options);
    this.#workers.lookForCancels();
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
    this.#workers.notify();
    if (resumed) this.emit("queue:resumed", { queue });
    return resumed;
  }

  /**
   * Pauses one group of a job for every process on this database: claims
   * skip the jobs of group `key` of `job` (a definition or its name), in
   * every queue, until {@linkcode Queue.resumeGroup}, or, with `forMs` or
   * `until`, until then (a hold: a tenant's API answered 429, say). Dispatch
   * still stores them; running ones finish, and one claimed ahead does not
   * start. A pause in force is never shortened: pausing a held group
   * without an end makes it paused until resumed, and of two holds the
   * later end wins.
   *
   * @example Pausing one tenant's mailbox syncs
   * ```ts ignore
   * await queue.pauseGroup(syncMailbox, "tenant-42");
   * await queue.resumeGroup(syncMailbox, "tenant-42");
   * await queue.pauseGroup(syncMailbox, "tenant-7", { forMs: 30_000 }); // resumes on its own
   * ```
   */
  async pauseGroup(
    job: JobDefinition | string,
    key: string,
    options?: PauseGroupOptions,
  ): Promise<void> {
    this.#assertOpen("pause a group");
    const [name, group] = groupTarget(job, key, "pauseGroup");
    const now = this.#clock.now();
    const until = groupPauseEnd(options, now, "pauseGroup");
    await this.#store.pauseGroup(name, group, now, until);
  }

  /**
   * Resumes a paused group of a job (ending a hold early) and wakes idle
   * workers at once; false if it was not paused (nor held).
   */
  async resumeGroup(job: JobDefinition | string, key: string): Promise<boolean> {
    this.#assertOpen("resume a group");
    const [name, group] = groupTarget(job, key, "resumeGroup");
    const resumed = await this.#store.resumeGroup(name, group, this.#clock.now());
    this.#workers.notify();
    return resumed;
  }

  /** The queues paused now, by name. */
  async paused(): Promise<PausedQueue[]> {
    this.#assertOpen("list paused queues");
    return await this.#store.paused(this.#clock.now());
  }

  /**
   * The groups paused or held now, by job name then key (100 unless
   * `limit` says, as {@linkcode Queue.failed}): each with when it was
   * paused and when it resumes on its own (`until`; null for a pause that
   * lasts until {@linkcode Queue.resumeGroup}). A hold whose end has passed
   * is not listed, whether a handler's `ctx.rateLimitGroup()` or
   * `pauseGroup()` with `forMs` or `until` made it.
   *
   * @example Listing the held tenants
   * ```ts ignore
   * for (const group of await queue.pausedGroups({ limit: 1000 })) {
   *   console.log(group.name, group.key, group.until ?? "until resumed");
   * }
   * ```
   */
  async pausedGroups(options: ListOptions = {}): Promise<PausedGroup[]> {
    this.#assertOpen("list paused groups");
    const slice = page(options, "pausedGroups");
    return await this.#store.pausedGroups(this.#clock.now(), slice);
  }

  /**
   * Copies the queue's SQLite database to `file`, a new file, while workers
   * in this and other processes go on: the copy is the database as of one
   * commit, every job in the one state it had then. Refuses a file that
   * exists (naming it; it is never overwritten), a queue in memory, and a
   * queue on PostgreSQL or Redis, whose error names the server's own tools.
   * This process runs nothing else while the pages are copied (10 to 16 ms
   * per MiB, measured in docs/backups.md): the `backup` command does it from
   * a process of its own. Restoring is in docs/backups.md.
   *
   * @example Back up the queue's database
   * ```ts
   * import { Queue } from "@renox/queue";
   *
   * const dir = await Deno.makeTempDir();
   * const queue = await Queue.open({ path: `${dir}/jobs.db`, jobs: [] });
   * const { path, bytes } = await queue.backup(`${dir}/jobs-backup.db`);
   * console.log(`copied ${bytes} bytes to ${path}`);
   * await queue.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  async backup(file: string): Promise<BackupResult> {
    this.#assertOpen("back up the database");
    return await this.#store.backup(file);
  }

  /**
   * Stops every worker of this queue (each with its grace period), then
   * closes the database once its open transactions have ended: one still
   * open 5 s after that is rolled back, and its `queue.transaction()`
   * rejects. On SQLite, whose workers' writes wait for an open
   * transaction, one still open once the workers' grace period and those
   * 5 s have passed since this call is rolled back then, so that the
   * workers' stop ends.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#store.startClosing?.(this.#workers.longestGraceMs + CLOSE_WAITS_MS);
      await this.#workers.stop();
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

  /** The output of a job that ended, or its final error. */

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
    this.#workers.notify();
  }
}

/** `name` when it is a string; a `TypeError` otherwise. */
