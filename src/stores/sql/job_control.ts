/**
 * Job control in SQL: finished jobs recorded in `completed_jobs` by the
 * settle that ends them, results and the kept history read back, a cancel
 * (removing a job that has not started, or asking the worker of a running
 * one), and paused queues. The claim reads the pauses through
 * {@linkcode notPaused}.
 *
 * @internal
 * @module
 */
import type { JobLinks } from "../_rows.ts";
import type {
  CancelOutcome,
  CancelRequest,
  CancelRequested,
  CompletedFilter,
  CompletedJobRow,
  FinishedState,
  JobResultRow,
  PauseRow,
} from "../job_control_rows.ts";
import type { Lease, Page, Settlement } from "../store.ts";
import * as chainsBatches from "./chains_batches.ts";
import { clockParam, type Dialect, LINK_COLUMNS } from "./dialect.ts";
import { releaseRemoved } from "./keys.ts";
import { exec, type Script } from "./script.ts";
import { statement } from "./statement.ts";

/**
 * The claim's condition that `queue` (a placeholder) is not paused at `now`
 * (an SQL expression): one index lookup per queue, in the claim's one statement.
 */
export function notPaused(queue: string, now: string): string {
  return `NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.queue = ${queue}
    AND (p.until IS NULL OR p.until > ${now}))`;
}

/** No token: the value the record statement's fence takes for a job not leased. */
const UNLEASED = -1;

/**
 * Copies jobs about to be deleted into `completed_jobs`, each fenced by its
 * token (`-1`: none), all of a settle's in one statement. Each row's times
 * are given as ms after `{{now $2}}` (the caller's now, or the database's).
 */
const RECORD = statement(
  `INSERT INTO completed_jobs (id, queue, name, state, payload, output, error, attempts,
    created_at, started_at, finished_at, duration_ms, keep_until)
  SELECT j.id, j.queue, j.name, r.state, j.payload, r.output, r.error, j.attempts, j.created_at,
    clock.t + r.started_ms, clock.t + r.finished_ms, r.duration_ms, clock.t + r.keep_ms
  FROM {{rows $1 id int, token int, state text, output text, error text, started_ms int,
    finished_ms int, duration_ms int, keep_ms int}} r CROSS JOIN (SELECT {{now $2}} AS t) clock,
    jobs j
  WHERE j.id = r.id AND COALESCE(j.token, -1) = r.token
  ON CONFLICT (id) DO UPDATE SET state = excluded.state, output = excluded.output,
    error = excluded.error, attempts = excluded.attempts, started_at = excluded.started_at,
    finished_at = excluded.finished_at, duration_ms = excluded.duration_ms,
    keep_until = excluded.keep_until`,
);
/** Kept jobs whose time ran out by `{{now $1}}` (read once: the index on `keep_until` serves it). */
const PRUNE_KEPT = statement(
  "DELETE FROM completed_jobs WHERE keep_until <= (SELECT {{now $1}})",
);
/** Kept jobs that finished more than `$2` ms before `{{now $1}}`. */
const PRUNE_FINISHED = statement(
  "DELETE FROM completed_jobs WHERE finished_at < (SELECT {{now $1}} - $2)",
);
/**
 * Where job `$1` stands; `leased` is 1 when its lease still runs at
 * `{{now $2}}` and it started (a job claimed ahead has not).
 */
const RESULT = statement(
  `SELECT 'job' AS source, name, attempts,
    CASE WHEN token IS NOT NULL AND available_at > {{now $2}} AND claimed_ahead = 0 THEN 1
      ELSE 0 END AS leased,
    CAST(NULL AS TEXT) AS output, CAST(NULL AS TEXT) AS error, cancel_requested AS state
    FROM jobs WHERE id = $1
  UNION ALL SELECT 'kept', name, attempts, 0, output, error, state FROM completed_jobs
    WHERE id = $1
  UNION ALL SELECT 'failed', name, attempts, 0, CAST(NULL AS TEXT), error, CAST(NULL AS TEXT)
    FROM failed_jobs WHERE id = $1`,
);
const COMPLETED_COLUMNS =
  "id, queue, name, state, payload, output, error, attempts, created_at, started_at, finished_at, duration_ms";
