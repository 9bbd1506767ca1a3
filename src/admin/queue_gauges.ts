/**
 * The queue's observable gauges: jobs pending, delayed and running per
 * queue, read from the store when the OpenTelemetry SDK collects (never
 * without one: the no-op meter never calls back). Registered by each open
 * queue and removed when it closes.
 *
 * @internal
 * @module
 */
// A full specifier, as for zod: an app importing this from another folder need not list it.
// deno-lint-ignore no-import-prefix
import { type BatchObservableCallback, type Meter, metrics } from "npm:@opentelemetry/api@1";
import type { Clock } from "../clock.ts";
import { INSTRUMENTATION_SCOPE } from "../trace_context.ts";
import type { StatsStore } from "../stores/store.ts";

/** One queue's gauges, until {@linkcode QueueGauges.remove}. */
export class QueueGauges {
  readonly #meter: Meter;
  readonly #callback: BatchObservableCallback;
  readonly #gauges;

  /** Registers the gauges, read from `store` at `clock`'s now. */
  constructor(store: Pick<StatsStore, "counts">, clock: Clock) {
    this.#meter = metrics.getMeter(INSTRUMENTATION_SCOPE);
    const gauge = (name: string, description: string) =>
      this.#meter.createObservableGauge(name, { description, unit: "{job}" });
    const gauges = {
      pending: gauge("renox.jobs.pending", "Jobs due now and waiting for a worker"),
      delayed: gauge("renox.jobs.delayed", "Jobs waiting for a later time"),
      running: gauge("renox.jobs.running", "Jobs leased to a worker"),
    };
    this.#gauges = gauges;
    this.#callback = async (result) => {
      let rows;
      try {
        rows = await store.counts(clock.now());
      } catch {
        return; // a closed or busy store: this collection has no reading
      }
      for (const row of rows) {
        const attributes = { "messaging.destination.name": row.queue };
        result.observe(gauges.pending, row.pending, attributes);
        result.observe(gauges.delayed, row.delayed, attributes);
        result.observe(gauges.running, row.reserved, attributes);
      }
    };
    this.#meter.addBatchObservableCallback(this.#callback, Object.values(gauges));
  }

  /** Stops reading the store. */
  remove(): void {
    this.#meter.removeBatchObservableCallback(this.#callback, Object.values(this.#gauges));
  }
}
