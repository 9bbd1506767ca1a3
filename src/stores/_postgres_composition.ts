/**
 * The SQL of chains and batches on PostgreSQL, the same rules as on SQLite
 * (see `_sqlite_composition.ts`). Every method runs inside a transaction the
 * store has opened; batch rows are updated with `UPDATE … RETURNING`, whose
 * row locks make two settles of one batch take turns.
 *
 * @internal
 * @module
 */
import type { Run } from "./_postgres_run.ts";
import { countMembers, type JobLinks, type StoredBatch, toBatchRow } from "./_rows.ts";
import type {
  BatchRow,
  HeldJobRow,
  NewBatchRow,
  NewChainRow,
  NewJobRow,
  Page,
  PushedBatch,
} from "./store.ts";

/** What a waiting job is waiting for. */
type HeldRole = "link" | "chain-catch" | "then" | "catch" | "finally";

/** Rows come as one array per column; ids follow the rows' order, as the sequence does. */
const INSERT_MEMBER = `INSERT INTO jobs
  (queue, name, payload, priority, available_at, retry_until, created_at, batch_id, batch_member)
  SELECT queue, name, payload, priority, available_at, retry_until, created_at, $8, 1
  FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::bigint[],
    $7::bigint[]) WITH ORDINALITY
    AS row(queue, name, payload, priority, available_at, retry_until, created_at, position)
  ORDER BY position
  RETURNING id`;
const START_CHAIN = "UPDATE jobs SET chain_id = id WHERE id = $1";
const INSERT_HELD = `INSERT INTO held_jobs
  (role, chain_id, batch_id, position, queue, name, payload, priority, delay_ms, retry_for_ms)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`;
const QUEUE_HELD = `INSERT INTO jobs
  (queue, name, payload, priority, available_at, retry_until, created_at, batch_id, chain_id)
  SELECT queue, name, payload, priority, $1 + delay_ms, $1 + retry_for_ms, $1, batch_id,
    CASE WHEN role = 'link' THEN chain_id END
  FROM held_jobs`;
const QUEUE_HELD_ONE = `${QUEUE_HELD} WHERE id = $2`;
const QUEUE_HELD_OF_BATCH = `${QUEUE_HELD} WHERE batch_id = $2 AND role = $3 ORDER BY position`;
const QUEUE_HELD_OF_CHAIN = `${QUEUE_HELD} WHERE chain_id = $2 AND role = $3 ORDER BY position`;
const DROP_HELD_ONE = "DELETE FROM held_jobs WHERE id = $1";
const DROP_HELD_OF_BATCH = "DELETE FROM held_jobs WHERE batch_id = $1 AND role = $2";
const DROP_HELD_OF_CHAIN = "DELETE FROM held_jobs WHERE chain_id = $1";
const DROP_CHAIN_CATCH = "DELETE FROM held_jobs WHERE chain_id = $1 AND role = 'chain-catch'";
const NEXT_LINK =
  "SELECT id FROM held_jobs WHERE chain_id = $1 AND role = 'link' ORDER BY position LIMIT 1";
const DROP_ORPHAN_LINKS = `DELETE FROM held_jobs h WHERE h.chain_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.chain_id = h.chain_id)
  AND NOT EXISTS (SELECT 1 FROM failed_jobs f WHERE f.chain_id = h.chain_id)`;

const INSERT_BATCH = `INSERT INTO batches (name, total, pending, allow_failures, created_at)
  VALUES ($1, $2, $2, $3, $4) RETURNING id`;
const BATCH_COLUMNS =
  "id, name, total, pending, failed, skipped, allow_failures, created_at, cancelled_at, finished_at";
const BATCH_ONE = `SELECT ${BATCH_COLUMNS} FROM batches WHERE id = $1`;
const BATCH_LOCK = "SELECT cancelled_at, finished_at FROM batches WHERE id = $1 FOR UPDATE";
const BATCH_PAGE = `SELECT ${BATCH_COLUMNS} FROM batches ORDER BY id DESC LIMIT $1 OFFSET $2`;
const GROW_BATCH = "UPDATE batches SET total = total + $1, pending = pending + $1 WHERE id = $2";
const MEMBER_SUCCEEDED = "UPDATE batches SET pending = pending - 1 WHERE id = $1";
const MEMBER_FAILED = `UPDATE batches SET pending = pending - 1, failed = failed + 1 WHERE id = $1
  RETURNING allow_failures, cancelled_at`;
const MEMBERS_RETRIED = `UPDATE batches SET pending = pending + $1, failed = failed - $1,
  finished_at = NULL WHERE id = $2`;
const MEMBERS_SKIPPED =
  "UPDATE batches SET pending = pending - $1, skipped = skipped + $1 WHERE id = $2";
