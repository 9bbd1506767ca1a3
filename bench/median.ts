/**
 * The median, the one summary every figure of the bench uses: on a shared,
 * noisy machine a single slow run moves the mean but not the median.
 *
 * @module
 */

/** The middle value of `values` (the mean of the two middle ones for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError("median: no values");
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}
