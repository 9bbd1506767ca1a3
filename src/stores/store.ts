/**
 * What a store offers, as roles: {@linkcode JobWrites} for dispatching,
 * {@linkcode WorkerStore} for a worker's tick, {@linkcode AdminStore} and
 * {@linkcode StatsStore} for people, and {@linkcode Store}, all of them
 * with its lifetime, for whoever opens and closes one. Each caller depends
 * on the role it uses. A store owns its SQL; nothing outside a store builds
 * a statement. The row types a store takes and gives are re-exported here.
 *
 * The store interface is not stable: not for implementing a third-party
 * store yet. Its methods and row types may change in any release while the
 * stores that ship with the queue (SQLite, PostgreSQL) are still growing.
 *
 * @experimental
 * @module
 */
import type {
  InsertedBatch,
  KeyedInsert,
  KeyedJobRow,
  NewBatchRow,
  NewChainRow,
  NewJobRow,
} from "./rows/dispatch.ts";
import type {
  BatchRow,
  FailedJob,
  JobFilter,
  JobList,
  MetricsRow,
  Page,
  PendingByName,
  QueueCountsRow,
  RunningJobOnQueue,
  WorkerHeartbeat,
  WorkerInfo,
} from "./rows/read.ts";
import type { ScheduleRow, ScheduleRun, StoredScheduleRow } from "./rows/schedules.ts";
import type {
  CancelOutcome,
  CancelRequest,
  CancelRequested,
  FinishedFilter,
  FinishedJob,
  JobResultRow,
  PausedGroup,
  PausedQueue,
} from "./rows/job_control.ts";
import type {
  ClaimedJob,
  ClaimRequest,
  Lease,
  MiddlewareRequest,
  Settlement,
  SettleResult,
} from "./rows/tick.ts";
import type { LogLineRow, TickRecords } from "./rows/logs.ts";
import type { JobStepsRow, SignalOutcome, SignalRequest } from "./rows/steps.ts";
import type { MigrateOptions, MigrationPlan, SchemaNews } from "./schema_steps.ts";
import type {
  CancelFlowRequest,
  CancelledFlow,
  FlowRow,
  InsertedFlow,
  NewFlowRow,
} from "./rows/flows.ts";
import type { MoveFence, TransferPage, TransferRow, TransferTable } from "./rows/transfer.ts";

export type * from "./rows/dispatch.ts";
export type * from "./rows/job_control.ts";
export type * from "./rows/logs.ts";
export type * from "./rows/read.ts";
export type * from "./rows/tick.ts";
export type * from "./rows/schedules.ts";
export type * from "./rows/steps.ts";
export type * from "./rows/flows.ts";
export type * from "./rows/transfer.ts";
export { TRANSFER_TABLES } from "./rows/transfer.ts";
export type { SpendLimits } from "./rows/spend_limits.ts";
export type {
  MigrateOptions,
  MigrationPlan,
  OlderWorker,
  PlannedStep,
  SchemaNews,
  SchemaStepKind,
} from "./schema_steps.ts";
export { FROM_PREVIOUS_OUTPUT } from "./rows/dispatch.ts";
export {
  METRICS_CARRIED_MINUTE,
  METRICS_RETENTION_MS,
  RUNTIME_BUCKETS_MS,
  runtimeBucket,
} from "./rows/read.ts";

/** The part of a store usable inside {@linkcode Store.transaction}. */
export interface StoreTransaction {
  /** Inserts jobs as part of the transaction; returns their ids in order. */
  insertJobs(rows: readonly NewJobRow[]): Promise<number[]>;
  /** Inserts keyed jobs as part of the transaction. */
  insertKeyed(rows: readonly KeyedJobRow[]): Promise<KeyedInsert[]>;
  /** Inserts a chain as part of the transaction; returns its id. */
  insertChain(chain: NewChainRow): Promise<number>;
  /** Inserts a batch as part of the transaction. */
  insertBatch(batch: NewBatchRow): Promise<InsertedBatch>;
  /** Inserts a flow as part of the transaction. */
  insertFlow(flow: NewFlowRow): Promise<InsertedFlow>;
  /**
   * Runs the app's own statement inside the transaction and returns its rows.
   * Parameters use the engine's placeholders (`?` for SQLite).
   */
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
}

