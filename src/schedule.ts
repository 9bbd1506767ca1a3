/**
 * Schedules: a job dispatched at each slot of a cron expression (in a time
 * zone) or of a fixed interval. Define them beside the jobs in the jobs
 * module and export them; `Queue.open` stores them, and the workers' ticks
 * fire each slot as exactly one job, however many processes run.
 *
 * Words: a *slot* is one instant a schedule fires at; a slot is *fired*
 * when its job is stored; a slot is *missed* when the next slot is due too
 * before it was fired (the workers were down, or the schedule paused).
 *
 * @module
 */
import { shown } from "./shown.ts";
import type { JobDefinition, PayloadOf } from "./job.ts";
import { isJobDefinition } from "./job.ts";
import { assertName } from "./names.ts";
import { optionBag, optionNames } from "./option_bags.ts";
import { type ScheduleTimes, scheduleTimes, type SlotRule } from "./schedule_times.ts";

/**
 * What a schedule does with slots missed while no worker fired them:
 * `"skip"` fires none of them, `"once"` one job for the latest, `"all"` one
 * job for each of the latest `maxCatchUp`, oldest first (with
 * `overlap: "allow"` only: those jobs are queued together).
 */
export type MissedPolicy = "skip" | "once" | "all";

/**
 * What a schedule does at a slot while a job it fired is still pending,
 * delayed or running: `"skip"` fires nothing for that slot, `"allow"` fires
 * it anyway.
 */
export type OverlapPolicy = "skip" | "allow";

/** The settings {@linkcode defineSchedule} takes. */
export interface ScheduleConfig<J extends JobDefinition> {
  /** Stable name, stored; 1 to 255 characters. Renaming makes a new schedule. */
  name: string;
  /**
   * A cron expression: 5 fields (minute hour day-of-month month day-of-week),
   * or 6 with seconds first. Give either `cron` or `everyMs`.
   */
  cron?: string;
  /**
   * Fire every this many ms (at least 1000), at multiples of it counted from
   * the Unix epoch (so `60_000` fires at each whole minute). Give either
   * `cron` or `everyMs`.
   */
  everyMs?: number;
  /**
   * The IANA time zone `cron` is read in (`"Europe/Berlin"`). Not used by `everyMs`.
   * @default {"UTC"}
   */
  timezone?: string;
  /** The job each slot dispatches: one exported from the same jobs module. */
  job: J;
  /**
   * The payload of each job: a value (checked by the job's schema when the
   * queue opens) or a function of the slot (checked at each slot). Left
   * out, each job gets `null`, which the job's schema must take
   * (`z.null()`): `undefined` is no JSON value, so a job with a
   * `z.undefined()` or `z.void()` schema cannot be stored.
   * @default {null}
   */
  payload?: PayloadOf<J> | ((slot: Date) => PayloadOf<J>);
  /**
   * What to do with slots missed while no worker fired them (downtime, pause).
   * @default {"once"}
   */
  missed?: MissedPolicy;
  /**
   * With `missed: "all"`: the most missed slots fired at once (the latest ones).
   * Also the most slots one `backfillSchedule` call fires.
   * @default {100}
   */
  maxCatchUp?: number;
  /**
   * What to do at a slot while a job this schedule fired is pending, delayed or running.
   * @default {"skip"}
   */
  overlap?: OverlapPolicy;
  /**
   * Each job is due a random 0 to `jitterMs` ms after its slot, to spread
   * the start of many schedules on one slot.
   * @default {0}
   */
  jitterMs?: number;
}

/** Every key {@linkcode defineSchedule} reads ({@linkcode ScheduleConfig}): any other is refused by name. */
const SCHEDULE_OPTIONS = optionNames<ScheduleConfig<JobDefinition>>()([
  "name",
  "cron",
  "everyMs",
  "timezone",
  "job",
  "payload",
  "missed",
  "maxCatchUp",
  "overlap",
  "jitterMs",
]);

/** A schedule as {@linkcode defineSchedule} returns it: every setting resolved and checked. */
export interface ScheduleDefinition {
  /** Stable name, stored. */
  readonly name: string;
  /** The cron expression, or null for an interval. */
  readonly cron: string | null;
  /** The interval in ms, or null for a cron expression. */
  readonly everyMs: number | null;
  /** The IANA time zone of `cron`. */
  readonly timezone: string;
  /** The job each slot dispatches. */
  readonly job: JobDefinition;
  /** The payload (null when none was given), or a function of the slot that returns it. */
  readonly payload: unknown;
  /** What to do with missed slots. */
  readonly missed: MissedPolicy;
  /** The most missed slots `"all"` fires, and the most slots one backfill fires. */
  readonly maxCatchUp: number;
  /** What to do at a slot while a job of this schedule has not finished. */
  readonly overlap: OverlapPolicy;
  /** The spread of each job's due time after its slot, in ms. */
  readonly jitterMs: number;
}

const DEFINITIONS = new WeakMap<object, ScheduleTimes>();

/**
 * Defines a schedule. Export it from the jobs module beside its job, so
 * the app, the CLI and every worker see the same list.
 *
 * Throws a `TypeError` naming the schedule when a setting is wrong: a cron
 * expression that does not parse or never fires (`0 0 31 2 *`), an unknown
 * time zone, an `everyMs` under a second, both `cron` and `everyMs` (or
 * neither), an unknown policy, `missed: "all"` without `overlap: "allow"`,
 * no `payload` for a job whose schema refuses `null`.
 *
 * @example A report every night at 02:30 in Berlin
 * ```ts
 * import { defineJob, defineSchedule } from "@renox/queue";
 * import { z } from "zod";
 *
 * export const sendReport = defineJob({
 *   name: "send-report",
 *   schema: z.object({ day: z.string() }),
 *   handle({ day }, ctx) {
 *     console.log(`report for ${day}, slot ${ctx.scheduled?.slot.toISOString()}`);
 *   },
 * });
 *
 * export const nightlyReport = defineSchedule({
 *   name: "nightly-report",
 *   cron: "30 2 * * *",
 *   timezone: "Europe/Berlin",
 *   job: sendReport,
 *   payload: (slot) => ({ day: slot.toISOString().slice(0, 10) }),
 * });
 * ```
 */
