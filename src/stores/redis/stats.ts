/**
 * What the dashboard and stats read on Redis, and the metrics rollup.
 *
 * @internal
 * @module
 */
import type {
  JobFilter,
  JobList,
  MetricsRow,
  Page,
  PendingByName,
  QueueCountsRow,
  RunningJobOnQueue,
  WorkerHeartbeat,
  WorkerInfo,
} from "../store.ts";
import type { RedisConnection } from "./connection.ts";
import { notYet } from "./not_yet.ts";

/**
 * The tick's stats hook:
 * - `H.metrics(s, job)`: settlement `s` applied to `job`: add it to the
 *   metrics rollup (see `WorkerStore.settle`).
 */
export const STATS_HOOKS = String.raw`
function H.metrics(s, job) end
`;

/** Not yet on Redis: see `Store`. */
export function counts(_redis: RedisConnection, _now: number): Promise<QueueCountsRow[]> {
  return notYet("counts");
}

/** Not yet on Redis: see `Store`. */
export function pendingByName(_redis: RedisConnection, _now: number): Promise<PendingByName[]> {
  return notYet("pendingByName");
}

/** Not yet on Redis: see `Store`. */
export function running(_redis: RedisConnection, _now: number): Promise<RunningJobOnQueue[]> {
  return notYet("running");
}

/** Not yet on Redis: see `Store`. */
export function jobs(
  _redis: RedisConnection,
  _filter: JobFilter,
  _page: Page,
  _now: number,
): Promise<JobList> {
  return notYet("jobs");
}

/** Not yet on Redis: see `Store`. */
export function metrics(
  _redis: RedisConnection,
  _since: number,
  _until: number,
): Promise<MetricsRow[]> {
  return notYet("metrics");
}

/** Not yet on Redis: see `Store`. */
export function heartbeat(
  _redis: RedisConnection,
  _worker: WorkerHeartbeat,
  _staleBefore: number,
): Promise<void> {
  return notYet("heartbeat");
}

/** Not yet on Redis: see `Store`. */
export function removeWorker(_redis: RedisConnection, _id: string): Promise<boolean> {
  return notYet("removeWorker");
}

/** Not yet on Redis: see `Store`. */
export function workers(
  _redis: RedisConnection,
  _seenSince: number,
  _now: number,
): Promise<WorkerInfo[]> {
  return notYet("workers");
}
