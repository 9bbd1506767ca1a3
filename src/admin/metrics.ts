/**
 * What the metrics rollup says about a window of time: jobs per minute, and
 * per queue and per job type the runs, failures, average and p95 runtime,
 * and average wait. The rollup itself is written by the store, in the
 * transaction that settles each tick's jobs.
 *
 * @module
 */
import { optionBag } from "../option_bags.ts";
import { shown } from "../shown.ts";
import type { Clock } from "../clock.ts";
import {
  METRICS_CARRIED_MINUTE,
  type MetricsRow,
  RUNTIME_BUCKETS_MS,
  type StatsStore,
} from "../stores/store.ts";
import { addMetricsRow, emptyMetricsTotals, type MetricsTotals } from "../stores/rows/read.ts";

const MINUTE_MS = 60_000;
/** The longest window: the rollup keeps 7 days. */
const MAX_WINDOW_MS = 7 * 24 * 60 * MINUTE_MS;

/** Options for {@linkcode Queue.metrics}. */
export interface MetricsOptions {
  /**
   * How far back to look, in ms, rounded up to whole minutes (the current
   * one included), from 1 minute to 7 days; or `Infinity` for everything
   * the rollup counted: the last 7 days' minutes, and the totals of the
   * minutes pruned before them (kept per queue and job name), which
   * `byQueue` and `byJob` add in (never falling, as counters should) and
   * `perMinute` does not.
   * @default {3_600_000}
   */
  windowMs?: number;
}

/** Totals over a window. Runtimes and waits are of the attempts whose handler ran and was timed. */
export interface MetricsSummary {
  /** Attempts that succeeded. */
  readonly completed: number;
  /** Jobs that failed for good. */
  readonly failed: number;
  /** Attempts that ended in an error and were retried. */
  readonly retried: number;
  /** Jobs that expired before they started (`expireInMs`). */
  readonly expired: number;
  /**
   * Attempts timed: handlers that ran to a success, a failure for good or an
   * error they are retried after. An attempt that ended in `ctx.release()`,
   * was put back (a stop, a Web Worker terminated) or parked is not timed.
   */
  readonly runs: number;
  /** Mean runtime of the timed attempts, in ms; null without any. */
  readonly averageRuntimeMs: number | null;
  /**
   * 95th percentile of their runtime, in ms, estimated from the rollup's
   * histogram (linear within the bucket that holds it, so exact to that
   * bucket's width; above the last bound it reads as that bound); null
   * without any.
   */
  readonly p95RuntimeMs: number | null;
  /** Mean time the timed attempts waited, from when they were due to their claim, in ms; null without any. */
  readonly averageWaitMs: number | null;
}

/** Totals for one job name on one queue. */
export interface JobTypeMetrics extends MetricsSummary {
  /** Queue name. */
  readonly queue: string;
  /** Job name. */
  readonly name: string;
}

/** What settled in one minute, every queue and job together. */
export interface MinuteMetrics {
  /** The minute's start. */
  readonly minute: Date;
  /** Attempts that succeeded. */
  readonly completed: number;
  /** Jobs that failed for good. */
  readonly failed: number;
  /** Attempts that ended in an error and were retried. */
  readonly retried: number;
  /** Jobs that expired before they started. */
  readonly expired: number;
}

/** The metrics of a window, as {@linkcode Queue.metrics} returns them. */
export interface QueueMetrics {
  /** The first minute's start. */
  readonly since: Date;
  /** The end of the current minute: the window is `[since, until)`. */
  readonly until: Date;
  /** Every minute of the window, oldest first, with zeros where nothing settled. */
  readonly perMinute: MinuteMetrics[];
  /** Totals per queue, keyed by queue name (only queues where something settled). */
  readonly byQueue: Record<string, MetricsSummary>;
  /** Totals per job name and queue, sorted by queue then name. */
  readonly byJob: JobTypeMetrics[];
}

/** The minutes a window covers: `[since, until)`, whole minutes ending with the current one. */
export interface MetricsWindow {
  /** Start of the first minute, ms since the epoch. */
  readonly since: number;
  /** End of the current minute, ms since the epoch. */
  readonly until: number;
  /** Whether the totals of pruned minutes count too (`windowMs: Infinity`). */
  readonly carried: boolean;
}

