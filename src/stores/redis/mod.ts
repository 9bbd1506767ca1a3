/**
 * The Redis store: the queue on the Redis an app already runs. Each rule
 * that is one transaction on SQL is one Lua function here (one library,
 * loaded with `FUNCTION LOAD`);
 * times come from the server's clock (`TIME`, inside each function), so hosts
 * whose clocks disagree still agree on what is due; idle workers wake on the
 * prefix's pub/sub channel (polling stays as the fallback).
 *
 * Every key of a store lives under its prefix, a Cluster hash tag
 * (`{renox}` by default): one store is one shard, and two prefixes on one
 * server are two independent queues.
 *
 * This module is the only one that imports the Redis client, from the
 * `@renox/queue/redis` entry point (and `Queue.open({ url })` on demand):
 * other apps never load it at run time.
 *
 * @example Open a queue on Redis
 * ```ts ignore
 * import { Queue } from "@renox/queue";
 * import { RedisStore } from "@renox/queue/redis";
 *
 * const store = await RedisStore.open("redis://127.0.0.1:6379/0", { prefix: "app" });
 * const queue = await Queue.open({ store, jobs: import.meta.resolve("./jobs.ts") });
 * ```
 *
 * @module
 */
import { LONGEST_TIMER_MS } from "../../clock.ts";
import { optionBag, optionNames } from "../../option_bags.ts";
import { shown } from "../../shown.ts";
import type {
  BackupResult,
  BatchRow,
  CancelFlowRequest,
  CancelledFlow,
  CancelOutcome,
  CancelRequest,
  CancelRequested,
  ClaimedJob,
  ClaimRequest,
  FailedJob,
  FinishedFilter,
  FinishedJob,
  FlowRow,
  InsertedBatch,
  InsertedFlow,
  JobFilter,
  JobList,
  JobResultRow,
  JobStepsRow,
  KeyedInsert,
  KeyedJobRow,
  Lease,
  LogLineRow,
  MetricsRow,
  MiddlewareRequest,
  MigrateOptions,
  MigrationPlan,
  MoveFence,
  MoveStore,
  NewBatchRow,
  NewChainRow,
  NewFlowRow,
  NewJobRow,
  Page,
  PausedGroup,
  PausedQueue,
  PendingByName,
  QueueCountsRow,
  RunningJobOnQueue,
  ScheduleRow,
  ScheduleRun,
  SchemaNews,
  Settlement,
  SettleResult,
  SignalOutcome,
  SignalRequest,
  Store,
  StoredScheduleRow,
  StoreTransaction,
  TickRecords,
  TransferPage,
  TransferRow,
  TransferTable,
  UnfinishedJobRow,
  WorkerHeartbeat,
  WorkerInfo,
} from "../store.ts";
import { RedisConnection } from "./connection.ts";
import * as chainsBatches from "./chains_batches.ts";
import * as flows from "./flows.ts";
import * as failedJobs from "./failed_jobs.ts";
import * as groups from "./groups.ts";
import * as jobControl from "./job_control.ts";
import * as jobLogs from "./job_logs.ts";
import * as jobWrites from "./job_writes.ts";
import * as keys from "./keys.ts";
import { LAYOUT_VERSION, layoutPlan, migrate } from "./migrate.ts";
import * as moveExport from "./move_export.ts";
import * as moveImport from "./move_import.ts";
import * as moving from "./moving.ts";
import { isRedisUrl, redactPassword, redisUrlParts } from "../database_url.ts";
import * as schedules from "./schedules.ts";
import * as stats from "./stats.ts";
import * as steps from "./steps.ts";
import * as tick from "./tick.ts";

/** Options for {@linkcode RedisStore.open}. */
export interface RedisStoreOptions {
  /**
   * The name every key of the store starts with, made a Cluster hash tag
   * (`app` becomes `{app}`): letters, digits, `_`, `-`, `.` and `:`. The
   * URL's `prefix` parameter (`redis://host:6379/0?prefix=app`) gives it too;
   * this option wins.
   * @default {"renox"}
   */
  prefix?: string;
  /**
   * Whose clock the times the store writes and compares go by: `"database"`
   * (the Redis server's, read with `TIME` in each script, so hosts whose
   * clocks disagree still agree) or `"caller"` (the times the queue passes
   * in, e.g. a test's clock).
   * @default {"database"}
   */
  clock?: "database" | "caller";
  /**
   * How long connecting may take before a call rejects, in ms: a call made
   * while the client reconnects waits for it this long (a dispatch whose
   * reply was lost, as long again to be sent once more). A dispatch of a
   * unique or debounce key that another open transaction holds waits for
   * that transaction's end this long too, then rejects naming the key.
   * @default {10_000}
   */
  connectTimeoutMs?: number;
  /**
   * How opening applies the schema steps the database lacks
   * (docs/upgrading.md): `{ force: true }` applies a contract step even
   * while older workers run; `false` applies none, for a store opened only
   * to read {@linkcode RedisStore.migrationPlan}.
   * @default {{}}
   */
  migrate?: MigrateOptions | false;
}

