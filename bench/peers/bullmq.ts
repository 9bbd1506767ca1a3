/**
 * BullMQ on the Redis at 127.0.0.1:6379, as a peer: the same workloads as
 * ours (single add, bulk add of {@linkcode PEER_BULK_SIZE} per call, drains
 * of pre-queued no-op jobs at concurrency 1, 8 and 32), each in BullMQ's
 * default configuration apart from the worker's concurrency, each on a queue
 * of its own that is verified (every job completed, nothing waiting, active,
 * delayed or failed) and then obliterated. Loaded only by `--peers`.
 *
 * @module
 */
import { measureRate } from "../measurement.ts";

/** Jobs per call of a peer's bulk add. */
export const PEER_BULK_SIZE = 100;
/** Where the peer's Redis is expected. */
export const REDIS = { host: "127.0.0.1", port: 6379 } as const;

// deno-lint-ignore no-explicit-any
type BullMq = any;

let loaded: Promise<BullMq> | null = null;
function bullmq(): Promise<BullMq> {
  return loaded ??= import("bullmq");
}

/** Whether Redis answers a PING at {@linkcode REDIS} within 1 s. */
export async function redisAnswers(): Promise<boolean> {
  try {
    const connection = await Deno.connect({ hostname: REDIS.host, port: REDIS.port });
    try {
      await connection.write(new TextEncoder().encode("PING\r\n"));
      const buffer = new Uint8Array(16);
      const timer = setTimeout(() => connection.close(), 1_000);
      const read = await connection.read(buffer).finally(() => clearTimeout(timer));
      return read !== null &&
        new TextDecoder().decode(buffer.subarray(0, read)).startsWith("+PONG");
    } finally {
      try {
        connection.close();
      } catch { /* closed by the timer */ }
    }
  } catch {
    return false;
  }
}

/** Runs `fn` on a fresh BullMQ queue, obliterated afterwards. */
async function withBullQueue<T>(fn: (queue: BullMq, name: string) => Promise<T>): Promise<T> {
  const { Queue } = await bullmq();
  const name = `renox-bench-${crypto.randomUUID()}`;
  const queue = new Queue(name, { connection: REDIS });
  try {
    return await fn(queue, name);
  } finally {
    await queue.obliterate({ force: true });
    await queue.close();
  }
}

/** Checks that the queue holds `completed` completed jobs and nothing else. */
async function assertDone(queue: BullMq, completed: number): Promise<void> {
  const counts = await queue.getJobCounts("waiting", "active", "delayed", "failed", "completed");
  const left = counts.waiting + counts.active + counts.delayed + counts.failed;
  if (counts.completed !== completed || left !== 0) {
    throw new Error(
      `BullMQ: expected ${completed} completed and nothing else: got ${JSON.stringify(counts)}`,
    );
  }
}

/** Checks that the queue holds `waiting` waiting jobs and nothing else. */
async function assertWaiting(queue: BullMq, waiting: number): Promise<void> {
  const counts = await queue.getJobCounts("waiting", "active", "delayed", "failed", "completed");
  if (
    counts.waiting !== waiting ||
    counts.active + counts.delayed + counts.failed + counts.completed !== 0
  ) {
    throw new Error(
      `BullMQ: expected ${waiting} waiting and nothing else: got ${JSON.stringify(counts)}`,
    );
  }
}

/** `queue.add()` of `jobs` jobs, one awaited at a time. */
export function bullAddSingle(jobs: number): Promise<number> {
  return withBullQueue(async (queue) => {
    const rate = await measureRate(jobs, async () => {
      for (let n = 0; n < jobs; n++) await queue.add("noop", { n });
    });
    await assertWaiting(queue, jobs);
    return rate;
  });
}

/** `queue.addBulk()` of `jobs` jobs, {@linkcode PEER_BULK_SIZE} per call. */
export function bullAddBulk(jobs: number): Promise<number> {
  return withBullQueue(async (queue) => {
    const rate = await measureRate(jobs, () => addAll(queue, jobs));
    await assertWaiting(queue, jobs);
    return rate;
  });
}

async function addAll(queue: BullMq, jobs: number): Promise<void> {
  for (let first = 0; first < jobs; first += PEER_BULK_SIZE) {
    const size = Math.min(PEER_BULK_SIZE, jobs - first);
    await queue.addBulk(
      Array.from({ length: size }, (_, i) => ({ name: "noop", data: { n: first + i } })),
    );
  }
}

/** Pre-adds `jobs` no-op jobs, then times a `Worker` at `concurrency` that completes them all. */
export function bullDrain(jobs: number, concurrency: number): Promise<number> {
  return withBullQueue(async (queue, name) => {
    const { Worker } = await bullmq();
    await addAll(queue, jobs);
    let worker: BullMq;
    const rate = await measureRate(jobs, async () => {
      const all = Promise.withResolvers<void>();
      let completed = 0;
      worker = new Worker(name, async () => {}, { connection: REDIS, concurrency });
      worker.on("completed", () => {
        if (++completed === jobs) all.resolve();
      });
      worker.on("failed", (_job: unknown, error: Error) => all.reject(error));
      await all.promise;
    });
    await worker.close();
    await assertDone(queue, jobs);
    return rate;
  });
}
