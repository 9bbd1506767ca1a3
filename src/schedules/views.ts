/**
 * Schedules as the admin API shows them, and the options of a backfill.
 *
 * @module
 */
import type { MissedPolicy, OverlapPolicy } from "../schedule.ts";
import { nextSlots, scheduleTimes } from "../schedule_times.ts";
import type { StoredScheduleRow } from "../stores/store.ts";

/** A stored schedule, as {@linkcode Queue.schedules} lists it. */
export interface ScheduleInfo {
  /** Its stable name. */
  readonly name: string;
  /** The job it dispatches. */
  readonly job: string;
  /** The queue that job goes to. */
  readonly queue: string;
  /** The cron expression, or null for an interval. */
  readonly cron: string | null;
  /** The interval in ms, or null for a cron expression. */
  readonly everyMs: number | null;
  /** The IANA time zone of `cron`. */
  readonly timezone: string;
  /** What it does with missed slots. */
  readonly missed: MissedPolicy;
  /** The most missed slots `"all"` fires. */
  readonly maxCatchUp: number;
  /** What it does at a slot while its last job has not finished. */
  readonly overlap: OverlapPolicy;
  /** The spread of each job's due time after its slot, in ms. */
  readonly jitterMs: number;
  /** Whether it is paused: no slot fires until it is resumed. */
  readonly paused: boolean;
  /**
   * The next slot it will fire (while paused, the first one it missed),
   * or null when none is left.
   */
  readonly nextSlot: Date | null;
  /** Its next 5 slots after now. */
  readonly nextRuns: readonly Date[];
  /**
   * The slot fired last (or the time of the last trigger), or null: after a
   * backfill, the newest slot it fired, which may be older than one fired
   * before it (the slots to come do not go by it).
   */
  readonly lastSlot: Date | null;
  /** The id of the job the last slot fired, or null. */
  readonly lastJobId: number | null;
  /** When the last slot was fired, or null. */
  readonly lastFiredAt: Date | null;
}

/** Options for {@linkcode Queue.backfillSchedule}. */
export interface BackfillOptions {
  /** The first instant of the range (included). */
  from: Date;
  /** The last instant of the range (included); at most now. */
  to: Date;
}

/** What {@linkcode Queue.backfillSchedule} did. */
export interface BackfillResult {
  /** The ids of the jobs it stored, oldest slot first. */
  readonly jobIds: readonly number[];
  /** Slots of the range that had been fired already (or whose unique job was held), skipped. */
  readonly skipped: number;
}

/** A stored schedule as the admin API shows it, with its next runs after `now`. */
export function toScheduleInfo(row: StoredScheduleRow, now: number): ScheduleInfo {
  const date = (ms: number | null) => ms === null ? null : new Date(ms);
  return {
    name: row.name,
    job: row.job,
    queue: row.queue,
    cron: row.cron,
    everyMs: row.everyMs,
    timezone: row.timezone,
    missed: row.missed as MissedPolicy,
    maxCatchUp: row.maxCatchUp,
    overlap: row.overlap as OverlapPolicy,
    jitterMs: row.jitterMs,
    paused: row.paused,
    nextSlot: date(row.nextSlot),
    nextRuns: nextRuns(row, now),
    lastSlot: date(row.lastSlot),
    lastJobId: row.lastJobId,
    lastFiredAt: date(row.lastFiredAt),
  };
}

/**
 * The next 5 slots of a stored schedule after `now`; none for one whose rule
 * no longer reads (stored by an older version and defined by no process
 * now), so one such schedule does not hide the list.
 */
function nextRuns(row: StoredScheduleRow, now: number): Date[] {
  let times;
  try {
    times = scheduleTimes(
      row.cron === null ? { everyMs: row.everyMs! } : { cron: row.cron, timezone: row.timezone },
    );
  } catch {
    return [];
  }
  return nextSlots(times, now, 5).map((slot) => new Date(slot));
}
