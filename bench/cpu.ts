/**
 * CPU-bound jobs (about 20 ms of synchronous arithmetic each) run at
 * concurrency 2 in this isolate, in 1 Web Worker and in 2: the isolate runs
 * one at a time whatever the concurrency, 2 Web Workers should run two at
 * once on a machine with 2 free cores. The same work in 1 and 2 bare Web
 * Workers says how much of that this machine gives right now.
 *
 * @module
 */
import type { ExecutorKind } from "../mod.ts";
import { SPIN_WARMUP_CALLS, SPIN_WARMUP_ITERATIONS, type SpinCalibration } from "./cpu_work.ts";
import { cpuBound } from "./jobs.ts";
import { type Measurement, measureRate } from "./measurement.ts";
import { assertPending, withQueue } from "./queue_fixture.ts";
import { rawParallelRate } from "./raw_parallel.ts";

/** How long one CPU-bound job should hold its thread, in ms. */
export const CPU_JOB_MS = 20;
/** CPU-bound jobs per timed run, whatever `--jobs` says. */
export const CPU_JOBS = 50;
/** CPU-bound jobs per warm-up run. */
const CPU_WARMUP_JOBS = 6;
/** Jobs running at once in every CPU measurement. */
const CPU_CONCURRENCY = 2;
const CPU_POLL_MS = 5;
/** The isolate executor's row, the baseline of the CPU rows. */
export const CPU_BASELINE_ROW = "cpu-isolate";
/** The row whose comparison with 1 Web Worker is the speedup. */
export const CPU_SPEEDUP_ROW = "cpu-workers-2";

/** The plain Web Workers row whose comparison with 1 thread is this machine's parallel ceiling. */
export const RAW_SPEEDUP_ROW = "cpu-raw-2";

/**
 * The CPU measurements: the isolate executor is the baseline; 2 Web Workers
 * are also compared with 1 (the speedup), and with the same work in 2 bare
 * Web Workers (the plain parallel ceiling, itself compared with 1 bare Web
 * Worker). `calibration` is called on the first run and says how many
 * iterations make a job of {@linkcode CPU_JOB_MS}.
 */
export function cpuMeasurements(calibration: () => SpinCalibration): Measurement[] {
  const common = {
    baseline: CPU_BASELINE_ROW,
    fixedJobs: CPU_JOBS,
    fixedWarmupJobs: CPU_WARMUP_JOBS,
  };
  const jobs =
    `${CPU_JOBS} CPU-bound jobs (~${CPU_JOB_MS} ms each), concurrency ${CPU_CONCURRENCY}`;
  return [
    {
      ...common,
      id: CPU_BASELINE_ROW,
      name: "CPU isolate",
      label: `${jobs}, isolate executor`,
      run: (count) => drainCpu(count, calibration().iterations, "isolate", 0),
    },
    {
      ...common,
      id: "cpu-workers-1",
      name: "CPU 1 Web Worker",
      label: `${jobs}, 1 Web Worker`,
      run: (count) => drainCpu(count, calibration().iterations, "workers", 1),
    },
    {
      ...common,
      id: CPU_SPEEDUP_ROW,
      name: "CPU 2 Web Workers",
      label: `${jobs}, 2 Web Workers`,
      alsoComparedWith: ["cpu-workers-1", RAW_SPEEDUP_ROW],
      run: (count) => drainCpu(count, calibration().iterations, "workers", 2),
    },
    {
      ...common,
      id: "cpu-raw-1",
      name: "plain 1 Web Worker",
      label: `the same work in 1 plain Web Worker, no queue (parallel ceiling)`,
      run: (count) => rawParallelRate(count, calibration().iterations, 1),
    },
    {
      ...common,
      id: RAW_SPEEDUP_ROW,
      name: "plain 2 Web Workers",
      label: `the same work in 2 plain Web Workers, no queue (parallel ceiling)`,
      alsoComparedWith: ["cpu-raw-1"],
      run: (count) => rawParallelRate(count, calibration().iterations, 2),
    },
  ];
}

/**
 * Times `jobs` CPU-bound jobs on a warm worker: it first runs
 * {@linkcode SPIN_WARMUP_CALLS} short jobs per slot (so every Web Worker has
 * imported the jobs module, ~0.1 s that would weigh on 2 Web Workers more
 * than on 1, and its JIT has optimised the loop), then the clock runs from
 * dispatching the jobs until the last one completed.
 */
function drainCpu(
  jobs: number,
  iterations: number,
  executor: ExecutorKind,
  workers: number,
): Promise<number> {
  return withQueue(async (queue) => {
    const worker = queue.work({
      executor,
      ...(executor === "workers" && { workers }),
      concurrency: CPU_CONCURRENCY,
      pollMs: CPU_POLL_MS,
    });
    let completed = 0;
    const warmups = CPU_CONCURRENCY * SPIN_WARMUP_CALLS;
    let goal = { count: warmups, reached: Promise.withResolvers<void>() };
    worker.addEventListener("job:complete", () => {
      if (++completed === goal.count) goal.reached.resolve();
    });
    worker.addEventListener("job:failed", ({ detail }) => goal.reached.reject(detail.error));
    try {
      const warm = Array.from({ length: warmups }, () => ({ iterations: SPIN_WARMUP_ITERATIONS }));
      await queue.dispatchMany(cpuBound, warm);
      await goal.reached.promise;
      goal = { count: completed + jobs, reached: Promise.withResolvers<void>() };
      const all = Array.from({ length: jobs }, () => ({ iterations }));
      const rate = await measureRate(jobs, async () => {
        await queue.dispatchMany(cpuBound, all);
        await goal.reached.promise;
      });
      await assertPending(queue, 0);
      return rate;
    } finally {
      await worker.stop();
    }
  });
}
