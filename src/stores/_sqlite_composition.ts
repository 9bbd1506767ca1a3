/**
 * The SQL of chains and batches on SQLite: inserting them, moving them on as
 * their jobs settle, and keeping batch counters exact. Every method runs
 * inside a write transaction the store has opened, so a job's settle and what
 * it changes in its chain or batch commit together.
 *
 * @internal
 * @module
 */
import type { StatementSync } from "node:sqlite";
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

const INSERT_LINKED = `INSERT INTO jobs
  (queue, name, payload, priority, available_at, retry_until, created_at, batch_id, batch_member)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`;
const START_CHAIN = "UPDATE jobs SET chain_id = id WHERE id = ?";
const INSERT_HELD = `INSERT INTO held_jobs
  (role, chain_id, batch_id, position, queue, name, payload, priority, delay_ms, retry_for_ms)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
/** Queues waiting jobs (the selection is appended): due `delay_ms` after ?1. */
const QUEUE_HELD = `INSERT INTO jobs
  (queue, name, payload, priority, available_at, retry_until, created_at, batch_id, chain_id)
  SELECT queue, name, payload, priority, ?1 + delay_ms, ?1 + retry_for_ms, ?1, batch_id,
    CASE WHEN role = 'link' THEN chain_id END
  FROM held_jobs`;
const QUEUE_HELD_ONE = `${QUEUE_HELD} WHERE id = ?2`;
const QUEUE_HELD_OF_BATCH = `${QUEUE_HELD} WHERE batch_id = ?2 AND role = ?3 ORDER BY position`;
const QUEUE_HELD_OF_CHAIN = `${QUEUE_HELD} WHERE chain_id = ?2 AND role = ?3 ORDER BY position`;
const DROP_HELD_ONE = "DELETE FROM held_jobs WHERE id = ?";
const DROP_HELD_OF_BATCH = "DELETE FROM held_jobs WHERE batch_id = ? AND role = ?";
const DROP_HELD_OF_CHAIN = "DELETE FROM held_jobs WHERE chain_id = ?";
const DROP_CHAIN_CATCH = "DELETE FROM held_jobs WHERE chain_id = ? AND role = 'chain-catch'";
const NEXT_LINK =
  "SELECT id FROM held_jobs WHERE chain_id = ? AND role = 'link' ORDER BY position LIMIT 1";
const DROP_ORPHAN_LINKS = `DELETE FROM held_jobs WHERE chain_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.chain_id = held_jobs.chain_id)
  AND NOT EXISTS (SELECT 1 FROM failed_jobs WHERE failed_jobs.chain_id = held_jobs.chain_id)`;

const INSERT_BATCH = `INSERT INTO batches (name, total, pending, allow_failures, created_at)
  VALUES (?, ?, ?, ?, ?) RETURNING id`;
const BATCH_COLUMNS =
  "id, name, total, pending, failed, skipped, allow_failures, created_at, cancelled_at, finished_at";
const BATCH_ONE = `SELECT ${BATCH_COLUMNS} FROM batches WHERE id = ?`;
const BATCH_PAGE = `SELECT ${BATCH_COLUMNS} FROM batches ORDER BY id DESC LIMIT ? OFFSET ?`;
const GROW_BATCH = "UPDATE batches SET total = total + ?1, pending = pending + ?1 WHERE id = ?2";
const MEMBER_SUCCEEDED = "UPDATE batches SET pending = pending - 1 WHERE id = ?";
const MEMBER_FAILED = `UPDATE batches SET pending = pending - 1, failed = failed + 1 WHERE id = ?
  RETURNING allow_failures, cancelled_at`;
const MEMBERS_RETRIED = `UPDATE batches SET pending = pending + ?1, failed = failed - ?1,
  finished_at = NULL WHERE id = ?2`;
const MEMBERS_SKIPPED =
  "UPDATE batches SET pending = pending - ?1, skipped = skipped + ?1 WHERE id = ?2";
const FINISH = `UPDATE batches SET finished_at = ? WHERE id = ? AND pending = 0
  AND finished_at IS NULL RETURNING failed, skipped, cancelled_at`;
const CANCEL = `UPDATE batches SET cancelled_at = ? WHERE id = ? AND cancelled_at IS NULL
  AND finished_at IS NULL`;
const SKIP_IF_CANCELLED = `DELETE FROM jobs WHERE id = ?1
  AND EXISTS (SELECT 1 FROM batches WHERE id = ?2 AND cancelled_at IS NOT NULL)`;
const SKIP_WAITING_MEMBERS =
  "DELETE FROM jobs WHERE batch_id = ? AND batch_member = 1 AND token IS NULL";
const PRUNE_HELD = `DELETE FROM held_jobs WHERE batch_id IN
  (SELECT id FROM batches WHERE finished_at < ?1 OR cancelled_at < ?1)`;
const PRUNE = "DELETE FROM batches WHERE finished_at < ?1 OR cancelled_at < ?1";

/** Chains and batches on one SQLite connection. */
export class SqliteComposition {
  readonly #prepare: (sql: string) => StatementSync;

  /** `prepare` returns the connection's cached statement for `sql`. */
  constructor(prepare: (sql: string) => StatementSync) {
    this.#prepare = prepare;
  }

  /** Inserts a chain; its id is its first link's job id. */
  insertChain(chain: NewChainRow, insert: (rows: readonly NewJobRow[]) => number[]): number {
    const [id] = insert([chain.first]);
    this.#prepare(START_CHAIN).run(id!);
    this.#hold(chain.next, "link", id!, null);
    this.#hold(chain.onFailure, "chain-catch", id!, null);
    return id!;
  }

  /** Inserts a batch, its jobs and its callbacks. */
  insertBatch(batch: NewBatchRow): PushedBatch {
    const total = batch.jobs.length;
    const { id } = this.#prepare(INSERT_BATCH).get(
      batch.name,
      total,
      total,
      batch.allowFailures ? 1 : 0,
      batch.createdAt,
    ) as { id: number };
    const jobIds = this.#insertMembers(id, batch.jobs);
    this.#hold(batch.then, "then", null, id);
    this.#hold(batch.catch, "catch", null, id);
    this.#hold(batch.finally, "finally", null, id);
    this.#finishIfDone(id, batch.createdAt);
    return { id, jobIds };
  }

  /** Adds counted jobs to a running batch; throws naming why it cannot. */
  addToBatch(batchId: number, rows: readonly NewJobRow[]): number[] {
    const batch = this.batch(batchId);
    const refusal = batch === null
      ? "no such batch"
      : batch.cancelledAt !== null
      ? "it was cancelled"
      : batch.finishedAt !== null
      ? "it has finished"
      : null;
    if (refusal !== null) throw new Error(`Cannot add jobs to batch ${batchId}: ${refusal}`);
    const ids = this.#insertMembers(batchId, rows);
    this.#prepare(GROW_BATCH).run(rows.length, batchId);
    return ids;
  }

  /** Moves the chain and batch of a job that just succeeded or failed for good. */
  settled(links: JobLinks, kind: "complete" | "fail", at: number): void {
    const { chain_id: chainId, batch_id: batchId } = links;
    if (chainId !== null) {
      if (kind === "fail") this.#queueChainCatch(chainId, at);
      else this.#nextLink(chainId, at);
    }
    if (batchId === null || links.batch_member !== 1) return;
    if (kind === "complete") this.#prepare(MEMBER_SUCCEEDED).run(batchId);
    else {
      const batch = this.#prepare(MEMBER_FAILED).get(batchId) as
        | { allow_failures: number; cancelled_at: number | null }
        | undefined;
      if (batch === undefined) return; // pruned while the job ran
      this.#queueCallbacks(batchId, "catch", at);
      if (batch.allow_failures === 0) this.cancel(batchId, at);
    }
    this.#finishIfDone(batchId, at);
  }

  /**
   * Skips a batch job just put back (released for a retry, held back, or
   * given back by a stopping worker) if its batch was cancelled meanwhile.
   * Returns whether it was skipped (deleted).
   */
  putBack(id: number, links: JobLinks, at: number): boolean {
    const { batch_id: batchId } = links;
    if (batchId === null || links.batch_member !== 1) return false;
    if (this.#prepare(SKIP_IF_CANCELLED).run(id, batchId).changes === 0) return false;
    this.#prepare(MEMBERS_SKIPPED).run(1, batchId);
    this.#finishIfDone(batchId, at);
    return true;
  }

  /** Counts batch jobs moved back from the failed jobs as pending again. */
  retried(moved: readonly JobLinks[]): void {
    for (const [batchId, count] of countMembers(moved)) {
      this.#prepare(MEMBERS_RETRIED).run(count, batchId);
    }
  }

  /** Counts batch jobs deleted unrun as skipped, and finishes their batches if nothing is left. */
  cleared(deleted: readonly JobLinks[], at: number): void {
    for (const [batchId, count] of countMembers(deleted)) {
      this.#prepare(MEMBERS_SKIPPED).run(count, batchId);
      this.#finishIfDone(batchId, at);
    }
    this.dropOrphanLinks();
  }

  /** Deletes the waiting links of chains none of whose jobs is left, queued or failed. */
  dropOrphanLinks(): void {
    this.#prepare(DROP_ORPHAN_LINKS).run();
  }

  /** Cancels a batch: skips its waiting jobs; false if it was cancelled or finished already. */
  cancel(batchId: number, at: number): boolean {
    if (this.#prepare(CANCEL).run(at, batchId).changes === 0) return false;
    this.#prepare(DROP_HELD_OF_BATCH).run(batchId, "then"); // can never fire now
    const skipped = Number(this.#prepare(SKIP_WAITING_MEMBERS).run(batchId).changes);
    if (skipped > 0) this.#prepare(MEMBERS_SKIPPED).run(skipped, batchId);
    this.#finishIfDone(batchId, at);
    return true;
  }

  /** One batch, or null. */
  batch(id: number): BatchRow | null {
    const row = this.#prepare(BATCH_ONE).get(id) as StoredBatch | undefined;
    return row === undefined ? null : toBatchRow(row);
  }

  /** Batches, newest first. */
  batches(page: Page): BatchRow[] {
    return (this.#prepare(BATCH_PAGE).all(page.limit, page.offset) as unknown as StoredBatch[])
      .map(toBatchRow);
  }

  /** Deletes batches finished or cancelled before `before`, and their waiting callbacks. */
  prune(before: number): number {
    this.#prepare(PRUNE_HELD).run(before);
    return Number(this.#prepare(PRUNE).run(before).changes);
  }

  #insertMembers(batchId: number, rows: readonly NewJobRow[]): number[] {
    const statement = this.#prepare(INSERT_LINKED);
    return rows.map((row) =>
      Number(
        statement.get(
          row.queue,
          row.name,
          row.payload,
          row.priority,
          row.availableAt,
          row.retryUntil,
          row.createdAt,
          batchId,
          1,
        )!.id,
      )
    );
  }

  #hold(
    rows: readonly HeldJobRow[],
    role: HeldRole,
    chainId: number | null,
    batchId: number | null,
  ): void {
    const statement = this.#prepare(INSERT_HELD);
    rows.forEach((row, position) =>
      statement.run(
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
      )
    );
  }

  /** Queues a chain's next link, or, after its last, drops the catch it no longer needs. */
  #nextLink(chainId: number, at: number): void {
    const next = this.#prepare(NEXT_LINK).get(chainId) as { id: number } | undefined;
    if (next === undefined) this.#prepare(DROP_HELD_OF_CHAIN).run(chainId);
    else {
      this.#prepare(QUEUE_HELD_ONE).run(at, next.id);
      this.#prepare(DROP_HELD_ONE).run(next.id);
    }
  }

  /** Queues a chain's catch jobs; deleting them is what makes them fire at most once. */
  #queueChainCatch(chainId: number, at: number): void {
    this.#prepare(QUEUE_HELD_OF_CHAIN).run(at, chainId, "chain-catch");
    this.#prepare(DROP_CHAIN_CATCH).run(chainId);
  }

  /** Queues a batch's callbacks of one role; deleting them makes each fire at most once. */
  #queueCallbacks(batchId: number, role: HeldRole, at: number): void {
    this.#prepare(QUEUE_HELD_OF_BATCH).run(at, batchId, role);
    this.#prepare(DROP_HELD_OF_BATCH).run(batchId, role);
  }

  /** Marks a batch finished once nothing is pending, and queues finally (and then, if all succeeded). */
  #finishIfDone(batchId: number, at: number): void {
    const finished = this.#prepare(FINISH).get(at, batchId) as
      | { failed: number; skipped: number; cancelled_at: number | null }
      | undefined;
    if (finished === undefined) return;
    if (finished.failed === 0 && finished.skipped === 0 && finished.cancelled_at === null) {
      this.#queueCallbacks(batchId, "then", at);
    }
    this.#queueCallbacks(batchId, "finally", at);
  }
}
