/**
 * The plain parallel ceiling for CPU-bound jobs: the same work as the CPU
 * job, handed to 1 or 2 bare Web Workers one job per message, with no queue
 * in the way. On a shared machine the second core is not always free: this
 * says what 2 threads could gain here, in the same round as our figure.
 *
 * @module
 */

import { SPIN_WARMUP_CALLS, SPIN_WARMUP_ITERATIONS } from "./cpu_work.ts";

/**
 * Starts `threads` Web Workers and warms each up as the queue's are, then times
 * `jobs` jobs of `iterations`, each Web Worker taking the next job as soon
 * as it answers; returns jobs per second.
 */
export async function rawParallelRate(
  jobs: number,
  iterations: number,
  threads: number,
): Promise<number> {
  const url = new URL("./raw_spin_worker.ts", import.meta.url);
  const workers = Array.from({ length: threads }, () => new Worker(url, { type: "module" }));
  try {
    await Promise.all(workers.map(async (worker) => {
      for (let call = 0; call < SPIN_WARMUP_CALLS; call++) {
        await runOne(worker, SPIN_WARMUP_ITERATIONS);
      }
    }));
    let next = 0;
    const start = performance.now();
    await Promise.all(workers.map(async (worker) => {
      while (next < jobs) {
        next++;
        await runOne(worker, iterations);
      }
    }));
    return jobs / (Math.max(performance.now() - start, 0.001) / 1000);
  } finally {
    for (const worker of workers) worker.terminate();
  }
}

function runOne(worker: Worker, iterations: number): Promise<void> {
  return new Promise((resolve, reject) => {
    worker.onmessage = () => resolve();
    worker.onerror = (event) => {
      event.preventDefault();
      reject(new Error(`A raw spin Web Worker failed: ${event.message}`));
    };
    worker.postMessage(iterations);
  });
}
