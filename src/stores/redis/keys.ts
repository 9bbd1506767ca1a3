/**
 * Unique and debounced jobs, `withoutOverlapping` and `rateLimited` on Redis.
 *
 * @internal
 * @module
 */
import type { KeyedInsert, KeyedJobRow, MiddlewareRequest } from "../store.ts";
import type { RedisConnection } from "./connection.ts";
import { notYet } from "./not_yet.ts";

/**
 * The tick's key hooks:
 * - `H.started(id, job)`: `job` started (claimed to run, or its start
 *   confirmed): release the unique key it holds until it starts.
 * - `H.keysSettled(id, job, kind, token)`: a settlement of `kind` applied:
 *   release the middleware locks of the attempt (`job.locked`), and, unless
 *   `kind` is `release`, the unique key it holds until it settles.
 * - `H.keysRemoved(id)`: a released job was removed (its batch was
 *   cancelled): release every key it holds.
 */
export const KEY_HOOKS = String.raw`
function H.started(id, job) end
function H.keysSettled(id, job, kind, token) end
function H.keysRemoved(id) end
`;

/** Not yet on Redis: see `Store`. */
export function insertKeyed(
  _redis: RedisConnection,
  _rows: readonly KeyedJobRow[],
  _stage?: string,
): Promise<KeyedInsert[]> {
  return notYet("insertKeyed");
}

/** Not yet on Redis: see `Store`. */
export function acquire(
  _redis: RedisConnection,
  _requests: readonly MiddlewareRequest[],
  _now: number,
): Promise<(number | null)[]> {
  return notYet("acquire");
}
