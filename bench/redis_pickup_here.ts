/**
 * Pick-up latency of our worker measured as BullMQ's is: an idle worker in
 * the bench's own process (isolate executor, on a store connection of its
 * own, woken by the store's wake-up channel), jobs dispatched one at a time
 * by a queue on another connection, each timed with `performance.now()`
 * from just before `dispatch()` to the first line of its handler, the next
 * one dispatched a gap after the last one started. The row beside BullMQ's
 * like for like; the other pick-up row keeps the worker in another process
 * with the Web Worker executor (as the `work` command runs), which BullMQ's
 * row does not.
 *
 * @module
 */
import { pickupHere, pickupHereStarts } from "./jobs.ts";
import { IDLE_GAP_MS, IDLE_POLL_MS, type LatencySample } from "./pickup.ts";
import { serialPickups, StartSignals } from "./peers/serial_pickups.ts";
import { openRedisQueue, withTempPrefix } from "./redis_queue.ts";

/** Untimed jobs first: the worker's subscription to the wake-up channel is made after `work()`. */
const WARMUP_JOBS = 5;
/** A warm-up job not started by then fails the run (the first may wait for a poll). */
const WARMUP_TIMEOUT_MS = IDLE_POLL_MS * 4;

/** Times `jobs` serial pick-ups by an idle worker in this process, on a fresh prefix at `url`. */
export function redisPickupHere(url: string, jobs: number): Promise<LatencySample> {
  return withTempPrefix(url, async (prefix) => {
    await using producer = await openRedisQueue(url, prefix);
    await using consumer = await openRedisQueue(url, prefix);
    const signals = new StartSignals();
    pickupHereStarts.current = signals;
    const worker = consumer.work({ executor: "isolate", concurrency: 1, pollMs: IDLE_POLL_MS });
    try {
      for (let n = -WARMUP_JOBS; n < 0; n++) {
        await producer.dispatch(pickupHere, { n });
        await withDeadline(signals.started(n), WARMUP_TIMEOUT_MS, `warm-up job ${n}`);
      }
      return await serialPickups(jobs, {
        dispatch: (n) => producer.dispatch(pickupHere, { n }),
        started: (n) => signals.started(n),
      }, () => IDLE_GAP_MS);
    } finally {
      pickupHereStarts.current = null;
      await worker.stop({ graceMs: 1_000 });
    }
  });
}

async function withDeadline(done: Promise<void>, ms: number, what: string): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      done,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not start within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
