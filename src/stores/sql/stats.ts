/**
 * What the dashboard and the admin commands read, and the metrics rollup the
 * settle transaction adds to: counts per queue, running and listed jobs,
 * failed jobs, the per-minute rollup, and the workers' heartbeats.
 *
 * @internal
 * @module
 */
import type { SchemaNews } from "../schema_steps.ts";
import { type FailedRow, type RunningRow, toFailedJob, toRunningJob } from "./stored_rows.ts";
import {
  carriedIncrements,
  type MetricsIncrement,
  metricsIncrements,
  type MetricsRollup,
  RUNTIME_BUCKET_COLUMNS,
  type SettledJobRow,
  type StoredListedJob,
  type StoredMetrics,
  type StoredWorker,
  toListedJob,
  toMetricsRow,
  toWorkerInfo,
} from "./metrics_rollup.ts";
import type {
  FailedJob,
  JobFilter,
  JobList,
  MetricsRow,
  Page,
  PendingByName,
  QueueCountsRow,
  RunningJobOnQueue,
  Settlement,
  UnfinishedJobRow,
  WorkerHeartbeat,
  WorkerInfo,
} from "../store.ts";
import { clockParam, type Dialect, STARTED_ATTEMPTS } from "./dialect.ts";
import { each, exec, type Script } from "./script.ts";
import { statement } from "./statement.ts";

const BUCKETS = RUNTIME_BUCKET_COLUMNS;

/** An upsert's update: the counts given added to the row's. */
const ADDED = ["completed", "failed", "retried", "runtime_ms", "wait_ms", "expired", ...BUCKETS]
  .map((column) => `${column} = job_metrics.${column} + excluded.${column}`).join(", ");
/** Adds to the row of (minute, queue, name, shard): `$1` … `$4`, then the counts. */
const ADD_METRICS = statement(
  `INSERT INTO job_metrics
  (minute, queue, name, shard, completed, failed, retried, runtime_ms, wait_ms,
    ${BUCKETS.join(", ")}, expired)
  VALUES (${Array.from({ length: 10 + BUCKETS.length }, (_, index) => `$${index + 1}`).join(", ")})
  ON CONFLICT (minute, queue, name, shard) DO UPDATE SET ${ADDED}`,
);
/**
 * A prune: deletes the rows of minutes before `$1` (never the carried totals', a minute no cutoff
 * passes), handing them back to be carried. The delete drives the carry: a row two stores prune at
 * once is deleted, so carried, by one of them.
 */
const PRUNE_METRICS = statement(
  `DELETE FROM job_metrics WHERE minute < $1
  RETURNING minute, queue, name, completed, failed, retried, runtime_ms, wait_ms,
    ${BUCKETS.join(", ")}, expired`,
);
/** The rollup's rows of minutes `$1` up to `$2`, each store's shards added up. */
const METRICS = statement(
  `SELECT minute, queue, name, SUM(completed) AS completed, SUM(failed) AS failed,
    SUM(retried) AS retried, SUM(expired) AS expired, SUM(runtime_ms) AS runtime_ms, SUM(wait_ms) AS wait_ms,
    ${BUCKETS.map((column) => `SUM(${column}) AS ${column}`).join(", ")}
  FROM job_metrics WHERE minute >= $1 AND minute < $2
  GROUP BY minute, queue, name ORDER BY minute, queue, name`,
);

/**
 * A worker's row, seen at `{{now $7}}` (the caller's now, or the
 * database's): it started `$6` ms before that (a negative number), a time
 * kept from its first heartbeat.
 */
const HEARTBEAT = statement(
  `INSERT INTO workers
    (id, host, pid, queues, concurrency, started_at, last_seen_at, running, names, schema_step)
  VALUES ($1, $2, $3, $4, $5, {{now $7}} + $6, {{now $7}}, $8, $9, $10)
  ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
    queues = excluded.queues, concurrency = excluded.concurrency,
    last_seen_at = excluded.last_seen_at, running = excluded.running, names = excluded.names,
    schema_step = excluded.schema_step`,
);
/**
 * The database's newest step, and its first step newer than `$1` (the
 * code's) that is not recorded as an expand step: what a heartbeat learns.
 */
const SCHEMA_NEWS = statement(
  `SELECT (SELECT MAX(version) FROM queue_migrations) AS newest,
    (SELECT MIN(version) FROM queue_migrations
      WHERE version > $1 AND (kind IS NULL OR kind <> 'expand')) AS contract`,
);
/** Workers last seen more than `$2` ms before `{{now $1}}`. */
const DROP_STALE_WORKERS = statement(
  "DELETE FROM workers WHERE last_seen_at < (SELECT {{now $1}} - $2)",
);
const REMOVE_WORKER = statement("DELETE FROM workers WHERE id = $1");
/** Workers seen in the `$2` ms up to `{{now $1}}`. */
const WORKERS = statement(
  `SELECT id, host, pid, queues, concurrency, started_at, last_seen_at, running, names, schema_step
  FROM workers WHERE last_seen_at >= (SELECT {{now $1}} - $2) ORDER BY started_at, id`,
);