/** Writes that dispatch jobs: what `Queue`, its transactions and the builders use. */
export interface JobWrites {
  /** Inserts jobs in one transaction; returns their ids in order. */
  insertJobs(rows: readonly NewJobRow[]): Promise<number[]>;
  /**
   * Inserts unique or debounced jobs in one transaction, each unless its key
   * already names a job that holds it; says what happened to each row.
   */
  insertKeyed(rows: readonly KeyedJobRow[]): Promise<KeyedInsert[]>;
  /** Inserts a chain's first link and its waiting links in one transaction; returns the chain's id. */
  insertChain(chain: NewChainRow): Promise<number>;
  /**
   * Inserts a batch, its jobs and its callbacks in one transaction. A batch
   * without jobs is finished at once and queues its callbacks.
   */
  insertBatch(batch: NewBatchRow): Promise<InsertedBatch>;
  /**
   * Adds jobs to a batch that is neither cancelled nor finished, counting
   * them, in one transaction; returns their ids. Rejects naming the reason otherwise.
   */
  addToBatch(batchId: number, rows: readonly NewJobRow[]): Promise<number[]>;
  /**
   * Inserts a flow in one transaction: its nodes without parents as jobs,
   * the others and its catch waiting.
   */
  insertFlow(flow: NewFlowRow): Promise<InsertedFlow>;
  /** Runs `fn` in one transaction: its inserts and queries commit or roll back together. */
  transaction<T>(fn: (tx: StoreTransaction) => T | Promise<T>): Promise<T>;
}

/** What a worker's tick needs: claim, settle, renew, middleware, its heartbeat and wake-ups. */
export interface WorkerStore {
  /**
   * Leases up to `limit` due jobs in one statement, in claim order (the
   * order a worker starts them in: grouped jobs round by round across
   * their groups, one of each group before a second of any). Each
   * claimed job keeps how long it had been due (`now` less the due time the
   * claim replaced: its dispatch or release time, or the end of a dead
   * worker's lease) until it settles, for the metrics rollup.
   */
  claim(request: ClaimRequest): Promise<ClaimedJob[]>;
  /**
   * Whether a claim for `request`'s queues and names that came back empty
   * may have passed over a job it could take, due at `request.now`: then
   * the queues are not empty. Only PostgreSQL's claim passes one over,
   * skipping the rows another transaction holds for a moment (`SKIP
   * LOCKED`: a `dispatchAndWait()` marking its job awaited, an admin action
   * on it, and for a grouped job its group's row, which a dispatch into the
   * group locks until it commits); it answers from what is committed and
   * from which transactions are open, without taking or waiting for a lock.
   * A group with a due job whose row is locked counts whatever its own
   * rules (limit, order, rate) would give: the claim asked again applies
   * them. SQLite's
   * and Redis's claims never pass a due job over: false. A worker that
   * stops once its queues are empty asks before it stops.
   */
  claimPassedOver(request: Pick<ClaimRequest, "queues" | "names" | "now">): Promise<boolean>;
  /**
   * Applies settlements in one transaction and, when `then` is given, claims
   * the next jobs in that same transaction (one commit per worker tick).
   *
   * The same transaction adds to the metrics rollup, one upsert per (minute
   * of `at`, queue, name): each applied `complete` counts in `completed`,
   * `fail` in `failed`, and `release` with a non-null `error` and no
   * `refundAttempt` in `retried`, `cancel` with `expired` in `expired`.
   * Each of the first three that carries
   * `durationMs` adds it to `runtimeMs` and to its bucket
   * ({@linkcode runtimeBucket}), and adds the job's wait (see
   * {@linkcode Store.claim}) to `waitMs`. Progress writes and settlements
   * that did not apply count nowhere. Rows of minutes more than
   * {@linkcode METRICS_RETENTION_MS} before `at` are deleted and added to
   * the rows of {@linkcode METRICS_CARRIED_MINUTE} (per queue and name), at
   * most once a minute (of `at`) per store instance, each deleted row counted
   * there once however many stores prune at once: the rollup's totals never
   * fall.
   *
   * `records`, in the same transaction: the log lines handlers wrote (each
   * job's lines kept under `maxBytesPerJob`, the oldest dropped and one
   * `cap` line saying how many), and the span of each attempt whose release
   * applied (kept on its job for the next attempt to link to). Lines of jobs
   * in none of the jobs, the failed jobs and the kept finished jobs are
   * pruned at most once a minute.
   */
  settle(
    settlements: readonly Settlement[],
    then?: ClaimRequest,
    records?: TickRecords,
  ): Promise<SettleResult>;
  /**
   * The earliest time after `after` at which a job of `queues` becomes due
   * (a delayed job, a retry's backoff, or a lease that runs out), or null
   * when none will: an idle worker sleeps until then instead of until its
   * next poll. One index seek per queue. With `groupRates` (as a claim
   * request carries them), a group that has a job due now but is over its
   * rate limit becomes due when its window turns.
   */
  nextDueAt(
    queues: readonly string[],
    after: number,
    groupRates?: ClaimRequest["groupRates"],
  ): Promise<number | null>;
  /**
   * Extends leases to `until`, `now` being the caller's now (a store on the
   * database's clock extends them as long after its own now); returns the
   * ids whose lease was lost.
   */
  renew(leases: readonly Lease[], until: number, now: number): Promise<number[]>;
  /**
   * Checks the middleware of claimed jobs in one transaction, in order: a job
   * whose every rule passes takes its locks and counts its starts and gets
   * null; another takes nothing and gets the time to try again, on the
   * caller's clock (as every time it is given and every release). Locks are
   * released by the job's settle, whatever its kind, or expire. A job let
   * through that its claim started (not one claimed ahead) starts now: a
   * unique key it holds until processing is released (its claim, asked with
   * its name in `checkedNames`, kept it); a job held back keeps its key.
   */
  acquire(requests: readonly MiddlewareRequest[], now: number): Promise<(number | null)[]>;
  /**
   * Writes a worker's row, replacing the one with its id (its start time is
   * kept from the first), and deletes the rows of workers last seen before
   * `staleBefore` (those that died without removing theirs). The row's
   * `lastSeenAt` is the caller's now: a store on the database's clock
   * stamps its own now and moves the other times by as much. The row
   * records the schema step the store's code was built for; the reply is
   * what the database's schema says to that code (a newer contract step
   * means the worker must stop: docs/upgrading.md).
   */
  heartbeat(worker: WorkerHeartbeat, staleBefore: number): Promise<SchemaNews>;
  /** Deletes a worker's row; whether it was there. */
  removeWorker(id: string): Promise<boolean>;
  /** Which of `leases` (running jobs) had a cancel asked (`queue.cancel()`), with the reason. */
  cancelsAsked(leases: readonly Lease[]): Promise<CancelRequested[]>;
  /**
   * Calls `listener` soon after another connection (maybe another process)
   * may have added or freed jobs, so idle workers look at once instead of at
   * their next poll. Best effort: a store that cannot watch never calls it,
   * and workers keep polling. Dispose the result to stop.
   */
  watch(listener: () => void): Disposable;
}

