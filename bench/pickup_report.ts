/**
 * Turning pick-up samples into the latency table: per measurement the
 * median over the runs of each run's p50 and p99, the slowest pick-up of
 * all runs, and each percentile's ratio to the baseline's in the same round.
 *
 * @module
 */
import { median } from "./median.ts";
import type { LatencySample, PickupMeasurement } from "./pickup.ts";

/** One line of the latency table. */
export interface PickupRow {
  /** The measurement's id. */
  readonly id: string;
  /** What was measured. */
  readonly label: string;
  /** Median over the runs of each run's p50, in ms. */
  readonly p50Ms: number;
  /** Median over the runs of each run's p99, in ms. */
  readonly p99Ms: number;
  /** The slowest pick-up of all runs, in ms. */
  readonly maxMs: number;
  /** Each run's figures, in run order. */
  readonly samples: readonly LatencySample[];
  /** The baseline's id (the row's own for the baseline). */
  readonly baseline: string;
  /** The baseline's short name. */
  readonly baselineName: string;
  /** Median over the rounds of this p50 ÷ the baseline's p50 (lower is faster). */
  readonly p50Ratio: number;
  /** Median over the rounds of this p99 ÷ the baseline's p99 (lower is faster). */
  readonly p99Ratio: number;
}

/** Builds the rows; `samples` maps ids to one sample per round, as `runRounds` returns them. */
export function buildPickupRows(
  measurements: readonly PickupMeasurement[],
  samples: ReadonlyMap<string, readonly LatencySample[]>,
): PickupRow[] {
  const byId = new Map(measurements.map((measurement) => [measurement.id, measurement]));
  const samplesOf = (id: string) => {
    const values = samples.get(id);
    if (values === undefined || values.length === 0) throw new Error(`No samples for "${id}"`);
    return values;
  };
  return measurements.map((measurement) => {
    const baseline = byId.get(measurement.baseline);
    if (baseline === undefined) throw new Error(`"${measurement.id}" names an unknown baseline`);
    const own = samplesOf(measurement.id);
    const base = samplesOf(baseline.id);
    const paired = (pick: (sample: LatencySample) => number) =>
      median(own.map((sample, round) => pick(sample) / pick(base[round]!)));
    return {
      id: measurement.id,
      label: measurement.label,
      p50Ms: median(own.map(({ p50Ms }) => p50Ms)),
      p99Ms: median(own.map(({ p99Ms }) => p99Ms)),
      maxMs: Math.max(...own.map(({ maxMs }) => maxMs)),
      samples: own,
      baseline: baseline.id,
      baselineName: baseline.name,
      p50Ratio: paired(({ p50Ms }) => p50Ms),
      p99Ratio: paired(({ p99Ms }) => p99Ms),
    };
  });
}

/** The latency table as markdown. */
export function formatPickupTable(rows: readonly PickupRow[]): string {
  const header = [
    "pick-up: dispatch() called → handler starts",
    "p50 ms",
    "p99 ms",
    "max ms",
    "p50 ÷ baseline",
    "p99 ÷ baseline",
    "baseline",
  ];
  const lines = rows.map((row) => [
    row.label,
    ms(row.p50Ms),
    ms(row.p99Ms),
    ms(row.maxMs),
    percent(row.p50Ratio),
    percent(row.p99Ratio),
    row.baseline === row.id ? `${row.baselineName} (itself)` : row.baselineName,
  ]);
  const right = new Set([1, 2, 3, 4, 5]);
  return [header, header.map((_, i) => right.has(i) ? "---:" : "---"), ...lines]
    .map((cells) => `| ${cells.join(" | ")} |`).join("\n");
}

function ms(value: number): string {
  return value.toFixed(value < 10 ? 2 : 1);
}

function percent(fraction: number): string {
  return `${(fraction * 100).toFixed(fraction < 0.1 ? 1 : 0)} %`;
}
