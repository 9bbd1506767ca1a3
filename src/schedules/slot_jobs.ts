/**
 * Turning schedules into what a store keeps: the rows `Queue.open` syncs
 * (after checking every schedule against the jobs it names), and the job
 * row of one slot, built by the same rules as a dispatch (schema, size cap,
 * unique and debounce keys, retry window; sealed by the caller when the job
 * is encrypted).
 *
 * @internal
 * @module
 */
import type { JobRows } from "../dispatch/job_rows.ts";
import type { JobRegistry } from "../registry.ts";
import { payloadFor, type ScheduleDefinition, timesOf } from "../schedule.ts";
import type { FiredJobRow, ScheduleRow } from "../stores/store.ts";

/**
 * Checks the registry's schedules and returns the rows to store. Throws an
 * error naming the schedule for two schedules with one name, a job that is
 * not registered, or a payload that fails the job's schema (a payload
 * function is called for the first slot to check it).
 */
export function scheduleRows(registry: JobRegistry, jobRows: JobRows, now: number): ScheduleRow[] {
  const seen = new Set<string>();
  return registry.schedules().map((schedule) => {
    const where = `Schedule "${schedule.name}"`;
    if (seen.has(schedule.name)) {
      throw new TypeError(`${where}: two schedules have this name: names must be unique`);
    }
    seen.add(schedule.name);
    if (!registry.has(schedule.job)) {
      throw new TypeError(
        `${where}: its job "${schedule.job.name}" is not registered with this queue (export it from the jobs module)`,
      );
    }
    // The payload is checked for the first slot after now; the store finds where the schedule starts.
    const firstSlot = timesOf(schedule).next(now) ?? now;
    try {
      jobRow(schedule, jobRows, firstSlot, now);
    } catch (error) {
      throw new TypeError(`${where}: ${(error as Error).message}`, { cause: error });
    }
    return {
      name: schedule.name,
      job: schedule.job.name,
      queue: schedule.job.queue,
      cron: schedule.cron,
      everyMs: schedule.everyMs,
      timezone: schedule.timezone,
      missed: schedule.missed,
      maxCatchUp: schedule.maxCatchUp,
      overlap: schedule.overlap,
      jitterMs: schedule.jitterMs,
      definition: definitionText(schedule),
    };
  });
}

/**
 * The job of `schedule` for `slot`, due at `availableAt`, as unsealed
 * rows. Throws like a dispatch for a payload that fails the job's schema,
 * and with the error of a payload function that throws.
 */
export function jobRow(
  schedule: ScheduleDefinition,
  jobRows: JobRows,
  slot: number,
  availableAt: number,
): FiredJobRow {
  let payload: unknown;
  try {
    payload = payloadFor(schedule, slot);
  } catch (error) {
    throw new Error(
      `its payload function threw for slot ${new Date(slot).toISOString()}: ${
        (error as Error)?.message ?? String(error)
      }`,
      { cause: error },
    );
  }
  const role = ` for schedule "${schedule.name}"`;
  const [row] = jobRows.plainRows(schedule.job, [payload], undefined, role);
  const due = { ...row!, availableAt };
  return jobRows.keyed(schedule.job, [payload], [due])?.[0] ?? due;
}

/**
 * Every setting and the payload as one text: a change of any is a changed
 * schedule. An encrypted job's payload (a value, or a function's source,
 * which may hold one) is left out, as the store must only ever hold its
 * ciphertext (docs/encryption.md): a change of it alone is then no change
 * to the stored schedule, whose jobs take the payload the code gives.
 */
function definitionText(schedule: ScheduleDefinition): string {
  const payload = schedule.job.encrypted ? "(encrypted)" : schedule.payload;
  return JSON.stringify([
    schedule.job.name,
    schedule.job.queue,
    schedule.cron,
    schedule.everyMs,
    schedule.timezone,
    schedule.missed,
    schedule.maxCatchUp,
    schedule.overlap,
    schedule.jitterMs,
    typeof payload === "function" ? `function ${payload.toString()}` : payload ?? null,
  ]);
}
