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
import { HISTORY } from "./job_control_hooks.ts";
import { luaScript, unfencedScript } from "./lua.ts";
import { workers } from "./workers.ts";

/**
 * The layouts of keys, oldest first. Layout 1 (expand) lays out every key
 * the store has; no code comes before it. Layout 2 (contract) moves no key:
 * it is the gate of groups and flows (SQL's contract steps 19 and 21), whose
 * jobs a worker of layout 1 would run outside their group's turn and limit,
 * or settle without queueing a flow's children. Layout 3 (contract) keeps
 * the kept history in one listing per queue and job name
 * (job_control_hooks.ts), no longer also in `P:done`, `P:done:q:<queue>`
 * and `P:done:n:<name>`: code of layout 2 would read those (its lists, its
 * `pruneFinished`) and miss every job kept since. {@linkcode convertHistory}
 * converts a store's history to it. Layout 4 (contract) writes each `:` of
 * a queue's name as `|` in its keys (`P:q:mail|high:lv`), so that a queue
 * named like another one's key plus an ending (`mail:g:4:send` beside the
 * group `lv` of job `send` in `mail`) has keys of its own: code of layout 3 would read and write the old keys of such a
 * queue. {@linkcode convertQueueKeys} renames them.
 */
export const LAYOUTS: readonly Migration[] = [
  { version: 1, kind: "expand", sql: "" },
  { version: 2, kind: "contract", sql: "" },
  { version: 3, kind: "contract", sql: "" },
  { version: 4, kind: "contract", sql: "" },
];

/** Most kept jobs one call of the history's conversion to layout 3 reads, and groups the queue keys' conversion to layout 4 renames. */
const CONVERT_CHUNK = 250;

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
 * Input: `fresh` (an epoch, kept only when the store has none). Reply:
 * `{epoch, from}`, the store's epoch and the layout it had before this call
 * (of several processes migrating at once, the one that moved it on is the
 * one that applied the layouts). Refuses a store past a contract layout newer than this
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
return cjson.encode({epoch = redis.call('HGET', meta, 'epoch'), from = layout})
`,
);

/**
 * Input: `from` (a rank in `P:done`). The history's conversion to layout 3,
 * a chunk at a time: adds the pairs (queue, job name) of up to a chunk of
 * the kept jobs listed in layout 2's `P:done` to `P:done:pairs`; after the
 * last, deletes `P:done`, `P:done:q:<queue>` and `P:done:n:<name>`. Reply:
 * the rank to go on from, or null when done (at once on a store of layout 3
 * or later, or with no such listing). Unfenced, as opening a moved store is.
 */
const CONVERT_HISTORY = unfencedScript(
  "convertHistory",
  "allow-oom",
  HISTORY,
  String.raw`
if tonumber(redis.call('HGET', P .. ':meta', 'layout') or '0') >= 3 then return cjson.encode(NULL) end
local all = P .. ':done'
local members = redis.call('ZRANGE', all, INPUT.from, INPUT.from + ${CONVERT_CHUNK} - 1)
for _, member in ipairs(members) do
  local fields = redis.call('HMGET', P .. ':done:' .. tonumber(member), 'queue', 'name')
  if fields[1] then redis.call('SADD', P .. ':done:pairs', History.pair(fields[1], fields[2])) end
