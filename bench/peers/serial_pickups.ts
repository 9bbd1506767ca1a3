/**
 * Pick-up latency of a PostgreSQL peer: jobs dispatched one at a time by a
 * client of their own to an idle worker of the peer's (its own instance and
 * connections, in this process), each once the previous one has started
 * and a gap has passed; timed from just before the dispatch call to the
 * first line of the handler.
 *
 * @module
 */
import type { LatencySample } from "../pickup.ts";
import { percentile } from "../percentile.ts";

/** A job that has not started by then fails the run. */
const JOB_TIMEOUT_MS = 20_000;

/** What {@linkcode serialPickups} drives: a dispatch, and a way to hear a job start. */
export interface PickupTarget {
  /** Dispatches job `n`, its payload `{ n }`. */
  dispatch(n: number): Promise<unknown>;
  /** Resolves when the handler of job `n` starts. */
  started(n: number): Promise<void>;
}

/**
 * Dispatches `jobs` jobs to `target` one at a time, waiting `gapMs()` after
 * each one started, and returns the latencies.
 */
export async function serialPickups(
  jobs: number,
  target: PickupTarget,
  gapMs: () => number,
): Promise<LatencySample> {
  const latencies: number[] = [];
  for (let n = 0; n < jobs; n++) {
    await new Promise((resolve) => setTimeout(resolve, gapMs()));
    const started = target.started(n);
    const at = performance.now();
    await target.dispatch(n);
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      started,
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`job ${n} did not start within ${JOB_TIMEOUT_MS} ms`)),
          JOB_TIMEOUT_MS,
        );
      }),
    ]).finally(() => clearTimeout(timer));
    latencies.push(performance.now() - at);
  }
  return {
    jobs,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    maxMs: Math.max(...latencies),
  };
}

/** Resolvers of "job n started", made on demand by either side. */
export class StartSignals {
  readonly #waiting = new Map<number, PromiseWithResolvers<void>>();

  /** The promise of job `n`'s start. */
  started(n: number): Promise<void> {
    return this.#entry(n).promise;
  }

  /** Says that job `n` started. */
  start(n: number): void {
    this.#entry(n).resolve();
  }

  #entry(n: number): PromiseWithResolvers<void> {
    let entry = this.#waiting.get(n);
    if (entry === undefined) {
      entry = Promise.withResolvers<void>();
      this.#waiting.set(n, entry);
    }
    return entry;
  }
}