/** What {@linkcode AdminStore.unfinishedJob} reads of a job. */
export interface UnfinishedJobRow {
  /** The payload as stored: JSON, or an encrypted envelope. */
  readonly payload: string;
  /** The error of its last attempt, or why it was put back, or null. */
  readonly lastError: string | null;
}

/** What the admin commands change and read: failed jobs, batches, clearing queues. */
export interface AdminStore {
  /** Failed jobs, newest first. */
  failed(page: Page): Promise<FailedJob[]>;
  /** One failed job, or null. */
  failedJob(id: number): Promise<FailedJob | null>;
  /**
   * A job not yet finished (pending, delayed or running): its payload as
   * stored and the error of its last attempt; null when there is none.
   */
  unfinishedJob(id: number): Promise<UnfinishedJobRow | null>;
  /**
   * Moves failed jobs back to their queues, due at `now`, with fresh attempts;
   * `"all"` for every one, `{ batchId }` for the failed jobs of one batch.
   * A batch job moved back is pending in its batch again. Returns the ids
   * moved; an id already gone is skipped.
   */
  retry(
    ids: readonly number[] | "all" | { readonly batchId: number },
    now: number,
  ): Promise<number[]>;
  /** Deletes one failed job; whether it existed. A chain it was a link of loses its waiting links. */
  forget(id: number): Promise<boolean>;
  /** Deletes every failed job; how many. */
  flushFailed(): Promise<number>;
  /**
   * Deletes failed jobs that failed before `before`, `now` being the
   * caller's now (a store on the database's clock cuts as long before its
   * own now); how many.
   */
  pruneFailed(before: number, now: number): Promise<number>;
  /**
   * Deletes jobs waiting in `queue` (every queue when omitted), leased ones
   * included; batch jobs among them count as skipped, and a batch left with
   * nothing pending finishes at `now`. Returns how many.
   */
  clear(queue: string | undefined, now: number): Promise<number>;
  /** One batch, or null. */
  batch(id: number): Promise<BatchRow | null>;
  /** Batches, newest first. */
  batches(page: Page): Promise<BatchRow[]>;
  /**
   * Cancels a batch that is neither cancelled nor finished: its jobs that are
   * not running are skipped, and its finally callbacks are queued if nothing
   * is left pending. Returns false (changing nothing) otherwise.
   */
  cancelBatch(id: number, now: number): Promise<boolean>;
  /**
   * Deletes batches that ended (nothing pending, cancelled or not: a
   * cancelled batch with a member still running has not ended) before
   * `before` (`now` being the caller's now, as for
   * {@linkcode AdminStore.pruneFailed}), with their waiting callbacks; how
   * many.
   */
  pruneBatches(before: number, now: number): Promise<number>;
  /** One flow with every node, or null. */
  flow(id: number): Promise<FlowRow | null>;
  /** Flows with every node, newest first. */
  flows(page: Page): Promise<FlowRow[]>;
  /**
   * Deletes the flows that ended (no node waiting, queued or running,
   * cancelled or not: a flow's age counts from when its last node ended,
   * not from its dispatch) before `before` (`now` being the caller's now,
   * as for {@linkcode AdminStore.pruneFailed}), with their nodes, edges and
   * the jobs still waiting for them; how many flows. Their nodes' jobs,
   * finished or failed, are not touched.
   */
  pruneFlows(before: number, now: number): Promise<number>;
  /**
   * Cancels a flow in one transaction: marks it cancelled, its waiting nodes
   * cancelled, and drops its catch; cancels the jobs of its queued nodes
   * (a job claimed ahead, not started, counts as queued) and asks its
   * running ones to stop, each as `cancel` does, so no claim after it takes
   * one of its nodes. Where the engine locks rows, a node's job whose row
   * another transaction holds at that moment (a claim, a start
   * confirmation, its settle) is cancelled as `cancel` does right after the
   * transaction, before this returns. Null, changing nothing, when there is
   * no such flow or it has ended (no node waiting, queued or running), as
   * that transaction reads it. A node that succeeds afterwards queues no
   * child.
   */
  cancelFlow(request: CancelFlowRequest): Promise<CancelledFlow | null>;
}