const FINISH = `UPDATE batches SET finished_at = $1 WHERE id = $2 AND pending = 0
  AND finished_at IS NULL RETURNING failed, skipped, cancelled_at`;
const CANCEL = `UPDATE batches SET cancelled_at = $1 WHERE id = $2 AND cancelled_at IS NULL
  AND finished_at IS NULL`;
const SKIP_WAITING_MEMBERS =
  "DELETE FROM jobs WHERE batch_id = $1 AND batch_member = 1 AND token IS NULL";
const SKIP_ONE = "DELETE FROM jobs WHERE id = $1";
const PRUNE_HELD = `DELETE FROM held_jobs WHERE batch_id IN
  (SELECT id FROM batches WHERE finished_at < $1 OR cancelled_at < $1)`;
const PRUNE = "DELETE FROM batches WHERE finished_at < $1 OR cancelled_at < $1";

/** Chains and batches, run through the store's current transaction. */
export class PostgresComposition {
  readonly #run: Run;
  /** Jobs this object moved from waiting to queued (chain links, callbacks). */
  queued = 0;

  /** `run` sends one statement in the store's current transaction. */
  constructor(run: Run) {
    this.#run = run;
  }

  /** Inserts a chain; its id is its first link's job id. */
  async insertChain(
    chain: NewChainRow,
    insert: (rows: readonly NewJobRow[]) => Promise<number[]>,
  ): Promise<number> {
    const [id] = await insert([chain.first]);
    await this.#run(START_CHAIN, [id]);
    await this.#hold(chain.next, "link", id!, null);
    await this.#hold(chain.onFailure, "chain-catch", id!, null);
    return id!;
  }

