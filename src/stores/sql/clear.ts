/**
 * Clearing a queue: deleting its jobs that are not running (with their memos
 * and signals), counting batch jobs among them as skipped, in one write
 * transaction. A running job is left to finish, with its keys and locks: a
 * job of its key or group must not start beside its handler.
 *
 * @internal
 * @module
 */
import type { JobLinks } from "./stored_rows.ts";
import * as chainsBatches from "./chains_batches.ts";
import * as flows from "./flows.ts";
import { clockParam, type Dialect, LINK_COLUMNS, runningAt } from "./dialect.ts";
import { releaseRemoved } from "./keys.ts";
import { exec, type Script, wakeAfterCommit } from "./script.ts";
import { statement } from "./statement.ts";
import * as steps from "./steps.ts";

/** Not running at `{{now $1}}`: not leased, held ahead and not started, or its lease ran out. */
const NOT_RUNNING = `NOT ${runningAt("{{now $1}}")}`;
const CLEAR_ONE = statement(
  `DELETE FROM jobs WHERE queue = $2 AND ${NOT_RUNNING} RETURNING id, ${LINK_COLUMNS}`,
);
const CLEAR_ALL = statement(`DELETE FROM jobs WHERE ${NOT_RUNNING} RETURNING id, ${LINK_COLUMNS}`);

/**
 * Deletes the jobs of one queue, or of all, that are not running at `now`
 * (waiting, delayed, held ahead by a worker that has not started them, or
 * whose worker died); batch jobs count
 * as skipped, and a batch left with nothing pending finishes at `now`
 * (moved onto the database's clock where the store goes by it); a flow
 * node is cancelled and its descendants skipped.
 */
export function* clear(dialect: Dialect, queue: string | undefined, now: number): Script<number> {
  const clock = clockParam(dialect, now);
  const { rows: deleted } = queue === undefined
    ? yield* exec<JobLinks & { id: number }>(CLEAR_ALL, clock)
    : yield* exec<JobLinks & { id: number }>(CLEAR_ONE, clock, queue);
  // What a batch left with nothing pending queues (its finally callbacks), or a flow's node
  // running on its parent's failure, is due by the store's clock.
  const linked = deleted.some((row) =>
    row.batch_id !== null || (row.flow_id !== null && row.flow_id !== undefined)
  );
  const at = linked ? yield* dialect.now(now) : now;
  yield* chainsBatches.cleared(deleted, at);
  yield* flows.cleared(deleted, at);
  const ids = deleted.map((row) => Number(row.id));
  yield* releaseRemoved(ids);
  yield* steps.dropRemoved(ids);
  yield* wakeAfterCommit();
  return deleted.length;
}
