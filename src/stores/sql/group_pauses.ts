/**
 * Paused groups in SQL (`group_pauses`, by job name and group key, in every
 * queue): the claim's window of groups leaves them out (src/stores/sql/groups.ts),
 * and a start confirmation refuses a job of one held ahead, as for a paused
 * queue. A pause does not stop jobs already running.
 *
 * A pause with an end (`until`, on the store's clock; a "hold", as
 * `pauseGroup(…, { forMs })` and `ctx.rateLimitGroup()` make) stops holding
 * once its end has passed: every reader compares `until` with its now, and
 * the row stays until a resume or a later pause replaces it. A later pause
 * never shortens one still in force: a pause without an end stays without
 * one, and of two holds the later end wins.
 *
 * @internal
 * @module
 */
import { clockParam, type Dialect } from "./dialect.ts";
import { exec, type Script } from "./script.ts";
import { statement } from "./statement.ts";

/**
 * The condition that the group of the job row `row` (an alias) is not
 * paused at `now` (an SQL expression).
 */
export function groupNotPaused(row: string, now: string): string {
  return `NOT EXISTS (SELECT 1 FROM group_pauses gp
    WHERE gp.name = ${row}.name AND gp.group_key = ${row}.group_key
      AND (gp.until IS NULL OR gp.until > ${now}))`;
}

/**
 * Pauses group (`$1`, `$2`) at `{{now $3}}`, until `$4` ms after it (null:
 * until resumed). A pause still in force keeps its start and is only ever
 * lengthened; one that has passed is replaced.
 */
const PAUSE_GROUP = statement(
  `WITH now_ms AS (SELECT {{now $3}} AS t)
  INSERT INTO group_pauses (name, group_key, paused_at, until)
  SELECT $1, $2, t, t + $4 FROM now_ms WHERE true
  ON CONFLICT (name, group_key) DO UPDATE SET
    paused_at = CASE WHEN group_pauses.until <= (SELECT t FROM now_ms) THEN excluded.paused_at
      ELSE group_pauses.paused_at END,
    until = CASE
      WHEN group_pauses.until <= (SELECT t FROM now_ms) THEN excluded.until
      WHEN group_pauses.until IS NULL OR excluded.until IS NULL THEN NULL
      WHEN excluded.until > group_pauses.until THEN excluded.until
      ELSE group_pauses.until END`,
);
const RESUME_GROUP = statement(
  `DELETE FROM group_pauses WHERE name = $1 AND group_key = $2
  RETURNING CASE WHEN until IS NULL OR until > {{now $3}} THEN 1 ELSE 0 END AS held`,
);

/**
 * Pauses group `key` of job `name` from `now` until `until` (null: until
 * resumed): on the store's clock, as long after its now. Once it commits,
 * no claim or start confirmation that began before it is still open, so
 * none of the group's jobs starts after it but those already started.
 */
export function* pauseGroup(
  dialect: Dialect,
  name: string,
  key: string,
  now: number,
  until: number | null,
): Script<void> {
  yield* dialect.waitOutStarts();
  yield* exec(
    PAUSE_GROUP,
    name,
    key,
    clockParam(dialect, now),
    until === null ? null : until - now,
  );
}

/**
 * Holds group `key` of job `name` from `now` until `until`, in a settle's
 * transaction (a handler's `ctx.rateLimitGroup`): as {@linkcode pauseGroup}
 * without waiting out open claims, so a claim already under way may still
 * take one of the group's jobs.
 */
export function* holdGroup(
  dialect: Dialect,
  name: string,
  key: string,
  now: number,
  until: number,
): Script<void> {
  yield* exec(PAUSE_GROUP, name, key, clockParam(dialect, now), until - now);
}

/**
 * Resumes group `key` of job `name`, ending its pause or hold; whether it
 * was paused at `now`. Wakes idle workers.
 */
export function* resumeGroup(
  dialect: Dialect,
  name: string,
  key: string,
  now: number,
): Script<boolean> {
  const { rows } = yield* exec<{ held: number | string }>(
    RESUME_GROUP,
    name,
    key,
    clockParam(dialect, now),
  );
  const held = rows.some((row) => Number(row.held) === 1);
  if (held) yield* dialect.notify();
  return held;
}
