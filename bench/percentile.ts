/**
 * Percentiles of a sample, for latencies: the tail matters there, not the
 * middle alone.
 *
 * @module
 */

/**
 * The nearest-rank `p`-th percentile of `values` (`p` from 0 to 100): the
 * smallest value that at least `p` % of the values do not exceed. It is
 * always one of the values, never an interpolation between two.
 */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) throw new RangeError("percentile: no values");
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile: p must be 0 to 100: got ${p}`);
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}
