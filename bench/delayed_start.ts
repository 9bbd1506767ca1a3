/**
 * Delayed jobs start on time: {@linkcode DELAYED_JOBS} no-op jobs dispatched
 * at once with delays spread over a few seconds, drained by an idle worker
 * with the default `pollMs`, and each job's start lateness: how long after
 * its due time its `job:start` came. A worker that waited for its next poll
 * would show up to a whole `pollMs` of it.
 *
 * @module
 */
import { noop } from "./jobs.ts";
import { percentile } from "./percentile.ts";
import type { LatencySample, PickupMeasurement } from "./pickup.ts";
import { withQueue } from "./queue_fixture.ts";
import { wallClockMs } from "./wall_clock.ts";

/** Delayed jobs per run. */
export const DELAYED_JOBS = 200;
/** The first job's delay, in ms. */
const FIRST_DELAY_MS = 100;
/** Mean gap between two jobs' due times, in ms (each gap is random, 0 to twice this). */
const MEAN_GAP_MS = 12;

/** The start-lateness measurement (its own baseline: the targets are absolute). */
export function delayedStartMeasurement(): PickupMeasurement {
  return {
    id: "delayed-start",
    name: "delayed start",
    label: `delayed jobs: due time → job:start, same process, default pollMs ` +
      `(${DELAYED_JOBS} jobs; target p50 ≤ 5 ms, p99 ≤ 20 ms)`,
    baseline: "delayed-start",
    fixedJobs: DELAYED_JOBS,
    fixedWarmupJobs: 20,
    run: delayedStarts,
  };
}

/** Dispatches `jobs` delayed jobs, runs them with a default worker, and sums up their lateness. */
function delayedStarts(jobs: number): Promise<LatencySample> {
  return withQueue(async (queue) => {
    const dueAt = new Map<number, number>();
    const lateness: number[] = [];
    const worker = queue.work({ executor: "isolate" });
    const all = Promise.withResolvers<void>();
    worker.addEventListener("job:start", ({ detail }) => {
      const due = dueAt.get(detail.id);
      if (due === undefined) return;
      lateness.push(wallClockMs() - due);
      if (lateness.length === jobs) all.resolve();
    });
    try {
      let delayMs = FIRST_DELAY_MS;
      for (let n = 0; n < jobs; n++) {
        // Date.now() is what the store adds the delay to, rounded down: the due time is no earlier.
        const due = Date.now() + delayMs;
        dueAt.set(await queue.dispatch(noop, { n }, { delayMs }), due);
        delayMs += Math.round(Math.random() * 2 * MEAN_GAP_MS);
      }
      const timer = setTimeout(
        () => all.reject(new Error(`Only ${lateness.length} of ${jobs} delayed jobs started`)),
        delayMs + 30_000,
      );
      await all.promise.finally(() => clearTimeout(timer));
    } finally {
      await worker.stop({ graceMs: 1_000 });
    }
    return {
      jobs,
      p50Ms: percentile(lateness, 50),
      p99Ms: percentile(lateness, 99),
      maxMs: Math.max(...lateness),
    };
  });
}
