/**
 * BullMQ on a Redis server (127.0.0.1:6379 unless a URL is given), as a
 * peer: the same workloads as ours (single add, bulk add of
 * {@linkcode PEER_BULK_SIZE} per call, drains of pre-queued no-op jobs at
 * concurrency 1, 8 and 32, in this process and in several worker processes,
 * and serial pick-ups), each in BullMQ's default configuration apart from
 * the worker's concurrency (its own ioredis connections, lockDuration
 * 30 s, completed jobs kept: removeOnComplete unset), each on a queue of its
 * own that is verified (every job completed, nothing waiting, active,
 * delayed or failed) and then obliterated. Loaded only by `--peers` and
 * `--store redis`.
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import type { LatencySample } from "../pickup.ts";
import { measureRate } from "../measurement.ts";
import { timeProcessDrain } from "../process_drain.ts";
import { serialPickups, StartSignals } from "./serial_pickups.ts";

/** Jobs per call of a peer's bulk add. */
export const PEER_BULK_SIZE = 100;
/** Where the peer's Redis is expected. */
export const REDIS = { host: "127.0.0.1", port: 6379 } as const;

/** How BullMQ connects (ioredis options): host and port, and what the URL adds. */
export interface BullConnection {
  /** The server's host. */
  readonly host: string;
  /** The server's port. */
  readonly port: number;
  /** The user, when the URL names one. */
  readonly username?: string;
  /** The password, when the URL has one. */
  readonly password?: string;
  /** The database number, when the URL's path gives one. */
  readonly db?: number;
  /** TLS options, for a `rediss://` URL. */
  readonly tls?: Record<string, never>;
}

/** The ioredis options of a `redis://` or `rediss://` URL. */
export function bullConnection(url: string): BullConnection {
  const target = new URL(url);
  const db = target.pathname.slice(1);
  return {
    host: target.hostname,
    port: Number(target.port || 6379),
    ...(target.username !== "" && { username: decodeURIComponent(target.username) }),
    ...(target.password !== "" && { password: decodeURIComponent(target.password) }),
    ...(db !== "" && { db: Number(db) }),
    ...(target.protocol === "rediss:" && { tls: {} }),
  };
}

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

/** Runs `fn` on a fresh BullMQ queue on `connection`, obliterated afterwards. */
async function withBullQueue<T>(
  fn: (queue: BullMq, name: string) => Promise<T>,
  connection: BullConnection = REDIS,
): Promise<T> {
  const { Queue } = await bullmq();
  const name = `renox-bench-${crypto.randomUUID()}`;
  const queue = new Queue(name, { connection });
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
export function bullAddSingle(jobs: number, connection: BullConnection = REDIS): Promise<number> {
  return withBullQueue(async (queue) => {
    const rate = await measureRate(jobs, async () => {
      for (let n = 0; n < jobs; n++) await queue.add("noop", { n });
    });
    await assertWaiting(queue, jobs);
    return rate;
  }, connection);
}

/** `queue.addBulk()` of `jobs` jobs, {@linkcode PEER_BULK_SIZE} per call. */
export function bullAddBulk(jobs: number, connection: BullConnection = REDIS): Promise<number> {
  return withBullQueue(async (queue) => {
    const rate = await measureRate(jobs, () => addAll(queue, jobs));
    await assertWaiting(queue, jobs);
    return rate;
  }, connection);
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
export function bullDrain(
  jobs: number,
  concurrency: number,
  connection: BullConnection = REDIS,
): Promise<number> {
  return withBullQueue(async (queue, name) => {
    const { Worker } = await bullmq();
    await addAll(queue, jobs);
    let worker: BullMq;
    const rate = await measureRate(jobs, async () => {
      const all = Promise.withResolvers<void>();
      let completed = 0;
      worker = new Worker(name, async () => {}, { connection, concurrency });
      worker.on("completed", () => {
        if (++completed === jobs) all.resolve();
      });
      worker.on("failed", (_job: unknown, error: Error) => all.reject(error));
      await all.promise;
    });
    await worker.close();
    await assertDone(queue, jobs);
    return rate;
  }, connection);
}

/**
 * Pre-adds `jobs` no-op jobs, starts `processes` BullMQ worker processes at
 * `concurrency` each, and times them from `go` until each found the queue
 * drained (as our multi-process drain is timed).
 */
export function bullProcessDrain(
  url: string,
  jobs: number,
  processes: number,
  concurrency: number,
): Promise<number> {
  return withBullQueue(async (queue, name) => {
    await addAll(queue, jobs);
    const commands = Array.from(
      { length: processes },
      () => bullDrainWorkerCommand(url, name, concurrency),
    );
    const rate = await timeProcessDrain(
      commands,
      jobs,
      `BullMQ's ${processes}-process drain at concurrency ${concurrency}`,
    );
    await assertDone(queue, jobs);
    return rate;
  }, bullConnection(url));
}

function bullDrainWorkerCommand(url: string, queue: string, concurrency: number): Deno.Command {
  const script = fileURLToPath(new URL("./bullmq_drain_worker.ts", import.meta.url));
  const config = fileURLToPath(new URL("../../deno.json", import.meta.url));
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", "--config", config, script, url, queue, String(concurrency)],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  });
}

/**
 * Serial pick-ups by an idle BullMQ `Worker` in this process (its blocking
 * wait for jobs on its own connection), added by a `Queue` on another.
 */
export function bullPickup(jobs: number, connection: BullConnection): Promise<LatencySample> {
  return withBullQueue(async (queue, name) => {
    const { Worker } = await bullmq();
    const signals = new StartSignals();
    const worker = new Worker(name, (job: { data: { n: number } }) => {
      signals.start(job.data.n);
      return Promise.resolve();
    }, { connection });
    await worker.waitUntilReady();
    try {
      return await serialPickups(jobs, {
        dispatch: (n) => queue.add("noop", { n }),
        started: (n) => signals.started(n),
      }, () => PICKUP_GAP_MS);
    } finally {
      await worker.close();
    }
  }, connection);
}

/** Wait after a pick-up before the next add, so that the worker is idle again (as ours). */
const PICKUP_GAP_MS = 2;
