/**
 * Paused groups in SQL (`group_pauses`, by job name and group key, in every
 * queue): the claim's window of groups leaves them out (src/stores/sql/groups.ts),
 * and a start confirmation refuses a job of one held ahead, as for a paused
 * queue. A pause does not stop jobs already running.
 *
 * @internal
 * @module
 */
import { clockParam, type Dialect } from "./dialect.ts";
import { exec, type Script } from "./script.ts";
import { statement } from "./statement.ts";

/** The condition that the group of the job row `row` (an alias) is not paused. */
export function groupNotPaused(row: string): string {
  return `NOT EXISTS (SELECT 1 FROM group_pauses gp
    WHERE gp.name = ${row}.name AND gp.group_key = ${row}.group_key)`;
}

const PAUSE_GROUP = statement(
  `INSERT INTO group_pauses (name, group_key, paused_at) VALUES ($1, $2, {{now $3}})
  ON CONFLICT (name, group_key) DO NOTHING`,
);
const RESUME_GROUP = statement("DELETE FROM group_pauses WHERE name = $1 AND group_key = $2");

/**
 * Pauses group `key` of job `name`. Once it commits, no claim or start
 * confirmation that began before it is still open, so none of the group's
 * jobs starts after it but those already started.
 */
export function* pauseGroup(
  dialect: Dialect,
  name: string,
  key: string,
  now: number,
): Script<void> {
  yield* dialect.waitOutStarts();
  yield* exec(PAUSE_GROUP, name, key, clockParam(dialect, now));
}

/** Resumes group `key` of job `name`; whether it was paused. Wakes idle workers. */
export function* resumeGroup(dialect: Dialect, name: string, key: string): Script<boolean> {
  const { count } = yield* exec(RESUME_GROUP, name, key);
  if (count > 0) yield* dialect.notify();
  return count > 0;
}
