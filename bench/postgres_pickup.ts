/**
 * Pick-up latency on PostgreSQL: how long after `dispatch()` is called an
 * idle worker in another process starts the job's handler, over jobs
 * dispatched one at a time, each once the previous one has completed. Two
 * ways: woken by `LISTEN/NOTIFY` (polling every 5 s, so a missed wake-up
 * shows), and the baseline, the same worker with its store's `watch()`
 * hidden, polling every 50 ms.
 *
 * @module
 */
import {
  IDLE_GAP_MS,
  IDLE_POLL_MS,
  type LatencySample,
  type PickupMeasurement,
  pickupsFromProcess,
  POLL_ONLY_JOBS,
  POLL_ONLY_MS,
  pollPhase,
  WARMUP_ROUND_JOBS,
} from "./pickup.ts";
import { pickupWorkerCommand } from "./pickup_worker.ts";
import { withPostgresQueue } from "./postgres_queue.ts";
import { POSTGRES_PICKUP_JOBS } from "./postgres_sizes.ts";

/** The two pick-up measurements; the poll-only one is the baseline. */
export function postgresPickupMeasurements(url: string): PickupMeasurement[] {
  return [
    {
      id: "pickup-poll-only",
      name: `poll only (${POLL_ONLY_MS} ms)`,
      label: `other process, no LISTEN (watch() hidden), pollMs ${POLL_ONLY_MS}: polling ` +
        `alone (${POLL_ONLY_JOBS} jobs)`,
      baseline: "pickup-poll-only",
      fixedJobs: POLL_ONLY_JOBS,
      fixedWarmupJobs: WARMUP_ROUND_JOBS,
      run: (jobs) => crossProcess(url, jobs, { pollMs: POLL_ONLY_MS, watch: false }, pollPhase),
    },
    {
      id: "pickup-notify",
      name: "LISTEN/NOTIFY",
      label: `other process, woken by LISTEN/NOTIFY, pollMs ${
        IDLE_POLL_MS.toLocaleString("en-US")
      } (${POSTGRES_PICKUP_JOBS.toLocaleString("en-US")} jobs)`,
      baseline: "pickup-poll-only",
      fixedJobs: POSTGRES_PICKUP_JOBS,
      fixedWarmupJobs: WARMUP_ROUND_JOBS,
      run: (jobs) =>
        crossProcess(url, jobs, { pollMs: IDLE_POLL_MS, watch: true }, () => IDLE_GAP_MS),
    },
  ];
}

/** A worker process on a fresh schema, created and migrated here first; this process dispatches. */
function crossProcess(
  url: string,
  jobs: number,
  options: { readonly pollMs: number; readonly watch: boolean },
  gapMs: () => number,
): Promise<LatencySample> {
  return withPostgresQueue(
    url,
    (queue, schema) =>
      pickupsFromProcess(queue, pickupWorkerCommand({ db: url, schema, ...options }), {
        jobs,
        gapMs,
        pollOnlyMs: options.watch ? null : options.pollMs,
      }),
  );
}
