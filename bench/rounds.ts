/**
 * Running every measurement several times, interleaved, so that a slow spell
 * on a shared machine lands on a figure and its baseline alike: each round
 * runs each measurement once, right beside its baseline, and every other
 * round runs them in reverse order so that no measurement always goes first.
 *
 * @module
 */
import type { Measurement } from "./measurement.ts";

/** Options for {@linkcode runRounds}. */
export interface RoundsOptions {
  /** Rounds whose figures are kept. */
  readonly runs: number;
  /** Jobs per run of each measurement. */
  readonly jobs: number;
  /** Jobs per run in the one untimed warm-up round that comes first (JIT, page cache); 0 for none. */
  readonly warmupJobs: number;
  /** Told before each round starts: `round` 0 is the warm-up. */
  readonly onRound?: (round: number, runs: number) => void;
}

/**
 * Runs the warm-up round, then `runs` rounds; returns each measurement's
 * jobs/s per round, by id, in round order (so index `i` of a figure and of
 * its baseline come from the same round).
 */
export async function runRounds(
  measurements: readonly Measurement[],
  options: RoundsOptions,
): Promise<Map<string, number[]>> {
  const order = besideBaselines(measurements);
  const samples = new Map<string, number[]>(order.map(({ id }) => [id, []]));
  if (options.warmupJobs > 0) {
    options.onRound?.(0, options.runs);
    for (const measurement of order) await measurement.run(options.warmupJobs);
  }
  for (let round = 1; round <= options.runs; round++) {
    options.onRound?.(round, options.runs);
    for (const measurement of round % 2 === 1 ? order : order.toReversed()) {
      samples.get(measurement.id)!.push(await measurement.run(options.jobs));
    }
  }
  return samples;
}

/** `measurements` reordered so that each comes right after its baseline, where it can. */
export function besideBaselines(measurements: readonly Measurement[]): Measurement[] {
  const order: Measurement[] = [];
  const placed = new Set<string>();
  const place = (measurement: Measurement) => {
    if (placed.has(measurement.id)) return;
    placed.add(measurement.id);
    order.push(measurement);
    for (const other of measurements) {
      if (other.baseline === measurement.id && other.id !== measurement.id) place(other);
    }
  };
  for (const measurement of measurements) place(measurement);
  return order;
}
