/**
 * What one measurement of the bench is, and how its work is timed.
 *
 * @module
 */
import type { Runnable } from "./rounds.ts";

/** One figure of the report: a piece of work done on `jobs` jobs, timed, in jobs per second. */
export interface Measurement extends Runnable<number> {
  /** Stable key, used in the JSON output and to name a baseline. */
  readonly id: string;
  /** What the table's measurement column says. */
  readonly label: string;
  /** A short name, for the baseline column of the rows compared with it. */
  readonly name: string;
  /** The `id` of the measurement this one is compared with (its own for a baseline). */
  readonly baseline: string;
  /**
   * Ids of further measurements this one is also compared with, each ratio
   * paired by round like the baseline's (e.g. the batched ceiling).
   */
  readonly alsoComparedWith?: readonly string[];
  /** The ratio to the baseline this figure should reach, as a fraction; none if absent. */
  readonly target?: number;
  /**
   * The ratio to the baseline this figure should stay at or under (a peer's
   * row, whose baseline is ours: 0.67 says ours is to be 1.5× theirs).
   */
  readonly targetAtMost?: number;
  /**
   * Does the work once on a fresh database and returns jobs per second.
   * Setup (opening, migrating, pre-queueing jobs) is not timed.
   */
  run(jobs: number): Promise<number>;
}

/** Times `work`, which handles `jobs` jobs, and returns jobs per second. */
export async function measureRate(jobs: number, work: () => unknown): Promise<number> {
  const start = performance.now();
  await work();
  const elapsedMs = performance.now() - start;
  return jobs / (Math.max(elapsedMs, 0.001) / 1000);
}
