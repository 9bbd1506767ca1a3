/**
 * Job logs and the attempt spans a retry links to: what a tick's settle
 * writes beside its settlements (in the same transaction, so a tick's lines
 * are batched into its one commit), the per-job cap, reading one job's log,
 * and pruning.
 *
 * Pruning rule: a job's lines go with its history. Once the job is in none
 * of `jobs`, `failed_jobs` and `completed_jobs` (it succeeded and its kept
 * record expired after `keepFinishedMs`, or it was forgotten or cleared),
 * its lines, and its step memos and signals, are deleted by a settle, at
 * most once a minute per store instance.
 *
 * @internal
 * @module
 */
import type { AttemptSpan, LogLineRow, LogWrites, NewLogLine } from "../rows/logs.ts";
import { clockParam, type Dialect } from "./dialect.ts";
import { each, exec, type Script } from "./script.ts";
import { statement } from "./statement.ts";
import * as steps from "./steps.ts";
import { JOB_GONE, jobStored, type PruneSchedule } from "./upkeep.ts";

/** Room kept under the cap for the line that says how many lines it dropped. */
const CAP_LINE_ROOM = 128;

/** A line written `$3` ms after `{{now $9}}` (the tick's time: the caller's, or the database's now). */
const INSERT_LINE = statement(
  `INSERT INTO job_logs (job_id, attempt, at, level, message, fields, encrypted, bytes)
  VALUES ($1, $2, {{now $9}} + $3, $4, $5, $6, $7, $8)`,
);
const OVER_CAP = statement(
  `SELECT job_id FROM job_logs WHERE job_id IN {{ids $1}}
  GROUP BY job_id HAVING SUM(bytes) > $2 ORDER BY job_id`,
);
const NEWEST_FIRST = statement(
  "SELECT id, bytes, level, fields FROM job_logs WHERE job_id = $1 ORDER BY id DESC",
);
const DROP_UP_TO = statement("DELETE FROM job_logs WHERE job_id = $1 AND id <= $2");
const INSERT_CAP_LINE = statement(
  `INSERT INTO job_logs (id, job_id, attempt, at, level, message, fields, encrypted, bytes)
  VALUES ($1, $2, 0, {{now $3}}, 'cap', $4, $5, 0, $6)`,
);
const LOG_OF = statement(
  `SELECT id, job_id, attempt, at, level, message, fields, encrypted FROM job_logs
  WHERE job_id = $1 AND ${jobStored("$1")} ORDER BY id`,
);
const PRUNE = statement(`DELETE FROM job_logs WHERE ${JOB_GONE}`);
const SET_LAST_SPAN = statement("UPDATE jobs SET last_span = $1 WHERE id = $2");

/**
 * Records the spans of attempts whose release applied (run after their
 * rows were released, in the same transaction), in id order.
 */
export function* recordSpans(spans: readonly AttemptSpan[]): Script<void> {
  const sorted = [...spans].sort((a, b) => a.id - b.id);
  yield* each(SET_LAST_SPAN, sorted.map(({ id, traceparent }) => [traceparent, id]));
}

/**
 * Appends a tick's lines, then keeps each job they belong to under the cap
 * (dropping its oldest lines and saying so in one `cap` line), then prunes
 * when `pruning` says a prune is due at `at` (the tick's latest time, on the
 * caller's clock: the lines' times keep their distance from it on the
 * store's clock).
 */
export function* writeLogs(
  dialect: Dialect,
  writes: LogWrites | undefined,
  pruning: PruneSchedule,
  at: number,
): Script<void> {
  const lines = writes?.lines ?? [];
  if (lines.length > 0) {
    const now = clockParam(dialect, at);
    yield* each(INSERT_LINE, lines.map((line) => [...lineParams(line, at), now]));
    const max = writes!.maxBytesPerJob;
    const jobIds = [...new Set(lines.map((line) => line.jobId))];
    const { rows } = yield* exec<{ job_id: number }>(OVER_CAP, jobIds, max);
    for (const { job_id: jobId } of rows) yield* keepUnderCap(Number(jobId), max, now);
  }
  if (Number.isFinite(at) && pruning.due(at)) {
    yield* exec(PRUNE);
    yield* steps.prune();
  }
}

/** One job's log, oldest line first. */
export function* logOf(jobId: number): Script<LogLineRow[]> {
  const { rows } = yield* exec<StoredLogLine>(LOG_OF, jobId);
  return rows.map((row) => ({
    id: Number(row.id),
    jobId: Number(row.job_id),
    attempt: Number(row.attempt),
    at: Number(row.at),
    level: row.level,
    message: row.message,
    fields: row.fields,
    encrypted: Number(row.encrypted) === 1,
  }));
}

interface StoredLogLine {
  readonly id: number;
  readonly job_id: number;
  readonly attempt: number;
  readonly at: number;
  readonly level: string;
  readonly message: string;
  readonly fields: string | null;
  readonly encrypted: number;
}

/** A line's first eight parameters, its time as ms after `at`. */
function lineParams(line: NewLogLine, at: number): unknown[] {
  return [
    line.jobId,
    line.attempt,
    line.at - at,
    line.level,
    line.message,
    line.fields,
    line.encrypted ? 1 : 0,
    line.bytes,
  ];
}

/**
 * Drops a job's oldest lines until the rest fit under `max` bytes with room
 * for the `cap` line, which takes the place of the newest line dropped and
 * counts every line dropped so far; it is written at `{{now}}` of `now`.
 */
function* keepUnderCap(jobId: number, max: number, now: number | null): Script<void> {
  const { rows } = yield* exec<{ id: number; bytes: number; level: string; fields: string | null }>(
    NEWEST_FIRST,
    jobId,
  );
  let kept = 0;
  let cutoff: number | null = null;
  let dropped = 0;
  for (const row of rows) {
    if (row.level === "cap") {
      dropped += droppedBefore(row.fields);
      cutoff ??= Number(row.id);
      continue;
    }
    if (cutoff === null && kept + Number(row.bytes) <= max - CAP_LINE_ROOM) {
      kept += Number(row.bytes);
      continue;
    }
    cutoff ??= Number(row.id);
    dropped++;
  }
  if (cutoff === null) return;
  yield* exec(DROP_UP_TO, jobId, cutoff);
  const message = `log capped at ${max} bytes per job: ${dropped} older line${
    dropped === 1 ? "" : "s"
  } dropped`;
  const fields = JSON.stringify({ dropped });
  yield* exec(INSERT_CAP_LINE, cutoff, jobId, now, message, fields, message.length + fields.length);
}

function droppedBefore(fields: string | null): number {
  try {
    const dropped = (JSON.parse(fields ?? "{}") as { dropped?: unknown }).dropped;
    return typeof dropped === "number" ? dropped : 0;
  } catch {
    return 0;
  }
}
