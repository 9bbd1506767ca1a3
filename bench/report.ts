/**
 * Turning samples into the report: each measurement's median, its ratio to
 * its baseline's median from the same bench run, whether it meets its
 * target, printed as markdown tables or as JSON.
 *
 * @module
 */
import { CPU_BASELINE_ROW, CPU_SPEEDUP_ROW, RAW_SPEEDUP_ROW } from "./cpu.ts";
import type { SpinCalibration } from "./cpu_work.ts";
import { type Environment, formatEnvironment } from "./environment.ts";
import type { Measurement } from "./measurement.ts";
import { median } from "./median.ts";
import { formatPickupTable, type PickupRow } from "./pickup_report.ts";
import {
  formatPostgresServer,
  POSTGRES_METHOD_NOTE,
  type PostgresServer,
} from "./postgres_environment.ts";
import type { StoreName } from "./flags.ts";
import { formatRedisServer, REDIS_METHOD_NOTE, type RedisServer } from "./redis_environment.ts";

/** A further comparison of a row, paired by round like its baseline's. */
export interface OtherRatio {
  /** The other measurement's id. */
  readonly id: string;
  /** Its short name. */
  readonly name: string;
  /** Median over the rounds of this figure ÷ that one in the same round. */
  readonly ratio: number;
}

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
  /** Ratios to the measurements of `alsoComparedWith`. */
  readonly also: readonly OtherRatio[];
  /** Whether its jobs per run were fixed rather than `--jobs`. */
  readonly fixed: boolean;
  /** The ratio this row should reach, or null when it has no target. */
  readonly target: number | null;
  /** The ratio this row should stay at or under, or null (a peer's row, its baseline ours). */
  readonly targetAtMost: number | null;
  /** Whether `ratio >= target` (or `ratio <= targetAtMost`), or null when there is no target. */
  readonly met: boolean | null;
}

/** Everything one bench run found, and what it ran on. */
export interface Report {
  /** Versions and machine. */
  readonly environment: Environment;
  /** The store measured. */
  readonly store: StoreName;
  /** The PostgreSQL server, or null on SQLite. */
  readonly postgres: PostgresServer | null;
  /** The Redis server, or null on the other stores. */
  readonly redis: RedisServer | null;
  /** Runs per measurement. */
  readonly runs: number;
  /** Jobs per run. */
  readonly jobs: number;
  /** Jobs per measurement in the untimed warm-up round (those whose size is not fixed). */
  readonly warmupJobs: number;
  /** Whether the Web Worker drains ran (their time includes starting the pool). */
  readonly workerDrains: boolean;
  /** The CPU-bound job's size, or null when the CPU measurements did not run. */
  readonly cpu: SpinCalibration | null;
  /** Wall time of the whole bench, warm-up included, in ms. */
  readonly elapsedMs: number;
  /** One row per throughput measurement, in the order they ran. */
  readonly rows: readonly ReportRow[];
  /** One row per pick-up latency measurement. */
  readonly pickup: readonly PickupRow[];
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
    const pairedRatio = (other: readonly number[]) =>
      median(own.map((value, round) => value / other[round]!));
    const ratio = pairedRatio(base);
    const target = measurement.target ?? null;
    const targetAtMost = measurement.targetAtMost ?? null;
    return {
      id: measurement.id,
      label: measurement.label,
      medianJobsPerSecond,
      samples: own,
      baseline: baseline.id,
      baselineName: baseline.name,
      ratio,
      ratioOfMedians: medianJobsPerSecond / median(base),
      also: (measurement.alsoComparedWith ?? []).map((id) => {
        const other = byId.get(id);
        if (other === undefined) {
          throw new Error(`"${measurement.id}" is compared with unknown "${id}"`);
        }
        return { id, name: other.name, ratio: pairedRatio(samplesOf(id)) };
      }),
      fixed: measurement.fixedJobs !== undefined,
      target,
      targetAtMost,
      met: target !== null ? ratio >= target : targetAtMost !== null ? ratio <= targetAtMost : null,
    };
  });
}

/**
 * The report as markdown: a title line, the throughput table, the CPU
 * speedup, the pick-up latency table, the machine line, and how it was run.
 */
