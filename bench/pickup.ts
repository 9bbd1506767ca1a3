/**
 * Pick-up latency: how long after `dispatch()` is called an idle worker's
 * handler starts, over jobs dispatched one at a time, each once the previous
 * one has completed. Three ways: a worker in another process woken by its
 * watch of the WAL file (polling every 5 s, so a missed wake-up shows), the
 * same worker with watching made impossible and polling every 50 ms (the
 * baseline: what polling alone gives), and a worker in the dispatching
 * process, woken directly by `dispatch()`.
 *
 * @module
 */
import { Queue } from "../mod.ts";
import { BENCH_JOBS_URL, pickup } from "./jobs.ts";
import { readLines } from "./lines.ts";
import { percentile } from "./percentile.ts";
import { PickupLog } from "./pickup_log.ts";
import { listenForPickups } from "./pickup_signal.ts";
import { parsePickupWorkerLine, pickupWorkerCommand } from "./pickup_worker.ts";
import { withQueue } from "./queue_fixture.ts";
import type { Runnable } from "./rounds.ts";
import { withTempDatabase } from "./temp_database.ts";
import { wallClockMs } from "./wall_clock.ts";

/** Serial jobs per timed run with a worker process woken by its watch. */
export const PICKUP_JOBS = 1_000;
/** Serial jobs per timed run with a worker in this process (a reference, not the figure asked for). */
export const IN_PROCESS_JOBS = 300;
/** Serial jobs per timed run of the poll-only baseline (each waits ~25 ms). */
export const POLL_ONLY_JOBS = 100;
/** `pollMs` of the workers that should be woken: a missed wake-up costs up to this. */
export const IDLE_POLL_MS = 5_000;
/** `pollMs` of the poll-only baseline. */
export const POLL_ONLY_MS = 50;
/** Untimed jobs at the start of every run (the Web Worker imports the jobs module). */
const PER_RUN_WARMUP_JOBS = 5;
/** Jobs per run in the warm-up round. */
export const WARMUP_ROUND_JOBS = 20;
/** Wait after a job completed before the next dispatch, so that the worker is idle again. */
export const IDLE_GAP_MS = 2;
/**
 * The poll-only baseline waits a random share of a poll interval more: a
 * worker starts its poll sleep right when a job completes, so a dispatch at
 * a fixed gap after each completion would always wait almost a whole
 * interval, where a job arriving at a random moment waits half of one on average.
 */
export const pollPhase = (): number => IDLE_GAP_MS + Math.random() * POLL_ONLY_MS;
/** A job that has not started and completed by then fails the run. */
const JOB_TIMEOUT_MS = IDLE_POLL_MS * 4;
/** A worker process that has not said it is ready by then fails the run. */
const READY_TIMEOUT_MS = 30_000;
/** How long a worker process may take to stop once its stdin closed, before it is killed. */
const STOP_TIMEOUT_MS = 5_000;

/** What one run of serial pick-ups found. */
export interface LatencySample {
  /** Jobs timed. */
  readonly jobs: number;
  /** Median pick-up latency, in ms. */
  readonly p50Ms: number;
  /** 99th percentile, in ms. */
  readonly p99Ms: number;
  /** The slowest pick-up, in ms. */
  readonly maxMs: number;
}

/** One pick-up latency figure of the report. */
export interface PickupMeasurement extends Runnable<LatencySample> {
  /** What the table says. */
  readonly label: string;
  /** A short name, for the baseline column. */
  readonly name: string;
}

/** The three pick-up measurements; the poll-only one is the baseline. */
export function pickupMeasurements(): PickupMeasurement[] {
  return [
    {
      id: "pickup-poll-only",
      name: `poll only (${POLL_ONLY_MS} ms)`,
      label:
        `other process, no watch (file: URI), pollMs ${POLL_ONLY_MS}: polling alone (${POLL_ONLY_JOBS} jobs)`,
      baseline: "pickup-poll-only",
      fixedJobs: POLL_ONLY_JOBS,
      fixedWarmupJobs: WARMUP_ROUND_JOBS,
      run: (jobs) => crossProcess(jobs, { pollMs: POLL_ONLY_MS, watch: false }, pollPhase),
    },
    {
      id: "pickup-watch",
      name: "WAL watch",
      label: `other process, woken by its WAL watch, pollMs ${
        IDLE_POLL_MS.toLocaleString("en-US")
      } (${PICKUP_JOBS.toLocaleString("en-US")} jobs)`,
      baseline: "pickup-poll-only",
      fixedJobs: PICKUP_JOBS,
      fixedWarmupJobs: WARMUP_ROUND_JOBS,
      run: (jobs) => crossProcess(jobs, { pollMs: IDLE_POLL_MS, watch: true }, () => IDLE_GAP_MS),
    },
    {
      id: "pickup-in-process",
      name: "in-process",
      label: `same process, woken directly by dispatch(), pollMs ${
        IDLE_POLL_MS.toLocaleString("en-US")
      } (${IN_PROCESS_JOBS.toLocaleString("en-US")} jobs)`,
      baseline: "pickup-poll-only",
      fixedJobs: IN_PROCESS_JOBS,
      fixedWarmupJobs: WARMUP_ROUND_JOBS,
      run: inProcess,
    },
  ];
}

