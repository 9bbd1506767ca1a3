/**
 * Running and keeping schedules by hand: list them, pause and resume them,
 * forget one no process defines any more, trigger one now, and backfill the
 * slots of a past range. A trigger or backfill builds each slot's job by
 * the firing's own rules (schema, size cap, unique keys, sealing) and
 * stores it with the slot, so a slot already fired is skipped.
 *
 * @internal
 * @module
 */
import { optionBag } from "../option_bags.ts";
import type { Clock } from "../clock.ts";
import type { JobRows } from "../dispatch/job_rows.ts";
import { runNow } from "../dispatch/run_now.ts";
import type { Executor } from "../executors/executor.ts";
import type { JobRegistry } from "../registry.ts";
import { assertName } from "../names.ts";
import { type ScheduleDefinition, timesOf } from "../schedule.ts";
import { slotsBetween } from "../schedule_times.ts";
import { shown } from "../shown.ts";
import type { ScheduleStore } from "../stores/store.ts";
import { jobRow } from "./slot_jobs.ts";
import {
  type BackfillOptions,
  type BackfillResult,
  type ScheduleInfo,
  toScheduleInfo,
} from "./views.ts";

/** What schedule admin reads, writes, runs and wakes. */
export interface ManualRunsParts {
  /** Where schedules and the slots they fired are kept. */
  readonly store: ScheduleStore;
  /** The schedules this process defines. */
  readonly registry: JobRegistry;
  /** Builds and seals each slot's job. */
  readonly jobRows: JobRows;
  /** Source of the time slots fire at. */
  readonly clock: Clock;
  /** Runs a triggered job at once in this isolate (an inline queue). */
  readonly executor: Pick<Executor, "run">;
  /** An inline queue runs a triggered job at once and stores nothing. */
  readonly inline: boolean;
  /** Wakes the queue's workers: jobs may be due now. */
  readonly notify: () => void;
}

/** The stored schedules of one queue, run and kept by hand. */
export class ManualRuns {
  readonly #parts: ManualRunsParts;

  /** Schedule admin on `parts`. */
  constructor(parts: ManualRunsParts) {
    this.#parts = parts;
  }

  /** Every stored schedule, with its next runs. */
  async list(): Promise<ScheduleInfo[]> {
    const now = this.#parts.clock.now();
    return (await this.#parts.store.schedules()).map((row) => toScheduleInfo(row, now));
  }

  /** Pauses (`paused` true) or resumes a stored schedule; false when none has that name. */
  async setPaused(name: string, paused: boolean): Promise<boolean> {
    const { store, clock } = this.#parts;
    const method = paused ? "pauseSchedule" : "resumeSchedule";
    const changed = await store.setSchedulePaused(
      assertName(name, method, "the schedule name"),
      paused,
      clock.now(),
    );
    if (!paused) this.#parts.notify();
    return changed;
  }

  /** Whether this process's jobs module defines schedule `name`. */
  defines(name: string): boolean {
    return this.#parts.registry.schedules().some((each) => each.name === name);
  }

  /** Deletes a stored schedule no process defines; refuses one this process defines. */
  forget(name: string): Promise<boolean> {
    assertName(name, "forgetSchedule", "the schedule name");
    if (this.defines(name)) {
      throw new TypeError(
        `Cannot forget schedule ${
          JSON.stringify(name)
        }: this queue's jobs module still defines it (remove it there first, or it is stored again at the next open)`,
      );
    }
    return this.#parts.store.forgetSchedule(name);
  }

  /** Fires schedule `name` now, outside its times; the job's id, 0 inline, null when held. */
  async trigger(name: string): Promise<number | null> {
    const { jobRows, store } = this.#parts;
    const schedule = this.#schedule(name, "trigger");
    const now = this.#parts.clock.now();
    const row = await jobRows.seal(schedule.job, jobRow(schedule, jobRows, now, now));
    if (this.#parts.inline) {
      await runNow(this.#parts.executor, schedule.job, row, { name, slot: now });
      return 0;
    }
    const [id] = await store.runSchedule(name, [{ slot: now, manual: true, row }], now);
    this.#parts.notify();
    return id ?? null;
  }

  /** Fires the slots of schedule `name` from `options.from` to `options.to` not fired yet. */
  async backfill(name: string, options: BackfillOptions): Promise<BackfillResult> {
    const { jobRows, store } = this.#parts;
    const schedule = this.#schedule(name, "backfill");
    const where = `Cannot backfill schedule "${name}"`;
    if (this.#parts.inline) {
      throw new TypeError(
        `${where}: an inline queue (mode "inline") stores no record of the slots fired: trigger it with triggerSchedule() to run its job now`,
      );
    }
    const { from, to } = optionBag(options, where, ["from", "to"]) ?? {};
    for (const [key, value] of [["from", from], ["to", to]] as const) {
      if (!(value instanceof Date) || !Number.isFinite(value.getTime())) {
        throw new TypeError(`${where}: ${key} must be a valid Date: got ${shown(value)}`);
      }
    }
    const now = this.#parts.clock.now();
    if (from!.getTime() < 0) {
      throw new RangeError(
        `${where}: from must be at or after 1970-01-01T00:00:00.000Z (the Unix epoch): got ${
          from!.toISOString()
        }`,
      );
    }
    if (from!.getTime() > to!.getTime()) throw new RangeError(`${where}: from is after to`);
    if (to!.getTime() > now) {
      throw new RangeError(`${where}: to is in the future (slots to come fire on their own)`);
    }
    const cap = schedule.maxCatchUp;
    const slots = slotsBetween(timesOf(schedule), from!.getTime(), to!.getTime(), cap);
    if (slots.length > cap) {
      throw new RangeError(
        `${where}: the range holds more than ${cap} slots (its maxCatchUp): narrow it`,
      );
    }
    const runs = [];
    for (const slot of slots) {
      const row = await jobRows.seal(schedule.job, jobRow(schedule, jobRows, slot, now));
      runs.push({ slot, manual: false, row });
    }
    const ids = runs.length === 0 ? [] : await store.runSchedule(name, runs, now);
    this.#parts.notify();
    const jobIds = ids.filter((id): id is number => id !== null);
    return { jobIds, skipped: ids.length - jobIds.length };
  }

  #schedule(name: string, action: string): ScheduleDefinition {
    if (typeof name !== "string") {
      throw new TypeError(
        `${action}Schedule: the schedule's name must be a string: got ${shown(name)}`,
      );
    }
    const schedule = this.#parts.registry.schedules().find((each) => each.name === name);
    if (schedule === undefined) {
      throw new TypeError(
        `Cannot ${action} schedule ${
          JSON.stringify(name)
        }: no schedule of that name is defined in the jobs module`,
      );
    }
    return schedule;
  }
}