const REDIS_STORE_OPTIONS = optionNames<RedisStoreOptions>()([
  "prefix",
  "clock",
  "connectTimeoutMs",
  "migrate",
]);

/**
 * Jobs in Redis, shared by any number of processes on any number of
 * machines: every store rule is one Lua script, atomic on the server.
 */
export class RedisStore implements Store, MoveStore, AsyncDisposable {
  readonly #redis: RedisConnection;
  /**
   * When this store's settles last pruned, where their walk through the group
   * holds stands, and when its claims last rolled back abandoned stages.
   */
  readonly #upkeep = tick.settleUpkeep();

  private constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  /**
   * Connects to `url` (`redis://…` or `rediss://…`, an optional `prefix`
   * parameter), checks the server (Redis 7 or later, `noeviction`) and
   * migrates the store's layout.
   */
  static async open(url: string, given: RedisStoreOptions = {}): Promise<RedisStore> {
    if (typeof url !== "string") {
      throw new TypeError(`RedisStore.open: url must be a string: got ${shown(url)}`);
    }
    const options = optionBag(given, "RedisStore.open", REDIS_STORE_OPTIONS) ?? {};
    // As QUEUE_DB is read: a space before the URL (left by a .env file) does not hide it.
    url = url.trim();
    if (!isRedisUrl(url)) {
      throw new TypeError(
        `url must start with redis:// or rediss://: got ${shown(redactPassword(url))}`,
      );
    }
    const { server, prefix } = redisUrlParts(url, options.prefix);
    const clock = options.clock ?? "database";
    if (clock !== "database" && clock !== "caller") {
      throw new TypeError(`clock must be "database" or "caller": got ${shown(clock)}`);
    }
    const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    // A longer timer fires at once.
    if (!(connectTimeoutMs >= 100 && connectTimeoutMs <= LONGEST_TIMER_MS)) {
      throw new RangeError(
        `connectTimeoutMs must be a number of ms from 100 to ${LONGEST_TIMER_MS}: got ${
          shown(connectTimeoutMs)
        }`,
      );
    }
    let redis: RedisConnection;
    try {
      redis = await RedisConnection.open(
        { url: server, connectTimeoutMs },
        `{${prefix}}`,
        clock === "database",
      );
    } catch (error) {
      throw new Error(
        `could not connect to Redis at ${redactPassword(url)}: ${
          (error as Error)?.message ?? error
        }`,
        { cause: error },
      );
    }
    const store = new RedisStore(redis);
    try {
      if (options.migrate !== false) await store.migrate(options.migrate ?? {});
    } catch (error) {
      await store.close().catch(() => {});
      throw error;
    }
    return store;
  }

