/**
 * Job control on Redis: results and the kept history, awaiting, cancels,
 * pauses.
 *
 * @internal
 * @module
 */
import type {
  CancelOutcome,
  CancelRequest,
  CancelRequested,
  FinishedFilter,
  FinishedJob,
  JobResultRow,
  Lease,
  Page,
  PausedQueue,
} from "../store.ts";
import type { RedisConnection } from "./connection.ts";
import { notYet } from "./not_yet.ts";

/**
 * The tick's job-control hooks:
 * - `H.paused(queue)`: whether claims skip `queue` at `NOW`.
 * - `H.finished(id, job, s)`: a `complete` or `cancel` settlement applied to
 *   `job`, before its row is deleted: keep it in the history when
 *   `s.keepUntil` says so, and tell awaiters when the job is awaited.
 */
export const JOB_CONTROL_HOOKS = String.raw`
function H.paused(queue) return false end
function H.finished(id, job, s) end
`;

/** Not yet on Redis: see `Store`. */
export function result(
  _redis: RedisConnection,
  _id: number,
  _now: number,
): Promise<JobResultRow | null> {
  return notYet("result");
}

/** Not yet on Redis: see `Store`. */
export function results(
  _redis: RedisConnection,
  _ids: readonly number[],
  _now: number,
): Promise<Map<number, JobResultRow>> {
  return notYet("results");
}

/** Not yet on Redis: see `Store`. */
export function finished(
  _redis: RedisConnection,
  _filter: FinishedFilter,
  _page: Page,
): Promise<FinishedJob[]> {
  return notYet("finished");
}

/** Not yet on Redis: see `Store`. */
export function finishedJob(_redis: RedisConnection, _id: number): Promise<FinishedJob | null> {
  return notYet("finishedJob");
}

/** Not yet on Redis: see `Store`. */
export function pruneFinished(
  _redis: RedisConnection,
  _before: number,
  _now: number,
): Promise<number> {
  return notYet("pruneFinished");
}

/** Not yet on Redis: see `Store`. */
export function markAwaited(_redis: RedisConnection, _id: number): Promise<boolean> {
  return notYet("markAwaited");
}

/** Not yet on Redis: see `Store`. */
export function cancel(_redis: RedisConnection, _request: CancelRequest): Promise<CancelOutcome> {
  return notYet("cancel");
}

/** Not yet on Redis: see `Store`. */
export function cancelsAsked(
  _redis: RedisConnection,
  _leases: readonly Lease[],
): Promise<CancelRequested[]> {
  return notYet("cancelsAsked");
}

/** Not yet on Redis: see `Store`. */
export function pause(
  _redis: RedisConnection,
  _queue: string,
  _now: number,
  _until: number | null,
  _reason: string | null,
): Promise<void> {
  return notYet("pause");
}

/** Not yet on Redis: see `Store`. */
export function resume(_redis: RedisConnection, _queue: string, _now: number): Promise<boolean> {
  return notYet("resume");
}

/** Not yet on Redis: see `Store`. */
export function paused(_redis: RedisConnection, _now: number): Promise<PausedQueue[]> {
  return notYet("paused");
}