const COMPLETED_PAGE = statement(
  `SELECT ${COMPLETED_COLUMNS} FROM completed_jobs
  WHERE (CAST($1 AS text) IS NULL OR name = CAST($1 AS text))
    AND (CAST($2 AS text) IS NULL OR queue = CAST($2 AS text))
  ORDER BY finished_at DESC, id DESC LIMIT $3 OFFSET $4`,
);
const COMPLETED_ONE = statement(`SELECT ${COMPLETED_COLUMNS} FROM completed_jobs WHERE id = $1`, {
  oneRow: true,
});
const AWAIT = statement("UPDATE jobs SET awaited = 1 WHERE id = $1");
/**
 * Job `$1`, locked, and whether it runs: its lease still runs at `now`,
 * `{{now $2}}`, and it started (a job claimed ahead has not).
 */
const FIND = statement(
  `SELECT id, keyed, ${LINK_COLUMNS}, token,
    CASE WHEN token IS NOT NULL AND available_at > {{now $2}} AND claimed_ahead = 0 THEN 1
      ELSE 0 END AS leased,
    {{now $2}} AS now
  FROM jobs WHERE id = $1 {{forUpdate}}`,
  { oneRow: true },
);
const FINISHED = statement(
  `SELECT id FROM completed_jobs WHERE id = $1 UNION ALL SELECT id FROM failed_jobs WHERE id = $1`,
);
const REMOVE = statement("DELETE FROM jobs WHERE id = $1");
const ASK_CANCEL = statement("UPDATE jobs SET cancel_requested = $1 WHERE id = $2");
const CANCELS_ASKED = statement(
  `SELECT id, token, cancel_requested FROM jobs
  WHERE id IN {{ids $1}} AND cancel_requested IS NOT NULL`,
);
/** Pauses `$1` at `{{now $2}}`, until `$3` ms after it (null: until resumed). */
const PAUSE = statement(
  `INSERT INTO queue_pauses (queue, paused_at, until, reason)
  VALUES ($1, {{now $2}}, {{now $2}} + $3, $4)
  ON CONFLICT (queue) DO UPDATE SET paused_at = excluded.paused_at, until = excluded.until,
    reason = excluded.reason`,
);
const RESUME = statement(
  "DELETE FROM queue_pauses WHERE queue = $1 AND (until IS NULL OR until > {{now $2}})",
);
const DROP_PAUSE = statement("DELETE FROM queue_pauses WHERE queue = $1");
const PAUSED = statement(
  `SELECT queue, paused_at, until, reason FROM queue_pauses
  WHERE until IS NULL OR until > {{now $1}} ORDER BY queue`,
);

/** When `completed_jobs` was last pruned by a settle of this store: at most once a minute. */
export class CompletedPruning {
  #prunedAt = -Infinity;