export function formatMarkdown(report: Report): string {
  const sections = [
    report.postgres !== null
      ? "## @renox/queue bench: PostgreSQL store"
      : report.redis !== null
      ? "## @renox/queue bench: Redis store beside BullMQ"
      : "## @renox/queue bench",
  ];
  if (report.rows.length > 0) sections.push(formatRateTable(report.rows));
  const speedup = report.rows.find(({ id }) => id === CPU_SPEEDUP_ROW)?.also[0];
  const rawSpeedup = report.rows.find(({ id }) => id === RAW_SPEEDUP_ROW)?.also[0];
  const isolate = report.rows.find(({ id }) => id === CPU_BASELINE_ROW);
  if (speedup !== undefined && rawSpeedup !== undefined && report.cpu !== null) {
    sections.push(
      `CPU-bound speedup, 2 Web Workers over 1: **${speedup.ratio.toFixed(2)}×** on ` +
        `${report.environment.cores} cores (navigator.hardwareConcurrency); plain Web Workers ` +
        `without the queue, same rounds: ${rawSpeedup.ratio.toFixed(2)}×. One job is ` +
        `${report.cpu.iterations.toLocaleString("en-US")} iterations, ` +
        `${report.cpu.msPerJob.toFixed(1)} ms when calibrated in the main isolate` +
        (isolate === undefined
          ? ""
          : ` (${
            (1000 / isolate.medianJobsPerSecond).toFixed(1)
          } ms a job at the isolate row's rate)`) +
        `; timed on a warm worker (each Web Worker ran short jobs first), from dispatch to the ` +
        `last completion.`,
    );
  }
  if (report.pickup.length > 0) sections.push(formatPickupTable(report.pickup));
  const seconds = (report.elapsedMs / 1000).toFixed(1);
  const runs = `${report.runs} run${report.runs === 1 ? "" : "s"}`;
  const footnote = [
    `Each figure: median of ${runs}, each on a fresh ${
      report.postgres !== null
        ? "PostgreSQL schema (dropped afterwards)"
        : report.redis !== null
        ? "Redis key prefix or BullMQ queue (deleted or obliterated afterwards)"
        : "temp-file database"
    }, after one untimed ` +
    `warm-up round. Each round runs every measurement once, beside its baseline (order ` +
    `reversed every other round); a ratio is the median over the rounds of figure ÷ baseline ` +
    `in the same round.`,
  ];
  if (report.rows.some(({ fixed }) => !fixed)) {
    footnote.push(
      ` Throughput rows run ${report.jobs.toLocaleString("en-US")} jobs per run (warm-up ` +
        `${report.warmupJobs.toLocaleString("en-US")})` +
        (report.workerDrains
          ? ", the Web Worker drains too (their time includes starting the pool)"
          : "") +
        (report.cpu === null ? "." : "; CPU rows the count in their label."),
    );
  }
  if (report.pickup.length > 0 && report.redis === null) {
    footnote.push(
      ` Pick-up: wall-clock ms (performance.timeOrigin + now()) from just before dispatch() ` +
        `to the first line of the handler, in a Web Worker; each job is dispatched 2 ms after ` +
        `the previous one completed (the poll-only baseline waits a random 0–50 ms more, so ` +
        `that its dispatches fall anywhere in the poll interval); p50 and p99 are per run, ` +
        `their median over the runs is shown, and max is the slowest of all runs.`,
    );
  }
  if (report.postgres !== null) footnote.push(POSTGRES_METHOD_NOTE);
  if (report.redis !== null) footnote.push(REDIS_METHOD_NOTE);
  footnote.push(` Whole bench: ${seconds} s.`);
  const server = report.postgres !== null
    ? `\n${formatPostgresServer(report.postgres)}`
    : report.redis !== null
    ? `\n${formatRedisServer(report.redis)}`
    : "";
  sections.push(`${formatEnvironment(report.environment)}${server}\n${footnote.join("")}`);
  return sections.join("\n\n");
}

function formatRateTable(rows: readonly ReportRow[]): string {
  const header = [
    "measurement",
    "median jobs/s",
    "ratio to baseline",
    "baseline",
    "also",
    "target",
    "met?",
  ];
  const lines = rows.map((row) => [
    row.label,
    Math.round(row.medianJobsPerSecond).toLocaleString("en-US"),
    percent(row.ratio),
    row.baseline === row.id ? `${row.baselineName} (itself)` : row.baselineName,
    row.also.length === 0
      ? "—"
      : row.also.map(({ name, ratio }) => `${percent(ratio)} of ${name}`).join("; "),
    row.target !== null
      ? `≥ ${percent(row.target)}`
      : row.targetAtMost !== null
      ? `≤ ${percent(row.targetAtMost)}`
      : "—",
    row.met === null ? "—" : row.met ? "yes" : "**no**",
  ]);
  const right = new Set([1, 2]);
  return [header, header.map((_, i) => right.has(i) ? "---:" : "---"), ...lines]
    .map((cells) => `| ${cells.join(" | ")} |`).join("\n");
}

/** The report as indented JSON (rates in jobs per second, ratios as fractions). */
export function formatJson(report: Report): string {
  return JSON.stringify(report, null, 2);
}

function percent(fraction: number): string {
  return `${(fraction * 100).toFixed(fraction < 0.1 ? 1 : 0)} %`;
}