  /**
   * Checks the server (version, eviction policy, persistence), applies the
   * key layouts the store lacks (see {@linkcode Store.migrate}) and writes
   * the store's epoch when it has none; safe to call from several processes
   * at once.
   */
  migrate(options: MigrateOptions = {}): Promise<MigrationPlan> {
    return migrate(this.#redis, options);
  }

  /** See {@linkcode RedisStore.migrationPlan}. */
  migrationPlan(): Promise<MigrationPlan> {
    return layoutPlan(this.#redis);
  }

  /** Inserts jobs in one script; their ids in order. */
  insertJobs(rows: readonly NewJobRow[]): Promise<number[]> {
    return jobWrites.insertJobs(this.#redis, rows);
  }

  /** Runs `fn` with inserts that become visible together when it returns, or not at all. */
  transaction<T>(fn: (tx: StoreTransaction) => T | Promise<T>): Promise<T> {
    return jobWrites.transaction(this.#redis, fn);
  }

  /** Leases up to `request.limit` due jobs in one script. */
  claim(request: ClaimRequest): Promise<ClaimedJob[]> {
    return tick.claim(this.#redis, this.#upkeep, request);
  }

  /** False: a claim is one script, which never passes a due job over. */
  claimPassedOver(_request: Pick<ClaimRequest, "queues" | "names" | "now">): Promise<boolean> {
    return Promise.resolve(false);
  }

  /** Applies settlements and records, confirms starts, and claims, in one script. */
  settle(
    settlements: readonly Settlement[],
    then?: ClaimRequest,
    records?: TickRecords,
  ): Promise<SettleResult> {
    return tick.settle(this.#redis, this.#upkeep, settlements, then, records);
  }

  /** The earliest time after `after` at which a job of `queues` becomes due, or null. */
  nextDueAt(
    queues: readonly string[],
    after: number,
    groupRates?: ClaimRequest["groupRates"],
  ): Promise<number | null> {
    return tick.nextDueAt(this.#redis, queues, after, groupRates);
  }

  /** Extends leases to `until`; the ids whose lease was lost. */
  renew(leases: readonly Lease[], until: number, now: number): Promise<number[]> {
    return tick.renew(this.#redis, leases, until, now);
  }

  /** Calls `listener` when another connection may have added or freed jobs. */
  watch(listener: () => void): Disposable {
    return this.#redis.watch(listener);
  }

  /** See {@linkcode Store.insertKeyed}. */
  insertKeyed(rows: readonly KeyedJobRow[]): Promise<KeyedInsert[]> {
    return keys.insertKeyed(this.#redis, rows);
  }

  /** See {@linkcode Store.acquire}. */
  acquire(requests: readonly MiddlewareRequest[], now: number): Promise<(number | null)[]> {
    return keys.acquire(this.#redis, requests, now);
  }

  /** See {@linkcode Store.insertChain}. */
  insertChain(chain: NewChainRow): Promise<number> {
    return chainsBatches.insertChain(this.#redis, chain);
  }

  /** See {@linkcode Store.insertBatch}. */
  insertBatch(batch: NewBatchRow): Promise<InsertedBatch> {
    return chainsBatches.insertBatch(this.#redis, batch);
  }

  /** See {@linkcode Store.addToBatch}. */
  addToBatch(batchId: number, rows: readonly NewJobRow[]): Promise<number[]> {
    return chainsBatches.addToBatch(this.#redis, batchId, rows);
  }

  /** See {@linkcode Store.insertFlow}. */
  insertFlow(flow: NewFlowRow): Promise<InsertedFlow> {
    return flows.insertFlow(this.#redis, flow);
  }

  /** See {@linkcode Store.flow}. */
  flow(id: number): Promise<FlowRow | null> {
    return flows.flow(this.#redis, id);
  }

  /** See {@linkcode Store.flows}. */
  flows(page: Page): Promise<FlowRow[]> {
    return flows.flows(this.#redis, page);
  }

  /** See {@linkcode Store.pruneFlows}. */
  pruneFlows(before: number, now: number): Promise<number> {
    return flows.pruneFlows(this.#redis, before, now);
  }

  /** See {@linkcode Store.cancelFlow}. */
  cancelFlow(request: CancelFlowRequest): Promise<CancelledFlow | null> {
    return flows.cancelFlow(this.#redis, request);
  }

  /** See {@linkcode Store.batch}. */
  batch(id: number): Promise<BatchRow | null> {
    return chainsBatches.batch(this.#redis, id);
  }

  /** See {@linkcode Store.batches}. */
  batches(page: Page): Promise<BatchRow[]> {
    return chainsBatches.batches(this.#redis, page);
  }

  /** See {@linkcode Store.cancelBatch}. */
  cancelBatch(id: number, now: number): Promise<boolean> {
    return chainsBatches.cancelBatch(this.#redis, id, now);
  }

  /** See {@linkcode Store.pruneBatches}. */
  pruneBatches(before: number, now: number): Promise<number> {
    return chainsBatches.pruneBatches(this.#redis, before, now);
  }

  /** See {@linkcode Store.result}. */
  result(id: number, now: number): Promise<JobResultRow | null> {
    return jobControl.result(this.#redis, id, now);
  }

  /** See {@linkcode Store.results}. */
  results(ids: readonly number[], now: number): Promise<Map<number, JobResultRow>> {
    return jobControl.results(this.#redis, ids, now);
  }

  /** See {@linkcode Store.finished}. */
  finished(filter: FinishedFilter, page: Page): Promise<FinishedJob[]> {
    return jobControl.finished(this.#redis, filter, page);
  }

  /** See {@linkcode Store.finishedJob}. */
  finishedJob(id: number): Promise<FinishedJob | null> {
    return jobControl.finishedJob(this.#redis, id);
  }

  /** See {@linkcode Store.pruneFinished}. */
  pruneFinished(before: number, now: number): Promise<number> {
    return jobControl.pruneFinished(this.#redis, before, now);
  }

  /** See {@linkcode Store.markAwaited}. */
  markAwaited(id: number): Promise<boolean> {
    return jobControl.markAwaited(this.#redis, id);
  }

  /** See {@linkcode Store.cancel}. */
  cancel(request: CancelRequest): Promise<CancelOutcome> {
    return jobControl.cancel(this.#redis, request);
  }

  /** See {@linkcode Store.cancelsAsked}. */
  cancelsAsked(leases: readonly Lease[]): Promise<CancelRequested[]> {
    return jobControl.cancelsAsked(this.#redis, leases);
  }

  /** See {@linkcode Store.pause}. */
  pause(queue: string, now: number, until: number | null, reason: string | null): Promise<void> {
    return jobControl.pause(this.#redis, queue, now, until, reason);
  }

  /** See {@linkcode Store.resume}. */
  resume(queue: string, now: number): Promise<boolean> {
    return jobControl.resume(this.#redis, queue, now);
  }

  /** See {@linkcode Store.paused}. */
  paused(now: number): Promise<PausedQueue[]> {
    return jobControl.paused(this.#redis, now);
  }

  /** See {@linkcode Store.pauseGroup}. */
  pauseGroup(name: string, key: string, now: number, until: number | null): Promise<void> {
    return groups.pauseGroup(this.#redis, name, key, now, until);
  }

  /** See {@linkcode Store.resumeGroup}. */
  resumeGroup(name: string, key: string, now: number): Promise<boolean> {
    return groups.resumeGroup(this.#redis, name, key, now);
  }

  /** See {@linkcode Store.pausedGroups}. */
  pausedGroups(now: number, page: Page): Promise<PausedGroup[]> {
    return groups.pausedGroups(this.#redis, now, page);
  }

  /** See {@linkcode Store.failed}. */
  failed(page: Page): Promise<FailedJob[]> {
    return failedJobs.failed(this.#redis, page);
  }

  /** See {@linkcode Store.failedJob}. */
  failedJob(id: number): Promise<FailedJob | null> {
    return failedJobs.failedJob(this.#redis, id);
  }

  /** See {@linkcode Store.unfinishedJob}. */
  unfinishedJob(id: number): Promise<UnfinishedJobRow | null> {
    return failedJobs.unfinishedJob(this.#redis, id);
  }

  /** See {@linkcode Store.retry}. */
  retry(
    ids: readonly number[] | "all" | { readonly batchId: number },
    now: number,
  ): Promise<number[]> {
    return failedJobs.retry(this.#redis, ids, now);
  }

  /** See {@linkcode Store.forget}. */
  forget(id: number): Promise<boolean> {
    return failedJobs.forget(this.#redis, id);
  }

  /** See {@linkcode Store.flushFailed}. */
  flushFailed(): Promise<number> {
    return failedJobs.flushFailed(this.#redis);
  }

  /** See {@linkcode Store.pruneFailed}. */
  pruneFailed(before: number, now: number): Promise<number> {
    return failedJobs.pruneFailed(this.#redis, before, now);
  }

  /** See {@linkcode Store.clear}. */
  clear(queue: string | undefined, now: number): Promise<number> {
    return failedJobs.clear(this.#redis, queue, now);
  }

  /** See {@linkcode Store.counts}. */
  counts(now: number): Promise<QueueCountsRow[]> {
    return stats.counts(this.#redis, now);
  }

  /** See {@linkcode Store.pendingByName}. */
  pendingByName(now: number): Promise<PendingByName[]> {
    return stats.pendingByName(this.#redis, now);
  }

  /** See {@linkcode Store.running}. */
  running(now: number): Promise<RunningJobOnQueue[]> {
    return stats.running(this.#redis, now);
  }

  /** See {@linkcode Store.jobs}. */
  jobs(filter: JobFilter, page: Page, now: number): Promise<JobList> {
    return stats.jobs(this.#redis, filter, page, now);
  }

  /** See {@linkcode Store.metrics}. */
  metrics(since: number, until: number): Promise<MetricsRow[]> {
    return stats.metrics(this.#redis, since, until);
  }

  /** See {@linkcode Store.heartbeat}. */
  heartbeat(worker: WorkerHeartbeat, staleBefore: number): Promise<SchemaNews> {
    return stats.heartbeat(this.#redis, worker, LAYOUT_VERSION, staleBefore);
  }

  /** See {@linkcode Store.removeWorker}. */
  removeWorker(id: string): Promise<boolean> {
    return stats.removeWorker(this.#redis, id);
  }

  /** See {@linkcode Store.workers}. */
  workers(seenSince: number, now: number): Promise<WorkerInfo[]> {
    return stats.workers(this.#redis, seenSince, now);
  }

  /** See {@linkcode Store.logs}. */
  logs(jobId: number): Promise<LogLineRow[]> {
    return jobLogs.logs(this.#redis, jobId);
  }

  /** See {@linkcode Store.jobSteps}. */
  jobSteps(id: number): Promise<JobStepsRow> {
    return steps.jobSteps(this.#redis, id);
  }

  /** See {@linkcode Store.signal}. */
  signal(request: SignalRequest): Promise<SignalOutcome> {
    return steps.signal(this.#redis, request);
  }

  /** See {@linkcode Store.syncSchedules}. */
  syncSchedules(rows: readonly ScheduleRow[], now: number): Promise<void> {
    return schedules.syncSchedules(this.#redis, rows, now);
  }

  /** See {@linkcode Store.schedules}. */
  schedules(): Promise<StoredScheduleRow[]> {
    return schedules.schedules(this.#redis);
  }

  /** See {@linkcode Store.setSchedulePaused}. */
  setSchedulePaused(name: string, paused: boolean, now: number): Promise<boolean> {
    return schedules.setSchedulePaused(this.#redis, name, paused, now);
  }

  /** See {@linkcode Store.forgetSchedule}. */
  forgetSchedule(name: string): Promise<boolean> {
    return schedules.forgetSchedule(this.#redis, name);
  }

  /** See {@linkcode Store.runSchedule}. */
  runSchedule(name: string, runs: readonly ScheduleRun[], now: number): Promise<(number | null)[]> {
    return schedules.runSchedule(this.#redis, name, runs, now);
  }

  /** See {@linkcode MoveStore.fenceForMove}: `moved_to` in the store's meta hash. */
  fenceForMove(to: string, now: number): Promise<MoveFence> {
    return moving.fenceForMove(this.#redis, to, now);
  }

  /** See {@linkcode MoveStore.moveFence}. */
  moveFence(): Promise<MoveFence | null> {
    return moving.moveFence(this.#redis);
  }

  /** See {@linkcode MoveStore.liftMoveFence}. */
  liftMoveFence(): Promise<boolean> {
    return moving.liftMoveFence(this.#redis);
  }

  /**
   * See {@linkcode MoveStore.exportRows}; `job_steps`, `job_signals` and
   * `job_logs` go by job id, then by their own key.
   */
  exportRows(
    table: TransferTable,
    after: string | null,
    limit: number,
    maxBytes?: number,
  ): Promise<TransferPage> {
    return moveExport.exportRows(this.#redis, table, after, limit, maxBytes);
  }

  /** See {@linkcode MoveStore.importRows}. */
  importRows(table: TransferTable, rows: readonly TransferRow[]): Promise<number> {
    return moveImport.importRows(this.#redis, table, rows);
  }

  /** See {@linkcode MoveStore.countRows}. */
  countRows(table: TransferTable): Promise<number> {
    return moveExport.countRows(this.#redis, table);
  }

  /** See {@linkcode MoveStore.finishImport}. */
  finishImport(): Promise<void> {
    return moveImport.finishImport(this.#redis);
  }

  /**
   * See {@linkcode Store.backup}. Rejects: a Redis server is backed up with
   * its own persistence (an RDB snapshot from `BGSAVE`, or the AOF files),
   * which the error names; see docs/backups.md.
   */
  backup(_file: string): Promise<BackupResult> {
    return Promise.reject(
      new Error(
        "Cannot back up a Redis queue from the queue: use the server's own persistence, " +
          "BGSAVE and then a copy of its RDB file (dump.rdb, once LASTSAVE shows the new save), " +
          "or a copy of its AOF files (appendonly yes); either holds the whole server, not only " +
          "this queue's keys; see docs/backups.md",
      ),
    );
  }

  /** Closes the connections; later calls fail. */
  close(): Promise<void> {
    return this.#redis.close();
  }

  /** Closes the store. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