/**
 * The jobs with the time the states go by, `clock.t` (`{{now $1}}`: the
 * caller's now, or the database's, read once per statement).
 */
const JOBS_AT = "FROM jobs CROSS JOIN (SELECT {{now $1}} AS t) clock";
/**
 * A job's state at `clock.t`, as `JobState` defines it (the rule of the
 * counts): a job claimed ahead has not started, so it is pending.
 */
const STATE = `CASE WHEN available_at <= clock.t OR claimed_ahead = 1 THEN 'pending'
  WHEN token IS NULL THEN 'delayed' ELSE 'running' END`;
/** Jobs matching $2 state, $3 queue and $4 name, each null for any. */
const MATCHING = `${JOBS_AT} WHERE (CAST($2 AS text) IS NULL OR ${STATE} = CAST($2 AS text))
  AND (CAST($3 AS text) IS NULL OR queue = CAST($3 AS text))
  AND (CAST($4 AS text) IS NULL OR name = CAST($4 AS text))`;
const LIST_JOBS = statement(
  `SELECT id, queue, name, ${STATE} AS state, priority, ${STARTED_ATTEMPTS} AS attempts,
    available_at,
    created_at, progress, batch_id, last_error
  ${MATCHING} ORDER BY id LIMIT $5 OFFSET $6`,
);
const COUNT_JOBS = statement(`SELECT COUNT(*) AS total ${MATCHING}`, { oneRow: true });
const COUNTS = statement(
  `SELECT queue,
    COUNT(*) FILTER (WHERE available_at <= clock.t OR claimed_ahead = 1) AS pending,
    COUNT(*) FILTER (WHERE token IS NULL AND available_at > clock.t) AS delayed,
    COUNT(*) FILTER (WHERE token IS NOT NULL AND available_at > clock.t AND claimed_ahead = 0)
      AS reserved
  ${JOBS_AT} GROUP BY queue`,
);
const FAILED_COUNTS = statement(
  "SELECT queue, COUNT(*) AS failed FROM failed_jobs GROUP BY queue",
);
const PENDING_BY_NAME = statement(
  `SELECT queue, name, COUNT(*) AS pending FROM jobs WHERE available_at <= (SELECT {{now $1}})
  GROUP BY queue, name ORDER BY queue, name`,
);
const RUNNING = statement(
  `SELECT id, queue, name, attempts, progress, available_at, batch_id FROM jobs
  WHERE token IS NOT NULL AND available_at > (SELECT {{now $1}}) AND claimed_ahead = 0
  ORDER BY id`,
);
const FAILED_COLUMNS =
  "id, queue, name, payload, error, stack, attempts, crashes, created_at, failed_at, batch_id, chain_id";
const FAILED_PAGE = statement(
  `SELECT ${FAILED_COLUMNS} FROM failed_jobs ORDER BY failed_at DESC, id DESC LIMIT $1 OFFSET $2`,
);
const UNFINISHED_ONE = statement("SELECT payload, last_error FROM jobs WHERE id = $1", {
  oneRow: true,
});
const FAILED_ONE = statement(`SELECT ${FAILED_COLUMNS} FROM failed_jobs WHERE id = $1`, {
  oneRow: true,
});

/**
 * Adds a tick's applied settlements to the rollup, as `Store.settle`
 * specifies; `jobs` are the settled jobs as the settle statements returned
 * them (their queue, name and wait), on the rows of `rollup`'s shard. Prunes
 * old rows when `rollup` says so.
 */
export function* recordMetrics(
  settlements: readonly Settlement[],
  applied: readonly boolean[],
  jobs: readonly SettledJobRow[],
  rollup: MetricsRollup,
): Script<void> {
  yield* addMetrics(metricsIncrements(settlements, applied, jobs), rollup.shard);
  const cutoff = settlements.length === 0 ? null : rollup.due(settlements);
  if (cutoff === null) return;
  const { rows: pruned } = yield* exec<StoredMetrics>(PRUNE_METRICS, cutoff);
  yield* addMetrics(carriedIncrements(pruned.map(toMetricsRow)), rollup.shard);
}

/** Adds each of `increments` to its row of the store's `shard`. */
function* addMetrics(increments: readonly MetricsIncrement[], shard: number): Script<void> {
  yield* each(
    ADD_METRICS,
    increments.map((group) => [
      group.minute,
      group.queue,
      group.name,
      shard,
      group.completed,
      group.failed,
      group.retried,
      group.runtimeMs,
      group.waitMs,
      ...group.buckets,
      group.expired,
    ]),
  );
}

/** The rollup's rows with `since <= minute < until`. */
export function* metrics(since: number, until: number): Script<MetricsRow[]> {
  return (yield* exec<StoredMetrics>(METRICS, since, until)).rows.map(toMetricsRow);
}

