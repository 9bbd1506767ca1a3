/**
 * Paused queues in SQL: pausing and resuming a queue, listing the pauses,
 * and the condition the claim reads them through ({@linkcode notPaused}).
 *
 * @internal
 * @module
 */
import type { PausedQueue } from "../rows/job_control.ts";
import { clockParam, type Dialect } from "./dialect.ts";
import { exec, type Script, wakeAfterCommit } from "./script.ts";
import { statement } from "./statement.ts";

/**
 * The claim's condition that `queue` (a placeholder) is not paused at `now`
 * (an SQL expression): one index lookup per queue, in the claim's one statement.
 */
export function notPaused(queue: string, now: string): string {
  return `NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.queue = ${queue}
    AND (p.until IS NULL OR p.until > ${now}))`;
}

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

/**
 * Pauses `queue` from `now` until `until` (null: until resumed): on the
 * store's clock, as long after its now. Once it commits, no claim or start
 * confirmation that began before it is still open, so no job of `queue`
 * starts after it but those already started.
 */
export function* pause(
  dialect: Dialect,
  queue: string,
  now: number,
  until: number | null,
  reason: string | null,
): Script<void> {
  yield* dialect.waitOutStarts();
  yield* exec(PAUSE, queue, clockParam(dialect, now), until === null ? null : until - now, reason);
}

/** Resumes `queue`; whether it was paused at `now`. Wakes idle workers. */
export function* resume(dialect: Dialect, queue: string, now: number): Script<boolean> {
  const { count } = yield* exec(RESUME, queue, clockParam(dialect, now));
  yield* exec(DROP_PAUSE, queue);
  yield* wakeAfterCommit();
  return count > 0;
}

/** The queues paused at `now`, by name. */
export function* paused(dialect: Dialect, now: number): Script<PausedQueue[]> {
  const { rows } = yield* exec<
    { queue: string; paused_at: number; until: number | null; reason: string | null }
  >(PAUSED, clockParam(dialect, now));
  return rows.map((row) => ({
    queue: row.queue,
    pausedAt: new Date(Number(row.paused_at)),
    until: row.until === null ? null : new Date(Number(row.until)),
    reason: row.reason,
  }));
}