  /** Inserts a batch, its jobs and its callbacks. */
  async insertBatch(batch: NewBatchRow): Promise<PushedBatch> {
    const [row] = await this.#run<{ id: number }>(INSERT_BATCH, [
      batch.name,
      batch.jobs.length,
      batch.allowFailures ? 1 : 0,
      batch.createdAt,
    ]);
    const id = row!.id;
    const jobIds = await this.#insertMembers(id, batch.jobs);
    await this.#hold(batch.then, "then", null, id);
    await this.#hold(batch.catch, "catch", null, id);
    await this.#hold(batch.finally, "finally", null, id);
    await this.#finishIfDone(id, batch.createdAt);
    return { id, jobIds };
  }

  /** Adds counted jobs to a running batch; throws naming why it cannot. */
  async addToBatch(batchId: number, rows: readonly NewJobRow[]): Promise<number[]> {
    const [batch] = await this.#run<{ cancelled_at: number | null; finished_at: number | null }>(
      BATCH_LOCK,
      [batchId],
    );
    const refusal = batch === undefined
      ? "no such batch"
      : batch.cancelled_at !== null
      ? "it was cancelled"
      : batch.finished_at !== null
      ? "it has finished"
      : null;
    if (refusal !== null) throw new Error(`Cannot add jobs to batch ${batchId}: ${refusal}`);
    const ids = await this.#insertMembers(batchId, rows);
    await this.#run(GROW_BATCH, [rows.length, batchId]);
    return ids;
  }

  /** Moves the chain and batch of a job that just succeeded or failed for good. */
  async settled(links: JobLinks, kind: "complete" | "fail", at: number): Promise<void> {
    const { chain_id: chainId, batch_id: batchId } = links;
    if (chainId !== null) {
      if (kind === "fail") {
        this.queued += (await this.#run(QUEUE_HELD_OF_CHAIN, [at, chainId, "chain-catch"])).count;
        await this.#run(DROP_CHAIN_CATCH, [chainId]);
      } else await this.#nextLink(chainId, at);
    }
    if (batchId === null || links.batch_member !== 1) return;
    if (kind === "complete") await this.#run(MEMBER_SUCCEEDED, [batchId]);
    else {
      const [batch] = await this.#run<{ allow_failures: number; cancelled_at: number | null }>(
        MEMBER_FAILED,
        [batchId],
      );
      if (batch === undefined) return; // pruned while the job ran
      await this.#queueCallbacks(batchId, "catch", at);
      if (batch.allow_failures === 0) await this.cancel(batchId, at);
    }
    await this.#finishIfDone(batchId, at);
  }

  /** Skips a batch job just put back if its batch was cancelled meanwhile; whether it did. */
  async putBack(id: number, links: JobLinks, at: number): Promise<boolean> {
    const { batch_id: batchId } = links;
    if (batchId === null || links.batch_member !== 1) return false;
    // Lock the batch first: a cancel committing meanwhile is then seen, never missed.
    const [batch] = await this.#run<{ cancelled_at: number | null }>(BATCH_LOCK, [batchId]);
    if (batch?.cancelled_at === null || batch === undefined) return false;
    if ((await this.#run(SKIP_ONE, [id])).count === 0) return false;
    await this.#run(MEMBERS_SKIPPED, [1, batchId]);
    await this.#finishIfDone(batchId, at);
    return true;
  }

  /** Counts batch jobs moved back from the failed jobs as pending again. */
  async retried(moved: readonly JobLinks[]): Promise<void> {
    for (const [batchId, count] of countMembers(moved)) {
      await this.#run(MEMBERS_RETRIED, [count, batchId]);
    }
  }

  /** Counts batch jobs deleted unrun as skipped, and finishes their batches if nothing is left. */
  async cleared(deleted: readonly JobLinks[], at: number): Promise<void> {
    for (const [batchId, count] of countMembers(deleted)) {
      await this.#run(MEMBERS_SKIPPED, [count, batchId]);
      await this.#finishIfDone(batchId, at);
    }
    await this.dropOrphanLinks();
  }

  /** Deletes the waiting links of chains none of whose jobs is left, queued or failed. */
  async dropOrphanLinks(): Promise<void> {
    await this.#run(DROP_ORPHAN_LINKS);
  }

  /** Cancels a batch: skips its waiting jobs; false if it was cancelled or finished already. */
  async cancel(batchId: number, at: number): Promise<boolean> {
    if ((await this.#run(CANCEL, [at, batchId])).count === 0) return false;
    await this.#run(DROP_HELD_OF_BATCH, [batchId, "then"]); // can never fire now
    const skipped = (await this.#run(SKIP_WAITING_MEMBERS, [batchId])).count;
    if (skipped > 0) await this.#run(MEMBERS_SKIPPED, [skipped, batchId]);
    await this.#finishIfDone(batchId, at);
    return true;
  }

  /** One batch, or null. */
  async batch(id: number): Promise<BatchRow | null> {
    const [row] = await this.#run<StoredBatch>(BATCH_ONE, [id]);
    return row === undefined ? null : toBatchRow(row);
  }

  /** Batches, newest first. */
  async batches(page: Page): Promise<BatchRow[]> {
    return (await this.#run<StoredBatch>(BATCH_PAGE, [page.limit, page.offset])).map(toBatchRow);
  }

  /** Deletes batches finished or cancelled before `before`, and their waiting callbacks. */
  async prune(before: number): Promise<number> {
    await this.#run(PRUNE_HELD, [before]);
    return (await this.#run(PRUNE, [before])).count;
  }

  async #insertMembers(batchId: number, rows: readonly NewJobRow[]): Promise<number[]> {
    if (rows.length === 0) return [];
    const column = <T>(pick: (row: NewJobRow) => T) => rows.map(pick);
    const inserted = await this.#run<{ id: number }>(INSERT_MEMBER, [
      column((row) => row.queue),
      column((row) => row.name),
      column((row) => row.payload),
      column((row) => row.priority),
      column((row) => row.availableAt),
      column((row) => row.retryUntil),
      column((row) => row.createdAt),
      batchId,
    ]);
    return inserted.map((row) => row.id).sort((a, b) => a - b);
  }

  async #hold(
    rows: readonly HeldJobRow[],
    role: HeldRole,
    chainId: number | null,
    batchId: number | null,
  ): Promise<void> {
    for (const [position, row] of rows.entries()) {
      await this.#run(INSERT_HELD, [
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
      ]);
    }
  }

  /** Queues a chain's next link, or, after its last, drops the catch it no longer needs. */
  async #nextLink(chainId: number, at: number): Promise<void> {
    const [next] = await this.#run<{ id: number }>(NEXT_LINK, [chainId]);
    if (next === undefined) await this.#run(DROP_HELD_OF_CHAIN, [chainId]);
    else {
      this.queued += (await this.#run(QUEUE_HELD_ONE, [at, next.id])).count;
      await this.#run(DROP_HELD_ONE, [next.id]);
    }
  }

  /** Queues a batch's callbacks of one role; deleting them makes each fire at most once. */
  async #queueCallbacks(batchId: number, role: HeldRole, at: number): Promise<void> {
    this.queued += (await this.#run(QUEUE_HELD_OF_BATCH, [at, batchId, role])).count;
    await this.#run(DROP_HELD_OF_BATCH, [batchId, role]);
  }

  /** Marks a batch finished once nothing is pending, and queues finally (and then, if all succeeded). */
  async #finishIfDone(batchId: number, at: number): Promise<void> {
    const [finished] = await this.#run<
      { failed: number; skipped: number; cancelled_at: number | null }
    >(FINISH, [at, batchId]);
    if (finished === undefined) return;
    if (finished.failed === 0 && finished.skipped === 0 && finished.cancelled_at === null) {
      await this.#queueCallbacks(batchId, "then", at);
    }
    await this.#queueCallbacks(batchId, "finally", at);
  }
}
