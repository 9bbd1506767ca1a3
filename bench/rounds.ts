/**
 * Running every measurement several times, interleaved, so that a slow spell
 * on a shared machine lands on a figure and its baseline alike: each round
 * runs each measurement once, right beside its baseline, and every other
 * round runs them in reverse order so that no measurement always goes first.
 *
 * @module
 */

/** What rounds run: anything with an id, a baseline and a run that yields one sample. */
export interface Runnable<Sample> {
  /** Stable key. */
  readonly id: string;
  /** The `id` of the one this is compared with (its own for a baseline). */
  readonly baseline: string;
  /** Jobs per timed run whatever `--jobs` says, for work whose size is fixed. */
  readonly fixedJobs?: number;
  /** Jobs in its warm-up run, when `fixedJobs` is set. */
  readonly fixedWarmupJobs?: number;
  /** Does the work once on `jobs` jobs and returns what it measured. */
  run(jobs: number): Promise<Sample>;
}

/** Options for {@linkcode runRounds}. */
export interface RoundsOptions {
  /** Rounds whose figures are kept. */
  readonly runs: number;
  /** Jobs per run of each measurement without `fixedJobs`. */
  readonly jobs: number;
  /**
   * Jobs per run in the one untimed warm-up round that comes first (JIT,
   * page cache) for measurements without `fixedJobs`; 0 for no warm-up round.
   */
  readonly warmupJobs: number;
  /** Told before each round starts: `round` 0 is the warm-up. */
  readonly onRound?: (round: number, runs: number) => void;
}

/**
 * Runs the warm-up round, then `runs` rounds; returns each measurement's
 * samples per round, by id, in round order (so index `i` of a figure and of
 * its baseline come from the same round).
 */
export async function runRounds<Sample>(
  measurements: readonly Runnable<Sample>[],
  options: RoundsOptions,
): Promise<Map<string, Sample[]>> {
  const order = besideBaselines(measurements);
  const samples = new Map<string, Sample[]>(order.map(({ id }) => [id, []]));
  if (order.length === 0) return samples;
  if (options.warmupJobs > 0) {
    options.onRound?.(0, options.runs);
    for (const measurement of order) {
      const jobs = measurement.fixedJobs === undefined
        ? options.warmupJobs
        : measurement.fixedWarmupJobs ?? 0;
      if (jobs > 0) await measurement.run(jobs);
    }
  }
  for (let round = 1; round <= options.runs; round++) {
    options.onRound?.(round, options.runs);
    for (const measurement of round % 2 === 1 ? order : order.toReversed()) {
      const jobs = measurement.fixedJobs ?? options.jobs;
      samples.get(measurement.id)!.push(await measurement.run(jobs));
    }
  }
  return samples;
}

/** `measurements` reordered so that each comes right after its baseline, where it can. */
export function besideBaselines<T extends { readonly id: string; readonly baseline: string }>(
  measurements: readonly T[],
): T[] {
  const order: T[] = [];
  const placed = new Set<string>();
  const place = (measurement: T) => {
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