/** What the dashboard and stats read: counts, running and listed jobs, metrics, workers. */
export interface StatsStore {
  /** Jobs per queue by state, at `now`. */
  counts(now: number): Promise<QueueCountsRow[]>;
  /** Due jobs per queue and job name, at `now`, by queue then name. */
  pendingByName(now: number): Promise<PendingByName[]>;
  /** Jobs leased now, with their progress, in id order. */
  running(now: number): Promise<RunningJobOnQueue[]>;
  /**
   * Jobs not yet finished that match `filter` (states as of `now`, see
   * {@linkcode JobState}), in id order, one page of them, with how many match
   * in all.
   */
  jobs(filter: JobFilter, page: Page, now: number): Promise<JobList>;
  /** The metrics rollup's rows with `since <= minute < until`, by minute, then queue, then name. */
  metrics(since: number, until: number): Promise<MetricsRow[]>;
  /**
   * Workers last seen at or after `seenSince`, `now` being the caller's now
   * (a store on the database's clock looks as far back from its own now),
   * earliest started first, then by id.
   */
  workers(seenSince: number, now: number): Promise<WorkerInfo[]>;
  /** One job's log (what its handler wrote with `ctx.log()`), oldest line first. */
  logs(jobId: number): Promise<LogLineRow[]>;
}

/**
 * Schedules: what `Queue.open` syncs, and what the admin commands read and
 * change. Their slots are fired by the worker's claim ({@linkcode ClaimRequest.schedules}).
 */
export interface ScheduleStore {
  /**
   * Stores the schedules one process defines, in one transaction: adds new
   * ones, updates changed ones (a changed cron, interval or time zone starts
   * again at its first slot after now: the database's now on a store that
   * goes by its clock, else `now`); schedules not in `rows`, paused state
   * and last runs are left as they are.
   */
  syncSchedules(rows: readonly ScheduleRow[], now: number): Promise<void>;
  /** Every stored schedule, by name. */
  schedules(): Promise<StoredScheduleRow[]>;
  /** Pauses or resumes a schedule; false when it is not stored. */
  setSchedulePaused(name: string, paused: boolean, now: number): Promise<boolean>;
  /**
   * Removes a stored schedule, with its state and the record of the slots
   * it fired whose jobs have ended (the jobs still stored stay); false when
   * it is not stored.
   */
  forgetSchedule(name: string): Promise<boolean>;
  /**
   * Stores jobs of a schedule outside its slot sequence or tick (a trigger,
   * a backfill) in one transaction; for each run its job's id, or null when
   * its slot was fired already or the job's unique key is held.
   */
  runSchedule(name: string, runs: readonly ScheduleRun[], now: number): Promise<(number | null)[]>;
}