/** Checks {@linkcode MetricsOptions} and places the window at `now`. */
export function metricsWindow(now: number, options: MetricsOptions | undefined): MetricsWindow {
  const windowMs = optionBag(options, "metrics", ["windowMs"])?.windowMs ?? 3_600_000;
  const carried = windowMs === Infinity;
  if (
    !carried && !(Number.isFinite(windowMs) && windowMs >= MINUTE_MS && windowMs <= MAX_WINDOW_MS)
  ) {
    throw new RangeError(
      `metrics: windowMs must be a number of ms from ${MINUTE_MS} (1 minute) to ${MAX_WINDOW_MS} (7 days), or Infinity for everything counted: got ${
        shown(windowMs)
      }`,
    );
  }
  const until = Math.floor(now / MINUTE_MS) * MINUTE_MS + MINUTE_MS;
  const minutes = Math.ceil((carried ? MAX_WINDOW_MS : windowMs) / MINUTE_MS);
  return { since: until - minutes * MINUTE_MS, until, carried };
}

/** Reads and adds up the metrics of the window `options` place at `clock`'s now. */
export async function readMetrics(
  store: Pick<StatsStore, "metrics">,
  clock: Clock,
  options: MetricsOptions,
): Promise<QueueMetrics> {
  const window = metricsWindow(clock.now(), options);
  // Everything counted: every row kept (a minute leaves the window before its prune carries it)
  // up to and with the carried totals, in one read, so a prune between two reads cannot show.
  const rows = window.carried
    ? await store.metrics(0, METRICS_CARRIED_MINUTE + MINUTE_MS)
    : await store.metrics(window.since, window.until);
  return summarizeMetrics(rows, window);
}

/** Adds up the rollup's rows of a window. */
export function summarizeMetrics(rows: readonly MetricsRow[], window: MetricsWindow): QueueMetrics {
  const minutes = new Map<
    number,
    { completed: number; failed: number; retried: number; expired: number }
  >();
  for (let minute = window.since; minute < window.until; minute += MINUTE_MS) {
    minutes.set(minute, { completed: 0, failed: 0, retried: 0, expired: 0 });
  }
  const byQueue = new Map<string, MetricsTotals>();
  const byJob = new Map<string, MetricsTotals & { queue: string; name: string }>();
  for (const row of rows) {
    const slot = minutes.get(row.minute);
    if (slot !== undefined) {
      slot.completed += row.completed;
      slot.failed += row.failed;
      slot.retried += row.retried;
      slot.expired += row.expired;
    }
    add(byQueue, row.queue, row, () => emptyMetricsTotals());
    add(
      byJob,
      JSON.stringify([row.queue, row.name]),
      row,
      () => ({ ...emptyMetricsTotals(), queue: row.queue, name: row.name }),
    );
  }
  return {
    since: new Date(window.since),
    until: new Date(window.until),
    perMinute: [...minutes].map(([minute, counts]) => ({ minute: new Date(minute), ...counts })),
    byQueue: Object.fromEntries(
      [...byQueue].sort(([a], [b]) => a < b ? -1 : 1).map(([queue, totals]) => [
        queue,
        summary(totals),
      ]),
    ),
    byJob: [...byJob.values()]
      .sort((a, b) => a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : a.name < b.name ? -1 : 1)
      .map((totals) => ({ queue: totals.queue, name: totals.name, ...summary(totals) })),
  };
}

/**
 * The `q` quantile (0 to 1) of the runs counted in a runtime histogram
 * (buckets in the order of `RUNTIME_BUCKETS_MS`, longer runs last): the
 * rank `ceil(q × runs)` located in its bucket and placed linearly between
 * the bucket's bounds (0 below the first); a rank in the last bucket reads
 * as the last bound. Null for an empty histogram.
 */
export function estimateQuantile(buckets: readonly number[], q: number): number | null {
  const runs = buckets.reduce((sum, count) => sum + count, 0);
  if (runs === 0) return null;
  const rank = Math.max(1, Math.ceil(q * runs));
  let before = 0;
  for (const [index, count] of buckets.entries()) {
    if (before + count >= rank) {
      const upper = RUNTIME_BUCKETS_MS[index];
      const lower = index === 0 ? 0 : RUNTIME_BUCKETS_MS[index - 1]!;
      if (upper === undefined) return lower;
      return lower + (upper - lower) * (rank - before) / count;
    }
    before += count;
  }
  return RUNTIME_BUCKETS_MS.at(-1)!;
}

function add<T extends MetricsTotals>(
  map: Map<string, T>,
  key: string,
  row: MetricsRow,
  make: () => T,
) {
  let totals = map.get(key);
  if (totals === undefined) map.set(key, totals = make());
  addMetricsRow(totals, row);
}

function summary(totals: MetricsTotals): MetricsSummary {
  const runs = totals.buckets.reduce((sum, count) => sum + count, 0);
  return {
    completed: totals.completed,
    failed: totals.failed,
    retried: totals.retried,
    expired: totals.expired,
    runs,
    averageRuntimeMs: runs === 0 ? null : totals.runtimeMs / runs,
    p95RuntimeMs: estimateQuantile(totals.buckets, 0.95),
    averageWaitMs: runs === 0 ? null : totals.waitMs / runs,
  };
}
