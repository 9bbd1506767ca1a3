/**
 * Turning samples into the report: each measurement's median, its ratio to
 * its baseline's median from the same bench run, whether it meets its
 * target, printed as a markdown table or as JSON.
 *
 * @module
 */
import { type Environment, formatEnvironment } from "./environment.ts";
import type { Measurement } from "./measurement.ts";
import { median } from "./median.ts";

/** One line of the report. */
export interface ReportRow {
  /** The measurement's id. */
  readonly id: string;
  /** What was measured. */
  readonly label: string;
  /** Median jobs per second over the runs. */
  readonly medianJobsPerSecond: number;
  /** Jobs per second of each run, in run order. */
  readonly samples: readonly number[];
  /** The baseline's id (the row's own for a baseline). */
  readonly baseline: string;
  /** The baseline's short name. */
  readonly baselineName: string;
  /**
   * The median, over the runs, of this run's figure over its baseline's
   * figure in the same round: a slow spell that hits both cancels out.
   */
  readonly ratio: number;
  /** This median over the baseline's median, for comparison with `ratio`. */
  readonly ratioOfMedians: number;
  /** The ratio this row should reach, or null when it has no target. */
  readonly target: number | null;
  /** Whether `ratio >= target`, or null when there is no target. */
  readonly met: boolean | null;
}

/** Everything one bench run found, and what it ran on. */
export interface Report {
  /** Versions and machine. */
  readonly environment: Environment;
  /** Runs per measurement. */
  readonly runs: number;
  /** Jobs per run. */
  readonly jobs: number;
  /** Jobs per measurement in the untimed warm-up round. */
  readonly warmupJobs: number;
  /** Wall time of the whole bench, warm-up included, in ms. */
  readonly elapsedMs: number;
  /** One row per measurement, in the order they ran. */
  readonly rows: readonly ReportRow[];
}

/**
 * Computes medians, paired ratios to baselines and targets met. `samples`
 * maps ids to jobs/s per round, index `i` of every list from round `i`.
 */
export function buildRows(
  measurements: readonly Measurement[],
  samples: ReadonlyMap<string, readonly number[]>,
): ReportRow[] {
  const byId = new Map(measurements.map((measurement) => [measurement.id, measurement]));
  const samplesOf = (id: string) => {
    const values = samples.get(id);
    if (values === undefined || values.length === 0) {
      throw new Error(`No samples for measurement "${id}"`);
    }
    return values;
  };
  return measurements.map((measurement) => {
    const baseline = byId.get(measurement.baseline);
    if (baseline === undefined) {
      throw new Error(`Measurement "${measurement.id}" names an unknown baseline`);
    }
    const own = samplesOf(measurement.id);
    const base = samplesOf(baseline.id);
    if (own.length !== base.length) {
      throw new Error(`"${measurement.id}" and its baseline ran a different number of rounds`);
    }
    const medianJobsPerSecond = median(own);
    const ratio = median(own.map((value, round) => value / base[round]!));
    const target = measurement.target ?? null;
    return {
      id: measurement.id,
      label: measurement.label,
      medianJobsPerSecond,
      samples: own,
      baseline: baseline.id,
      baselineName: baseline.name,
      ratio,
      ratioOfMedians: medianJobsPerSecond / median(base),
      target,
      met: target === null ? null : ratio >= target,
    };
  });
}

/** The report as markdown: a title line, the table, the machine line, and how it was run. */
export function formatMarkdown(report: Report): string {
  const header = [
    "measurement",
    "median jobs/s",
    "ratio to baseline",
    "baseline",
    "target",
    "met?",
  ];
  const lines = report.rows.map((row) => [
    row.label,
    Math.round(row.medianJobsPerSecond).toLocaleString("en-US"),
    percent(row.ratio),
    row.baseline === row.id ? `${row.baselineName} (itself)` : row.baselineName,
    row.target === null ? "—" : `≥ ${percent(row.target)}`,
    row.met === null ? "—" : row.met ? "yes" : "**no**",
  ]);
  const right = new Set([1, 2]);
  const table = [header, header.map((_, i) => right.has(i) ? "---:" : "---"), ...lines]
    .map((cells) => `| ${cells.join(" | ")} |`);
  const seconds = (report.elapsedMs / 1000).toFixed(1);
  return [
    "## @renox/queue bench",
    "",
    ...table,
    "",
    formatEnvironment(report.environment),
    `Each figure: median of ${report.runs} runs of ${
      report.jobs.toLocaleString("en-US")
    } jobs, each on a fresh temp-file database, after one untimed warm-up round of ${
      report.warmupJobs.toLocaleString("en-US")
    } jobs. Each round runs every measurement once, beside its baseline (order reversed ` +
    `every other round); a ratio is the median over the rounds of figure ÷ baseline in the ` +
    `same round. Whole bench: ${seconds} s.`,
  ].join("\n");
}

/** The report as indented JSON (rates in jobs per second, ratios as fractions). */
export function formatJson(report: Report): string {
  return JSON.stringify(report, null, 2);
}

function percent(fraction: number): string {
  return `${(fraction * 100).toFixed(fraction < 0.1 ? 1 : 0)} %`;
}
