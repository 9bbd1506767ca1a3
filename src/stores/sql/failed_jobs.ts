/**
 * What the admin commands do to failed and waiting jobs: retry failed jobs
 * (a job is in exactly one table throughout), forget, flush or prune them,
 * and clear a queue. Each runs in one write transaction.
 *
 * @internal
 * @module
 */
import type { JobLinks } from "../_rows.ts";
import * as chainsBatches from "./chains_batches.ts";
import type { Dialect, RetrySelection } from "./dialect.ts";
import { releaseRemoved } from "./keys.ts";
import { exec, type Script } from "./script.ts";
import { statement } from "./statement.ts";

const FORGET = statement("DELETE FROM failed_jobs WHERE id = $1");
const FLUSH = statement("DELETE FROM failed_jobs");
const PRUNE = statement("DELETE FROM failed_jobs WHERE failed_at < $1");
const CLEAR_ONE = statement(
  "DELETE FROM jobs WHERE queue = $1 RETURNING id, batch_id, batch_member, chain_id",
);
const CLEAR_ALL = statement("DELETE FROM jobs RETURNING id, batch_id, batch_member, chain_id");

/** Moves failed jobs back to their queues, due at `now`; the ids moved, and whether any was. */
export function* retry(dialect: Dialect, selection: RetrySelection, now: number): Script<number[]> {
  const moved = yield* dialect.retryFailed(selection, now);
  yield* chainsBatches.retried(moved);
  if (moved.length > 0) yield* dialect.notify();
  return moved.map((row) => Number(row.id));
}

/** Deletes one failed job (and the waiting links of its chain); whether it existed. */
export function* forget(id: number): Script<boolean> {
  return (yield* deleteFailed(FORGET, id)) === 1;
}

/** Deletes every failed job; how many. */
export function* flush(): Script<number> {
  return yield* deleteFailed(FLUSH);
}

/** Deletes failed jobs that failed before `before`; how many. */
export function* prune(before: number): Script<number> {
  return yield* deleteFailed(PRUNE, before);
}

/**
 * Deletes waiting and leased jobs of one queue, or of all; batch jobs count
 * as skipped, and a batch left with nothing pending finishes at `now`.
 */
export function* clear(dialect: Dialect, queue: string | undefined, now: number): Script<number> {
  const { rows: deleted } = queue === undefined
    ? yield* exec<JobLinks & { id: number }>(CLEAR_ALL)
    : yield* exec<JobLinks & { id: number }>(CLEAR_ONE, queue);
  yield* chainsBatches.cleared(deleted, now);
  yield* releaseRemoved(deleted.map((row) => Number(row.id)));
  yield* dialect.notify();
  return deleted.length;
}

/** Deletes failed jobs, then the chain links that can never run now; how many. */
function* deleteFailed(
  remove: ReturnType<typeof statement>,
  ...params: unknown[]
): Script<number> {
  const { count } = yield* exec(remove, ...params);
  if (count > 0) yield* chainsBatches.dropOrphanLinks();
  return count;
}
