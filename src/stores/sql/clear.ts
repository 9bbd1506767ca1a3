/**
 * Clearing a queue: deleting its waiting and leased jobs (with their memos
 * and signals), counting batch jobs among them as skipped, in one write
 * transaction.
 *
 * @internal
 * @module
 */
import type { JobLinks } from "./stored_rows.ts";
import * as chainsBatches from "./chains_batches.ts";
import * as flows from "./flows.ts";
import { type Dialect, LINK_COLUMNS } from "./dialect.ts";
import { releaseRemoved } from "./keys.ts";
import { exec, type Script, wakeAfterCommit } from "./script.ts";
import { statement } from "./statement.ts";
import * as steps from "./steps.ts";

const CLEAR_ONE = statement(`DELETE FROM jobs WHERE queue = $1 RETURNING id, ${LINK_COLUMNS}`);
const CLEAR_ALL = statement(`DELETE FROM jobs RETURNING id, ${LINK_COLUMNS}`);

/**
 * Deletes waiting and leased jobs of one queue, or of all; batch jobs count
 * as skipped, and a batch left with nothing pending finishes at `now`
 * (moved onto the database's clock where the store goes by it); a flow
 * node is cancelled and its descendants skipped.
 */
export function* clear(dialect: Dialect, queue: string | undefined, now: number): Script<number> {
  const { rows: deleted } = queue === undefined
    ? yield* exec<JobLinks & { id: number }>(CLEAR_ALL)
    : yield* exec<JobLinks & { id: number }>(CLEAR_ONE, queue);
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
