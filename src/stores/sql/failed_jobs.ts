/**
 * What the admin commands do to failed jobs: retry them (a job is in
 * exactly one table throughout), forget, flush or prune them. Each runs in
 * one write transaction.
 *
 * @internal
 * @module
 */
import * as chainsBatches from "./chains_batches.ts";
import * as flows from "./flows.ts";
import { clockParam, type Dialect, type RetrySelection } from "./dialect.ts";
import { reenterGroups } from "./groups.ts";
import { overlapRetried } from "./schedules.ts";
import * as steps from "./steps.ts";
import { exec, type Script, wakeAfterCommit } from "./script.ts";
import { type Statement, statement } from "./statement.ts";

const FORGET = statement("DELETE FROM failed_jobs WHERE id = $1");
const FLUSH = statement("DELETE FROM failed_jobs");
/** Failed jobs that failed more than `$2` ms before `{{now $1}}`. */
const PRUNE = statement("DELETE FROM failed_jobs WHERE failed_at < (SELECT {{now $1}} - $2)");

/**
 * Moves failed jobs back to their queues, due now on the store's clock (the
 * database's on PostgreSQL, else `now`); the ids moved.
 */
export function* retry(dialect: Dialect, selection: RetrySelection, now: number): Script<number[]> {
  // A caller whose clock runs ahead would otherwise hold the retried jobs back by as much.
  const at = yield* dialect.now(now);
  const moved = yield* dialect.retryFailed(selection, at);
  const ids = moved.map((row) => Number(row.id));
  yield* reenterGroups(ids);
  yield* chainsBatches.retried(moved);
  yield* flows.retried(moved, at);
  yield* overlapRetried(ids, at);
  if (moved.length > 0) yield* wakeAfterCommit();
  return ids;
}

/** Deletes one failed job (with its memos and signals, and the waiting links of its chain); whether it existed. */
export function* forget(id: number): Script<boolean> {
  if ((yield* deleteFailed(FORGET, id)) === 0) return false;
  yield* steps.dropRemoved([id]);
  return true;
}

/** Deletes every failed job, with the memos and signals of the jobs gone; how many. */
export function* flush(): Script<number> {
  const count = yield* deleteFailed(FLUSH);
  if (count > 0) yield* steps.prune();
  return count;
}

/**
 * Deletes failed jobs that failed before `before`, `now` being the caller's
 * now (on the database's clock, as long before its now), with the memos and
 * signals of the jobs gone; how many.
 */
export function* prune(dialect: Dialect, before: number, now: number): Script<number> {
  const count = yield* deleteFailed(PRUNE, clockParam(dialect, now), now - before);
  if (count > 0) yield* steps.prune();
  return count;
}

/** Deletes failed jobs, then the chain links that can never run now; how many. */
function* deleteFailed(
  remove: Statement,
  ...params: unknown[]
): Script<number> {
  const { count } = yield* exec(remove, ...params);
  if (count > 0) yield* chainsBatches.dropOrphanLinks();
  return count;
}
