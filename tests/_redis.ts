/**
 * Redis for tests: the URL from `QUEUE_TEST_REDIS_URL`, and stores opened
 * under a fresh prefix whose keys are deleted when the store is disposed.
 *
 * @module
 */
// deno-lint-ignore no-import-prefix
import { createClient } from "npm:@redis/client@^6.4";
import { RedisStore, type RedisStoreOptions } from "../src/stores/redis/mod.ts";

/** The test server's URL, or null when tests that need Redis should skip. */
export function redisTestUrl(): string | null {
  return Deno.env.get("QUEUE_TEST_REDIS_URL") || null;
}

/** A fresh prefix, unique to this process and call. */
export function freshPrefix(): string {
  return `t_${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
}

/** The keys of `prefix` on the server at `url`, sorted. */
export async function prefixKeys(url: string, prefix: string): Promise<string[]> {
  const client = createClient({ url });
  client.on("error", () => {});
  await client.connect();
  try {
    const found: string[] = [];
    for await (const keys of client.scanIterator({ MATCH: `{${prefix}}:*`, COUNT: 1000 })) {
      found.push(...keys);
    }
    return found.sort();
  } finally {
    await client.close();
  }
}

/** Deletes every key of `prefix` on the server at `url` (in pages, as `SCAN` gives them). */
export async function deletePrefix(url: string, prefix: string): Promise<void> {
  const client = createClient({ url });
  client.on("error", () => {});
  await client.connect();
  try {
    for await (const keys of client.scanIterator({ MATCH: `{${prefix}}:*`, COUNT: 1000 })) {
      if (keys.length > 0) await client.unlink(keys);
    }
  } finally {
    await client.close();
  }
}

/** A store under a new prefix of its own; disposing it deletes the prefix's keys and closes the store. */
export async function openTestRedisStore(
  url: string,
  options: RedisStoreOptions = {},
): Promise<{ store: RedisStore; prefix: string } & AsyncDisposable> {
  const prefix = options.prefix ?? freshPrefix();
  const store = await RedisStore.open(url, { ...options, prefix });
  return {
    store,
    prefix,
    async [Symbol.asyncDispose]() {
      await store.close();
      await deletePrefix(url, prefix);
    },
  };
}