/**
 * Writes a worker's row, its code built for schema step `codeStep`, and
 * drops those of workers not seen since `staleBefore`: its times keep their
 * distance from its `lastSeenAt` (the caller's now) on the store's clock, so
 * a host whose clock is off neither stamps its row off nor drops live
 * workers' rows as stale. Reads back the database's schema news.
 */
export function* heartbeat(
  dialect: Dialect,
  worker: WorkerHeartbeat,
  codeStep: number,
  staleBefore: number,
): Script<SchemaNews> {
  const now = clockParam(dialect, worker.lastSeenAt);
  yield* exec(
    HEARTBEAT,
    worker.id,
    worker.host,
    worker.pid,
    JSON.stringify(worker.queues),
    worker.concurrency,
    worker.startedAt - worker.lastSeenAt,
    now,
    worker.running,
    JSON.stringify(worker.names),
    codeStep,
  );
  yield* exec(DROP_STALE_WORKERS, now, worker.lastSeenAt - staleBefore);
  const { rows: [news] } = yield* exec<{ newest: unknown; contract: unknown }>(
    SCHEMA_NEWS,
    codeStep,
  );
  return {
    codeStep,
    databaseStep: Number(news?.newest ?? codeStep),
    contractStep: news?.contract === null || news?.contract === undefined
      ? null
      : Number(news.contract),
  };
}

/** Deletes a worker's row; whether it was there. */
export function* removeWorker(id: string): Script<boolean> {
  return (yield* exec(REMOVE_WORKER, id)).count === 1;
}

/** Workers last seen at or after `seenSince`, `now` being the caller's now. */
export function* workers(dialect: Dialect, seenSince: number, now: number): Script<WorkerInfo[]> {
  const { rows } = yield* exec<StoredWorker>(WORKERS, clockParam(dialect, now), now - seenSince);
  return rows.map(toWorkerInfo);
}

/** A page of the jobs not yet finished that match `filter`, and how many match, at `now`. */
export function* jobs(
  dialect: Dialect,
  filter: JobFilter,
  page: Page,
  now: number,
): Script<JobList> {
  const match = [clockParam(dialect, now), filter.state, filter.queue, filter.name];
  const { rows: [counted] } = yield* exec<{ total: number }>(COUNT_JOBS, ...match);
  const { rows } = yield* exec<StoredListedJob>(LIST_JOBS, ...match, page.limit, page.offset);
  return { total: Number(counted!.total), jobs: rows.map(toListedJob) };
}

/** Jobs per queue by state at `now`, failed jobs included, by queue name. */
export function* counts(dialect: Dialect, now: number): Script<QueueCountsRow[]> {
  const byQueue = new Map<string, QueueCountsRow>();
  for (const row of (yield* exec<Record<string, unknown>>(COUNTS, clockParam(dialect, now))).rows) {
    const queue = String(row.queue);
    byQueue.set(queue, {
      queue,
      pending: Number(row.pending),
      delayed: Number(row.delayed),
      reserved: Number(row.reserved),
      failed: 0,
    });
  }
  for (const row of (yield* exec<{ queue: string; failed: number }>(FAILED_COUNTS)).rows) {
    const queue = String(row.queue);
    const counted = byQueue.get(queue) ?? { queue, pending: 0, delayed: 0, reserved: 0 };
    byQueue.set(queue, { ...counted, failed: Number(row.failed) });
  }
  return [...byQueue.values()].sort((a, b) => a.queue < b.queue ? -1 : 1);
}

/** Due jobs per queue and name, at `now`. */
export function* pendingByName(dialect: Dialect, now: number): Script<PendingByName[]> {
  const { rows } = yield* exec<PendingByName>(PENDING_BY_NAME, clockParam(dialect, now));
  return rows.map((row) => ({ queue: row.queue, name: row.name, pending: Number(row.pending) }));
}

/** Jobs leased at `now`, with their progress, in id order. */
export function* running(dialect: Dialect, now: number): Script<RunningJobOnQueue[]> {
  return (yield* exec<RunningRow>(RUNNING, clockParam(dialect, now))).rows.map(toRunningJob);
}

/** Failed jobs, newest first. */
export function* failed(page: Page): Script<FailedJob[]> {
  return (yield* exec<FailedRow>(FAILED_PAGE, page.limit, page.offset)).rows.map(toFailedJob);
}

/** A job not yet finished: its stored payload and last error, or null. */
export function* unfinishedJob(id: number): Script<UnfinishedJobRow | null> {
  const { rows: [row] } = yield* exec<{ payload: string; last_error: string | null }>(
    UNFINISHED_ONE,
    id,
  );
  return row === undefined ? null : { payload: row.payload, lastError: row.last_error };
}

/** One failed job, or null. */
export function* failedJob(id: number): Script<FailedJob | null> {
  const { rows: [row] } = yield* exec<FailedRow>(FAILED_ONE, id);
  return row === undefined ? null : toFailedJob(row);
}
