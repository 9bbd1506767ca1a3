/**
 * The SQL of what the dashboard reads on SQLite: the per-minute metrics
 * rollup (added to inside the settle transaction), the workers' heartbeats,
 * and the listing of jobs not yet finished. The write methods run inside a
 * write transaction the store has opened, so a tick's settles and what they
 * add to the rollup commit together. How settlements add up lives in
 * `_stats_rows.ts`, shared with PostgreSQL.
 *
 * @internal
 * @module
 */
import type { StatementSync } from "node:sqlite";
import {
  metricsIncrements,
  MetricsPruning,
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
  VALUES (${Array(8 + BUCKETS.length).fill("?").join(", ")})
  ON CONFLICT (minute, queue, name) DO UPDATE SET
    completed = completed + excluded.completed, failed = failed + excluded.failed,
    retried = retried + excluded.retried, runtime_ms = runtime_ms + excluded.runtime_ms,
    wait_ms = wait_ms + excluded.wait_ms,
    ${BUCKETS.map((column) => `${column} = ${column} + excluded.${column}`).join(", ")}`;
const PRUNE_METRICS = "DELETE FROM job_metrics WHERE minute < ?";
const METRICS = `SELECT minute, queue, name, completed, failed, retried, runtime_ms, wait_ms,
    ${BUCKETS.join(", ")}
  FROM job_metrics WHERE minute >= ? AND minute < ? ORDER BY minute, queue, name`;

const HEARTBEAT = `INSERT OR REPLACE INTO workers
  (id, host, pid, queues, concurrency, started_at, last_seen_at, running)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;
const DROP_STALE_WORKERS = "DELETE FROM workers WHERE last_seen_at < ?";
const REMOVE_WORKER = "DELETE FROM workers WHERE id = ?";
const WORKERS = `SELECT id, host, pid, queues, concurrency, started_at, last_seen_at, running
  FROM workers WHERE last_seen_at >= ? ORDER BY started_at, id`;

/** A job's state at ?1, as `JobState` defines it (the rule of the store's counts). */
const STATE = `CASE WHEN available_at <= ?1 THEN 'pending'
  WHEN token IS NULL THEN 'delayed' ELSE 'running' END`;
/** Jobs matching ?2 state, ?3 queue and ?4 name, each null for any. */
const MATCHING = `FROM jobs WHERE (?2 IS NULL OR ${STATE} = ?2)
  AND (?3 IS NULL OR queue = ?3) AND (?4 IS NULL OR name = ?4)`;
const LIST_JOBS = `SELECT id, queue, name, ${STATE} AS state, priority, attempts, available_at,
    created_at, progress, batch_id, last_error
  ${MATCHING} ORDER BY id LIMIT ?5 OFFSET ?6`;
const COUNT_JOBS = `SELECT COUNT(*) AS total ${MATCHING}`;

/** The metrics rollup, workers and job listing on one SQLite connection. */
export class SqliteStats {
  readonly #prepare: (sql: string) => StatementSync;
  readonly #pruning = new MetricsPruning();

  /** `prepare` returns the connection's cached statement for `sql`. */
  constructor(prepare: (sql: string) => StatementSync) {
    this.#prepare = prepare;
  }

  /**
   * Adds a tick's applied settlements to the rollup, as `Store.settle`
   * specifies; `jobs` are the settled jobs as the settle statements returned
   * them (their queue, name and wait).
   */
  record(
    settlements: readonly Settlement[],
    applied: readonly boolean[],
    jobs: readonly SettledJobRow[],
  ): void {
    for (const group of metricsIncrements(settlements, applied, jobs)) {
      const { completed, failed, retried, runtimeMs, waitMs } = group;
      this.#prepare(ADD_METRICS).run(
        group.minute,
        group.queue,
        group.name,
        completed,
        failed,
        retried,
        runtimeMs,
        waitMs,
        ...group.buckets,
      );
    }
    const cutoff = settlements.length === 0 ? null : this.#pruning.due(settlements);
    if (cutoff !== null) this.#prepare(PRUNE_METRICS).run(cutoff);
  }

  /** The rollup's rows with `since <= minute < until`. */
  metrics(since: number, until: number): MetricsRow[] {
    return (this.#prepare(METRICS).all(since, until) as unknown as StoredMetrics[])
      .map(toMetricsRow);
  }

  /** Writes a worker's row and drops those of workers not seen since `staleBefore`. */
  heartbeat(worker: WorkerRow, staleBefore: number): void {
    this.#prepare(HEARTBEAT).run(
      worker.id,
      worker.host,
      worker.pid,
      JSON.stringify(worker.queues),
      worker.concurrency,
      worker.startedAt,
      worker.lastSeenAt,
      worker.running,
    );
    this.#prepare(DROP_STALE_WORKERS).run(staleBefore);
  }

  /** Deletes a worker's row; whether it was there. */
  removeWorker(id: string): boolean {
    return this.#prepare(REMOVE_WORKER).run(id).changes === 1;
  }

  /** Workers last seen at or after `seenSince`. */
  workers(seenSince: number): WorkerRow[] {
    return (this.#prepare(WORKERS).all(seenSince) as unknown as StoredWorker[]).map(toWorkerRow);
  }

  /** A page of the jobs not yet finished that match `filter`, and how many match. */
  jobs(filter: JobFilter, page: Page, now: number): JobListing {
    const match = [now, filter.state, filter.queue, filter.name] as const;
    const { total } = this.#prepare(COUNT_JOBS).get(...match) as { total: number };
    const rows = this.#prepare(LIST_JOBS).all(
      ...match,
      page.limit,
      page.offset,
    ) as unknown as StoredListedJob[];
    return { total, rows: rows.map(toListedJobRow) };
  }
}
