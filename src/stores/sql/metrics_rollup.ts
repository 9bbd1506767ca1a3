/**
 * The dialect-neutral half of the dashboard's data in the SQL stores: how a
 * tick's settlements add up into metrics rollup increments, when old rollup
 * rows are pruned, and the rows the listing statements return with their
 * mapping to the store's row types. Both engines use it, so they count and
 * hand out the same.
 *
 * @internal
 * @module
 */
import {
  type JobState,
  type ListedJob,
  METRICS_CARRIED_MINUTE,
  METRICS_RETENTION_MS,
  type MetricsRow,
  RUNTIME_BUCKETS_MS,
  runtimeBucket,
  type Settlement,
  type WorkerInfo,
} from "../store.ts";
import { addMetricsRow, emptyMetricsTotals, type MetricsTotals } from "../rows/read.ts";
import { PruneSchedule } from "./upkeep.ts";

const MINUTE_MS = 60_000;

/** The runtime histogram's columns, `runtime_b0` … `runtime_b16`, in bucket order. */
export const RUNTIME_BUCKET_COLUMNS: readonly string[] = Array.from(
  { length: RUNTIME_BUCKETS_MS.length + 1 },
  (_, index) => `runtime_b${index}`,
);

/** A settled job as read before its settle: its queue, name and how long it waited when claimed. */
export interface SettledJobRow {
  readonly id: number;
  readonly queue: string;
  readonly name: string;
  readonly waited_ms: number | null;
}

/**
 * What one tick adds to one rollup row: the values of one upsert, `buckets`
 * one count per {@linkcode RUNTIME_BUCKET_COLUMNS}.
 */
export interface MetricsIncrement extends MetricsTotals {
  readonly minute: number;
  readonly queue: string;
  readonly name: string;
}

/** An increment of (minute, queue, name) that counts nothing yet. */
function emptyIncrement(minute: number, queue: string, name: string): MetricsIncrement {
  return { minute, queue, name, ...emptyMetricsTotals() };
}

/**
 * Adds up a tick's applied settlements into one increment per (minute of
 * `at`, queue, name), as `Store.settle` specifies; `jobs` are the settled
 * jobs read before the settle. Increments that count nothing are left out.
 */
export function metricsIncrements(
  settlements: readonly Settlement[],
  applied: readonly boolean[],
  jobs: readonly SettledJobRow[],
): MetricsIncrement[] {
  const byId = new Map(jobs.map((job) => [Number(job.id), job]));
  const groups = new Map<string, MetricsIncrement>();
  settlements.forEach((settlement, index) => {
    const job = byId.get(settlement.id);
    if (!applied[index] || job === undefined) return;
    // A park (a sleep or a wait) is no retry, and a step no end of an attempt: counted nowhere.
    if (
      settlement.kind === "progress" || (settlement.kind === "cancel" && !settlement.expired) ||
      settlement.kind === "step" || settlement.kind === "park"
    ) return;
    const minute = Math.floor(settlement.at / MINUTE_MS) * MINUTE_MS;
    const key = JSON.stringify([minute, job.queue, job.name]);
    let group = groups.get(key);
    if (group === undefined) groups.set(key, group = emptyIncrement(minute, job.queue, job.name));
    if (settlement.kind === "cancel") group.expired++;
    else if (settlement.kind === "complete") group.completed++;
    else if (settlement.kind === "fail") group.failed++;
    else if (settlement.error !== null && !settlement.refundAttempt) group.retried++;
    if (settlement.durationMs !== undefined) {
      group.runtimeMs += settlement.durationMs;
      group.waitMs += job.waited_ms === null ? 0 : Number(job.waited_ms);
      group.buckets[runtimeBucket(settlement.durationMs)]! += 1;
    }
  });
  return [...groups.values()].filter((group) =>
    group.completed + group.failed + group.retried + group.expired > 0 ||
    group.buckets.some((count) => count > 0)
  );
}

/**
 * What pruned rollup rows add to the carried totals: one increment per
 * queue and name, at {@linkcode METRICS_CARRIED_MINUTE}.
 */
export function carriedIncrements(rows: readonly MetricsRow[]): MetricsIncrement[] {
  const groups = new Map<string, MetricsIncrement>();
  for (const row of rows) {
    const key = JSON.stringify([row.queue, row.name]);
    let group = groups.get(key);
    if (group === undefined) {
      groups.set(key, group = emptyIncrement(METRICS_CARRIED_MINUTE, row.queue, row.name));
    }
    addMetricsRow(group, row);
  }
  return [...groups.values()];
}