/** A worker process on a fresh database; this process dispatches. */
function crossProcess(
  jobs: number,
  options: { readonly pollMs: number; readonly watch: boolean },
  gapMs: () => number,
): Promise<LatencySample> {
  return withTempDatabase(async (path) => {
    // Created and migrated here first, so the worker only opens it.
    await using queue = await Queue.open({ path, jobs: BENCH_JOBS_URL });
    return await pickupsFromProcess(queue, pickupWorkerCommand({ db: path, ...options }), {
      jobs,
      gapMs,
      pollOnlyMs: options.watch ? null : options.pollMs,
    });
  });
}

/**
 * Starts the pick-up worker process of `command` on `queue`'s database,
 * waits until it is ready, times serial pick-ups dispatched from `queue`,
 * and stops the process. `pollOnlyMs` names the poll interval of a worker
 * that should not be woken (null for one that should): a p50 far below it
 * says the baseline is none.
 */
export async function pickupsFromProcess(
  queue: Queue,
  command: Deno.Command,
  options: {
    readonly jobs: number;
    readonly gapMs: () => number;
    readonly pollOnlyMs: number | null;
  },
): Promise<LatencySample> {
  const { jobs, gapMs, pollOnlyMs } = options;
  const child = command.spawn();
  const stdin = child.stdin.getWriter();
  const log = new PickupLog();
  const ready = Promise.withResolvers<void>();
  const readyTimer = setTimeout(
    () => ready.reject(new Error(`The pick-up worker was not ready in ${READY_TIMEOUT_MS} ms`)),
    READY_TIMEOUT_MS,
  );
  const reading = (async () => {
    for await (const text of readLines(child.stdout)) {
      const line = parsePickupWorkerLine(text);
      if (line?.kind === "ready") ready.resolve();
      else if (line?.kind === "start") log.started(line.id, line.latencyMs);
      else if (line?.kind === "complete") log.completed(line.id);
    }
    const ended = new Error("The pick-up worker process ended before the run did");
    ready.reject(ended);
    log.fail(ended);
  })();
  try {
    await ready.promise.finally(() => clearTimeout(readyTimer));
    const sample = await serialPickups(queue, log, jobs, gapMs);
    if (pollOnlyMs !== null && sample.p50Ms < pollOnlyMs / 5) {
      console.error(
        `bench: the poll-only pick-up p50 is ${sample.p50Ms.toFixed(2)} ms with pollMs ` +
          `${pollOnlyMs}: its worker was woken, so it is no baseline (does the store ` +
          `now watch what the baseline opens?)`,
      );
    }
    return sample;
  } finally {
    await stdin.close().catch(() => {});
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stopped = await Promise.race([
      child.status.then(() => true),
      new Promise<false>((resolve) => timer = setTimeout(() => resolve(false), STOP_TIMEOUT_MS)),
    ]);
    clearTimeout(timer);
    if (!stopped) child.kill("SIGKILL");
    await reading.catch(() => {});
    await child.status;
  }
}

/** A worker in this process, woken by `dispatch()` itself. */
function inProcess(jobs: number): Promise<LatencySample> {
  return withQueue(async (queue) => {
    const log = new PickupLog();
    using _pickups = listenForPickups(({ id, latencyMs }) => log.started(id, latencyMs));
    const worker = queue.work({ executor: "workers", concurrency: 1, pollMs: IDLE_POLL_MS });
    worker.addEventListener("job:complete", ({ detail }) => log.completed(detail.id));
    try {
      return await serialPickups(queue, log, jobs, () => IDLE_GAP_MS);
    } finally {
      await worker.stop({ graceMs: 1_000 });
    }
  });
}

/**
 * Dispatches {@linkcode PER_RUN_WARMUP_JOBS} untimed jobs, then `jobs` timed
 * ones, each `gapMs()` after the one before has completed, and sums up the
 * latencies.
 */
async function serialPickups(
  queue: Queue,
  log: PickupLog,
  jobs: number,
  gapMs: () => number,
): Promise<LatencySample> {
  const latencies: number[] = [];
  for (let index = 0; index < PER_RUN_WARMUP_JOBS + jobs; index++) {
    await new Promise((resolve) => setTimeout(resolve, gapMs()));
    const id = await queue.dispatch(pickup, { sentAt: wallClockMs() });
    const latency = await log.wait(id, JOB_TIMEOUT_MS);
    if (index >= PER_RUN_WARMUP_JOBS) latencies.push(latency);
  }
  const earliest = Math.min(...latencies);
  if (earliest < -1) {
    console.error(`bench: a pick-up started ${-earliest} ms before its dispatch: clocks differ`);
  }
  return {
    jobs,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    maxMs: Math.max(...latencies),
  };
}
