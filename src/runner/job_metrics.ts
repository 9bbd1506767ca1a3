/**
 * The runner's OpenTelemetry instruments: counters of settled attempts and
 * histograms of runtime and wait, recorded when a tick's settle applied.
 * Names and units are listed in the README ("Observability"). Without an
 * SDK the instruments are no-ops of `npm:@opentelemetry/api`.
 *
 * @internal
 * @module
 */
// A full specifier, as for zod: an app importing this from another folder need not list it.
// deno-lint-ignore no-import-prefix
import { type Attributes, type Counter, type Histogram, metrics } from "npm:@opentelemetry/api@1";
import type { ClaimedJob } from "../stores/store.ts";
import { INSTRUMENTATION_SCOPE } from "./tracing.ts";

/** Seconds, the unit of every duration the queue records. */
const SECONDS = "s";
/** Bucket bounds for runtimes and waits, in seconds. */
const DURATION_BOUNDARIES = [
  0.001,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
  300,
];

/** The instruments one runner records to. */
export class JobMetrics {
  readonly #completed: Counter;
  readonly #failed: Counter;
  readonly #retried: Counter;
  readonly #duration: Histogram;
  readonly #wait: Histogram;

  /** Creates (or, with an SDK, looks up) the instruments. */
  constructor() {
    const meter = metrics.getMeter(INSTRUMENTATION_SCOPE);
    this.#completed = meter.createCounter("renox.jobs.completed", {
      description: "Attempts that succeeded",
      unit: "{job}",
    });
    this.#failed = meter.createCounter("renox.jobs.failed", {
      description: "Jobs that failed for good (moved to the failed jobs)",
      unit: "{job}",
    });
    this.#retried = meter.createCounter("renox.jobs.retried", {
      description: "Attempts that ended in an error and were released for a retry",
      unit: "{attempt}",
    });
    const advice = { explicitBucketBoundaries: DURATION_BOUNDARIES };
    this.#duration = meter.createHistogram("renox.job.duration", {
      description: "How long a handler ran, per attempt",
      unit: SECONDS,
      advice,
    });
    this.#wait = meter.createHistogram("renox.job.wait", {
      description: "How long a job had been due when a worker claimed it",
      unit: SECONDS,
      advice,
    });
  }

  /** An attempt starts: records how long its job had waited. */
  started(job: ClaimedJob): void {
    this.#wait.record((job.waitedMs ?? 0) / 1_000, attributesOf(job));
  }

  /** An attempt's settle applied: counts it, and records its runtime when the handler ran. */
  settled(job: ClaimedJob, kind: "complete" | "retry" | "fail", durationMs: number | null): void {
    const attributes = attributesOf(job);
    const counter = kind === "complete"
      ? this.#completed
      : kind === "fail"
      ? this.#failed
      : this.#retried;
    counter.add(1, attributes);
    if (durationMs !== null) this.#duration.record(durationMs / 1_000, attributes);
  }
}

function attributesOf(job: ClaimedJob): Attributes {
  return { "messaging.destination.name": job.queue, "renox.job.name": job.name };
}