/**
 * How many shards a store draws its own from: worker processes on one
 * database then add to different rows (two of three processes share one
 * once in about 1,500 openings).
 */
export const METRICS_SHARDS = 1024;

/**
 * A store's part of the metrics rollup: the shard its settles add to, drawn
 * at random when the store opens (rows are per minute, queue, job name and
 * shard, so worker processes settling at once on PostgreSQL do not wait for
 * each other's row lock; reads add the shards up), and when it prunes old
 * rows: at most once a minute of the settles' time.
 */
export class MetricsRollup {
  /** The shard this store's settles add to, in [0, {@linkcode METRICS_SHARDS}). */
  readonly shard: number = Math.floor(Math.random() * METRICS_SHARDS);
  readonly #pruning = new PruneSchedule();

  /**
   * The cutoff to delete rows of minutes before, if a prune is due for a tick
   * settling `settlements`, else null. Calling it with a cutoff returned
   * counts as pruning then.
   */
  due(settlements: readonly Settlement[]): number | null {
    const at = Math.max(...settlements.map((settlement) => settlement.at));
    return this.#pruning.due(at) ? at - METRICS_RETENTION_MS : null;
  }
}

/** A rollup row as the metrics statement returns it (`runtime_b0` … in the rest). */
export interface StoredMetrics {
  readonly minute: number;
  readonly queue: string;
  readonly name: string;
  readonly completed: number;
  readonly failed: number;
  readonly retried: number;
  readonly expired: number | null;
  readonly runtime_ms: number;
  readonly wait_ms: number;
  readonly [bucket: string]: unknown;
}

/** A job as the listing statement returns it. */
export interface StoredListedJob {
  readonly id: number;
  readonly queue: string;
  readonly name: string;
  readonly state: JobState;
  readonly priority: number;
  readonly attempts: number;
  readonly available_at: number;
  readonly created_at: number;
  readonly progress: number | null;
  readonly batch_id: number | null;
  readonly last_error: string | null;
}

/** A worker row; `queues` and `names` are JSON arrays. */
export interface StoredWorker {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly queues: string;
  readonly names: string;
  readonly concurrency: number;
  readonly started_at: number;
  readonly last_seen_at: number;
  readonly running: number;
  /** Null in a row written by code older than step 18, and in Redis rows of such code. */
  readonly schema_step?: number | null;
}

/** A rollup row as the store hands it out. */
export function toMetricsRow(row: StoredMetrics): MetricsRow {
  return {
    minute: Number(row.minute),
    queue: String(row.queue),
    name: String(row.name),
    completed: Number(row.completed),
    failed: Number(row.failed),
    retried: Number(row.retried),
    expired: Number(row.expired ?? 0),
    runtimeMs: Number(row.runtime_ms),
    waitMs: Number(row.wait_ms),
    runtimeBuckets: RUNTIME_BUCKET_COLUMNS.map((column) => Number(row[column])),
  };
}

/** A listed job as the store hands it out; only a running job shows its progress. */
export function toListedJob(row: StoredListedJob): ListedJob {
  return {
    id: Number(row.id),
    queue: row.queue,
    name: row.name,
    state: row.state,
    priority: Number(row.priority),
    attempts: Number(row.attempts),
    availableAt: new Date(Number(row.available_at)),
    createdAt: new Date(Number(row.created_at)),
    progress: row.state === "running" && row.progress !== null ? Number(row.progress) : null,
    batchId: row.batch_id === null ? null : Number(row.batch_id),
    lastError: row.last_error,
  };
}

/** A worker as the store hands it out. */
export function toWorkerInfo(row: StoredWorker): WorkerInfo {
  return {
    id: row.id,
    host: row.host,
    pid: Number(row.pid),
    queues: JSON.parse(row.queues) as string[],
    names: JSON.parse(row.names) as string[],
    concurrency: Number(row.concurrency),
    startedAt: new Date(Number(row.started_at)),
    lastSeenAt: new Date(Number(row.last_seen_at)),
    running: Number(row.running),
    schemaStep: row.schema_step === null || row.schema_step === undefined
      ? null
      : Number(row.schema_step),
  };
}
