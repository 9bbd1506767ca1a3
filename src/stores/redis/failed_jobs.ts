/**
 * failed_jobs.ts on Redis.
 *
 * @internal
 * @module
 */
import type { FailedJob, Page, UnfinishedJobRow } from "../store.ts";
import type { RedisConnection } from "./connection.ts";
import { notYet } from "./not_yet.ts";

/** Not yet on Redis: see `Store`. */
export function failed(_redis: RedisConnection, _page: Page): Promise<FailedJob[]> {
  return notYet("failed");
}

/** Not yet on Redis: see `Store`. */
export function failedJob(_redis: RedisConnection, _id: number): Promise<FailedJob | null> {
  return notYet("failedJob");
}

/** Not yet on Redis: see `Store`. */
export function unfinishedJob(
  _redis: RedisConnection,
  _id: number,
): Promise<UnfinishedJobRow | null> {
  return notYet("unfinishedJob");
}

/** Not yet on Redis: see `Store`. */
export function retry(
  _redis: RedisConnection,
  _ids: readonly number[] | "all" | { readonly batchId: number },
  _now: number,
): Promise<number[]> {
  return notYet("retry");
}

/** Not yet on Redis: see `Store`. */
export function forget(_redis: RedisConnection, _id: number): Promise<boolean> {
  return notYet("forget");
}

/** Not yet on Redis: see `Store`. */
export function flushFailed(_redis: RedisConnection): Promise<number> {
  return notYet("flushFailed");
}

/** Not yet on Redis: see `Store`. */
export function pruneFailed(
  _redis: RedisConnection,
  _before: number,
  _now: number,
): Promise<number> {
  return notYet("pruneFailed");
}

/** Not yet on Redis: see `Store`. */
export function clear(
  _redis: RedisConnection,
  _queue: string | undefined,
  _now: number,
): Promise<number> {
  return notYet("clear");
}
