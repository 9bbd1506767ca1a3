/**
 * schedules.ts on Redis.
 *
 * @internal
 * @module
 */
import type { ScheduleRow, ScheduleRun, StoredScheduleRow } from "../store.ts";
import type { RedisConnection } from "./connection.ts";
import { notYet } from "./not_yet.ts";

/** Not yet on Redis: see `Store`. */
export function syncSchedules(
  _redis: RedisConnection,
  _rows: readonly ScheduleRow[],
  _now: number,
): Promise<void> {
  return notYet("syncSchedules");
}

/** Not yet on Redis: see `Store`. */
export function schedules(_redis: RedisConnection): Promise<StoredScheduleRow[]> {
  return notYet("schedules");
}

/** Not yet on Redis: see `Store`. */
export function setSchedulePaused(
  _redis: RedisConnection,
  _name: string,
  _paused: boolean,
  _now: number,
): Promise<boolean> {
  return notYet("setSchedulePaused");
}

/** Not yet on Redis: see `Store`. */
export function forgetSchedule(_redis: RedisConnection, _name: string): Promise<boolean> {
  return notYet("forgetSchedule");
}

/** Not yet on Redis: see `Store`. */
export function runSchedule(
  _redis: RedisConnection,
  _name: string,
  _runs: readonly ScheduleRun[],
  _now: number,
): Promise<(number | null)[]> {
  return notYet("runSchedule");
}
