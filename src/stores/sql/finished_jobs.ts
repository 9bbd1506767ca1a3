/**
 * Finished jobs in SQL: recorded in `completed_jobs` by the settle (or the
 * cancel) that ends them, pruned past their time, and read back as results
 * and the kept history; waiting for a job marks it awaited.
 *
 * @internal
 * @module
 */
import type {
  FinishedFilter,
  FinishedJob,
  FinishedState,
  JobResultRow,
} from "../rows/job_control.ts";
import type { Page, Settlement } from "../store.ts";
import { clockParam, type Dialect, runningAt, STARTED_ATTEMPTS } from "./dialect.ts";
import { type StoredFinished, toFinishedJob } from "./stored_rows.ts";
import { exec, type Script, wakeAfterCommit } from "./script.ts";
import { statement } from "./statement.ts";
import * as steps from "./steps.ts";
import type { PruneSchedule } from "./upkeep.ts";

/** No token: the value the record statement's fence takes for a job not leased. */
const UNLEASED = -1;

/**
 * Copies jobs about to be deleted into `completed_jobs`, each fenced by its
 * token (`-1`: none), all of a settle's in one statement. Each row's times
 * are given as ms after `{{now $2}}` (the caller's now, or the database's).
 * A job whose claim never started its handler (`refund` 1: it expired, a
 * cancel asked during an earlier attempt was seen by this claim, or a
 * cancel removed it held ahead) has the attempt its claim counted taken off.
 */
const RECORD = statement(
  `INSERT INTO completed_jobs (id, queue, name, state, payload, output, error, attempts,
    created_at, started_at, finished_at, duration_ms, keep_until)
  SELECT j.id, j.queue, j.name, r.state, j.payload, r.output, r.error, j.attempts - r.refund,
    j.created_at, clock.t + r.started_ms, clock.t + r.finished_ms, r.duration_ms,
    clock.t + r.keep_ms
  FROM {{rows $1 id int, token int, state text, output text, error text, started_ms int,
    finished_ms int, duration_ms int, keep_ms int, refund int}} r
    CROSS JOIN (SELECT {{now $2}} AS t) clock,
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
 * Where each of the jobs `{{ids $1}}` stands, one row per job some table
 * holds; `leased` is 1 when its lease still runs at `{{now $2}}` and it
 * started (a job claimed ahead has not, nor counted its attempt).
 */
const RESULTS = statement(
  `SELECT 'job' AS source, id, name, ${STARTED_ATTEMPTS} AS attempts,
    CASE WHEN ${runningAt("{{now $2}}")} THEN 1 ELSE 0 END AS leased,
    CAST(NULL AS TEXT) AS output, CAST(NULL AS TEXT) AS error, cancel_requested AS state
    FROM jobs WHERE id IN {{ids $1}}
  UNION ALL SELECT 'kept', id, name, attempts, 0, output, error, state FROM completed_jobs
    WHERE id IN {{ids $1}}
  UNION ALL SELECT 'failed', id, name, attempts, 0, CAST(NULL AS TEXT), error, CAST(NULL AS TEXT)
    FROM failed_jobs WHERE id IN {{ids $1}}`,
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
  pruning: PruneSchedule,
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
          settlement.kind === "complete"
            ? "completed"
            : settlement.expired
            ? "expired"
            : "cancelled",
          settlement.kind === "complete" ? settlement.output ?? null : null,
          settlement.kind === "cancel" ? settlement.reason : null,
          duration === null ? null : settlement.at - duration - at,
          settlement.at - at,
          duration,
          (settlement.keepUntil ?? 0) - at,
          settlement.kind === "cancel" && settlement.refundAttempt === true ? 1 : 0,
        ];
      }),
      clockParam(dialect, at),
    );
  }
  if (pruning.due(at)) yield* exec(PRUNE_KEPT, clockParam(dialect, at));
}

/** A job a cancel removes, as {@linkcode recordCancelled} keeps it. */
export interface CancelledJob {
  /** Its id. */
  readonly id: number;
  /** The token of the claim that holds it, or null. */
  readonly token: number | null;
  /** How long after the store's now it is kept, in ms. */
  readonly keepMs: number;
  /** True when a worker holds it ahead, unstarted: the attempt that claim counted is not one. */
  readonly heldAhead: boolean;
}

/**
 * Records `jobs`, about to be deleted without running to their end, as
 * cancelled with `reason`, each kept `keepMs` after `now` (the store's now),
 * with the attempts its handler started.
 */
export function* recordCancelled(
  jobs: readonly CancelledJob[],
  reason: string,
  now: number,
): Script<void> {
  if (jobs.length === 0) return;
  const rows = jobs.map(({ id, token, keepMs, heldAhead }) => [
    id,
    token ?? UNLEASED,
    "cancelled",
    null,
    reason,
    null,
    0,
    null,
    keepMs,
    heldAhead ? 1 : 0,
  ]);
  yield* exec(RECORD, rows, now);
}

/**
 * Deletes kept jobs that finished before `before`, `now` being the caller's
 * now, with the memos and signals of the jobs gone; how many.
 */
export function* pruneFinished(dialect: Dialect, before: number, now: number): Script<number> {
  const { count } = yield* exec(PRUNE_FINISHED, clockParam(dialect, now), now - before);
  if (count > 0) yield* steps.prune();
  return count;
}

interface StoredResult {
  readonly source: "job" | "kept" | "failed";
  readonly id: number;
  readonly name: string;
  readonly attempts: number;
  readonly leased: number;
  readonly output: string | null;
  readonly error: string | null;
  readonly state: string | null;
}

function toResultRow(row: StoredResult): JobResultRow {
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

/**
 * Where each of the jobs `ids` stands at `now`, read in one statement, by
 * id; a job no table holds has no entry.
 */
export function* results(
  dialect: Dialect,
  ids: readonly number[],
  now: number,
): Script<Map<number, JobResultRow>> {
  const found = new Map<number, JobResultRow>();
  if (ids.length === 0) return found;
  const { rows } = yield* exec<StoredResult>(RESULTS, ids, clockParam(dialect, now));
  for (const row of rows) found.set(Number(row.id), toResultRow(row));
  return found;
}

/** Kept jobs matching `filter`, last finished first. */
export function* finished(filter: FinishedFilter, page: Page): Script<FinishedJob[]> {
  const { rows } = yield* exec<StoredFinished>(
    COMPLETED_PAGE,
    filter.name ?? null,
    filter.queue ?? null,
    page.limit,
    page.offset,
  );
  return rows.map(toFinishedJob);
}

/** One kept job, or null. */
export function* finishedJob(id: number): Script<FinishedJob | null> {
  const { rows: [row] } = yield* exec<StoredFinished>(COMPLETED_ONE, id);
  return row === undefined ? null : toFinishedJob(row);
}

/**
 * Marks job `id` as awaited, so the settle that ends it wakes the waiters;
 * whether it is there. One statement, then a wake-up of the workers after
 * its commit when it was there (a claim that ran while this held the row
 * skipped it with `SKIP LOCKED`, after the dispatch had woken them).
 */
export function* markAwaited(id: number): Script<boolean> {
  const marked = (yield* exec(AWAIT, id)).count === 1;
  if (marked) yield* wakeAfterCommit();
  return marked;
}
