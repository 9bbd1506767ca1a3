/**
 * Where stored times come from. Tests inject their own to move time without
 * sleeping.
 *
 * @module
 */

/** A source of the current time in integer milliseconds since the epoch. */
export interface Clock {
  /** The current time, in integer milliseconds since the epoch. */
  now(): number;
}

/** The wall clock. */
export const systemClock: Clock = { now: () => Date.now() };

/** The longest delay a timer takes (2^31 - 1 ms); a longer one fires at once, with a warning. */
export const LONGEST_TIMER_MS = 2_147_483_647;