/** Job control: results and the kept history, awaiting, cancelling, pausing queues. */
export interface JobControlStore {
  /** Where job `id` stands at `now`, or null when no table holds it. */
  result(id: number, now: number): Promise<JobResultRow | null>;
  /**
   * Where each of the jobs `ids` stands at `now`, read at once: by id, with
   * no entry for a job no table holds.
   */
  results(ids: readonly number[], now: number): Promise<Map<number, JobResultRow>>;
  /** Kept finished jobs matching `filter`, last finished first. */
  finished(filter: FinishedFilter, page: Page): Promise<FinishedJob[]>;
  /** One kept finished job, or null. */
  finishedJob(id: number): Promise<FinishedJob | null>;
  /**
   * Deletes kept finished jobs that finished before `before` (`now` being
   * the caller's now, as for {@linkcode AdminStore.pruneFailed}); how many.
   */
  pruneFinished(before: number, now: number): Promise<number>;
  /** Marks a job awaited, so the settle that ends it wakes watchers; whether it is still there. */
  markAwaited(id: number): Promise<boolean>;
  /**
   * Cancels a job in one transaction: one not running is deleted, recorded
   * as cancelled, counted as skipped in its batch, stops its chain (whose
   * `catch` is queued) and releases its keys and locks; a running one gets
   * its cancel asked, which its worker sees.
   */
  cancel(request: CancelRequest): Promise<CancelOutcome>;
  /** Pauses `queue` (claims skip it) until `until`, or until resumed when null. */
  pause(queue: string, now: number, until: number | null, reason: string | null): Promise<void>;
  /** Resumes `queue` and wakes idle workers; whether it was paused. */
  resume(queue: string, now: number): Promise<boolean>;
  /** The queues paused at `now`. */
  paused(now: number): Promise<PausedQueue[]>;
  /**
   * Pauses group `key` of job `name`, in every queue: claims skip its jobs
   * (and a job of it held ahead does not start); running ones go on. With
   * `until` (the caller's clock; a store on its own clock holds as long
   * after its now) the pause ends on its own then; null: until resumed. A
   * pause in force is never shortened: one without an end keeps none, and
   * of two ends the later wins.
   */
  pauseGroup(name: string, key: string, now: number, until: number | null): Promise<void>;
  /**
   * Resumes group `key` of job `name` (ending a hold early) and wakes idle
   * workers; whether it was paused at `now`.
   */
  resumeGroup(name: string, key: string, now: number): Promise<boolean>;
  /**
   * The groups paused or held at `now`, by job name then key, the slice
   * `page` of them: a hold whose end has passed is not listed.
   */
  pausedGroups(now: number, page: Page): Promise<PausedGroup[]>;
}

/**
 * Durable steps: the memos a job's handler left (written by its worker as
 * `step` and `park` settlements) and its mailbox of signals.
 */
export interface StepStore {
  /**
   * Job `id`'s memos (by `seq`) and the signals waiting in its mailbox
   * (oldest first); both empty when it has none. Memos and signals are kept
   * while the job is unfinished, failed, or kept finished, and pruned with
   * the log lines once it is in none of those.
   */
  jobSteps(id: number): Promise<JobStepsRow>;
  /**
   * Sends a signal to a job, in one transaction: an unfinished job keeps it
   * in its mailbox (`"buffered"`), and one parked in a wait for a signal of
   * that name is due at once (`"delivered"`, idle workers woken); an ended
   * job (failed, or kept finished) answers `"finished"` and an unknown one
   * `"not-found"`, storing nothing.
   */
  signal(request: SignalRequest): Promise<SignalOutcome>;
}

/**
 * Moving a queue to another store (docs/moving.md): the source's side (a
 * fence, then pages of rows) and the destination's (rows stored once each,
 * then the id counters moved past them). Rows are in the SQL schema's
 * layout whatever the store ({@linkcode TransferRow}); the store's id
 * counters are the rows of `id_counters` (`ID_COUNTERS_TABLE`).
 */
