/**
 * The slots of a schedule: the instants it fires at, from a cron expression
 * in a time zone (through `croner`, whose rules for daylight saving are the
 * ones we promise: a cron with one value in each of its second, minute and
 * hour fields fires a local time that does not exist once, at the first
 * valid instant after it, and one that exists twice once, at the first; a
 * cron with a wildcard, step, list or range in any of them skips a local
 * time that does not exist and fires one that exists twice at both),
 * or every `everyMs` counted from the Unix epoch, so every process and host
 * computes the same slots.
 *
 * @internal
 * @module
 */
// Inline specifier: an app that imports this module from source resolves it with its own import
// map, which need not list this dependency.
// deno-lint-ignore no-import-prefix
import { Cron } from "npm:croner@11";

/** How a schedule's slots are given: a cron expression in a time zone, or a fixed interval. */
export type SlotRule =
  | { readonly cron: string; readonly timezone: string }
  | { readonly everyMs: number };

/** The slots of one schedule, as ms since the epoch. */
export interface ScheduleTimes {
  /** The first slot strictly after `after`, or null when there is none (a cron that never fires again). */
  next(after: number): number | null;
  /** Up to `count` of the latest slots at or before `atOrBefore`, oldest first. */
  latest(atOrBefore: number, count: number): number[];
}

/**
 * The slots of `rule`. Throws a `TypeError` saying what is wrong with a cron
 * expression or time zone (an expression must have 5 fields, or 6 with
 * seconds first).
 */
export function scheduleTimes(rule: SlotRule): ScheduleTimes {
  if ("everyMs" in rule) return intervalTimes(rule.everyMs);
  const fields = rule.cron.trim() === "" ? [] : rule.cron.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    throw new TypeError(
      `cron must have 5 fields (minute hour day month weekday) or 6 (seconds first): got ${fields.length} in ${
        JSON.stringify(rule.cron)
      }`,
    );
  }
  let cron: Cron;
  let first: Date | null;
  try {
    cron = new Cron(rule.cron, { timezone: rule.timezone, paused: true });
    first = cron.nextRun(new Date(0)); // an unknown time zone is only found when a time is converted
  } catch (error) {
    const message = (error as Error).message.replace(/^Cron\w*: /, "");
    const what = /time ?zone/i.test(message)
      ? `timezone ${JSON.stringify(rule.timezone)} is not an IANA time zone`
      : `cron ${JSON.stringify(rule.cron)} does not parse: ${
        outOfRange(message, fields) ?? message
      }`;
    throw new TypeError(what, { cause: error });
  }
  // Dates repeat every 400 years (the Gregorian cycle): a cron with no slot after the epoch has none.
  if (first === null) {
    throw new TypeError(
      `cron ${
        JSON.stringify(rule.cron)
      } never fires: no date matches it (such as the 31st of a month that has 30 days or fewer)`,
    );
  }
  return {
    next(after) {
      return cron.nextRun(new Date(after))?.getTime() ?? null;
    },
    latest(atOrBefore, count) {
      // previousRuns looks strictly before its reference.
      return cron.previousRuns(count, new Date(atOrBefore + 1)).map((date) => date.getTime())
        .reverse();
    },
  };
}

/** Each field of a cron expression as croner names it in its errors, with its name and range for a reader. */
const CRON_FIELDS: Readonly<Record<string, { readonly name: string; readonly range: string }>> = {
  second: { name: "second", range: "0 to 59" },
  minute: { name: "minute", range: "0 to 59" },
  hour: { name: "hour", range: "0 to 23" },
  day: { name: "day of the month", range: "1 to 31" },
  month: { name: "month", range: "1 to 12 or JAN to DEC" },
  dayOfWeek: { name: "weekday", range: "0 to 7 (0 and 7 are Sunday) or SUN to SAT" },
};

/**
 * Croner's "Invalid value for <field>: <n>" as the field's name, the text
 * the expression gives it and its range: croner's number is its own
 * reading, one less than what was written for the day of the month and the
 * month. Null for any other message.
 */
function outOfRange(message: string, fields: readonly string[]): string | null {
  const field = /^Invalid value for (\w+):/.exec(message)?.[1];
  const known = field === undefined ? undefined : CRON_FIELDS[field];
  if (known === undefined) return null;
  const order = fields.length === 6 ? ["second", ...FIVE_FIELDS] : FIVE_FIELDS;
  const given = fields[order.indexOf(field!)];
  const note = fields.length === 6 && field === "dayOfWeek"
    ? " (6 fields are read with seconds first)"
    : "";
  return `its ${known.name} field ${JSON.stringify(given)} is out of range: ${known.range}${note}`;
}

/** The fields of a 5-field cron expression, in order, as croner names them. */
const FIVE_FIELDS = ["minute", "hour", "day", "month", "dayOfWeek"];

function intervalTimes(everyMs: number): ScheduleTimes {
  return {
    next: (after) => (Math.floor(after / everyMs) + 1) * everyMs,
    latest(atOrBefore, count) {
      const last = Math.floor(atOrBefore / everyMs) * everyMs;
      return Array.from({ length: count }, (_, index) => last - (count - 1 - index) * everyMs)
        .filter((slot) => slot >= 0);
    },
  };
}

/** The next `count` slots after `after`. */
export function nextSlots(times: ScheduleTimes, after: number, count: number): number[] {
  const slots: number[] = [];
  let slot = times.next(after);
  while (slot !== null && slots.length < count) {
    slots.push(slot);
    slot = times.next(slot);
  }
  return slots;
}

/** The slots in `[from, to]`, oldest first, stopping after `limit + 1` (so a caller sees it was over). */
export function slotsBetween(
  times: ScheduleTimes,
  from: number,
  to: number,
  limit: number,
): number[] {
  const slots: number[] = [];
  let slot = times.next(from - 1);
  while (slot !== null && slot <= to && slots.length <= limit) {
    slots.push(slot);
    slot = times.next(slot);
  }
  return slots;
}

/**
 * The slots a tick at `now` fires, oldest first, of a schedule whose next
 * slot to fire is `nextSlot`, by its missed policy: the one slot due when
 * it is on time; when slots were missed, none (`"skip"`), the latest
 * (`"once"`) or the latest `maxCatchUp` (`"all"`). An on-time tick computes
 * two slots whatever `maxCatchUp` is; only a tick that finds slots missed
 * looks further back.
 */
export function dueSlots(
  times: ScheduleTimes,
  nextSlot: number,
  now: number,
  missed: string,
  maxCatchUp: number,
): number[] {
  const first = times.next(nextSlot - 1);
  if (first === null || first > now) return [];
  const second = times.next(first);
  if (second === null || second > now) return [first];
  if (missed === "skip") return [];
  if (missed === "once") return times.latest(now, 1);
  return times.latest(now, maxCatchUp).filter((slot) => slot >= first);
}
