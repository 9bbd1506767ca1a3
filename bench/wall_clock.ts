/**
 * One wall clock with sub-millisecond resolution that every isolate and
 * every process of the bench reads alike, so that a time taken in one
 * process can be subtracted from a time taken in another.
 *
 * @module
 */

/**
 * Milliseconds since the epoch, with a fraction: `performance.timeOrigin +
 * performance.now()`. `Date.now()` alone would round a 2 ms pick-up to 1 or 3.
 */
export function wallClockMs(): number {
  return performance.timeOrigin + performance.now();
}
