/**
 * A queue on a fresh key prefix of a Redis server with the bench's jobs
 * module: the counterpart of `postgres_queue.ts` for `--store redis`,
 * shared by this process and the worker processes it starts. Every run gets
 * a prefix no one uses, and its keys are deleted afterwards, so runs share
 * nothing but the server.
 *
 * @module
 */
// deno-lint-ignore no-import-prefix
import { createClient } from "npm:@redis/client@^6.4";
import type { Queue } from "../mod.ts";
import { RedisStore } from "../src/stores/redis/mod.ts";
import { openBenchQueue } from "./unwatched_store.ts";

/** Keys deleted per `UNLINK` when a run's prefix is cleaned up. */
const UNLINK_CHUNK = 1_000;

/**
 * Opens a queue on `prefix` (migrated if new) with the store's defaults;
 * with `watch: false` its workers are never woken by the wake-up channel
 * and only poll.
 */
export async function openRedisQueue(
  url: string,
  prefix: string,
  options: { readonly watch?: boolean } = {},
): Promise<Queue> {
  return openBenchQueue(await RedisStore.open(url, { prefix }), options);
}

/**
 * Calls `fn` with a prefix no one uses, and deletes every key under it once
 * `fn` has settled. `fn` must close its connections, and stop its processes,
 * before it returns.
 */
export async function withTempPrefix<T>(
  url: string,
  fn: (prefix: string) => Promise<T>,
): Promise<T> {
  const prefix = `bench-${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  try {
    return await fn(prefix);
  } finally {
    await deletePrefix(url, prefix);
  }
}

/**
 * Opens a queue on a fresh prefix, calls `fn` with it and the prefix,
 * closes the queue and deletes the prefix's keys.
 */
export function withRedisQueue<T>(
  url: string,
  fn: (queue: Queue, prefix: string) => Promise<T>,
): Promise<T> {
  return withTempPrefix(url, async (prefix) => {
    await using queue = await openRedisQueue(url, prefix);
    return await fn(queue, prefix);
  });
}

/** Deletes every key of the store on `prefix` (all start with `{prefix}`). */
async function deletePrefix(url: string, prefix: string): Promise<void> {
  const client = createClient({ url });
  client.on("error", () => {});
  await client.connect();
  try {
    const found: string[] = [];
    for await (const keys of client.scanIterator({ MATCH: `{${prefix}}*`, COUNT: 1_000 })) {
      found.push(...keys);
    }
    for (let first = 0; first < found.length; first += UNLINK_CHUNK) {
      await client.unlink(found.slice(first, first + UNLINK_CHUNK));
    }
  } finally {
    await client.close();
  }
}
