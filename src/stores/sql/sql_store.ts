/**
 * The one store of every SQL engine: each storage operation is a script of
 * shared statements and rules, run by an {@linkcode Engine} with the
 * engine's {@linkcode Dialect} for what really differs.
 *
 * @internal
 * @module
 */
import { MetricsRollup } from "./metrics_rollup.ts";
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
import * as chainsBatches from "./chains_batches.ts";
import * as flows from "./flows.ts";
import { type Dialect, PLAIN, type RetrySelection } from "./dialect.ts";
import type { Engine, EngineTransaction } from "./engine.ts";
import { assertAppStatement } from "./app_statement.ts";
import { clear } from "./clear.ts";
import * as failedJobs from "./failed_jobs.ts";
import * as cancels from "./cancel.ts";
import * as finishedJobs from "./finished_jobs.ts";
import * as groupPauses from "./group_pauses.ts";
import * as pauses from "./pauses.ts";
import { PruneSchedule } from "./upkeep.ts";
import * as jobLogs from "./job_logs.ts";
import * as keys from "./keys.ts";
import * as schedules from "./schedules.ts";
import { type Script, wakeAfterCommit } from "./script.ts";
import * as stats from "./stats.ts";
import * as steps from "./steps.ts";
import * as tick from "./tick.ts";
import * as transfer from "./transfer.ts";
import { assertPageBytes, assertTransferTable, MOVE_PAGE_BYTES } from "../rows/transfer.ts";
import { assertTransferRows } from "../rows/transfer_columns.ts";
import type { Migration } from "../../../migrations/migration.ts";
import {
  type MigrateOptions,
  migrateWaiting,
  type MigrationPlan,
  type SchemaNews,
} from "../schema_steps.ts";

