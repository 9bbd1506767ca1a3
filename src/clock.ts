/**
 * Where stored times come from. Tests inject their own to move time without
 * sleeping.
 *
 * @module
 */
import { shown } from "./shown.ts";

/** A source of the current time in integer milliseconds since the epoch. */
export interface Clock {
  /** The current time, in integer milliseconds since the epoch. */
  now(): number;
}

/** The wall clock. */
export const systemClock: Clock = { now: () => Date.now() };

/** The latest time a clock may read: the last ms of the year 9999. */
const LATEST_CLOCK_MS = 253_402_300_799_999;

/**
 * The clock an option gives (`where` names the option), checked: its
 * `now()` must read an integer number of ms from the epoch to the year 9999,
 * or the call that read it throws naming the option and the value (a
 * `RangeError` for another number, a `TypeError` for anything else), before
 * anything is stored with it. The wall clock is used as is.
 */
export function checkedClock(clock: Clock | undefined, where: string): Clock {
  if (clock === undefined || clock === systemClock) return systemClock;
  if (typeof clock !== "object" || clock === null || typeof clock.now !== "function") {
    throw new TypeError(`${where} must be an object with a now() method: got ${shown(clock)}`);
  }
  return {
    now() {
      const now = clock.now();
      if (Number.isInteger(now) && now >= 0 && now <= LATEST_CLOCK_MS) return now;
      const message =
        `${where}.now() must return an integer number of ms since the epoch, up to the year 9999: got ${
          shown(now)
        }`;
      throw typeof now === "number" ? new RangeError(message) : new TypeError(message);
    },
  };
}

/** The longest delay a timer takes (2^31 - 1 ms); a longer one fires at once, with a warning. */
export const LONGEST_TIMER_MS = 2_147_483_647;
