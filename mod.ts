/**
 * Background jobs for Deno, kept in one SQLite file: retries with backoff, a
 * failed-jobs table, timeouts, leases that survive crashes, durable steps
 * (`ctx.step`, `ctx.sleep`, `ctx.waitFor` and `queue.signal`), and a worker
 * that claims and settles in batches.
 *
 * @example Define a job, dispatch it, work the queue
 * ```ts
 * import { defineJob, Queue } from "@renox/queue";
 * import { z } from "zod";
 *
 * const sendReceipt = defineJob({
 *   name: "send-receipt",
 *   schema: z.object({ orderId: z.number().int() }),
 *   async handle({ orderId }, ctx) {
 *     console.log(`receipt ${orderId} (attempt ${ctx.attempt})`);
 *   },
 * });
 *
 * await using queue = await Queue.open({ path: ":memory:", jobs: [sendReceipt] });
 * await queue.dispatch(sendReceipt, { orderId: 7 });
 * await queue.work({ stopWhenEmpty: true }).done;
 * ```
 *
 * @module
 */
export { type Backoff } from "./src/backoff.ts";
export { type Clock, systemClock } from "./src/clock.ts";
export { type DatabaseOptions, type QueueConfig, readConfig } from "./src/config.ts";
export { generateAppKey } from "./src/encryption.ts";
export {
  JobCancelledError,
  JobTimeoutError,
  JobWaitTimeoutError,
  OutdatedCodeError,
  PayloadIntegrityError,
  PermanentError,
  QueueClosedError,
  QueueLostError,
  QueueMovedError,
  StepMismatchError,
  StepTimeoutError,
  ValidationError,
  type ValidationIssue,
} from "./src/errors.ts";
export type { JobEventDetail, QueueEvent, QueueEventMap, QueueEventTarget } from "./src/events.ts";
export {
  defineJob,
  type Dispatcher,
  type DispatchOptions,
  type FailedJobContext,
  type GroupRate,
  type HandlerReturn,
  type JobConfig,
  type JobContext,
  type JobDefinition,
  type NoParents,
  type OutputOf,
  type ParentJobs,
  type ParentOutput,
  type ParentOutputs,
  type PayloadInput,
  type PayloadOf,
  type PayloadOutput,
  type PayloadSchema,
  type PlannedJobs,
  type ScheduledRun,
  type SchemaIssue,
  type SchemaResult,
} from "./src/job.ts";
export {
  type JobMiddleware,
  type RateLimited,
  rateLimited,
  type WithoutOverlapping,
  withoutOverlapping,
  type WithoutOverlappingOptions,
} from "./src/middleware.ts";
export type { JobsSource } from "./src/registry.ts";
export {
  defineSchedule,
  type MissedPolicy,
  type OverlapPolicy,
  type ScheduleConfig,
  type ScheduleDefinition,
} from "./src/schedule.ts";
export type { BackfillOptions, BackfillResult, ScheduleInfo } from "./src/schedules/views.ts";
export type {
  JobList,
  JobListOptions,
  JobState,
  ListedJob,
  UnfinishedJob,
} from "./src/admin/job_list.ts";
export type { JobLogLine, LogsOptions } from "./src/job_logs.ts";
export type { JobStep, SignalOutcome, StepOptions, WaitOptions } from "./src/steps.ts";
export type {
  JobTypeMetrics,
  MetricsOptions,
  MetricsSummary,
  MinuteMetrics,
  QueueMetrics,
} from "./src/admin/metrics.ts";
export type { UnclaimedJobs, WorkerInfo, WorkersOptions } from "./src/admin/workers.ts";
export { Queue, type QueueMode, type QueueOptions, type QueueTransaction } from "./src/queue.ts";
export type { BackupResult } from "./src/stores/store.ts";
export {
  abortMove,
  type MovedTable,
  type MoveFence,
  moveQueue,
  type MoveQueueOptions,
  type MoveReport,
} from "./src/move_queue.ts";
export type {
  CancelOptions,
  CancelOutcome,
  CancelResult,
  CompletedJob,
  CompletedOptions,
  DispatchAndWaitOptions,
  FinishedJob,
  FinishedOptions,
  JobResult,
  JobResultState,
  PausedGroup,
  PausedQueue,
  PauseGroupOptions,
  PauseOptions,
} from "./src/admin/job_control.ts";
export type { StoreOptions } from "./src/store_options.ts";
export type {
  MigrateOptions,
  MigrationPlan,
  OlderWorker,
  PlannedStep,
  SchemaStepKind,
} from "./src/stores/schema_steps.ts";
export type {
  FailedJob,
  ListOptions,
  PruneOptions,
  QueueCounts,
  RunningJob,
} from "./src/admin/listing.ts";
export { BatchBuilder, type BatchStatus } from "./src/batch.ts";
export { ChainBuilder, type ChainOptions, previousOutput } from "./src/chain.ts";
export {
  FlowBuilder,
  type FlowNode,
  type FlowNodeOptions,
  type FlowNodeState,
  type FlowNodeStatus,
  type FlowStatus,
} from "./src/flow.ts";
export type {
  QueueWorker,
  Runner,
  RunnerStats,
  StopOptions,
  StopReason,
  WorkerStats,
} from "./src/runner/runner.ts";
export { type Durability, SqliteStore, type SqliteStoreOptions } from "./src/stores/sqlite/mod.ts";
export type { ExecutorKind, ResolvedWorkOptions, WorkOptions } from "./src/runner/work_options.ts";
export type {
  DrainAfterOptions,
  DrainOptions,
  DrainResult,
  DrainStopReason,
  ServerlessOptions,
} from "./src/drains/options.ts";