/** A store of jobs in a SQL database. */
export class SqlStore implements Store, MoveStore {
  readonly #engine: Engine;
  readonly #dialect: Dialect;
  readonly #migrations: readonly Migration[];
  /** What this store's settles keep between ticks: its metrics shard, and when each prune ran. */
  readonly #upkeep = {
    metrics: new MetricsRollup(),
    finished: new PruneSchedule(),
    logs: new PruneSchedule(),
    rateWindows: new PruneSchedule(),
    holds: groupPauses.holdsWalk(),
  };

  /** Runs on `engine` with `dialect`; `migrations` are the engine's schema steps. */
  constructor(engine: Engine, dialect: Dialect, migrations: readonly Migration[]) {
    this.#engine = engine;
    this.#dialect = dialect;
    this.#migrations = migrations;
  }

  /** See {@linkcode Store.migrate}; a moved store's fence outlives every step applied. */
  async migrate(options: MigrateOptions = {}): Promise<MigrationPlan> {
    // Only code that has the fence's table (a test may open with fewer steps than this release).
    const knowsFences = this.#migrations.some(({ version }) => version === transfer.FENCE_STEP);
    const dialect = this.#dialect;
    const plan = await migrateWaiting(
      () =>
        this.#engine.migrate(
          this.#migrations,
          options,
          true,
          knowsFences
            ? {
              before: () => transfer.fenceOffForSteps(dialect),
              after: () => transfer.keepFence(dialect),
            }
            : undefined,
        ),
      options,
      "schema step",
    );
    // On every open, not only after a step: a store an older release migrated may have lost its
    // fence's triggers with a table a step built anew.
    if (knowsFences && (await this.moveFence()) !== null) {
      await this.#write(() => transfer.keepFence(this.#dialect));
    }
    return plan;
  }

  /** See {@linkcode Store.migrationPlan}. */
  migrationPlan(): Promise<MigrationPlan> {
    return this.#engine.migrate(this.#migrations, {}, false);
  }

  /** Inserts jobs in one transaction (one statement where the engine can); their ids in order. */
  insertJobs(rows: readonly NewJobRow[]): Promise<number[]> {
    // A grouped job's insert also enters its group: two statements, so a transaction.
    const grouped = rows.some((row) => row.group !== null && row.group !== undefined);
    const oneStatement = !grouped && (rows.length === 1 || this.#dialect.insertsInOneStatement);
    return this.#engine.run(
      () => waking(this.#dialect.insertJobs(rows, PLAIN)),
      oneStatement ? "statement" : "write",
    );
  }

  /** Inserts unique or debounced jobs in one transaction, each unless its key is held. */
  insertKeyed(rows: readonly KeyedJobRow[]): Promise<KeyedInsert[]> {
    return this.#write(() => waking(keys.insertKeyed(this.#dialect, rows)));
  }

  /** Checks claimed jobs' middleware in one transaction. */
  acquire(requests: readonly MiddlewareRequest[], now: number): Promise<(number | null)[]> {
    return this.#write(() => keys.acquire(this.#dialect, requests, now));
  }

  /** Inserts a chain's first link and its waiting links in one transaction. */
  insertChain(chain: NewChainRow): Promise<number> {
    return this.#write(() => waking(chainsBatches.insertChain(this.#dialect, chain)));
  }

  /** Inserts a batch with its jobs and callbacks in one transaction. */
  insertBatch(batch: NewBatchRow): Promise<InsertedBatch> {
    return this.#write(() => waking(chainsBatches.insertBatch(this.#dialect, batch)));
  }

  /** Adds counted jobs to a batch that is still running. */
  addToBatch(batchId: number, rows: readonly NewJobRow[]): Promise<number[]> {
    return this.#write(() => waking(chainsBatches.addToBatch(this.#dialect, batchId, rows)));
  }

  /** Inserts a flow: its nodes without parents queued, the others and its catch waiting. */
  insertFlow(flow: NewFlowRow): Promise<InsertedFlow> {
    return this.#write(() => waking(flows.insertFlow(this.#dialect, flow)));
  }

  /** One flow with every node, or null. */
  flow(id: number): Promise<FlowRow | null> {
    return this.#read(() => flows.flow(id));
  }

  /** Flows with every node, newest first. */
  flows(page: Page): Promise<FlowRow[]> {
    return this.#read(() => flows.flows(page));
  }

  /** Deletes the flows that ended before `before`; how many. */
  pruneFlows(before: number, now: number): Promise<number> {
    return this.#write(() => flows.prune(this.#dialect, before, now));
  }

  /** Cancels a flow, its waiting nodes and catch, and its queued and running nodes' jobs. */
  async cancelFlow(request: CancelFlowRequest): Promise<CancelledFlow | null> {
    const done = await this.#write(() => flows.cancelFlow(this.#dialect, request));
    if (done === null) return null;
    const cancelled = [...done.cancelled];
    const cancelling = [...done.cancelling];
    // A node's job whose row another transaction held at that moment (a claim taking it, its
    // start's confirmation, its own settle, which may have put it back for a retry): cancelled
    // now as `cancel` does, so none of them runs on unasked once this returns.
    for (const job of done.held) {
      const outcome = await this.cancel(job);
      if (outcome === "cancelled") cancelled.push(job.id);
      else if (outcome === "cancelling") cancelling.push(job.id);
    }
    return { cancelled, cancelling };
  }

  /** One batch, or null. */
  batch(id: number): Promise<BatchRow | null> {
    return this.#read(() => chainsBatches.batch(id));
  }

  /** Batches, newest first. */
  batches(page: Page): Promise<BatchRow[]> {
    return this.#read(() => chainsBatches.batches(page));
  }

  /** Cancels a running batch, skipping its waiting jobs. */
  cancelBatch(id: number, now: number): Promise<boolean> {
    const dialect = this.#dialect;
    return this.#write(function* () {
      // What the cancel queues (finally callbacks) is due by the store's clock.
      const queued = yield* chainsBatches.cancel(id, yield* dialect.now(now));
      if (queued === null) return false;
      yield* wakeAfterCommit();
      return true;
    });
  }

  /** Deletes batches finished or cancelled before `before`, `now` being the caller's now. */
  pruneBatches(before: number, now: number): Promise<number> {
    return this.#write(() => chainsBatches.prune(this.#dialect, before, now));
  }

  /** Due jobs per queue and job name. */
  pendingByName(now: number): Promise<PendingByName[]> {
    return this.#read(() => stats.pendingByName(this.#dialect, now));
  }

  /** Jobs leased now, with their progress. */
  running(now: number): Promise<RunningJobOnQueue[]> {
    return this.#read(() => stats.running(this.#dialect, now));
  }

  /** Runs `fn` in one transaction: its inserts and queries commit or roll back together. */
  transaction<T>(fn: (tx: StoreTransaction) => T | Promise<T>): Promise<T> {
    const dialect = this.#dialect;
    return this.#engine.transaction(async (tx: EngineTransaction) => {
      const handle: StoreTransaction = {
        insertJobs: (rows) => tx.run(waking(dialect.insertJobs(rows, PLAIN))),
        insertKeyed: (rows) => tx.run(waking(keys.insertKeyed(dialect, rows))),
        insertChain: (chain) => tx.run(waking(chainsBatches.insertChain(dialect, chain))),
        insertBatch: (batch) => tx.run(waking(chainsBatches.insertBatch(dialect, batch))),
        insertFlow: (flow) => tx.run(waking(flows.insertFlow(dialect, flow))),
        query: async <Row>(text: string, params: readonly unknown[] = []) => {
          assertAppStatement(dialect.engine, text, params);
          return await tx.query<Row>(text, params);
        },
      };
      return await fn(handle);
    });
  }

  /** Leases due jobs in one statement. */
  claim(request: ClaimRequest): Promise<ClaimedJob[]> {
    // One transaction: the claim and the keys it releases commit together, and a busy retry
    // cannot claim twice.
    return this.#write(() => tick.claim(this.#dialect, request));
  }

  /** Whether an empty claim passed over a due job (see `WorkerStore.claimPassedOver`). */
  claimPassedOver(request: Pick<ClaimRequest, "queues" | "names" | "now">): Promise<boolean> {
    return this.#engine.run(() => this.#dialect.passedOver(request), "statement");
  }

  /**
   * Applies settlements, each fenced by its token, writes log lines and
   * spans, confirms starts, marks handlers begun, then claims, all in one
   * transaction; except a settle that only marks starts, which runs as
   * unflushed statements, each its own commit (see `tick.onlyMarksStarts`).
   */
  settle(
    settlements: readonly Settlement[],
    then?: ClaimRequest,
    records?: TickRecords,
  ): Promise<SettleResult> {
    return this.#engine.run(
      () => tick.settle(this.#dialect, this.#upkeep, settlements, then, records),
      tick.onlyMarksStarts(settlements, then, records) ? "unflushed statements" : "write",
    );
  }

  /** One job's log, oldest line first. */
  logs(jobId: number): Promise<LogLineRow[]> {
    return this.#read(() => jobLogs.logOf(jobId));
  }

  /** The earliest time after `after` (the caller's now) at which a job of `queues` becomes due, on the caller's clock, or null. */
  nextDueAt(
    queues: readonly string[],
    after: number,
    groupRates?: ClaimRequest["groupRates"],
  ): Promise<number | null> {
    return this.#read(() => tick.nextDueAt(this.#dialect, queues, after, groupRates));
  }

  /** Extends leases in one transaction; returns the ids whose lease was lost. */
  renew(leases: readonly Lease[], until: number, now: number): Promise<number[]> {
    return this.#write(() => this.#dialect.renew(leases, until, now));
  }

  /** Jobs per queue by state, failed jobs included. */
  counts(now: number): Promise<QueueCountsRow[]> {
    return this.#read(() => stats.counts(this.#dialect, now));
  }

  /** A page of the jobs not yet finished that match `filter`, and how many match. */
  jobs(filter: JobFilter, page: Page, now: number): Promise<JobList> {
    return this.#read(() => stats.jobs(this.#dialect, filter, page, now));
  }

  /** The metrics rollup's rows with `since <= minute < until`. */
  metrics(since: number, until: number): Promise<MetricsRow[]> {
    return this.#read(() => stats.metrics(since, until));
  }

  /**
   * Writes a worker's row with the schema step this code was built for,
   * drops those of workers not seen since `staleBefore`, and reads the
   * database's schema news.
   */
  heartbeat(worker: WorkerHeartbeat, staleBefore: number): Promise<SchemaNews> {
    const codeStep = this.#migrations.at(-1)?.version ?? 0;
    return this.#write(() => stats.heartbeat(this.#dialect, worker, codeStep, staleBefore));
  }

  /** Deletes a worker's row; whether it was there. */
  removeWorker(id: string): Promise<boolean> {
    return this.#engine.run(() => stats.removeWorker(id), "statement");
  }

  /** Workers last seen at or after `seenSince`, `now` being the caller's now. */
  workers(seenSince: number, now: number): Promise<WorkerInfo[]> {
    return this.#read(() => stats.workers(this.#dialect, seenSince, now));
  }

  /** Failed jobs, newest first. */
  failed(page: Page): Promise<FailedJob[]> {
    return this.#read(() => stats.failed(page));
  }

  /** One failed job, or null. */
  failedJob(id: number): Promise<FailedJob | null> {
    return this.#read(() => stats.failedJob(id));
  }

  unfinishedJob(id: number): Promise<UnfinishedJobRow | null> {
    return this.#read(() => stats.unfinishedJob(id));
  }

  /** Moves failed jobs back in one transaction; a job is in exactly one table throughout. */
  retry(selection: RetrySelection, now: number): Promise<number[]> {
    return this.#write(() => failedJobs.retry(this.#dialect, selection, now));
  }

  /** Deletes one failed job, and the waiting links of its chain. */
  forget(id: number): Promise<boolean> {
    return this.#write(() => failedJobs.forget(id));
  }

  /** Deletes every failed job. */
  flushFailed(): Promise<number> {
    return this.#write(() => failedJobs.flush());
  }

  /** Deletes failed jobs older than `before`, `now` being the caller's now. */
  pruneFailed(before: number, now: number): Promise<number> {
    return this.#write(() => failedJobs.prune(this.#dialect, before, now));
  }

  /** Deletes waiting and leased jobs of one queue, or of all; batch jobs count as skipped. */
  clear(queue: string | undefined, now: number): Promise<number> {
    return this.#write(() => clear(this.#dialect, queue, now));
  }

  /** Stores the jobs module's schedules in one transaction. */
  syncSchedules(rows: readonly ScheduleRow[], now: number): Promise<void> {
    return this.#write(() => schedules.syncSchedules(this.#dialect, rows, now));
  }

  /** Every stored schedule, by name. */
  schedules(): Promise<StoredScheduleRow[]> {
    return this.#read(() => schedules.listSchedules());
  }

  /** Pauses or resumes a schedule. */
  setSchedulePaused(name: string, paused: boolean, now: number): Promise<boolean> {
    return this.#engine.run(() => schedules.setPaused(name, paused, now), "statement");
  }

  /** Removes a stored schedule, in one transaction. */
  forgetSchedule(name: string): Promise<boolean> {
    return this.#write(() => schedules.forgetSchedule(name));
  }

  /** Stores jobs of a schedule outside its tick, in one transaction. */
  runSchedule(name: string, runs: readonly ScheduleRun[], now: number): Promise<(number | null)[]> {
    return this.#write(() => schedules.runSchedule(this.#dialect, name, runs, now));
  }

  /** Where job `id` stands at `now`, read in one statement. */
  async result(id: number, now: number): Promise<JobResultRow | null> {
    return (await this.results([id], now)).get(id) ?? null;
  }

  /** Where each of the jobs `ids` stands at `now`, read in one statement. */
  results(ids: readonly number[], now: number): Promise<Map<number, JobResultRow>> {
    return this.#read(() => finishedJobs.results(this.#dialect, ids, now));
  }

  /** Kept finished jobs, last finished first. */
  finished(filter: FinishedFilter, page: Page): Promise<FinishedJob[]> {
    return this.#read(() => finishedJobs.finished(filter, page));
  }

  /** One kept finished job, or null. */
  finishedJob(id: number): Promise<FinishedJob | null> {
    return this.#read(() => finishedJobs.finishedJob(id));
  }

  /** Deletes kept finished jobs that finished before `before`, `now` being the caller's now. */
  pruneFinished(before: number, now: number): Promise<number> {
    return this.#write(() => finishedJobs.pruneFinished(this.#dialect, before, now));
  }

  /** Marks a job awaited, then wakes other processes' workers if it was there. */
  markAwaited(id: number): Promise<boolean> {
    return this.#engine.run(() => finishedJobs.markAwaited(id), "statement");
  }

  /** Cancels a job in one transaction. */
  cancel(request: CancelRequest): Promise<CancelOutcome> {
    return this.#write(() => cancels.cancel(this.#dialect, request));
  }

  /** Which of `leases` had a cancel asked. */
  cancelsAsked(leases: readonly Lease[]): Promise<CancelRequested[]> {
    return this.#read(() => cancels.cancelsAsked(leases));
  }

  /** Pauses a queue. */
  pause(queue: string, now: number, until: number | null, reason: string | null): Promise<void> {
    return this.#engine.run(
      () => pauses.pause(this.#dialect, queue, now, until, reason),
      "write",
    );
  }

  /** Resumes a queue and wakes idle workers. */
  resume(queue: string, now: number): Promise<boolean> {
    return this.#write(() => pauses.resume(this.#dialect, queue, now));
  }

  /** The queues paused at `now`. */
  paused(now: number): Promise<PausedQueue[]> {
    return this.#read(() => pauses.paused(this.#dialect, now));
  }

  /** Pauses a group, until `until` or until resumed when null. */
  pauseGroup(name: string, key: string, now: number, until: number | null): Promise<void> {
    return this.#engine.run(
      () => groupPauses.pauseGroup(this.#dialect, name, key, now, until),
      "write",
    );
  }

  /** Resumes a group and wakes idle workers. */
  resumeGroup(name: string, key: string, now: number): Promise<boolean> {
    return this.#write(() => groupPauses.resumeGroup(this.#dialect, name, key, now));
  }

  /** The groups paused or held at `now`, by job name then key, the slice `page` of them. */
  pausedGroups(now: number, page: Page): Promise<PausedGroup[]> {
    return this.#read(() => groupPauses.pausedGroups(this.#dialect, now, page));
  }

  /** Job `id`'s step memos by `seq` and its mailbox, oldest signal first. */
  jobSteps(id: number): Promise<JobStepsRow> {
    return this.#read(() => steps.jobSteps(id));
  }

  /** Sends a signal to a job in one transaction, waking idle workers when it made the job due. */
  signal(request: SignalRequest): Promise<SignalOutcome> {
    return this.#write(() => steps.signal(this.#dialect, request));
  }

  /** See {@linkcode MoveStore.fenceForMove}: the row in `queue_moves`, then the triggers. */
  async fenceForMove(to: string, now: number): Promise<MoveFence> {
    if (typeof to !== "string" || to === "") {
      throw new TypeError(`fenceForMove: to must name the destination: got ${JSON.stringify(to)}`);
    }
    return await this.#write(() => transfer.fence(this.#dialect, to, now));
  }

  /** See {@linkcode MoveStore.moveFence}. */
  moveFence(): Promise<MoveFence | null> {
    return this.#read(() => transfer.moveFence());
  }

  /** See {@linkcode MoveStore.liftMoveFence}: drops the triggers and the row. */
  liftMoveFence(): Promise<boolean> {
    return this.#write(() => transfer.liftFence(this.#dialect));
  }

  /**
   * See {@linkcode MoveStore.exportRows}: keyset pages, the cursor being the
   * last row's key as JSON; the text bytes of the rows read before the rows.
   */
  async exportRows(
    table: TransferTable,
    after: string | null,
    limit: number,
    maxBytes: number = MOVE_PAGE_BYTES,
  ): Promise<TransferPage> {
    assertTransferTable(table);
    if (!Number.isSafeInteger(limit) || limit < 1) {
      throw new RangeError(`exportRows: limit must be a whole number >= 1: got ${limit}`);
    }
    assertPageBytes(maxBytes);
    return await this.#read(() =>
      transfer.exportRows(this.#dialect, table, after, limit, maxBytes)
    );
  }

  /** See {@linkcode MoveStore.importRows}: insert-or-ignore on each table's key, one transaction. */
  async importRows(table: TransferTable, rows: readonly TransferRow[]): Promise<number> {
    assertTransferRows(table, rows);
    if (rows.length === 0) return 0;
    return await this.#write(() => transfer.importRows(this.#dialect, table, rows));
  }

  /** See {@linkcode MoveStore.countRows}. */
  async countRows(table: TransferTable): Promise<number> {
    assertTransferTable(table);
    return await this.#read(() => transfer.countRows(this.#dialect, table));
  }

  /** See {@linkcode MoveStore.finishImport}: `sqlite_sequence` or the identity sequences. */
  finishImport(): Promise<void> {
    return this.#write(() => transfer.moveIdCountersPast(this.#dialect));
  }

  /** Calls `listener` soon after another connection may have added or freed jobs. */
  watch(listener: () => void): Disposable {
    return this.#engine.watch(listener);
  }

  /** See {@linkcode Store.backup}: the engine copies its database, or says which tools do. */
  backup(file: string): Promise<BackupResult> {
    return this.#engine.backup(file);
  }

  /** See {@linkcode Store.startClosing}: what the engine needs of it, if anything. */
  startClosing(waitMs: number): void {
    this.#engine.startClosing?.(waitMs);
  }

  /** Closes the connection; later calls fail. */
  close(): Promise<void> {
    return this.#engine.close();
  }

  /** Same as {@linkcode SqlStore.close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #write<T>(start: () => Script<T>): Promise<T> {
    return this.#engine.run(start, "write");
  }

  #read<T>(start: () => Script<T>): Promise<T> {
    return this.#engine.run(start, "statement");
  }
}

/**
 * `script`, then a wake-up of other processes' workers once it commits: a
 * dispatch's jobs may be due now, or sooner than what idle workers sleep
 * until.
 */
function* waking<T>(script: Script<T>): Script<T> {
  const result = yield* script;
  yield* wakeAfterCommit();
  return result;
}