export interface MoveStore {
  /**
   * Marks this store moved to `to`, in one write: from then on every write
   * of the queue (a dispatch, a claim, a settle, an admin action) is refused
   * with an error naming `to`; reads go on. A fence already there is kept
   * and given back, so a move run again fences nothing twice.
   */
  fenceForMove(to: string, now: number): Promise<MoveFence>;
  /** The fence a move left on this store, or null when it has none. */
  moveFence(): Promise<MoveFence | null>;
  /** Lifts the fence, for a move given up; false when there was none. */
  liftMoveFence(): Promise<boolean>;
  /**
   * Up to `limit` rows of `table` after `after` (null: from its first row),
   * in the order of its primary key, with where the next page starts. The
   * page also ends once its rows' text (every text column: payloads,
   * outputs, errors, log lines) would pass `maxBytes` bytes (UTF-8), a row
   * bigger than that alone in its page, so a page of big payloads still
   * fits in one string of the destination's import (default
   * `MOVE_PAGE_BYTES`, 4 MiB).
   */
  exportRows(
    table: TransferTable,
    after: string | null,
    limit: number,
    maxBytes?: number,
  ): Promise<TransferPage>;
  /**
   * Stores `rows` of `table` in one transaction, each unless a row with its
   * primary key is already there (so a move run again stores nothing twice),
   * with whatever the store keeps beside the rows (indexes; Redis's sets),
   * and resolves with how many were new. A schedule there that never fired
   * (the app's open stored it from its jobs module) takes a row that fired
   * or was paused whole, counted as new. A row of `id_counters` raises its
   * counter to at least its value, and counts as there when the counter is
   * at or past it. A row that does not fit the table's layout is refused
   * whole, naming the table and the column. The rows go to the store as
   * one string: a move gives a call at most a page's bytes of text (see
   * `exportRows`).
   */
  importRows(table: TransferTable, rows: readonly TransferRow[]): Promise<number>;
  /** How many rows `table` holds (`id_counters`: how many counters handed out an id). */
  countRows(table: TransferTable): Promise<number>;
  /** After the last import: moves every id counter past the highest id stored, never back. */
  finishImport(): Promise<void>;
}

/** What {@linkcode Store.backup} wrote. */
export interface BackupResult {
  /** The copy's absolute path. */
  readonly path: string;
  /** The copy's size, in bytes. */
  readonly bytes: number;
}

/** A storage engine for jobs: every role, and its lifetime. */
export interface Store
  extends
    JobWrites,
    WorkerStore,
    AdminStore,
    StatsStore,
    ScheduleStore,
    JobControlStore,
    StepStore,
    MoveStore,
    AsyncDisposable {
  /**
   * Brings the schema up to date, safe to call from several processes at
   * once, and resolves with the plan it carried out. Expand steps are
   * applied while older workers run; a contract step is refused, naming the
   * workers of older code seen within the heartbeat window, unless
   * `options.force` (docs/upgrading.md).
   */
  migrate(options?: MigrateOptions): Promise<MigrationPlan>;
  /** What {@linkcode Store.migrate} would do, each step's kind and its blockers; changes nothing. */
  migrationPlan(): Promise<MigrationPlan>;
  /**
   * Writes a consistent copy of the database, as of one commit, to `file`,
   * a new file, while other connections go on writing; a file that exists
   * is refused, never overwritten. A store that cannot (a database in
   * memory, a server with backup tools of its own) rejects saying why and
   * where to look (docs/backups.md), writing nothing.
   */
  backup(file: string): Promise<BackupResult>;
  /**
   * Called by a queue's `close()` before it stops its workers, for a store
   * whose other writes, a worker's among them, wait for an open
   * `transaction()` (SQLite's one writer): from then on the store refuses
   * transactions, and rolls back one still open `waitMs` later (the
   * workers' grace period and the time `close()` gives a transaction), so
   * that the workers' stop does not wait for it as long as its callback
   * runs. `close()` may then roll it back sooner, as it would have. A
   * store whose writes never wait for a transaction leaves it out or does
   * nothing on it (PostgreSQL's).
   */
  startClosing?(waitMs: number): void;
  /**
   * Closes the connection once the open transactions have ended (a store
   * may roll back one still open after a time of its own: the three stores
   * here after 5 s); later calls fail.
   */
  close(): Promise<void>;
}
