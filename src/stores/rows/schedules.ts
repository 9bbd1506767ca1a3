/**
 * The rows of schedules: a schedule as `Queue.open` stores it, as a store
 * reads it back, what a worker's tick needs to fire due slots, and a job a
 * schedule stores outside its tick (a trigger, a backfill).
 *
 * @module
 */
import type { JobKey, NewJobRow } from "./dispatch.ts";

/** A schedule as the jobs module defines it, to store. */
export interface ScheduleRow {
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
  /** `"skip"`, `"once"` or `"all"`. */
  readonly missed: string;
  /** The most missed slots `"all"` fires. */
  readonly maxCatchUp: number;
  /** `"skip"` or `"allow"`. */
  readonly overlap: string;
  /** The spread of each job's due time after its slot, in ms. */
  readonly jitterMs: number;
  /** Every setting and the payload, as one text: a change of it is a changed schedule. */
  readonly definition: string;
}

/** A schedule as it is stored: its settings, without what only a sync needs, and its state. */
export interface StoredScheduleRow extends Omit<ScheduleRow, "definition"> {
  /** The next slot to fire, or null when there is none. */
  readonly nextSlot: number | null;
  /** Whether it is paused. */
  readonly paused: boolean;
  /** The last slot fired, or null. */
  readonly lastSlot: number | null;
  /** The job the last slot fired, or null. */
  readonly lastJobId: number | null;
  /** When the last slot was fired, or null. */
  readonly lastFiredAt: number | null;
}

/** A job row a schedule stores: a plain one, or one with its unique or debounce key. */
export type FiredJobRow = NewJobRow & { readonly key?: JobKey };

/**
 * What a worker's tick needs to fire the slots that are due, in its claim
 * transaction: the job row for a slot of a schedule this process defines.
 */
export interface ScheduleFiring {
  /**
   * The job for slot `slot` of schedule `name`, stored at `now`: undefined
   * when this process cannot build it (it does not define the schedule, or
   * an encrypted payload is not sealed yet: the slot then waits for a later
   * tick), null when the payload is refused (the slot is passed over).
   */
  row(name: string, slot: number, now: number): FiredJobRow | null | undefined;
  /**
   * The schedules this process defines: a tick reads and locks only those
   * that are due. The others are another process's to fire, or no process's
   * any more (left stored until forgotten), and however many are due they
   * never hold up this process's own.
   */
  readonly names: readonly string[];
}

/** A job a schedule stores outside its tick: a trigger (manual) or a backfilled slot. */
export interface ScheduleRun {
  /** The slot; for a trigger, the time it was triggered. */
  readonly slot: number;
  /** True for a trigger: outside the slot sequence, never refused as a slot already fired. */
  readonly manual: boolean;
  /** The job to store. */
  readonly row: FiredJobRow;
}
