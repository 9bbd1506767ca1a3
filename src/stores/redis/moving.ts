/**
 * Moving a queue to or from Redis (docs/moving.md): the Redis store's side
 * of `MoveStore`. Rows travel in the SQL schema's layout
 * (src/stores/rows/transfer.ts); this module turns the store's keys into
 * those rows and back, building every index the store's own writes keep,
 * so that after an import a worker claims, settles and retries the jobs and
 * the admin reads see them as if they had been dispatched here.
 *
 * Which keys each table maps to (`P` is the prefix; the key layouts are in
 * the modules named):
 * - `batches`: `P:batch:<id>` HASH, listed in `P:batches` (and
 *   `P:batches:ended` once it ended); its
 *   `P:batch:<id>:members` SET is built from the imported jobs
 *   (chains_batches.ts).
 * - `flows`: `P:flow:<id>` HASH, listed in `P:flows`; `flow_nodes` and
 *   `flow_edges`: `P:flow:<id>:n` (a node's JSON with its parents and
 *   children, its state, waits, job, output, error) and `P:flow:<id>:j`
 *   (flow_hooks.ts).
 * - `waiting_jobs`: the held JSON rows of `P:held:c:<chain>:next|catch`,
 *   `P:held:b:<batch>:then|catch|finally`, `P:flow:<id>:catch` and a
 *   waiting node's `<position>:h` field. A held row keeps the `id` and
 *   `position` it was imported with; a row the store held itself has
 *   neither, and is given an id after the highest one held (`P:seq:waiting`,
 *   set by an import) in the order chains, batches, flows, then its list.
 * - `jobs`: `P:job:<id>` HASH, placed as the store places a job: its level
 *   (`P:q:<queue>:p:<priority>`, `:lv`), or its group's keys (`:g:<gid>`,
 *   `:go:<gid>`, `:groups`), or the leased set (and `:gl:<gid>`) when it
 *   holds a token; `P:queues`; its batch's members (lua.ts, groups.ts).
 * - `failed_jobs`: `P:failed:<id>` HASH and `P:failed` (failed_jobs.ts).
 * - `completed_jobs`: `P:done:<id>` HASH, `P:done:qn:…`, `P:done:pairs`
 *   and `P:done:keep` (job_control_hooks.ts).
 * - `job_keys`: `P:key:<key>` HASH, and the job's `job_key` field; a
 *   schedule's overlap key (`{"schedule":<name>}`) is also its
 *   `overlapJob`, and a schedule's `overlapJob` with no such hash is
 *   exported as that key (keys.ts, schedule_runs.ts).
 * - `job_locks`: `P:lock:<key>` ZSET members, and the job's `lock_keys`.
 * - `rate_windows`: `P:rate:<key>` HASH.
 * - `schedules`: `P:sched` HASH (the JSON state), `P:sched:next`;
 *   `schedule_runs`: `P:sched:byjob` (with `firedAt`),
 *   `P:sched:<name>:runs` and `P:sched:<name>:fired` (schedule_runs.ts).
 * - `queue_pauses`: `P:pauses` HASH; `group_pauses`: `P:gpauses` SET,
 *   `P:gpauses:at` and `P:gpauses:until` HASHes; `job_groups`: `P:q:<queue>:gset` HASH (its
 *   `version` is SQL's alone: exported as 0) (job_control_hooks.ts, lua.ts).
 * - `job_steps`: `P:steps:<job>` HASH; `job_signals`: `P:signals:<job>`
 *   ZSET (lua.ts).
 * - `job_logs`: `P:log:<job>` LIST and `P:logs` (log_hooks.ts).
 * - `job_metrics`: `P:m:<minute>` HASH fields and `P:m`; Redis keeps no
 *   shards, so an import adds a row's counters to its minute's and keeps
 *   the row as it came in `P:m:<minute>:moved` (field `queue US name US
 *   shard`, read from both ends as a rollup field is, pruned with its
 *   minute); an export gives those rows, and what
 *   the store counted itself besides as shard 0 (metrics_rollup.ts).
 *
 * - `id_counters`: `P:seq` (jobs), `P:seq:batch`, `P:seq:flow`,
 *   `P:log:seq`, `P:signals:seq` and `P:seq:waiting` (`M.COUNTERS`); an
 *   import raises a counter with SET, never lowering it.
 *
 * An import also remembers the highest id of each counter it stored in
 * `P:move:max`; `finishImport` moves the counters past them.
 *
 * Export order is each table's primary key, except `job_steps`,
 * `job_signals` and `job_logs`, which go by job id and then their own key
 * (the store keeps them per job); `job_locks` has no key and goes by
 * (key, job_id, token). The fence (`moved_to` in `P:meta`) is read by every
 * write with the epoch (lua.ts).
 *
 * This module holds the fence and what both directions share; the import
 * is in move_import.ts, the export (and the counts) in move_export.ts.
 *
 * @internal
 * @module
 */
