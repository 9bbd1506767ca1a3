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

/** A client of the test server. */
type TestClient = ReturnType<typeof newClient>;

function newClient(url: string) {
  return createClient({ url });
}

/** Runs `fn` with a client of its own on the server at `url`, closed afterwards. */
async function withClient<T>(
  url: string,
  fn: (client: TestClient) => Promise<T>,
): Promise<T> {
  const client = newClient(url);
  client.on("error", () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

/** The keys of `prefix` on the server at `url`, sorted. */
export function prefixKeys(url: string, prefix: string): Promise<string[]> {
  return withClient(url, async (client) => {
    const found: string[] = [];
    for await (const keys of client.scanIterator({ MATCH: `{${prefix}}:*`, COUNT: 1000 })) {
      found.push(...keys);
    }
    return found.sort();
  });
}

/** Deletes every key of `prefix` on the server at `url` (in pages, as `SCAN` gives them). */
export function deletePrefix(url: string, prefix: string): Promise<void> {
  return withClient(url, async (client) => {
    for await (const keys of client.scanIterator({ MATCH: `{${prefix}}:*`, COUNT: 1000 })) {
      if (keys.length > 0) await client.unlink(keys);
    }
  });
}

/** Sends one command (`args`, its name first) to the server at `url`; its reply. */
export function redisCommand(url: string, args: readonly string[]): Promise<unknown> {
  return withClient(url, (client) => client.sendCommand([...args]));
}

/** The field `field` of the hash `key` on the server at `url`, or null when absent. */
export function hashField(url: string, key: string, field: string): Promise<string | null> {
  return withClient(url, async (client) => await client.hGet(key, field) ?? null);
}

/** The field names of the hash `key` on the server at `url` (none when it is absent). */
export function hashFieldNames(url: string, key: string): Promise<string[]> {
  return withClient(url, (client) => client.hKeys(key));
}

/** A unique or debounce key as the Redis store keeps it: a `{prefix}:key:<key>` hash. */
export interface RedisKeyRow {
  /** The key (a job's name and uniqueId). */
  readonly key: string;
  /** `unique` or `debounce`. */
  readonly kind: string;
  /** The job holding it. */
  readonly jobId: number;
  /** When a unique key expires (store clock); null for a debounce key. */
  readonly expiresAt: number | null;
}

/** The unique and debounce keys of `prefix` on the server at `url`, expired or not, by key. */
export function prefixJobKeys(url: string, prefix: string): Promise<RedisKeyRow[]> {
  return withClient(url, async (client) => {
    const start = `{${prefix}}:key:`;
    const rows: RedisKeyRow[] = [];
    for await (const names of client.scanIterator({ MATCH: `${start}*`, COUNT: 1000 })) {
      for (const name of names) {
        const hash = await client.hGetAll(name);
        rows.push({
          key: name.slice(start.length),
          kind: hash.kind ?? "",
          jobId: Number(hash.job_id),
          expiresAt: hash.expires_at === undefined ? null : Number(hash.expires_at),
        });
      }
    }
    return rows.sort((a, b) => a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
  });
}

/** How many overlap locks of `prefix` the server at `url` keeps (members of `{prefix}:lock:*`), expired or not. */
export function prefixLockCount(url: string, prefix: string): Promise<number> {
  return withClient(url, async (client) => {
    let count = 0;
    for await (const names of client.scanIterator({ MATCH: `{${prefix}}:lock:*`, COUNT: 1000 })) {
      for (const name of names) count += await client.zCard(name);
    }
    return count;
  });
}

/** A job that waits for its chain or batch, as {@linkcode prefixWaitingJobs} reads it. */
export interface RedisWaitingRow {
  /** What it waits as: `link` or `chain-catch` of a chain, `then`, `catch` or `finally` of a batch. */
  readonly role: string;
  /** The chain it belongs to, or null. */
  readonly chainId: number | null;
  /** The batch it belongs to, or null. */
  readonly batchId: number | null;
  /** The queue it will be put on. */
  readonly queue: string;
  /** Its job's name. */
  readonly name: string;
  /** Its payload as stored. */
  readonly payload: string;
  /** How long after it is queued it is due, in ms. */
  readonly delayMs: number;
}

/** The roles of the `{prefix}:held:<c|b>:<id>:<list>` lists, in the order a chain or batch writes them. */
const HELD_ROLES: Record<string, string> = {
  "c:next": "link",
  "c:catch": "chain-catch",
  "b:then": "then",
  "b:catch": "catch",
  "b:finally": "finally",
};

/**
 * The jobs of `prefix` that wait for their chain or batch, on the server at
 * `url`: by chain or batch id (chains first), then in the order they were
 * dispatched, as `waiting_jobs` rows are by id.
 */
export function prefixWaitingJobs(url: string, prefix: string): Promise<RedisWaitingRow[]> {
  return withClient(url, async (client) => {
    const roles = Object.keys(HELD_ROLES);
    const lists: { owner: "c" | "b"; id: number; rank: number; rows: string[] }[] = [];
    for await (const names of client.scanIterator({ MATCH: `{${prefix}}:held:*`, COUNT: 1000 })) {
      for (const name of names) {
        const [, owner, id, list] = name.match(/:held:([cb]):(\d+):(\w+)$/) ?? [];
        const rank = roles.indexOf(`${owner}:${list}`);
        if (rank === -1) throw new Error(`Unknown list of waiting jobs: ${name}`);
        const rows = await client.lRange(name, 0, -1);
        lists.push({ owner: owner as "c" | "b", id: Number(id), rank, rows });
      }
    }
    lists.sort((a, b) =>
      Number(a.owner === "b") - Number(b.owner === "b") || a.id - b.id || a.rank - b.rank
    );
    return lists.flatMap(({ owner, id, rank, rows }) =>
      rows.map((text) => {
        const row = JSON.parse(text);
        return {
          role: HELD_ROLES[roles[rank]!]!,
          chainId: owner === "c" ? id : null,
          batchId: owner === "b" ? id : null,
          queue: row.queue,
          name: row.name,
          payload: row.payload,
          delayMs: row.delayMs,
        };
      })
    );
  });
}

/**
 * Sets the field `field` of the hash `key` on the server at `url`, as
 * another writer would; false (and nothing written) when there is no such hash.
 */
export function setHashField(
  url: string,
  key: string,
  field: string,
  value: string,
): Promise<boolean> {
  return withClient(url, async (client) => {
    // One script: the hash is not made by the write when it is gone.
    const set = await client.eval(
      "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end " +
        "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return 1",
      { keys: [key], arguments: [field, value] },
    );
    return set === 1;
  });
}

/**
 * Runs the Lua script `script` on the server at `url` with `args` (its
 * `ARGV`), as another writer would (a store of older code, say); its reply.
 */
export function evalScript(url: string, script: string, args: string[]): Promise<unknown> {
  return withClient(url, (client) => client.eval(script, { arguments: args }));
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
