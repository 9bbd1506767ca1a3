/**
 * What a worker hands its claim so the tick fires due schedule slots: the
 * job row of each slot of the schedules this process defines, and when the
 * next slot comes, so an idle worker wakes for it instead of at its next
 * poll. An encrypted job's payload is sealed (asynchronously) before the
 * tick that needs it: the first tick that meets a slot it has no sealed row
 * for leaves the slot waiting, and the row is sealed for the next tick.
 *
 * @internal
 * @module
 */
import { asError } from "../errors.ts";
import type { JobRows } from "../dispatch/job_rows.ts";
import { type ScheduleDefinition, timesOf } from "../schedule.ts";
import { jobRow } from "./slot_jobs.ts";
import type { FiredJobRow, ScheduleFiring } from "../stores/store.ts";

/** How many sealed rows an encrypted schedule keeps ahead. */
const SEALED_AHEAD = 2;

/** The schedule firing of one worker. */
export class ScheduleFirer implements ScheduleFiring {
  readonly #byName: ReadonlyMap<string, ScheduleDefinition>;
  /** The schedules this process defines; see {@linkcode ScheduleFiring.names}. */
  readonly names: readonly string[];
  readonly #jobRows: JobRows;
  readonly #random: () => number;
  readonly #onError: (error: Error) => void;
  /** Sealed rows of encrypted schedules, by name and slot (null: its payload was refused). */
  readonly #sealed = new Map<string, { row: FiredJobRow | null; at: number }>();
  /** Slots a tick met without a sealed row. */
  readonly #wanted = new Map<string, { schedule: ScheduleDefinition; slot: number }>();
  #nextSlot: { after: number; slot: number | null } | null = null;
  readonly #encrypted: boolean;

  /** Fires `schedules`, building rows with `jobRows`; `onError` hears of refused payloads. */
  constructor(
    schedules: readonly ScheduleDefinition[],
    jobRows: JobRows,
    random: () => number,
    onError: (error: Error) => void,
  ) {
    this.#byName = new Map(schedules.map((schedule) => [schedule.name, schedule]));
    this.names = [...this.#byName.keys()];
    this.#encrypted = schedules.some((schedule) => schedule.job.encrypted);
    this.#jobRows = jobRows;
    this.#random = random;
    this.#onError = onError;
  }

  /** The row for one slot; see {@linkcode ScheduleFiring.row}. */
  row(name: string, slot: number, now: number): FiredJobRow | null | undefined {
    const schedule = this.#byName.get(name);
    if (schedule === undefined) return undefined;
    const availableAt = slot + this.#jitter(schedule);
    if (schedule.job.encrypted) {
      const sealed = this.#sealed.get(slotKey(name, slot));
      if (sealed === undefined) {
        this.#wanted.set(slotKey(name, slot), { schedule, slot });
        return undefined;
      }
      return sealed.row === null ? null : { ...sealed.row, availableAt, createdAt: now };
    }
    try {
      return { ...jobRow(schedule, this.#jobRows, slot, availableAt), createdAt: now };
    } catch (error) {
      this.#refused(schedule, error);
      return null;
    }
  }

  /** Whether ticks must seal rows first ({@linkcode ScheduleFirer.prepare}): an encrypted job is scheduled. */
  get needsPreparing(): boolean {
    return this.#encrypted;
  }

  /** Whether the last tick met a slot it had no sealed row for (tick again once prepared). */
  get missedRows(): boolean {
    return this.#wanted.size > 0;
  }

  /** Seals the rows of encrypted schedules a tick wanted, and of their next slots. */
  async prepare(now: number): Promise<void> {
    const wanted = [...this.#wanted.values()];
    this.#wanted.clear();
    for (const schedule of this.#byName.values()) {
      if (!schedule.job.encrypted) continue;
      const times = timesOf(schedule);
      // The slot due now (a tick is usually a little after it), then the next ones.
      for (const slot of times.latest(now, 1)) wanted.push({ schedule, slot });
      let slot: number | null = now;
      for (let ahead = 0; ahead < SEALED_AHEAD; ahead++) {
        slot = times.next(slot);
        if (slot === null) break;
        wanted.push({ schedule, slot });
      }
    }
    for (const [key, { at }] of this.#sealed) {
      if (at < now - 86_400_000) this.#sealed.delete(key);
    }
    for (const { schedule, slot } of wanted) {
      const key = slotKey(schedule.name, slot);
      if (this.#sealed.has(key)) continue;
      try {
        const row = jobRow(schedule, this.#jobRows, slot, slot);
        const sealed = await this.#jobRows.seal(schedule.job, row);
        this.#sealed.set(key, { row: { ...row, payload: sealed.payload }, at: now });
      } catch (error) {
        this.#sealed.set(key, { row: null, at: now });
        this.#refused(schedule, error);
      }
    }
  }

  /** The next slot of any schedule this process defines after `now`, or null. */
  nextSlot(now: number): number | null {
    // The last answer holds for any time from the one it was computed for up to that slot.
    const cached = this.#nextSlot;
    if (cached !== null && cached.after <= now && (cached.slot === null || cached.slot > now)) {
      return cached.slot;
    }
    let next: number | null = null;
    for (const schedule of this.#byName.values()) {
      const slot = timesOf(schedule).next(now);
      if (slot !== null && (next === null || slot < next)) next = slot;
    }
    this.#nextSlot = { after: now, slot: next };
    return next;
  }

  #jitter(schedule: ScheduleDefinition): number {
    return schedule.jitterMs === 0 ? 0 : Math.floor(this.#random() * schedule.jitterMs);
  }

  #refused(schedule: ScheduleDefinition, error: unknown): void {
    this.#onError(
      new Error(
        `Schedule "${schedule.name}" passed over a slot: ${asError(error).message}`,
        { cause: error },
      ),
    );
  }
}

function slotKey(name: string, slot: number): string {
  return `${slot}:${name}`;
}
