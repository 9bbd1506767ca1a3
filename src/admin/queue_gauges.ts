/**
 * The queue's observable gauges: jobs pending, delayed and running per
 * queue, read from the store when the OpenTelemetry SDK collects (never
 * without one: the no-op meter never calls back). Registered by each open
 * queue, again when the app installs a provider later, and removed when it
 * closes.
 *
 * @internal
 * @module
 */
// A full specifier, as for zod: an app importing this from another folder need not list it.
// deno-lint-ignore no-import-prefix
import type { BatchObservableCallback, Meter, Observable } from "npm:@opentelemetry/api@1";
import type { Clock } from "../clock.ts";
import { followMeter } from "../followed_meter.ts";
import type { StatsStore } from "../stores/store.ts";

/** The gauges as registered with one meter. */
interface Registered {
  readonly meter: Meter;
  readonly callback: BatchObservableCallback;
  readonly gauges: Observable[];
}

/** One queue's gauges, until {@linkcode QueueGauges.remove}. */
export class QueueGauges {
  readonly #store: Pick<StatsStore, "counts">;
  readonly #clock: Clock;
  #registered: Registered | null = null;
  readonly #unfollow: () => void;
  /** The queues the last collection read jobs of: each reads 0 once when its jobs are gone. */
  readonly #seen = new Set<string>();

  /**
   * Registers the gauges, read from `store` at `clock`'s now, with the
   * global provider's meter, and again with the meter of a provider the app
   * installs later.
   */
  constructor(store: Pick<StatsStore, "counts">, clock: Clock) {
    this.#store = store;
    this.#clock = clock;
    this.#unfollow = followMeter((meter) => this.#register(meter));
  }

  /** Stops reading the store. */
  remove(): void {
    this.#unfollow();
    this.#unregister();
  }

  #register(meter: Meter): void {
    this.#unregister();
    const gauge = (name: string, description: string) =>
      meter.createObservableGauge(name, { description, unit: "{job}" });
    const pending = gauge(
      "renox.jobs.pending",
      "Jobs due now and not started (a worker may hold them ahead)",
    );
    const delayed = gauge("renox.jobs.delayed", "Jobs waiting for a later time");
    const running = gauge("renox.jobs.running", "Jobs a worker started");
    const callback: BatchObservableCallback = async (result) => {
      let rows;
      try {
        rows = await this.#store.counts(this.#clock.now());
      } catch {
        return; // a closed or busy store: this collection has no reading
      }
      const empty = new Set(this.#seen);
      for (const row of rows) {
        const attributes = { "messaging.destination.name": row.queue };
        result.observe(pending, row.pending, attributes);
        result.observe(delayed, row.delayed, attributes);
        result.observe(running, row.reserved, attributes);
        this.#seen.add(row.queue);
        empty.delete(row.queue);
      }
      // The store counts only queues that hold jobs: one that emptied reads 0 once, not its last
      // value, and then no more (an exporter keeps that 0), until it holds jobs again.
      for (const queue of empty) {
        const attributes = { "messaging.destination.name": queue };
        for (const gauge of [pending, delayed, running]) result.observe(gauge, 0, attributes);
        this.#seen.delete(queue);
      }
    };
    const gauges = [pending, delayed, running];
    meter.addBatchObservableCallback(callback, gauges);
    this.#registered = { meter, callback, gauges };
  }

  #unregister(): void {
    if (this.#registered === null) return;
    const { meter, callback, gauges } = this.#registered;
    meter.removeBatchObservableCallback(callback, gauges);
    this.#registered = null;
  }
}
