/**
 * What `migrate` checks and writes on Redis: the server is Redis 7 or later
 * and never evicts keys (an evicted key is a lost job); persistence off is
 * warned about once (a restart then loses every job); the store's epoch is
 * written when the store has none, and read back for every later call to
 * check, so a server that restarted empty fails loudly.
 *
 * The layout is Redis's schema step: `P:meta` keeps `layout`, the newest
 * applied, and `contract_layout`, the newest applied contract layout
 * (absent reads as 0), so code older than the store can tell whether it
 * may keep working on it, as SQL's `queue_migrations.kind` tells
 * (src/stores/schema_steps.ts).
 *
 * @internal
 * @module
 */
import type { Migration } from "../../../migrations/migration.ts";
import {
  type AppliedStep,
  LIVE_WORKER_WINDOW_MS,
  type MigrateOptions,
  migrateWaiting,
  type MigrationPlan,
  planSteps,
} from "../schema_steps.ts";
import type { RedisConnection } from "./connection.ts";
import { luaScript, unfencedScript } from "./lua.ts";
import { workers } from "./workers.ts";

/**
 * The layouts of keys, oldest first. Layout 1 (expand) lays out every key
 * the store has; no code comes before it. Layout 2 (contract) moves no key:
 * it is the gate of groups and flows (SQL's contract steps 19 and 21), whose
 * jobs a worker of layout 1 would run outside their group's turn and limit,
 * or settle without queueing a flow's children. A later layout is a step
 * with the statements of its own script.
 */
export const LAYOUTS: readonly Migration[] = [
  { version: 1, kind: "expand", sql: "" },
  { version: 2, kind: "contract", sql: "" },
];

/** The layout of keys this code reads and writes. */
export const LAYOUT_VERSION = LAYOUTS.at(-1)!.version;

/** The newest contract layout this code knows (0: none). */
const CONTRACT_LAYOUT = Math.max(
  0,
  ...LAYOUTS.filter((layout) => layout.kind === "contract").map((layout) => layout.version),
);

/** Reply: the store's `layout` and `contract_layout` (0 when absent). */
const READ_LAYOUT = luaScript(
  "readLayout",
  "no-writes",
  String.raw`
local meta = P .. ':meta'
return cjson.encode({tonumber(redis.call('HGET', meta, 'layout') or '0'),
  tonumber(redis.call('HGET', meta, 'contract_layout') or '0')})
`,
);

/**
 * Input: `epoch` (a fresh one, kept only when the store has none). Reply:
 * the store's epoch. Refuses a store past a contract layout newer than this
 * code; keeps a newer layout as it is. Unfenced: a moved store still opens,
 * for its reads and to lift the fence of a move given up.
 */
const TAKE_EPOCH = unfencedScript(
  "migrate",
  "allow-oom",
  String.raw`
local meta = P .. ':meta'
local layout = tonumber(redis.call('HGET', meta, 'layout') or '0')
local contract = tonumber(redis.call('HGET', meta, 'contract_layout') or '0')
if contract > ${LAYOUT_VERSION} then
  return redis.error_reply('RENOX_LAYOUT the store has contract layout ' .. contract ..
    ', newer than the layout this code was built for (${LAYOUT_VERSION}): restart this process on the new version of @renox/queue')
end
redis.call('HSETNX', meta, 'epoch', INPUT.fresh)
if layout < ${LAYOUT_VERSION} then redis.call('HSET', meta, 'layout', ${LAYOUT_VERSION}) end
if contract < ${CONTRACT_LAYOUT} then redis.call('HSET', meta, 'contract_layout', ${CONTRACT_LAYOUT}) end
return cjson.encode(redis.call('HGET', meta, 'epoch'))
`,
);

const warned = new Set<string>();

/**
 * What migrating the store's layout would do (see `Store.migrationPlan`);
 * throws `OutdatedCodeError` past a newer contract layout.
 */
export async function layoutPlan(redis: RedisConnection): Promise<MigrationPlan> {
  const now = Date.now();
  const [layout, contract] = await redis.call<[number, number]>(READ_LAYOUT, { now });
  const applied: AppliedStep[] = LAYOUTS.filter((step) => step.version <= layout);
  if (layout > LAYOUT_VERSION) applied.push({ version: layout, kind: "expand" });
  if (contract > LAYOUT_VERSION) applied.push({ version: contract, kind: "contract" });
  const live = await workers(redis, now - LIVE_WORKER_WINDOW_MS, now);
  return planSteps(LAYOUTS, applied, live);
}

/**
 * Checks the server, applies the layouts the store lacks (a contract one
 * only once no older worker is seen, unless `options.force`) and takes the
 * store's epoch (see the module's doc); resolves with the plan it carried out.
 */
export async function migrate(
  redis: RedisConnection,
  options: MigrateOptions = {},
): Promise<MigrationPlan> {
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
  // Redis applies a layout in one script: the plan is read, and waited on, first.
  const plan = await migrateWaiting(() => layoutPlan(redis), options);
  const epoch = await redis.call<string>(TAKE_EPOCH, {
    now: Date.now(),
    fresh: crypto.randomUUID(),
  });
  redis.epoch = epoch;
  return plan;
}
