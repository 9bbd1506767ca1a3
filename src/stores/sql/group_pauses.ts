/**
 * Paused groups in SQL (`group_pauses`, by job name and group key, in every
 * queue): the claim's window of groups leaves them out (src/stores/sql/groups.ts),
 * and a start confirmation refuses a job of one held ahead, as for a paused
 * queue. A pause does not stop jobs already running.
 *
 * A pause with an end (`until`, on the store's clock; a "hold", as
 * `pauseGroup(…, { forMs })` and `ctx.rateLimitGroup()` make) stops holding
 * once its end has passed: every reader compares `until` with its now, and
 * the row stays until a resume or a later pause replaces it, or a settle's
 * upkeep deletes it ({@linkcode pruneHolds}, a minute after its end). A
 * later pause never shortens one still in force: a pause without an end
 * stays without one, and of two holds the later end wins.
 *
 * @internal
 * @module
 */
import type { PausedGroup } from "../rows/job_control.ts";
import type { Page } from "../rows/read.ts";
import { clockParam, type Dialect } from "./dialect.ts";
import { exec, type Script, wakeAfterCommit } from "./script.ts";
import { statement } from "./statement.ts";
import { HoldsPrune, PRUNE_EVERY_MS } from "./upkeep.ts";

/** Most rows of `group_pauses` one settle's prune looks at. */
export const HOLDS_PRUNE_CHUNK = 1000;

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
  if (held) yield* wakeAfterCommit();
  return held;
}

const PAUSED_GROUPS = statement(
  `SELECT name, group_key, paused_at, until FROM group_pauses
  WHERE until IS NULL OR until > {{now $1}} ORDER BY name, group_key LIMIT $2 OFFSET $3`,
);

/** The groups paused or held at `now`, by job name then key, the slice `page` of them. */
export function* pausedGroups(dialect: Dialect, now: number, page: Page): Script<PausedGroup[]> {
  const { rows } = yield* exec<
    { name: string; group_key: string; paused_at: number | string; until: number | string | null }
  >(PAUSED_GROUPS, clockParam(dialect, now), page.limit, page.offset);
  return rows.map((row) => ({
    name: row.name,
    key: row.group_key,
    pausedAt: new Date(Number(row.paused_at)),
    until: row.until === null ? null : new Date(Number(row.until)),
  }));
}

/**
 * The next `$3` rows of `group_pauses` after (`$1`, `$2`) in key order,
 * each with whether it is a hold that ended `$5` ms or more before
 * `{{now $4}}`.
 */
const WALK_PAUSES = statement(
  `SELECT name, group_key,
    CASE WHEN until <= {{now $4}} - $5 THEN 1 ELSE 0 END AS passed
  FROM group_pauses WHERE (name, group_key) > ($1, $2)
  ORDER BY name, group_key LIMIT $3`,
);

/**
 * Deletes the groups `$1` whose hold ended `$3` ms or more before
 * `{{now $2}}`, checked again under the rows' locks. On PostgreSQL a row
 * another transaction holds (a pause or hold being written) is skipped:
 * the prune never waits for a lock, so it takes no part in a deadlock with
 * the settles that hold groups in the same transaction.
 */
const DELETE_PASSED = statement(
  `DELETE FROM group_pauses WHERE (name, group_key) IN (
    SELECT name, group_key FROM group_pauses
    WHERE (name, group_key) IN (SELECT name, group_key FROM {{rows $1 name text, group_key text}} k)
      AND until <= {{now $2}} - $3
    {{skipLocked}})`,
);

/**
 * Where a store's walk through `group_pauses` stands: the last key read
 * (`["", ""]` is before every key: a name is never empty).
 */
export type HoldsWalk = HoldsPrune<readonly [string, string]>;

/** A walk through `group_pauses` not yet begun. */
export function holdsWalk(): HoldsWalk {
  return new HoldsPrune<readonly [string, string]>(["", ""]);
}

/**
 * Deletes holds whose end passed at least a minute before `at` (on the
 * store's clock), in the next chunk of `prune`'s walk through
 * `group_pauses` (at most {@linkcode HOLDS_PRUNE_CHUNK} rows; nothing is
 * read between walks, which start at most once a minute). A passed hold
 * holds nothing, so no claim sees a change; the minute keeps that true for
 * a process whose clock (with `clock: "caller"`) is up to a minute behind
 * this one's. Pauses without an end are never deleted here.
 */
export function* pruneHolds(dialect: Dialect, prune: HoldsWalk, at: number): Script<void> {
  const after = prune.next(at);
  if (after === null) return;
  const now = clockParam(dialect, at);
  const [name, key] = after;
  const { rows } = yield* exec<{ name: string; group_key: string; passed: number | string }>(
    WALK_PAUSES,
    name,
    key,
    HOLDS_PRUNE_CHUNK,
    now,
    PRUNE_EVERY_MS,
  );
  const last = rows.at(-1);
  prune.walked(
    at,
    rows.length < HOLDS_PRUNE_CHUNK || last === undefined ? null : [last.name, last.group_key],
  );
  const passed = rows.filter((row) => Number(row.passed) === 1);
  if (passed.length === 0) return;
  yield* exec(
    DELETE_PASSED,
    passed.map((row) => [row.name, row.group_key]),
    now,
    PRUNE_EVERY_MS,
  );
}
