/**
 * Chains and batches on Redis.
 *
 * @internal
 * @module
 */
import type {
  BatchRow,
  InsertedBatch,
  NewBatchRow,
  NewChainRow,
  NewJobRow,
  Page,
} from "../store.ts";
import type { RedisConnection } from "./connection.ts";
import { notYet } from "./not_yet.ts";

/**
 * The tick's chain and batch hooks:
 * - `H.linksSettled(id, job, kind, output, t)`: `job` ended (`complete`,
 *   `fail` or `cancel`) at `t` (store clock): queue its chain's next link
 *   (or its `catch`), count it in its batch and queue the batch's
 *   callbacks; returns how many jobs it queued.
 * - `H.linksPutBack(id, job, t)`: `job` was released to run again: returns
 *   how many jobs it queued and whether the job was removed instead (its
 *   batch was cancelled).
 */
export const CHAIN_BATCH_HOOKS = String.raw`
function H.linksSettled(id, job, kind, output, t) return 0 end
function H.linksPutBack(id, job, t) return 0, false end
`;

/** Not yet on Redis: see `Store`. */
export function insertChain(
  _redis: RedisConnection,
  _chain: NewChainRow,
  _stage?: string,
): Promise<number> {
  return notYet("insertChain");
}

/** Not yet on Redis: see `Store`. */
export function insertBatch(
  _redis: RedisConnection,
  _batch: NewBatchRow,
  _stage?: string,
): Promise<InsertedBatch> {
  return notYet("insertBatch");
}

/** Not yet on Redis: see `Store`. */
export function addToBatch(
  _redis: RedisConnection,
  _batchId: number,
  _rows: readonly NewJobRow[],
): Promise<number[]> {
  return notYet("addToBatch");
}

/** Not yet on Redis: see `Store`. */
export function batch(_redis: RedisConnection, _id: number): Promise<BatchRow | null> {
  return notYet("batch");
}

/** Not yet on Redis: see `Store`. */
export function batches(_redis: RedisConnection, _page: Page): Promise<BatchRow[]> {
  return notYet("batches");
}

/** Not yet on Redis: see `Store`. */
export function cancelBatch(_redis: RedisConnection, _id: number, _now: number): Promise<boolean> {
  return notYet("cancelBatch");
}

/** Not yet on Redis: see `Store`. */
export function pruneBatches(
  _redis: RedisConnection,
  _before: number,
  _now: number,
): Promise<number> {
  return notYet("pruneBatches");
}