  /** The time to prune kept rows up to, if a prune is due for a tick whose latest settle is `at`. */
  due(at: number): number | null {
    if (!(at >= this.#prunedAt + 60_000)) return null;
    this.#prunedAt = at;
    return at;
  }
}

type Recorded = Extract<Settlement, { kind: "complete" | "cancel" }>;

/**
 * The settle's `completed_jobs` step, before the job rows are deleted: the
 * successes and cancels that keep their job are copied with their output
 * (or reason), each fenced by its token, in one statement; kept rows past
 * their time are pruned at most once a minute.
 */
export function* recordFinished(
  dialect: Dialect,
  settlements: readonly Settlement[],
  pruning: CompletedPruning,
): Script<void> {
  if (settlements.length === 0) return;
  // Times as ms after the tick's latest end, which the statement puts on the store's clock.
  const at = Math.max(...settlements.map((settlement) => settlement.at));
  const kept = settlements.filter((settlement): settlement is Recorded =>
    (settlement.kind === "complete" || settlement.kind === "cancel") &&
    (settlement.keepUntil ?? 0) > settlement.at
  );
  if (kept.length > 0) {
    yield* exec(
      RECORD,
      kept.map((settlement) => {
        const duration = settlement.durationMs === undefined
          ? null
          : Math.round(settlement.durationMs);
        return [
          settlement.id,
          settlement.token,
          settlement.kind === "complete" ? "completed" : "cancelled",
          settlement.kind === "complete" ? settlement.output ?? null : null,
          settlement.kind === "cancel" ? settlement.reason : null,
          duration === null ? null : settlement.at - duration - at,
          settlement.at - at,
          duration,
          (settlement.keepUntil ?? 0) - at,
        ];
      }),
      clockParam(dialect, at),
    );
  }
  const cutoff = pruning.due(at);
  if (cutoff !== null) yield* exec(PRUNE_KEPT, clockParam(dialect, cutoff));
}

/** Deletes kept jobs that finished before `before`, `now` being the caller's now; how many. */
export function* pruneCompleted(dialect: Dialect, before: number, now: number): Script<number> {
  return (yield* exec(PRUNE_FINISHED, clockParam(dialect, now), now - before)).count;
}

interface StoredResult {
  readonly source: "job" | "kept" | "failed";
  readonly name: string;
  readonly attempts: number;
  readonly leased: number;
  readonly output: string | null;
  readonly error: string | null;
  readonly state: string | null;
}

/** Where job `id` stands at `now`, from the one table that holds it, or null. */
export function* result(dialect: Dialect, id: number, now: number): Script<JobResultRow | null> {
  const { rows: [row] } = yield* exec<StoredResult>(RESULT, id, clockParam(dialect, now));
  if (row === undefined) return null;
  const base = { name: row.name, attempts: Number(row.attempts) };
  switch (row.source) {
    case "job": {
      const leased = Number(row.leased) === 1;
      return {
        ...base,
        state: leased ? "running" : "pending",
        output: null,
        error: null,
        cancelRequested: row.state,
      };
    }
    case "kept":
      return {
        ...base,
        state: row.state as FinishedState,
        output: row.output,
        error: row.error,
        cancelRequested: null,
      };
    case "failed":
      return { ...base, state: "failed", output: null, error: row.error, cancelRequested: null };
  }
}

interface StoredCompleted {
  readonly id: number;
  readonly queue: string;
  readonly name: string;
  readonly state: FinishedState;
  readonly payload: string;
  readonly output: string | null;
  readonly error: string | null;
  readonly attempts: number;
  readonly created_at: number;
  readonly started_at: number | null;
  readonly finished_at: number;
  readonly duration_ms: number | null;
}

function toCompletedJobRow(row: StoredCompleted): CompletedJobRow {
  const optional = (value: number | null) => value === null ? null : Number(value);
  return {
    id: Number(row.id),
    queue: row.queue,
    name: row.name,
    state: row.state,
    payload: row.payload,
    output: row.output,
    error: row.error,
    attempts: Number(row.attempts),
    createdAt: Number(row.created_at),
    startedAt: optional(row.started_at),
    finishedAt: Number(row.finished_at),
    durationMs: optional(row.duration_ms),
  };
}

/** Kept jobs matching `filter`, last finished first. */
export function* completed(filter: CompletedFilter, page: Page): Script<CompletedJobRow[]> {
  const { rows } = yield* exec<StoredCompleted>(
    COMPLETED_PAGE,
    filter.name ?? null,
    filter.queue ?? null,
    page.limit,
    page.offset,
  );
  return rows.map(toCompletedJobRow);
}

/** One kept job, or null. */
export function* completedJob(id: number): Script<CompletedJobRow | null> {
  const { rows: [row] } = yield* exec<StoredCompleted>(COMPLETED_ONE, id);
  return row === undefined ? null : toCompletedJobRow(row);
}

/**
 * Marks job `id` as awaited, so the settle that ends it wakes the waiters;
 * whether it is there. Wakes workers again: a claim that ran while this
 * held the row skipped it (`SKIP LOCKED`), after the dispatch had woken them.
 */
export function* markAwaited(dialect: Dialect, id: number): Script<boolean> {
  const marked = (yield* exec(AWAIT, id)).count === 1;
  if (marked) yield* dialect.notify();
  return marked;
}

/**
 * Cancels job `id`: one not started (not leased, claimed ahead by a worker
 * that has not started it, or whose worker died) is recorded as cancelled
 * and deleted (a worker holding it ahead then finds its start refused), its batch counting it as skipped, its chain's
 * `catch` queued and its keys and locks released; a running one gets its
 * cancel asked, for its worker to see.
 */
export function* cancel(dialect: Dialect, request: CancelRequest): Script<CancelOutcome> {
  const { id, reason, keepUntil } = request;
  const { rows: [job] } = yield* exec<
    JobLinks & { id: number; token: number | null; leased: number; now: number; keyed: number }
  >(FIND, id, clockParam(dialect, request.now));
  if (job === undefined) {
    return (yield* exec(FINISHED, id)).rows.length > 0 ? "finished" : "not-found";
  }
  if (Number(job.leased) === 1) {
    yield* exec(ASK_CANCEL, reason, id);
    yield* dialect.notify();
    return "cancelling";
  }
  // The store's now (the database's on PostgreSQL), read by the find: what the cancel queues
  // (a chain's catch, a batch's callbacks) is due by it.
  const now = Number(job.now);
  const keepMs = keepUntil - request.now;
  if (keepMs > 0) {
    const token = job.token === null ? UNLEASED : Number(job.token);
    yield* exec(RECORD, [[id, token, "cancelled", null, reason, null, 0, null, keepMs]], now);
  }
  yield* exec(REMOVE, id);
  yield* chainsBatches.settled(job, "cancel", now);
  yield* releaseRemoved([id]);
  yield* dialect.notify();
  return "cancelled";
}

/** The leases among `leases` whose job had a cancel asked, with the reason. */
export function* cancelsAsked(leases: readonly Lease[]): Script<CancelRequested[]> {
  if (leases.length === 0) return [];
  const { rows } = yield* exec<{ id: number; token: number; cancel_requested: string }>(
    CANCELS_ASKED,
    leases.map((lease) => lease.id),
  );
  const held = new Set(leases.map((lease) => `${lease.id}:${lease.token}`));
  return rows.filter((row) => held.has(`${row.id}:${row.token}`)).map((row) => ({
    id: Number(row.id),
    token: Number(row.token),
    reason: row.cancel_requested,
  }));
}

/**
 * Pauses `queue` from `now` until `until` (null: until resumed): on the
 * store's clock, as long after its now.
 */
export function* pause(
  dialect: Dialect,
  queue: string,
  now: number,
  until: number | null,
  reason: string | null,
): Script<void> {
  yield* exec(PAUSE, queue, clockParam(dialect, now), until === null ? null : until - now, reason);
}

/** Resumes `queue`; whether it was paused at `now`. Wakes idle workers. */
export function* resume(dialect: Dialect, queue: string, now: number): Script<boolean> {
  const { count } = yield* exec(RESUME, queue, clockParam(dialect, now));
  yield* exec(DROP_PAUSE, queue);
  yield* dialect.notify();
  return count > 0;
}

/** The queues paused at `now`, by name. */
export function* paused(dialect: Dialect, now: number): Script<PauseRow[]> {
  const { rows } = yield* exec<
    { queue: string; paused_at: number; until: number | null; reason: string | null }
  >(PAUSED, clockParam(dialect, now));
  return rows.map((row) => ({
    queue: row.queue,
    pausedAt: Number(row.paused_at),
    until: row.until === null ? null : Number(row.until),
    reason: row.reason,
  }));
}
