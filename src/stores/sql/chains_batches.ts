/**
 * Chains and batches: inserting them, moving them on as their jobs settle,
 * and keeping batch counters exact. Every script runs inside the write
 * transaction that settles the job, so a job's outcome and what it changes
 * in its chain or batch commit together. Follow-up jobs wait in
 * `waiting_jobs`; moving one out is what makes it fire at most once. Scripts
 * that can queue follow-ups return how many they queued, so the store knows
 * whether to wake other processes.
 *
 * @internal
 * @module
 */
import { countMembers, type JobLinks, type StoredBatch, toBatchRow } from "./stored_rows.ts";
import { FROM_PREVIOUS_OUTPUT } from "../rows/dispatch.ts";
import type {
  BatchRow,
  InsertedBatch,
  NewBatchRow,
  NewChainRow,
  NewJobRow,
  Page,
  WaitingJobRow,
} from "../store.ts";
import { clockParam, type Dialect, KEYED, PLAIN } from "./dialect.ts";
import { each, exec, type Script } from "./script.ts";
import { statement } from "./statement.ts";

/** What a waiting job waits for. */
type WaitingRole = "link" | "chain-catch" | "then" | "catch" | "finally";

const START_CHAIN = statement("UPDATE jobs SET chain_id = id WHERE id = $1");
const INSERT_WAITING = statement(
  `INSERT INTO waiting_jobs
  (role, chain_id, batch_id, position, queue, name, payload, priority, delay_ms, retry_for_ms,
    trace, expire_in_ms)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
);
/**
 * Inserts waiting jobs as due jobs, in `position` order (the selection is
 * appended, ending with that order): due `delay_ms` after $1.
 */
const INSERT_DUE_FROM_WAITING = `INSERT INTO jobs
  (id, queue, name, payload, priority, available_at, retry_until, created_at, batch_id, chain_id,
    trace, expire_at)
  SELECT {{newJobId ORDER BY position}}, queue, name, payload, priority, $1 + delay_ms,
    $1 + retry_for_ms, $1, batch_id, CASE WHEN role = 'link' THEN chain_id END, trace,
    $1 + expire_in_ms
  FROM waiting_jobs`;
/** Inserts a chain's next link; one waiting for the previous output ($3) takes it ($4). */
const INSERT_NEXT_LINK = statement(
  `INSERT INTO jobs
  (id, queue, name, payload, priority, available_at, retry_until, created_at, batch_id, chain_id,
    trace, expire_at)
  SELECT {{newJobId}}, queue, name, CASE WHEN payload = $3 THEN $4 ELSE payload END, priority,
    $1 + delay_ms, $1 + retry_for_ms, $1, batch_id, chain_id, trace, $1 + expire_in_ms
  FROM waiting_jobs WHERE id = $2`,
);
const INSERT_DUE_OF_BATCH = statement(
  `${INSERT_DUE_FROM_WAITING} WHERE batch_id = $2 AND role = $3 ORDER BY position`,
);
const INSERT_DUE_OF_CHAIN = statement(
  `${INSERT_DUE_FROM_WAITING} WHERE chain_id = $2 AND role = $3 ORDER BY position`,
);
const DROP_WAITING_ONE = statement("DELETE FROM waiting_jobs WHERE id = $1");
const DROP_WAITING_OF_BATCH = statement(
  "DELETE FROM waiting_jobs WHERE batch_id = $1 AND role = $2",
);
const DROP_WAITING_OF_CHAIN = statement("DELETE FROM waiting_jobs WHERE chain_id = $1");
const DROP_CHAIN_CATCH = statement(
  "DELETE FROM waiting_jobs WHERE chain_id = $1 AND role = 'chain-catch'",
);
const NEXT_LINK = statement(
  "SELECT id FROM waiting_jobs WHERE chain_id = $1 AND role = 'link' ORDER BY position LIMIT 1",
  { oneRow: true },
);
const DROP_ORPHAN_LINKS = statement(
  `DELETE FROM waiting_jobs WHERE chain_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.chain_id = waiting_jobs.chain_id)
  AND NOT EXISTS (SELECT 1 FROM failed_jobs f WHERE f.chain_id = waiting_jobs.chain_id)`,
);

const INSERT_BATCH = statement(
  `INSERT INTO batches (name, total, pending, allow_failures, created_at)
  VALUES ($1, $2, $2, $3, $4) RETURNING id`,
  { oneRow: true },
);
const BATCH_COLUMNS =
  "id, name, total, pending, failed, skipped, allow_failures, created_at, cancelled_at, finished_at";
const BATCH_ONE = statement(`SELECT ${BATCH_COLUMNS} FROM batches WHERE id = $1`, { oneRow: true });
/** A batch's state, locked until the transaction ends where the engine locks rows. */
const BATCH_LOCK = statement(
  "SELECT cancelled_at, finished_at FROM batches WHERE id = $1 {{forUpdate}}",
  { oneRow: true },
);
const BATCH_PAGE = statement(
  `SELECT ${BATCH_COLUMNS} FROM batches ORDER BY id DESC LIMIT $1 OFFSET $2`,
);
const GROW_BATCH = statement(
  "UPDATE batches SET total = total + $1, pending = pending + $1 WHERE id = $2",
);
const MEMBER_SUCCEEDED = statement("UPDATE batches SET pending = pending - 1 WHERE id = $1");
const MEMBER_FAILED = statement(
  `UPDATE batches SET pending = pending - 1, failed = failed + 1 WHERE id = $1
  RETURNING allow_failures, cancelled_at`,
  { oneRow: true },
);
const MEMBERS_RETRIED = statement(
  `UPDATE batches SET pending = pending + $1, failed = failed - $1,
  finished_at = NULL WHERE id = $2`,
);
const MEMBERS_SKIPPED = statement(
  "UPDATE batches SET pending = pending - $1, skipped = skipped + $1 WHERE id = $2",
);
const FINISH = statement(
  `UPDATE batches SET finished_at = $1 WHERE id = $2 AND pending = 0
  AND finished_at IS NULL RETURNING failed, skipped, cancelled_at`,
  { oneRow: true },
);
const CANCEL = statement(
  `UPDATE batches SET cancelled_at = $1 WHERE id = $2 AND cancelled_at IS NULL
  AND finished_at IS NULL`,
);
const SKIP_WAITING_MEMBERS = statement(
  "DELETE FROM jobs WHERE batch_id = $1 AND batch_member = 1 AND token IS NULL",
);
const SKIP_ONE = statement("DELETE FROM jobs WHERE id = $1");
/**
 * Batches that ended more than `$2` ms before `{{now $1}}`. A batch ends when
 * nothing is left pending (`finished_at`), cancelled or not: a cancelled one
 * with a member still running has yet to fire its `finally`.
 */
const ENDED_BEFORE = "finished_at < (SELECT {{now $1}} - $2)";
const PRUNE_WAITING = statement(
  `DELETE FROM waiting_jobs WHERE batch_id IN (SELECT id FROM batches WHERE ${ENDED_BEFORE})`,
);
const PRUNE = statement(`DELETE FROM batches WHERE ${ENDED_BEFORE}`);

/** Inserts a chain; its id is its first link's job id. */
export function* insertChain(dialect: Dialect, chain: NewChainRow): Script<number> {
  const [id] = yield* dialect.insertJobs([chain.first], PLAIN);
  yield* exec(START_CHAIN, id);
  yield* wait(chain.next, "link", id!, null);
  yield* wait(chain.onFailure, "chain-catch", id!, null);
  return id!;
}

/** Inserts a batch, its jobs and its callbacks; a batch without jobs finishes at once. */
export function* insertBatch(dialect: Dialect, batch: NewBatchRow): Script<InsertedBatch> {
  const { rows: [row] } = yield* exec<{ id: number }>(
    INSERT_BATCH,
    batch.name,
    batch.jobs.length,
    batch.allowFailures ? 1 : 0,
    batch.createdAt,
  );
  const id = Number(row!.id);
  const jobIds = yield* dialect.insertJobs(batch.jobs, { batchId: id, keyed: KEYED.none });
  yield* wait(batch.then, "then", null, id);
  yield* wait(batch.catch, "catch", null, id);
  yield* wait(batch.finally, "finally", null, id);
  yield* finishIfDone(id, batch.createdAt);
  return { id, jobIds };
}

/** Adds counted jobs to a running batch; throws naming why it cannot. */
export function* addToBatch(
  dialect: Dialect,
  batchId: number,
  rows: readonly NewJobRow[],
): Script<number[]> {
  const { rows: [batch] } = yield* exec<
    { cancelled_at: number | null; finished_at: number | null }
  >(BATCH_LOCK, batchId);
  const refusal = batch === undefined
    ? "no such batch"
    : batch.cancelled_at !== null
    ? "it was cancelled"
    : batch.finished_at !== null
    ? "it has finished"
    : null;
  if (refusal !== null) throw new Error(`Cannot add jobs to batch ${batchId}: ${refusal}`);
  const ids = yield* dialect.insertJobs(rows, { batchId, keyed: KEYED.none });
  yield* exec(GROW_BATCH, rows.length, batchId);
  return ids;
}

/**
 * Moves the chain and batch of a job that just succeeded, failed for good,
 * or was cancelled (its chain stops as at a failure, and drops the links
 * that can never run now; its batch counts it as skipped); how many
 * follow-up jobs it queued.
 */
export function* settled(
  links: JobLinks,
  kind: "complete" | "fail" | "cancel",
  at: number,
  output: string | null = null,
): Script<number> {
  const { chain_id: chainId, batch_id: batchId } = links;
  let queued = 0;
  if (chainId !== null) {
    if (kind !== "complete") {
      queued += (yield* exec(INSERT_DUE_OF_CHAIN, at, chainId, "chain-catch")).count;
      yield* exec(DROP_CHAIN_CATCH, chainId);
      if (kind === "cancel") yield* exec(DROP_WAITING_OF_CHAIN, chainId);
    } else queued += yield* nextLink(chainId, at, output);
  }
  if (batchId === null || Number(links.batch_member) !== 1) return queued;
  if (kind === "cancel") yield* exec(MEMBERS_SKIPPED, 1, batchId);
  else if (kind === "complete") yield* exec(MEMBER_SUCCEEDED, batchId);
  else {
    const { rows: [batch] } = yield* exec<{ allow_failures: number }>(MEMBER_FAILED, batchId);
    if (batch === undefined) return queued; // pruned while the job ran
    queued += yield* insertCallbacks(batchId, "catch", at);
    if (Number(batch.allow_failures) === 0) queued += (yield* cancel(batchId, at)) ?? 0;
  }
  return queued + (yield* finishIfDone(batchId, at));
}

/**
 * Skips a batch job just put back (released for a retry, held back, or
 * given back by a stopping worker) if its batch was cancelled meanwhile;
 * whether it was skipped (deleted), and how many follow-ups that queued.
 */
export function* putBack(
  id: number,
  links: JobLinks,
  at: number,
): Script<{ skipped: boolean; queued: number }> {
  const { batch_id: batchId } = links;
  const kept = { skipped: false, queued: 0 };
  if (batchId === null || Number(links.batch_member) !== 1) return kept;
  // Lock the batch first: a cancel committing meanwhile is then seen, never missed.
  const { rows: [batch] } = yield* exec<{ cancelled_at: number | null }>(BATCH_LOCK, batchId);
  if (batch === undefined || batch.cancelled_at === null) return kept;
  if ((yield* exec(SKIP_ONE, id)).count === 0) return kept;
  yield* exec(MEMBERS_SKIPPED, 1, batchId);
  return { skipped: true, queued: yield* finishIfDone(batchId, at) };
}

/** Counts batch jobs moved back from the failed jobs as pending again. */
export function* retried(moved: readonly JobLinks[]): Script<void> {
  yield* each(MEMBERS_RETRIED, [...countMembers(moved)].map(([batchId, n]) => [n, batchId]));
}

/**
 * Counts batch jobs deleted unrun as skipped, finishes their batches if
 * nothing is left, and drops chain links that can never run now; how many
 * follow-ups that queued.
 */
export function* cleared(deleted: readonly JobLinks[], at: number): Script<number> {
  let queued = 0;
  for (const [batchId, count] of countMembers(deleted)) {
    yield* exec(MEMBERS_SKIPPED, count, batchId);
    queued += yield* finishIfDone(batchId, at);
  }
  yield* dropOrphanLinks();
  return queued;
}

/** Deletes the waiting links of chains none of whose jobs is left, queued or failed. */
export function* dropOrphanLinks(): Script<void> {
  yield* exec(DROP_ORPHAN_LINKS);
}

/**
 * Cancels a batch: skips its waiting jobs and drops its `then`; null if it
 * was cancelled or finished already, else how many follow-ups it queued.
 */
export function* cancel(batchId: number, at: number): Script<number | null> {
  if ((yield* exec(CANCEL, at, batchId)).count === 0) return null;
  yield* exec(DROP_WAITING_OF_BATCH, batchId, "then"); // can never fire now
  const skipped = (yield* exec(SKIP_WAITING_MEMBERS, batchId)).count;
  if (skipped > 0) yield* exec(MEMBERS_SKIPPED, skipped, batchId);
  return yield* finishIfDone(batchId, at);
}

/** One batch, or null. */
export function* batch(id: number): Script<BatchRow | null> {
  const { rows: [row] } = yield* exec<StoredBatch>(BATCH_ONE, id);
  return row === undefined ? null : toBatchRow(row);
}

/** Batches, newest first. */
export function* batches(page: Page): Script<BatchRow[]> {
  return (yield* exec<StoredBatch>(BATCH_PAGE, page.limit, page.offset)).rows.map(toBatchRow);
}

/**
 * Deletes batches that ended (nothing pending, cancelled or not) before
 * `before` (`now` being the caller's now: on the store's clock, as long
 * before its now), and their waiting callbacks.
 */
export function* prune(dialect: Dialect, before: number, now: number): Script<number> {
  const params = [clockParam(dialect, now), now - before];
  yield* exec(PRUNE_WAITING, ...params);
  return (yield* exec(PRUNE, ...params)).count;
}

function* wait(
  rows: readonly WaitingJobRow[],
  role: WaitingRole,
  chainId: number | null,
  batchId: number | null,
): Script<void> {
  yield* each(
    INSERT_WAITING,
    rows.map((row, position) => [
      role,
      chainId,
      batchId,
      position,
      row.queue,
      row.name,
      row.payload,
      row.priority,
      row.delayMs,
      row.retryForMs,
      row.trace ?? null,
      row.expireInMs ?? null,
    ]),
  );
}

/**
 * Queues a chain's next link (with `output`, the link before's, as its
 * payload if it asked for it), or, after its last, drops the catch it no
 * longer needs.
 */
function* nextLink(chainId: number, at: number, output: string | null): Script<number> {
  const { rows: [next] } = yield* exec<{ id: number }>(NEXT_LINK, chainId);
  if (next === undefined) {
    yield* exec(DROP_WAITING_OF_CHAIN, chainId);
    return 0;
  }
  const { count } = yield* exec(
    INSERT_NEXT_LINK,
    at,
    next.id,
    FROM_PREVIOUS_OUTPUT,
    output ?? "null",
  );
  yield* exec(DROP_WAITING_ONE, next.id);
  return count;
}

/** Queues a batch's callbacks of one role; deleting them makes each fire at most once. */
function* insertCallbacks(batchId: number, role: WaitingRole, at: number): Script<number> {
  const { count } = yield* exec(INSERT_DUE_OF_BATCH, at, batchId, role);
  yield* exec(DROP_WAITING_OF_BATCH, batchId, role);
  return count;
}

/** Marks a batch finished once nothing is pending, and queues finally (and then, if all succeeded). */
function* finishIfDone(batchId: number, at: number): Script<number> {
  const { rows: [finished] } = yield* exec<
    { failed: number; skipped: number; cancelled_at: number | null }
  >(FINISH, at, batchId);
  if (finished === undefined) return 0;
  let queued = 0;
  if (
    Number(finished.failed) === 0 && Number(finished.skipped) === 0 &&
    finished.cancelled_at === null
  ) {
    queued += yield* insertCallbacks(batchId, "then", at);
  }
  return queued + (yield* insertCallbacks(batchId, "finally", at));
}
