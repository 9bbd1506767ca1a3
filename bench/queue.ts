/**
 * Our figures: `Queue.dispatch()` one at a time, `Queue.dispatchMany()` in
 * one call, and draining pre-queued no-op jobs with `Queue.work()` at several
 * concurrencies, each through the public API only.
 *
 * @module
 */
import { z } from "zod";
import { defineJob, Queue } from "../mod.ts";
import { type Measurement, measureRate } from "./measurement.ts";
import { withTempDatabase } from "./temp_database.ts";

/** Concurrencies the drain is measured at. */
export const DRAIN_CONCURRENCIES = [1, 8, 32] as const;

/** The drain's poll interval, in ms. */
const DRAIN_POLL_MS = 5;

const noop = defineJob({
  name: "bench-noop",
  schema: z.object({ n: z.number().int() }),
  handle() {},
});

function payloads(jobs: number): { n: number }[] {
  return Array.from({ length: jobs }, (_, n) => ({ n }));
}

/**
 * The measurements of our own code: single dispatch (against the raw
 * autocommit insert, target 70 %), `dispatchMany` (against the raw
 * one-transaction insert), and the drains (against the batched ceiling,
 * target 40 % at concurrency 32).
 */
export function queueMeasurements(): Measurement[] {
  return [
    {
      id: "dispatch-single",
      name: "single dispatch",
      label: "queue.dispatch(), one at a time (sequential awaits)",
      baseline: "raw-insert-autocommit",
      target: 0.7,
      run: dispatchSingle,
    },
    {
      id: "dispatch-many",
      name: "dispatchMany",
      label: "queue.dispatchMany(), all jobs in one call",
      baseline: "raw-insert-one-transaction",
      run: dispatchMany,
    },
    ...DRAIN_CONCURRENCIES.map((concurrency): Measurement => ({
      id: `drain-c${concurrency}`,
      name: `drain c${concurrency}`,
      label: `queue.work() drain of no-op jobs, concurrency ${concurrency}`,
      baseline: "ceiling-batched",
      ...(concurrency === 32 && { target: 0.4 }),
      run: (jobs) => drain(jobs, concurrency),
    })),
  ];
}

function withQueue(fn: (queue: Queue) => Promise<number>): Promise<number> {
  return withTempDatabase(async (path) => {
    await using queue = await Queue.open({ path, jobs: [noop] });
    return await fn(queue);
  });
}

function dispatchSingle(jobs: number): Promise<number> {
  const all = payloads(jobs);
  return withQueue(async (queue) => {
    const rate = await measureRate(jobs, async () => {
      for (const payload of all) await queue.dispatch(noop, payload);
    });
    await assertPending(queue, jobs);
    return rate;
  });
}

function dispatchMany(jobs: number): Promise<number> {
  const all = payloads(jobs);
  return withQueue(async (queue) => {
    const rate = await measureRate(jobs, () => queue.dispatchMany(noop, all));
    await assertPending(queue, jobs);
    return rate;
  });
}

function drain(jobs: number, concurrency: number): Promise<number> {
  return withQueue(async (queue) => {
    await queue.dispatchMany(noop, payloads(jobs));
    let completed = 0;
    const rate = await measureRate(jobs, async () => {
      const worker = queue.work({ concurrency, stopWhenEmpty: true, pollMs: DRAIN_POLL_MS });
      await worker.done;
      completed = worker.stats.completed;
    });
    if (completed !== jobs) {
      throw new Error(`The drain at concurrency ${concurrency} ran ${completed} of ${jobs} jobs`);
    }
    await assertPending(queue, 0);
    return rate;
  });
}

/** A figure for work that was not all done would flatter us: check what the queue holds. */
async function assertPending(queue: Queue, expected: number): Promise<void> {
  const counts = Object.values(await queue.counts());
  const pending = counts.reduce((sum, { pending }) => sum + pending, 0);
  const other = counts.reduce((sum, c) => sum + c.delayed + c.reserved + c.failed, 0);
  if (pending !== expected || other !== 0) {
    throw new Error(
      `Expected ${expected} pending jobs and nothing else: got ${pending} pending, ${other} other`,
    );
  }
}