import type { MoveFence } from "../rows/transfer.ts";
import type { RedisConnection } from "./connection.ts";
import { luaScript, unfencedScript } from "./lua.ts";

/** Input: `to`, `now`. Reply: the fence, new or already there. */
const FENCE = unfencedScript(
  "fenceForMove",
  "allow-oom",
  String.raw`
local meta = P .. ':meta'
if redis.call('HEXISTS', meta, 'moved_to') == 0 then
  redis.call('HSET', meta, 'moved_to', INPUT.to, 'moved_at', string.format('%d', INPUT.now))
end
local f = redis.call('HMGET', meta, 'moved_to', 'moved_at')
return cjson.encode({to = f[1], at = f[2]})
`,
);

/** Reply: the fence or null. */
const READ_FENCE = luaScript(
  "moveFence",
  "no-writes",
  String.raw`
local f = redis.call('HMGET', P .. ':meta', 'moved_to', 'moved_at')
if not f[1] then return cjson.encode(NULL) end
return cjson.encode({to = f[1], at = f[2]})
`,
);

/** Reply: whether there was a fence. */
const LIFT_FENCE = unfencedScript(
  "liftMoveFence",
  "allow-oom",
  String.raw`
return cjson.encode(redis.call('HDEL', P .. ':meta', 'moved_to', 'moved_at') > 0)
`,
);

/** The helpers both directions use. */
export const MOVE_HELPERS = String.raw`
local M = {}
M.US = '\031'

-- The id counters (ID_COUNTER_NAMES): each one's key after the prefix, and its field in the
-- highest ids an import stored (P:move:max).
M.COUNTERS = {jobs = {':seq', 'job'}, batches = {':seq:batch', 'batch'},
  flows = {':seq:flow', 'flow'}, job_logs = {':log:seq', 'log'},
  job_signals = {':signals:seq', 'signal'}, waiting_jobs = {':seq:waiting', 'waiting'}}
-- The highest id the counter named name handed out (0: none).
function M.counter(name) return tonumber(redis.call('GET', P .. M.COUNTERS[name][1]) or '0') end

function M.isOverlapKey(key) return string.sub(key, 1, 12) == '{"schedule":' end
function M.gpausesAt() return P .. ':gpauses:at' end
function M.gpausesUntil() return P .. ':gpauses:until' end

-- A flow node's JSON (key, name, parents as [position, continueOnFailure], children), written so
-- that empty lists stay JSON arrays (cjson writes an empty table as {}).
function M.encodeMeta(meta)
  local parents, children = {}, {}
  for _, edge in ipairs(meta.parents) do
    table.insert(parents, '[' .. string.format('%d', edge[1]) .. ',' .. string.format('%d', edge[2]) .. ']')
  end
  for _, child in ipairs(meta.children) do table.insert(children, string.format('%d', child)) end
  return '{"key":' .. cjson.encode(meta.key) .. ',"name":' .. cjson.encode(meta.name) ..
    ',"parents":[' .. table.concat(parents, ',') .. '],"children":[' .. table.concat(children, ',') .. ']}'
end

-- The held lists of the waiting-job roles, by the row's owner column.
function M.heldList(role, row)
  if role == 'link' then return P .. ':held:c:' .. row.chain_id .. ':next' end
  if role == 'chain-catch' then return P .. ':held:c:' .. row.chain_id .. ':catch' end
  if role == 'then' or role == 'catch' or role == 'finally' then
    return P .. ':held:b:' .. row.batch_id .. ':' .. role
  end
  if role == 'flow-catch' then return P .. ':flow:' .. row.flow_id .. ':catch' end
  return nil
end
`;

/** Marks the store moved to `to`; see `MoveStore.fenceForMove`. */
export async function fenceForMove(
  redis: RedisConnection,
  to: string,
  now: number,
): Promise<MoveFence> {
  const fence = await redis.call<{ to: string; at: string }>(FENCE, { now, to });
  return { to: fence.to, at: Number(fence.at) };
}

/** The fence a move left, or null. */
export async function moveFence(redis: RedisConnection): Promise<MoveFence | null> {
  const fence = await redis.call<{ to: string; at: string } | null>(READ_FENCE, {
    now: Date.now(),
  });
  return fence === null ? null : { to: fence.to, at: Number(fence.at) };
}

/** Lifts the fence; false when there was none. */
export function liftMoveFence(redis: RedisConnection): Promise<boolean> {
  return redis.call<boolean>(LIFT_FENCE, { now: Date.now() });
}
