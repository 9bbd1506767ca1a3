/**
 * The SQL of what the dashboard reads on PostgreSQL, the same rules as on
 * SQLite (see `_sqlite_stats.ts`): the metrics rollup, added to inside the
 * settle transaction; workers' heartbeats; the listing of jobs not yet
 * finished. How settlements add up lives in `_stats_rows.ts`, shared.
 *
 * @internal
 * @module
 */
import type { Run } from "./_postgres_run.ts";
import {
  metricsIncrements,
  type MetricsPruning,
  RUNTIME_BUCKET_COLUMNS,
  type SettledJobRow,
  type StoredListedJob,
  type StoredMetrics,
  type StoredWorker,
  toListedJobRow,
  toMetricsRow,
  toWorkerRow,
} from "./_stats_rows.ts";
import type { JobFilter, JobListing, MetricsRow, Page, Settlement, WorkerRow } from "./store.ts";

const BUCKETS = RUNTIME_BUCKET_COLUMNS;

const ADD_METRICS = `INSERT INTO job_metrics
  (minute, queue, name, completed, failed, retried, runtime_ms, wait_ms, ${BUCKETS.join(", ")})
  VALUES (${Array.from({ length: 8 + BUCKETS.length }, (_, index) => `$${index + 1}`).join(", ")})
  ON CONFLICT (minute, queue, name) DO UPDATE SET
    completed = job_metrics.completed + excluded.completed,
    failed = job_metrics.failed + excluded.failed,
    retried = job_metrics.retried + excluded.retried,
    runtime_ms = job_metrics.runtime_ms + excluded.runtime_ms,
    wait_ms = job_metrics.wait_ms + excluded.wait_ms,
    ${
  BUCKETS.map((column) => `${column} = job_metrics.${column} + excluded.${column}`).join(", ")
}`;
const PRUNE_METRICS = "DELETE FROM job_metrics WHERE minute < $1";
const METRICS = `SELECT minute, queue, name, completed, failed, retried, runtime_ms, wait_ms,
    ${BUCKETS.join(", ")}
  FROM job_metrics WHERE minute >= $1 AND minute < $2 ORDER BY minute, queue, name`;

const HEARTBEAT = `INSERT INTO workers
  (id, host, pid, queues, concurrency, started_at, last_seen_at, running)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
  ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
    queues = excluded.queues, concurrency = excluded.concurrency,
    started_at = excluded.started_at, last_seen_at = excluded.last_seen_at,
    running = excluded.running`;
const DROP_STALE_WORKERS = "DELETE FROM workers WHERE last_seen_at < $1";
const REMOVE_WORKER = "DELETE FROM workers WHERE id = $1";
const WORKERS = `SELECT id, host, pid, queues, concurrency, started_at, last_seen_at, running
  FROM workers WHERE last_seen_at >= $1 ORDER BY started_at, id`;

/** A job's state at $1, as `JobState` defines it (the rule of the store's counts). */
const STATE = `CASE WHEN available_at <= $1 THEN 'pending'
  WHEN token IS NULL THEN 'delayed' ELSE 'running' END`;
/** Jobs matching $2 state, $3 queue and $4 name, each null for any. */
const MATCHING = `FROM jobs WHERE ($2::text IS NULL OR ${STATE} = $2::text)
  AND ($3::text IS NULL OR queue = $3::text) AND ($4::text IS NULL OR name = $4::text)`;
const LIST_JOBS = `SELECT id, queue, name, ${STATE} AS state, priority, attempts, available_at,
    created_at, progress, batch_id, last_error
  ${MATCHING} ORDER BY id LIMIT $5 OFFSET $6`;
const COUNT_JOBS = `SELECT COUNT(*) AS total ${MATCHING}`;

/** The metrics rollup, workers and job listing, through the store's transaction. */
export class PostgresStats {
  readonly #run: Run;
  readonly #pruning: MetricsPruning;

  /** `run` sends one statement in the store's current transaction; `pruning` is the store's. */
  constructor(run: Run, pruning: MetricsPruning) {
    this.#run = run;
    this.#pruning = pruning;
  }

  /**
   * Adds a tick's applied settlements to the rollup, as `Store.settle`
   * specifies; `jobs` are the settled jobs as the settle statements returned
   * them (their queue, name and wait).
   */
  async record(
    settlements: readonly Settlement[],
    applied: readonly boolean[],
    jobs: readonly SettledJobRow[],
  ): Promise<void> {
    for (const group of metricsIncrements(settlements, applied, jobs)) {
      const { completed, failed, retried, runtimeMs, waitMs } = group;
      await this.#run(ADD_METRICS, [
        group.minute,
        group.queue,
        group.name,
        completed,
        failed,
        retried,
        runtimeMs,
        waitMs,
        ...group.buckets,
      ]);
    }
    const cutoff = settlements.length === 0 ? null : this.#pruning.due(settlements);
    if (cutoff !== null) await this.#run(PRUNE_METRICS, [cutoff]);
  }

  /** The rollup's rows with `since <= minute < until`. */
  async metrics(since: number, until: number): Promise<MetricsRow[]> {
    return (await this.#run<StoredMetrics>(METRICS, [since, until])).map(toMetricsRow);
  }

  /** Writes a worker's row and drops those of workers not seen since `staleBefore`. */
  async heartbeat(worker: WorkerRow, staleBefore: number): Promise<void> {
    await this.#run(HEARTBEAT, [
      worker.id,
      worker.host,
      worker.pid,
      JSON.stringify(worker.queues),
      worker.concurrency,
      worker.startedAt,
      worker.lastSeenAt,
      worker.running,
    ]);
    await this.#run(DROP_STALE_WORKERS, [staleBefore]);
  }

  /** Deletes a worker's row; whether it was there. */
  async removeWorker(id: string): Promise<boolean> {
    return (await this.#run(REMOVE_WORKER, [id])).count === 1;
  }

  /** Workers last seen at or after `seenSince`. */
  async workers(seenSince: number): Promise<WorkerRow[]> {
    return (await this.#run<StoredWorker>(WORKERS, [seenSince])).map(toWorkerRow);
  }

  /** A page of the jobs not yet finished that match `filter`, and how many match. */
  async jobs(filter: JobFilter, page: Page, now: number): Promise<JobListing> {
    const match = [now, filter.state, filter.queue, filter.name];
    const [counted] = await this.#run<{ total: number }>(COUNT_JOBS, match);
    const rows = await this.#run<StoredListedJob>(LIST_JOBS, [...match, page.limit, page.offset]);
    return { total: Number(counted!.total), rows: rows.map(toListedJobRow) };
  }
}
