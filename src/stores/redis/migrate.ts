/**
 * What `migrate` checks and writes on Redis: the server is Redis 7 or later
 * and never evicts keys (an evicted key is a lost job); persistence off is
 * warned about once (a restart then loses every job); the store's epoch is
 * written when the store has none, and read back for every later call to
 * check, so a server that restarted empty fails loudly.
 *
 * @internal
 * @module
 */
import type { RedisConnection } from "./connection.ts";
import { luaScript } from "./lua.ts";

/** The layout of keys this code reads and writes. */
export const LAYOUT_VERSION = 1;

/** Input: `epoch` (a fresh one, kept only when the store has none). Reply: the store's epoch. */
const TAKE_EPOCH = luaScript(
  "migrate",
  "allow-oom",
  String.raw`
local meta = P .. ':meta'
local layout = tonumber(redis.call('HGET', meta, 'layout') or '0')
if layout > ${LAYOUT_VERSION} then
  return redis.error_reply('RENOX_LAYOUT the store was written by a newer @renox/queue (layout ' .. layout ..
    ', this one reads ${LAYOUT_VERSION}): upgrade this process')
end
redis.call('HSETNX', meta, 'epoch', INPUT.fresh)
redis.call('HSET', meta, 'layout', ${LAYOUT_VERSION})
return cjson.encode(redis.call('HGET', meta, 'epoch'))
`,
);

const warned = new Set<string>();

/** Checks the server and takes the store's epoch (see the module's doc). */
export async function migrate(redis: RedisConnection): Promise<void> {
  // One call: the default sections hold the server, memory and persistence ones, on every version.
  const info = String(await redis.client.sendCommand(["INFO"]));
  const field = (name: string) => info.match(new RegExp(`^${name}:(.*)$`, "m"))?.[1]?.trim();
  const version = field("redis_version") ?? "";
  const major = Number(version.split(".")[0]);
  if (!(major >= 7)) {
    throw new Error(
      `the Redis store needs Redis 7 or later: the server is ${version || "unknown"}`,
    );
  }
  const policy = field("maxmemory_policy");
  if (policy !== undefined && policy !== "noeviction") {
    throw new Error(
      `the Redis server evicts keys (maxmemory-policy ${policy}): an evicted key is a lost job. ` +
        "Set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, or in redis.conf)",
    );
  }
  const aof = field("aof_enabled");
  const server = `${field("tcp_port") ?? ""}:${field("run_id") ?? ""}`;
  if (aof === "0" && !warned.has(server)) {
    warned.add(server);
    console.warn(
      "@renox/queue: the Redis server has no append-only file (appendonly no): a restart loses " +
        `the jobs written since its last snapshot. Set appendonly yes ` +
        "(docs/redis.md, durability)",
    );
  }
  const epoch = await redis.call<string>(TAKE_EPOCH, {
    now: Date.now(),
    fresh: crypto.randomUUID(),
  });
  redis.epoch = epoch;
}