end
if #members == ${CONVERT_CHUNK} then return cjson.encode(INPUT.from + ${CONVERT_CHUNK}) end
local gone = {[all] = true}
for _, pair in ipairs(redis.call('SMEMBERS', P .. ':done:pairs')) do
  local length, rest = string.match(pair, '^(%d+):(.*)$')
  local queue = string.sub(rest, 1, tonumber(length))
  gone[P .. ':done:q:' .. queue] = true
  gone[P .. ':done:n:' .. string.sub(rest, #queue + 2)] = true
end
for key in pairs(gone) do redis.call('UNLINK', key) end
return cjson.encode(NULL)
`,
);

/**
 * Converts the kept history of a store of layout 2 to layout 3 (see
 * {@linkcode LAYOUTS}), a chunk of kept jobs per call so the server is
 * never held long; a store of layout 3 or later, or a new one, in one call.
 * Safe to run again, and from two processes at once.
 */
export async function convertHistory(redis: RedisConnection): Promise<void> {
  let from: number | null = 0;
  while (from !== null) {
    from = await redis.call<number | null>(CONVERT_HISTORY, { now: Date.now(), from });
  }
}

/**
 * Reply: the queues whose keys the conversion to layout 4 renames, those
 * whose name holds a `:` (none on a store of layout 4 or later).
 */
const QUEUES_TO_CONVERT = luaScript(
  "queuesToConvert",
  "no-writes",
  String.raw`
local names = {}
if tonumber(redis.call('HGET', P .. ':meta', 'layout') or '0') < 4 then
  for _, queue in ipairs(redis.call('SMEMBERS', P .. ':queues')) do
    if string.find(queue, ':', 1, true) then table.insert(names, queue) end
  end
end
if #names == 0 then return '[]' end
return cjson.encode(names)
`,
);

/**
 * Input: `queue`, `cursor` (of `HSCAN` on its group settings, "0" first).
 * The conversion of one queue's keys to layout 4: renames each key
 * `P:q:<queue>:…` of the name as it is to `queueKey(queue) .. …`, its
 * groups' keys a chunk of groups per call, then its levels and its own
 * keys. A key already renamed (another process converts too) is left, and
 * so is one that is also a group's key of a queue whose name this one's
 * starts with (the collision layout 4 ends: that queue keeps it). Reply: the cursor to go on from, or null when the queue is done (at once
 * on a store of layout 4 or later).
 */
const CONVERT_QUEUE_KEYS = unfencedScript(
  "convertQueueKeys",
  "allow-oom",
  String.raw`
if tonumber(redis.call('HGET', P .. ':meta', 'layout') or '0') >= 4 then return cjson.encode(NULL) end
local old, new = P .. ':q:' .. INPUT.queue, queueKey(INPUT.queue)
-- Whether key old .. suffix is also a group's key of a listed queue whose name this one's starts
-- with, then ':' (mail:g:4:send's ':lv' is the group lv of send in mail): layout 3 gave both
-- queues that key, and it stays the group's.
local function anotherQueues(suffix)
  local from = 1
  while true do
    local colon = string.find(INPUT.queue, ':', from, true)
    if colon == nil then return false end
    local other = string.sub(INPUT.queue, 1, colon - 1)
    local gid = string.match(string.sub(INPUT.queue, colon + 1) .. suffix, '^g[lo]?:(.+)$')
    if gid ~= nil and redis.call('SISMEMBER', P .. ':queues', other) == 1 and
        (redis.call('HEXISTS', P .. ':q:' .. other .. ':gset', gid) == 1 or
          redis.call('HEXISTS', queueKey(other) .. ':gset', gid) == 1) then
      return true
    end
    from = colon + 1
  end
end
local function rename(suffix)
  if not anotherQueues(suffix) and redis.call('EXISTS', old .. suffix) == 1 and
      redis.call('EXISTS', new .. suffix) == 0 then
    redis.call('RENAME', old .. suffix, new .. suffix)
  end
end
local scan = redis.call('HSCAN', old .. ':gset', INPUT.cursor, 'COUNT', ${CONVERT_CHUNK})
for i = 1, #scan[2], 2 do
  for _, kind in ipairs({':g:', ':gl:', ':go:'}) do rename(kind .. scan[2][i]) end
end
if scan[1] ~= '0' then return cjson.encode(scan[1]) end
if not anotherQueues(':lv') then
  for _, priority in ipairs(redis.call('ZRANGE', old .. ':lv', 0, -1)) do rename(':p:' .. priority) end
end
for _, suffix in ipairs({':lv', ':leased', ':groups', ':gset', ':gplain'}) do rename(suffix) end
return cjson.encode(NULL)
`,
);

/**
 * Converts the keys of a store of layout 3 to layout 4 (see
 * {@linkcode LAYOUTS}): renames the keys of each queue whose name holds a
 * `:`, a chunk of its groups per call so the server is never held long.
 * Safe to run again, and from several processes at once.
 */
export async function convertQueueKeys(redis: RedisConnection): Promise<void> {
  for (const queue of await redis.call<string[]>(QUEUES_TO_CONVERT, { now: Date.now() })) {
    let cursor: string | null = "0";
    while (cursor !== null) {
      cursor = await redis.call<string | null>(CONVERT_QUEUE_KEYS, {
        now: Date.now(),
        queue,
        cursor,
      });
    }
  }
}

/** The servers (port and run id) this process warned about; `null` once it warns no more. */
let warned: Set<string> | null = new Set<string>();

/**
 * Turns off, for this process, the warning about a server without an
 * append-only file: for the `work` supervisor, whose opening of the queue
 * is only a check before the child that works it, which warns itself.
 * @internal
 */
export function stopPersistenceWarnings(): void {
  warned = null;
}

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
 * store's epoch (see the module's doc); resolves with the plan it carried
 * out: the layouts it moved the store on to, none when another process
 * migrating at once did first.
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
  if (aof === "0" && warned !== null && !warned.has(server)) {
    warned.add(server);
    console.warn(
      "@renox/queue: the Redis server has no append-only file (appendonly no): a restart loses " +
        `the jobs written since its last snapshot. Set appendonly yes ` +
        "(docs/redis.md, durability)",
    );
  }
  // Redis applies a layout in one script: the plan is read, and waited on, first.
  const plan = await migrateWaiting(() => layoutPlan(redis), options, "key layout");
  await convertHistory(redis);
  await convertQueueKeys(redis);
  const { epoch, from } = await redis.call<{ epoch: string; from: number }>(TAKE_EPOCH, {
    now: Date.now(),
    fresh: crypto.randomUUID(),
  });
  redis.epoch = epoch;
  // The layouts another process applied first are not this one's to report.
  return { ...plan, steps: plan.steps.filter((step) => step.version > from) };
}
