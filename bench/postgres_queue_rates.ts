/**
 * Our throughput on PostgreSQL: `dispatch()` one at a time,
 * `dispatchMany()` in one call, and drains of pre-queued no-op jobs with the
 * isolate executor, in this process and across several worker processes on
 * the same schema, each on a fresh schema and through the public API only.
 *
 * @module
 */
import type { Measurement } from "./measurement.ts";
import { processDrain } from "./process_drain.ts";
import { withPostgresQueue } from "./postgres_queue.ts";
import {
  DRAIN_PROCESSES,
  POSTGRES_DRAIN_CONCURRENCIES,
  POSTGRES_PROCESS_DRAIN_CONCURRENCIES,
  type PostgresSizes,
} from "./postgres_sizes.ts";
import {
  DELAYED_BESIDE,
  delayedBesideMeasurement,
  dispatchMany,
  dispatchSingle,
  drain,
  type QueueFixture,
  stepMeasurements,
} from "./queue.ts";

function fixed(jobs: number): Pick<Measurement, "fixedJobs" | "fixedWarmupJobs"> {
  return { fixedJobs: jobs, fixedWarmupJobs: Math.max(1, Math.round(jobs / 10)) };
}

function count(jobs: number): string {
  return jobs.toLocaleString("en-US");
}

/**
 * Single dispatch (against the raw autocommit insert) and `dispatchMany`
 * (against the raw one-transaction insert).
 */
export function postgresDispatchMeasurements(url: string, sizes: PostgresSizes): Measurement[] {
  const fixture: QueueFixture = (fn) => withPostgresQueue(url, fn);
  return [
    {
      ...fixed(sizes.commitJobs),
      id: "dispatch-single",
      name: "single dispatch",
      label: `queue.dispatch(), one at a time (sequential awaits) (${
        count(sizes.commitJobs)
      } jobs)`,
      baseline: "raw-insert-autocommit",
      run: (jobs) => dispatchSingle(jobs, fixture),
    },
    {
      ...fixed(sizes.jobs),
      id: "dispatch-many",
      name: "dispatchMany",
      label: `queue.dispatchMany(), all jobs in one call (${count(sizes.jobs)} jobs)`,
      baseline: "raw-insert-one-transaction",
      run: (jobs) => dispatchMany(jobs, fixture),
    },
  ];
}

/**
 * The isolate drains at each of {@linkcode POSTGRES_DRAIN_CONCURRENCIES}:
 * one worker in this process, against the batched ceiling (target 50 % at
 * concurrency 32); then one worker process and {@linkcode DRAIN_PROCESSES}
 * worker processes at each of {@linkcode POSTGRES_PROCESS_DRAIN_CONCURRENCIES},
 * timed alike, the latter against the former (target 1.5× at 32) and the
 * batched ceiling; and the
 * in-process drain at 32 beside many delayed higher-priority jobs, against
 * the same drain without them (target 90 %).
 */
export function postgresDrainMeasurements(url: string, sizes: PostgresSizes): Measurement[] {
  const fixture: QueueFixture = (fn) => withPostgresQueue(url, fn);
  const inProcess = POSTGRES_DRAIN_CONCURRENCIES.map((concurrency): Measurement => ({
    ...fixed(sizes.jobs),
    id: `drain-c${concurrency}`,
    name: `1-process drain c${concurrency}`,
    label: `queue.work() drain of no-op jobs, isolate executor, concurrency ${concurrency}, ` +
      `1 worker in this process (${count(sizes.jobs)} jobs)`,
    baseline: "ceiling-batched",
    ...(concurrency === 32 && { target: 0.5 }),
    run: (jobs) => drain(jobs, concurrency, "isolate", fixture),
  }));
  const processes = POSTGRES_PROCESS_DRAIN_CONCURRENCIES.flatMap((concurrency): Measurement[] => [{
    ...fixed(sizes.processDrainJobs),
    id: `drain-1p-c${concurrency}`,
    name: `1-worker-process drain c${concurrency}`,
    label: `the same drain by 1 worker process × concurrency ${concurrency}, start to empty ` +
      `(${count(sizes.processDrainJobs)} jobs)`,
    baseline: "ceiling-batched",
    run: (jobs) => processDrain(url, jobs, 1, concurrency),
  }, {
    ...fixed(sizes.processDrainJobs),
    id: `drain-${DRAIN_PROCESSES}p-c${concurrency}`,
    name: `${DRAIN_PROCESSES}-process drain c${concurrency}`,
    label: `the same drain, ${DRAIN_PROCESSES} worker processes × concurrency ${concurrency}, ` +
      `start to empty (${count(sizes.processDrainJobs)} jobs)`,
    baseline: `drain-1p-c${concurrency}`,
    alsoComparedWith: ["ceiling-batched"],
    ...(concurrency === 32 && { target: 1.5 }),
    run: (jobs) => processDrain(url, jobs, DRAIN_PROCESSES, concurrency),
  }]);
  const delayedBeside = delayedBesideMeasurement(fixture, {
    ...fixed(sizes.jobs),
    label: `the in-process drain at concurrency 32 beside ${
      count(DELAYED_BESIDE)
    } delayed priority-5 jobs (${count(sizes.jobs)} jobs)`,
  });
  return [...inProcess, delayedBeside, ...processes];
}

/** The durable-step drains ({@linkcode stepMeasurements}) on the server, with its job counts. */
export function postgresStepMeasurements(url: string, sizes: PostgresSizes): Measurement[] {
  const fixture: QueueFixture = (fn) => withPostgresQueue(url, fn);
  return stepMeasurements(fixture, { ...fixed(sizes.jobs) });
}