export function defineSchedule<J extends JobDefinition>(
  given: ScheduleConfig<J>,
): ScheduleDefinition {
  const name = assertName(given?.name, "defineSchedule", "name");
  if (name === "." || name === "..") {
    // A URL resolves such a path segment away: the dashboard's actions on it could not name it.
    throw new TypeError(
      `defineSchedule: name must not be "." or "..": got ${JSON.stringify(name)}`,
    );
  }
  const where = `Schedule "${name}"`;
  const config = optionBag(given, where, SCHEDULE_OPTIONS)!;
  if (!isJobDefinition(config.job)) {
    throw new TypeError(`${where}: job must be a job made with defineJob()`);
  }
  if (config.job.parents !== undefined) {
    throw new TypeError(
      `${where}: job "${config.job.name}" declares the parents whose outputs it reads (defineJob({ parents })), so it runs only as a flow's node`,
    );
  }
  const { cron, everyMs } = config;
  if ((cron === undefined) === (everyMs === undefined)) {
    throw new TypeError(`${where}: give either cron or everyMs, not ${cron ? "both" : "neither"}`);
  }
  if (cron !== undefined && typeof cron !== "string") {
    throw new TypeError(`${where}: cron must be a string: got ${typeof cron}`);
  }
  if (
    everyMs !== undefined &&
    (typeof everyMs !== "number" || !Number.isInteger(everyMs) || everyMs < 1_000 ||
      everyMs > 366 * 86_400_000)
  ) {
    throw new RangeError(
      `${where}: everyMs must be a whole number of ms from 1000 (a second) to a year: got ${
        shown(everyMs)
      }`,
    );
  }
  const timezone = config.timezone ?? "UTC";
  if (typeof timezone !== "string" || timezone === "") {
    throw new TypeError(
      `${where}: timezone must be an IANA time zone name: got ${shown(timezone)}`,
    );
  }
  const rule: SlotRule = cron !== undefined ? { cron, timezone } : { everyMs: everyMs! };
  let times: ScheduleTimes;
  try {
    times = scheduleTimes(rule);
  } catch (error) {
    throw new TypeError(`${where}: ${(error as Error).message}`, { cause: error });
  }
  const missed = config.missed ?? "once";
  if (missed !== "skip" && missed !== "once" && missed !== "all") {
    throw new TypeError(`${where}: missed must be "skip", "once" or "all": got ${shown(missed)}`);
  }
  const overlap = config.overlap ?? "skip";
  if (overlap !== "skip" && overlap !== "allow") {
    throw new TypeError(`${where}: overlap must be "skip" or "allow": got ${shown(overlap)}`);
  }
  if (missed === "all" && overlap === "skip") {
    throw new TypeError(
      `${where}: missed "all" fires a job for each missed slot at once, which overlap "skip" (the default) forbids: set overlap: "allow", or missed: "once"`,
    );
  }
  const maxCatchUp = config.maxCatchUp ?? 100;
  if (!Number.isInteger(maxCatchUp) || maxCatchUp < 1 || maxCatchUp > 10_000) {
    throw new RangeError(
      `${where}: maxCatchUp must be a whole number from 1 to 10000: got ${shown(maxCatchUp)}`,
    );
  }
  const jitterMs = config.jitterMs ?? 0;
  if (typeof jitterMs !== "number" || !(jitterMs >= 0 && jitterMs <= 86_400_000)) {
    throw new RangeError(
      `${where}: jitterMs must be a number of ms from 0 to a day: got ${shown(jitterMs)}`,
    );
  }
  const payload = config.payload ?? null;
  if (config.payload === undefined && !config.job.schema.safeParse(null).success) {
    throw new TypeError(
      `${where}: no payload given, so each job gets null, which the schema of job "${config.job.name}" refuses: give a payload, or a schema that takes null (z.null(); z.undefined() and z.void() take no value JSON can store)`,
    );
  }
  const definition: ScheduleDefinition = Object.freeze({
    name,
    cron: cron ?? null,
    everyMs: everyMs ?? null,
    timezone: cron === undefined ? "UTC" : timezone,
    job: config.job,
    payload,
    missed,
    maxCatchUp,
    overlap,
    jitterMs: Math.round(jitterMs),
  });
  DEFINITIONS.set(definition, times);
  return definition;
}

/** Whether `value` was made by {@linkcode defineSchedule}. */
export function isScheduleDefinition(value: unknown): value is ScheduleDefinition {
  return typeof value === "object" && value !== null && DEFINITIONS.has(value);
}

/** The slots of a schedule made by {@linkcode defineSchedule}. @internal */
export function timesOf(schedule: ScheduleDefinition): ScheduleTimes {
  return DEFINITIONS.get(schedule)!;
}

/** The payload of `schedule`'s job for `slot`: its value, or what its function returns. @internal */
export function payloadFor(schedule: ScheduleDefinition, slot: number): unknown {
  const { payload } = schedule;
  return typeof payload === "function" ? payload(new Date(slot)) : payload;
}
