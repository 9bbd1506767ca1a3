/**
 * `GET /metrics`: the queue's figures in the Prometheus text exposition
 * format (or OpenMetrics, when the scraper asks for it), read from the
 * store, so every process's work counts, not only this one's. Counters are
 * per queue and job name, everything the metrics rollup counted (its last 7
 * days and the totals it carried from the minutes it pruned, so they never
 * fall); gauges are per queue, running jobs also per job name.
 *
 * @internal
 * @module
 */
import type { Queue } from "../queue.ts";

/** The content type of the Prometheus text format. */
export const PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8";
/** The content type of OpenMetrics text. */
export const OPENMETRICS_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Record<string, string>;

interface Family {
  readonly name: string;
  readonly type: "counter" | "gauge" | "summary";
  readonly help: string;
  readonly unit?: string;
  readonly samples: { readonly suffix?: string; readonly labels: Labels; readonly value: number }[];
}

/**
 * A summary's sum in seconds, from the mean of `runs` in ms: to the µs, so that
 * the float error of mean × runs never makes a sum read less than the scrape
 * before (a counter that falls reads to Prometheus as a reset).
 */
function seconds(meanMs: number | null, runs: number): number {
  return Math.round((meanMs ?? 0) * runs * 1e3) / 1e6;
}

/** The exposition of `queue`'s figures; `openMetrics` for the OpenMetrics flavour. */
export async function metricsText(queue: Queue, openMetrics: boolean): Promise<string> {
  const [metrics, counts] = [await queue.metrics({ windowMs: Infinity }), await queue.counts()];
  const counter = (name: string, help: string): Family => ({
    name,
    type: "counter",
    help,
    samples: [],
  });
  const completed = counter("renox_jobs_completed", "Attempts that succeeded");
  const failed = counter("renox_jobs_failed", "Jobs that failed for good");
  const retried = counter("renox_jobs_retried", "Attempts that ended in an error and were retried");
  const expired = counter("renox_jobs_expired", "Jobs that expired before they started");
  const duration: Family = {
    name: "renox_job_duration_seconds",
    type: "summary",
    unit: "seconds",
    help: "How long handlers ran, per attempt",
    samples: [],
  };
  const p95: Family = {
    name: "renox_job_duration_p95_seconds",
    type: "gauge",
    unit: "seconds",
    help: "95th percentile of the handlers' runtime, estimated from the rollup's buckets",
    samples: [],
  };
  const wait: Family = {
    name: "renox_job_wait_seconds",
    type: "summary",
    unit: "seconds",
    help: "How long jobs had been due when a worker claimed them",
    samples: [],
  };
  for (const job of metrics.byJob) {
    const labels = { queue: job.queue, job: job.name };
    completed.samples.push({ suffix: "_total", labels, value: job.completed });
    failed.samples.push({ suffix: "_total", labels, value: job.failed });
    retried.samples.push({ suffix: "_total", labels, value: job.retried });
    expired.samples.push({ suffix: "_total", labels, value: job.expired });
    if (job.p95RuntimeMs !== null) p95.samples.push({ labels, value: job.p95RuntimeMs / 1e3 });
    duration.samples.push({
      suffix: "_sum",
      labels,
      value: seconds(job.averageRuntimeMs, job.runs),
    });
    duration.samples.push({ suffix: "_count", labels, value: job.runs });
    wait.samples.push({ suffix: "_sum", labels, value: seconds(job.averageWaitMs, job.runs) });
    wait.samples.push({ suffix: "_count", labels, value: job.runs });
  }
  const gauge = (name: string, help: string): Family => ({
    name,
    type: "gauge",
    help,
    samples: [],
  });
  const pending = gauge("renox_jobs_pending", "Jobs due now and waiting for a worker");
  const delayed = gauge("renox_jobs_delayed", "Jobs waiting for a later time");
  const running = gauge("renox_jobs_running", "Jobs leased to a worker");
  const runningByJob = gauge("renox_jobs_running_by_job", "Jobs running now, per job name");
  const stored = gauge("renox_failed_jobs", "Jobs kept in the failed jobs");
  for (const [name, queueCounts] of Object.entries(counts)) {
    const labels = { queue: name };
    pending.samples.push({ labels, value: queueCounts.pending });
    delayed.samples.push({ labels, value: queueCounts.delayed });
    running.samples.push({ labels, value: queueCounts.reserved });
    stored.samples.push({ labels, value: queueCounts.failed });
    const byName = new Map<string, number>();
    for (const job of queueCounts.running) byName.set(job.name, (byName.get(job.name) ?? 0) + 1);
    for (const [job, value] of [...byName].sort(([a], [b]) => a < b ? -1 : 1)) {
      runningByJob.samples.push({ labels: { queue: name, job }, value });
    }
  }
  const families = [
    completed,
    failed,
    retried,
    expired,
    duration,
    p95,
    wait,
    pending,
    delayed,
    running,
    runningByJob,
    stored,
  ];
  const text = families.map((family) => render(family, openMetrics)).join("");
  return openMetrics ? `${text}# EOF\n` : text;
}

function render(family: Family, openMetrics: boolean): string {
  // OpenMetrics names a counter family without its `_total`; Prometheus text names it with it.
  const familyName = family.type === "counter" && !openMetrics
    ? `${family.name}_total`
    : family.name;
  let out = `# HELP ${familyName} ${
    escapeHelp(family.help)
  }\n# TYPE ${familyName} ${family.type}\n`;
  if (openMetrics && family.unit !== undefined) out += `# UNIT ${familyName} ${family.unit}\n`;
  for (const sample of family.samples) {
    const labels = Object.entries(sample.labels)
      .map(([key, value]) => `${key}="${escapeLabel(value)}"`).join(",");
    out += `${family.name}${sample.suffix ?? ""}{${labels}} ${number(sample.value)}\n`;
  }
  return out;
}

function number(value: number): string {
  return Number.isFinite(value) ? String(value) : value > 0 ? "+Inf" : value < 0 ? "-Inf" : "NaN";
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

function escapeHelp(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}
