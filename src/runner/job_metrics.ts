/**
 * The runner's OpenTelemetry instruments: counters of settled attempts,
 * added once per tick, and histograms of runtime and wait, recorded per
 * attempt.
 * Names and units are listed in docs/observability.md ("Metrics"). Without an
 * SDK the instruments are no-ops of `npm:@opentelemetry/api`; they are made
 * again when the app installs a `MeterProvider` later (src/followed_meter.ts).
 *
 * @internal
 * @module
 */
// A full specifier, as for zod: an app importing this from another folder need not list it.
// deno-lint-ignore no-import-prefix
import type { Attributes, Counter, Histogram, Meter } from "npm:@opentelemetry/api@1";
import { followMeter } from "../followed_meter.ts";
import type { ClaimedJob } from "../stores/store.ts";

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

/** How a counted attempt settled: each kind has its counter. */
type SettledKind = "complete" | "retry" | "fail";

/** The instruments of one meter. */
interface Instruments {
  readonly completed: Counter;
  readonly failed: Counter;
  readonly retried: Counter;
  readonly duration: Histogram;
  readonly wait: Histogram;
}

/** The instruments one runner records to. */
export class JobMetrics {
  /** Replaced when the app installs a `MeterProvider` after the runner started. */
  #instruments!: Instruments;
  readonly #unfollow: () => void;
  /** The attributes of each queue's jobs of each name, made once and handed to every record. */
  readonly #attributes = new Map<string, Map<string, Attributes>>();
  /** Attempts settled since the last flush, by their attributes. */
  readonly #counts = new Map<Attributes, Record<SettledKind, number>>();

  /** Creates (or, with an SDK, looks up) the instruments, until {@linkcode JobMetrics.close}. */
  constructor() {
    this.#unfollow = followMeter((meter) => this.#instruments = instrumentsOf(meter));
  }

  /** Stops following the app's `MeterProvider` (the runner stopped). */
  close(): void {
    this.#unfollow();
  }

  /** An attempt starts: records how long its job had waited. */
  started(job: ClaimedJob): void {
    this.#instruments.wait.record((job.waitedMs ?? 0) / 1_000, this.#attributesOf(job));
  }

  /**
   * An attempt's settle applied: records its runtime when the handler ran,
   * and counts it towards the next {@linkcode JobMetrics.flush}.
   */
  settled(job: ClaimedJob, kind: SettledKind, durationMs: number | null): void {
    const attributes = this.#attributesOf(job);
    let counts = this.#counts.get(attributes);
    if (counts === undefined) {
      this.#counts.set(attributes, counts = { complete: 0, retry: 0, fail: 0 });
    }
    counts[kind]++;
    if (durationMs !== null) this.#instruments.duration.record(durationMs / 1_000, attributes);
  }

  /**
   * Adds the attempts counted since the last flush to the counters: one
   * `add()` per queue, job name and counter for a tick's settles rather
   * than one per attempt (a counter's sum is the same, each call costs).
   */
  flush(): void {
    const { completed, retried, failed } = this.#instruments;
    for (const [attributes, counts] of this.#counts) {
      if (counts.complete > 0) completed.add(counts.complete, attributes);
      if (counts.retry > 0) retried.add(counts.retry, attributes);
      if (counts.fail > 0) failed.add(counts.fail, attributes);
    }
    this.#counts.clear();
  }

  /** The attributes every record of `job` carries (SDKs copy what they keep, none changes them). */
  #attributesOf({ queue, name }: ClaimedJob): Attributes {
    let byName = this.#attributes.get(queue);
    if (byName === undefined) this.#attributes.set(queue, byName = new Map());
    let attributes = byName.get(name);
    if (attributes === undefined) {
      attributes = Object.freeze({ "messaging.destination.name": queue, "renox.job.name": name });
      byName.set(name, attributes);
    }
    return attributes;
  }
}

/** The runner's instruments made with `meter`. */
function instrumentsOf(meter: Meter): Instruments {
  const advice = { explicitBucketBoundaries: DURATION_BOUNDARIES };
  return {
    completed: meter.createCounter("renox.jobs.completed", {
      description: "Attempts that succeeded",
      unit: "{job}",
    }),
    failed: meter.createCounter("renox.jobs.failed", {
      description: "Jobs that failed for good (moved to the failed jobs)",
      unit: "{job}",
    }),
    retried: meter.createCounter("renox.jobs.retried", {
      description: "Attempts that ended in an error and were released for a retry",
      unit: "{attempt}",
    }),
    duration: meter.createHistogram("renox.job.duration", {
      description: "How long a handler ran, per attempt",
      unit: SECONDS,
      advice,
    }),
    wait: meter.createHistogram("renox.job.wait", {
      description: "How long a job had been due when a worker claimed it",
      unit: SECONDS,
      advice,
    }),
  };
}
