/**
 * The start confirmation of jobs claimed ahead. A claim that takes jobs
 * beyond the worker's free slots leases them under its token with the mark
 * `claimed_ahead` = 1: to every rule of the queue they have not started. A
 * cancel removes such a job as it would a pending one, a pause keeps it
 * from starting, its `uniqueUntil: "processing"` key still holds, and a
 * claim that takes over its lease after its worker died charges it nothing.
 * Before the worker starts one, its settle (the same transaction that
 * records how the jobs before it ended) clears the mark in one fenced
 * statement: only while the row still holds that claim's token (a cancel
 * deleted it, or another worker took it over after the lease ran out) and
 * its queue is not paused; it renews the lease of each job it confirms, and
 * confirms again a job an earlier try of it confirmed. A job it refuses for
 * a pause is given back unleased, due when it was, its attempt not counted,
 * and the middleware locks its claim took are released. The keys that end
 * when their job starts are released for the jobs confirmed.
 *
 * @internal
 * @module
 */
import type { StartRequest } from "../store.ts";
import { clockParam, type Dialect, KEYED } from "./dialect.ts";
import { groupNotPaused } from "./group_pauses.ts";
import { notPaused } from "./pauses.ts";
import { releaseHeld, releaseOnStart } from "./keys.ts";
import { exec, type Script } from "./script.ts";
import { statement } from "./statement.ts";

/**
 * When a row its claim still holds ahead was due before that claim, the
 * claim's lease being `lease` ms (an SQL expression): the claim set
 * `available_at` to its now + the lease and `waited_ms` to its now less the
 * old due time, and nothing changes them while the row is held ahead.
 */
export function dueBeforeClaim(lease: string): string {
  return `available_at - ${lease} - COALESCE(waited_ms, 0)`;
}

/**
 * Gives claimed rows still held ahead back as the claim found them:
 * unleased, due when they were ({@linkcode dueBeforeClaim}), their attempt
 * not counted.
 */
export const UNCLAIM = statement(
  `UPDATE jobs SET token = NULL, available_at = ${dueBeforeClaim("$1")},
    attempts = attempts - 1, claimed_ahead = 0
  WHERE id IN {{ids $2}} AND token = $3 AND claimed_ahead = 1`,
);

/**
 * Clears the start mark of the jobs `$1` that claim `$2` holds ahead, where
 * their queue is not paused at `{{now $3}}`, and renews their lease to `$4`
 * ms after it; the jobs it marked. The lease the claim gave may have run out
 * while the job waited for this confirmation (a slow tick, a short lease):
 * still held under the claim's token, nobody took it over, and the renewal
 * keeps another worker from taking over (and charging a crash to) a job that
 * is starting here. A job of `$1` that the claim holds already started was
 * confirmed by an earlier try of the same confirmation (whose reply, or whose
 * later statements, were lost: the worker asks again): it is confirmed
 * again, whatever pause came since, and its lease renewed.
 */
const CONFIRM_START = statement(
  `UPDATE jobs SET claimed_ahead = 0, available_at = {{now $3}} + $4
  WHERE id IN {{ids $1}} AND token = $2
    AND (claimed_ahead = 0 OR (${notPaused("jobs.queue", "(SELECT {{now $3}})")} AND ${
    groupNotPaused("jobs", "(SELECT {{now $3}})")
  }))
  RETURNING id, keyed`,
);

/**
 * Confirms the starts `request` asks for, one statement per claim token;
 * the ids of the jobs that may start. A job not among them must not start:
 * it was cancelled, taken over by another worker, or given back because
 * its queue is paused.
 */
export function* confirmStarts(dialect: Dialect, request: StartRequest): Script<number[]> {
  const idsByToken = new Map<number, number[]>();
  for (const { id, token } of request.leases) {
    const ids = idsByToken.get(token);
    if (ids === undefined) idsByToken.set(token, [id]);
    else ids.push(id);
  }
  const now = clockParam(dialect, request.now);
  const started: number[] = [];
  const keyed: number[] = [];
  for (const [token, ids] of idsByToken) {
    const { rows } = yield* exec<{ id: number; keyed: number }>(
      CONFIRM_START,
      ids,
      token,
      now,
      request.leaseMs,
    );
    const confirmed = new Set<number>();
    for (const row of rows) {
      const id = Number(row.id);
      confirmed.add(id);
      started.push(id);
      if (Number(row.keyed) === KEYED.untilStarted) keyed.push(id);
    }
    // Refused while still held under this token: its queue is paused. Give it back, with the
    // middleware locks its claim took (a row taken over or deleted keeps or lost them already).
    const refused = ids.filter((id) => !confirmed.has(id));
    if (refused.length > 0) {
      yield* exec(UNCLAIM, request.leaseMs, refused, token);
      yield* releaseHeld([], refused.map((id) => ({ id, token })));
    }
  }
  yield* releaseOnStart(keyed);
  return started;
}
