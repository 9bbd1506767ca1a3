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
 *   `P:batches:ended` once cancelled or finished); its
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
 * - `completed_jobs`: `P:done:<id>` HASH, `P:done`, `P:done:q:…`,
 *   `P:done:n:…`, `P:done:qn:…` and `P:done:keep` (job_control_hooks.ts).
 * - `job_keys`: `P:key:<key>` HASH, and the job's `job_key` field; a
 *   schedule's overlap key (`{"schedule":<name>}`) is also its
 *   `overlapJob`, and a schedule's `overlapJob` with no such hash is
 *   exported as that key (keys.ts, schedule_runs.ts).
 * - `job_locks`: `P:lock:<key>` ZSET members, and the job's `lock_keys`.
 * - `rate_windows`: `P:rate:<key>` HASH.
 * - `schedules`: `P:sched` HASH (the JSON state), `P:sched:next`;
 *   `schedule_runs`: `P:sched:byjob` (with `firedAt`),
 *   `P:sched:<name>:runs` and `P:sched:<name>:fired` (schedule_runs.ts).
 * - `queue_pauses`: `P:pauses` HASH; `group_pauses`: `P:gpauses` SET and
 *   `P:gpauses:at` HASH; `job_groups`: `P:q:<queue>:gset` HASH (its
 *   `version` is SQL's alone: exported as 0) (job_control_hooks.ts, lua.ts).
 * - `job_steps`: `P:steps:<job>` HASH; `job_signals`: `P:signals:<job>`
 *   ZSET (lua.ts).
 * - `job_logs`: `P:log:<job>` LIST and `P:logs` (log_hooks.ts).
 * - `job_metrics`: `P:m:<minute>` HASH fields and `P:m`; Redis keeps no
 *   shards, so an import adds a row's counters to its minute's and keeps
 *   the row as it came in `P:m:<minute>:moved` (field `queue US name US
 *   shard`, pruned with its minute); an export gives those rows, and what
 *   the store counted itself besides as shard 0 (metrics_rollup.ts).
 *
 * An import remembers the highest id of each counter it stored in
 * `P:move:max`; `finishImport` moves `P:seq`, `P:seq:batch`, `P:seq:flow`,
 * `P:log:seq`, `P:signals:seq` and `P:seq:waiting` past them.
 *
 * Export order is each table's primary key, except `job_steps`,
 * `job_signals` and `job_logs`, which go by job id and then their own key
 * (the store keeps them per job); `job_locks` has no key and goes by
 * (key, job_id, token). The fence (`moved_to` in `P:meta`) is read by every
 * write with the epoch (lua.ts).
 *
 * @internal
 * @module
 */
import type { MoveFence, TransferPage, TransferRow, TransferTable } from "../rows/transfer.ts";
import type { RedisConnection } from "./connection.ts";
import { AREA_HOOKS } from "./hooks.ts";
import { luaScript, unfencedScript } from "./lua.ts";
import { fromLuaRow, toLuaRows, TRANSFER_COLUMNS } from "./move_columns.ts";
import { list } from "./script_replies.ts";

/** Most ids one export call looks at when it walks ids (jobs and what hangs on them). */
const SCAN_BUDGET = 2000;

/** Most ids one count call looks at (it keeps no rows: a few ms of the server's time). */
const COUNT_BUDGET = 10_000;

/** How far an overlap key's expiry lies: never on its own (the SQL stores' own value). */
const NEVER = 8_640_000_000_000_000;

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
const MOVE_HELPERS = String.raw`
local M = {}
M.US = '\031'

function M.isOverlapKey(key) return string.sub(key, 1, 12) == '{"schedule":' end
function M.gpausesAt() return P .. ':gpauses:at' end
function M.gsetKey(queue) return P .. ':q:' .. queue .. ':gset' end

-- A group id's name and key (see groupId in the prelude).
function M.splitGid(gid)
  local colon = string.find(gid, ':', 1, true)
  local length = tonumber(string.sub(gid, 1, colon - 1))
  return string.sub(gid, colon + 1, colon + length), string.sub(gid, colon + length + 2)
end

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

/**
 * Input: `table`, `columns` (its column names), `rows` (values as strings
 * or null), `overlapKeys` (schedules: each row's overlap key). Stores each
 * row not there yet, checks first; reply: `{stored}` or `{refused}`.
 */
const IMPORT = luaScript(
  "importRows",
  "writes",
  AREA_HOOKS,
  MOVE_HELPERS,
  String.raw`
local TABLE = INPUT.table
local COLUMNS = INPUT.columns
local I = {}

local function v(row, column)
  local value = row[column]
  if value == NULL then return nil end
  return value
end
local function n(row, column) return tonumber(v(row, column)) end
local function numOrNull(row, column) return n(row, column) or NULL end

-- The row's non-null columns as HSET arguments, but those named in skip.
local function fields(row, skip)
  local out = {}
  for _, column in ipairs(COLUMNS) do
    local value = v(row, column)
    if value ~= nil and not (skip and skip[column]) then
      table.insert(out, column); table.insert(out, value)
    end
  end
  return out
end

-- Counters an import moves past later (finishImport).
local function bump(counter, id)
  id = tonumber(id)
  if id == nil then return end
  local current = tonumber(redis.call('HGET', P .. ':move:max', counter) or '0')
  if id > current then redis.call('HSET', P .. ':move:max', counter, string.format('%d', id)) end
end

I.batches = {
  key = function(r) return r.id end,
  exists = function(r) return redis.call('EXISTS', Links.batchKey(r.id)) == 1 end,
  write = function(r)
    redis.call('HSET', Links.batchKey(r.id), unpack(fields(r)))
    redis.call('ZADD', P .. ':batches', r.id, r.id)
    Links.ended(r.id)
    bump('batch', r.id)
  end,
}

I.flows = {
  key = function(r) return r.id end,
  exists = function(r) return redis.call('EXISTS', Flows.key(r.id)) == 1 end,
  write = function(r)
    redis.call('HSET', Flows.key(r.id), unpack(fields(r)))
    redis.call('HSETNX', Flows.key(r.id), 'nodes', 0)
    redis.call('ZADD', P .. ':flows', r.id, r.id)
    bump('flow', r.id)
  end,
}

local function noFlow(r)
  if redis.call('EXISTS', Flows.key(r.flow_id)) == 0 then
    return 'flow_id: no flow ' .. r.flow_id .. ' in this store (flows are imported first)'
  end
  return nil
end

I.flow_nodes = {
  key = function(r) return r.flow_id .. ':' .. r.position end,
  check = noFlow,
  exists = function(r) return redis.call('HEXISTS', Flows.nodes(r.flow_id), r.position) == 1 end,
  write = function(r)
    local pos = r.position
    local f = {pos, M.encodeMeta({key = r.node_key, name = r.name, parents = {}, children = {}}),
      pos .. ':s', r.state, pos .. ':w', r.waiting_for}
    for suffix, column in pairs({j = 'job_id', o = 'output', e = 'error'}) do
      if v(r, column) ~= nil then table.insert(f, pos .. ':' .. suffix); table.insert(f, r[column]) end
    end
    redis.call('HSET', Flows.nodes(r.flow_id), unpack(f))
    if v(r, 'job_id') ~= nil then redis.call('HSET', Flows.jobs(r.flow_id), r.job_id, pos) end
    local count = tonumber(redis.call('HGET', Flows.key(r.flow_id), 'nodes') or '0')
    if tonumber(pos) + 1 > count then redis.call('HSET', Flows.key(r.flow_id), 'nodes', tonumber(pos) + 1) end
  end,
}

I.flow_edges = {
  key = function(r) return r.flow_id .. ':' .. r.parent .. ':' .. r.child end,
  check = function(r)
    local refused = noFlow(r)
    if refused ~= nil then return refused end
    for _, column in ipairs({'parent', 'child'}) do
      if redis.call('HEXISTS', Flows.nodes(r.flow_id), r[column]) == 0 then
        return column .. ': no node ' .. r[column] .. ' in flow ' .. r.flow_id .. ' (flow_nodes are imported first)'
      end
    end
    return nil
  end,
  exists = function(r)
    for _, edge in ipairs(Flows.meta(r.flow_id, r.child).parents) do
      if edge[1] == tonumber(r.parent) then return true end
    end
    return false
  end,
  write = function(r)
    local nodes = Flows.nodes(r.flow_id)
    local child = Flows.meta(r.flow_id, r.child)
    table.insert(child.parents, {tonumber(r.parent), tonumber(r.continue_on_failure)})
    redis.call('HSET', nodes, r.child, M.encodeMeta(child))
    local parent = Flows.meta(r.flow_id, r.parent)
    table.insert(parent.children, tonumber(r.child))
    redis.call('HSET', nodes, r.parent, M.encodeMeta(parent))
  end,
}

local OWNER = {link = 'chain_id', ['chain-catch'] = 'chain_id', ['then'] = 'batch_id',
  catch = 'batch_id', finally = 'batch_id', node = 'flow_id', ['flow-catch'] = 'flow_id'}

I.waiting_jobs = {
  key = function(r) return r.id end,
  check = function(r)
    local owner = OWNER[r.role]
    if owner == nil then
      return 'role: ' .. cjson.encode(r.role) .. ' is none of link, chain-catch, then, catch, finally, node, flow-catch'
    end
    if v(r, owner) == nil then return owner .. ': null for a waiting job of role ' .. r.role end
    if owner == 'flow_id' then return noFlow(r) end
    return nil
  end,
  exists = function(r)
    if r.role == 'node' then
      return redis.call('HEXISTS', Flows.nodes(r.flow_id), r.position .. ':h') == 1
    end
    for _, held in ipairs(redis.call('LRANGE', M.heldList(r.role, r), 0, -1)) do
      if tostring(cjson.decode(held).id) == r.id then return true end
    end
    return false
  end,
  write = function(r)
    local held = cjson.encode({queue = r.queue, name = r.name, payload = r.payload,
      priority = n(r, 'priority'), delayMs = n(r, 'delay_ms'), retryForMs = numOrNull(r, 'retry_for_ms'),
      expireInMs = numOrNull(r, 'expire_in_ms'), trace = v(r, 'trace') or NULL, id = n(r, 'id'),
      position = n(r, 'position')})
    if r.role == 'node' then
      redis.call('HSET', Flows.nodes(r.flow_id), r.position .. ':h', held)
    else
      redis.call('RPUSH', M.heldList(r.role, r), held)
    end
    bump('waiting', r.id)
  end,
}

-- Places an imported job as the store's writes place one (placeUnleased, a claim's lease), its
-- group listed without its setting (job_groups brings that).
local function placeJob(id, r)
  local queue, due = r.queue, r.available_at
  local gid = nil
  if v(r, 'group_key') ~= nil then gid = groupId(r.name, r.group_key) end
  if v(r, 'token') ~= nil then
    redis.call('ZADD', leasedKey(queue), due, pad(id))
    if gid ~= nil then redis.call('SADD', groupLeasedKey(queue, gid), pad(id)) end
  elseif gid ~= nil then
    redis.call('ZADD', groupKey(queue, gid), due, pad(id))
  else
    redis.call('ZADD', levelKey(queue, r.priority), due, pad(id))
    redis.call('ZADD', queueKey(queue) .. ':lv', -tonumber(r.priority), r.priority)
  end
  if gid ~= nil then
    if r.group_ordered == '1' then redis.call('ZADD', groupOrderKey(queue, gid), id, pad(id)) end
    if redis.call('ZSCORE', groupsKey(queue), gid) == false then
      local last = redis.call('ZRANGE', groupsKey(queue), -1, -1, 'WITHSCORES')
      redis.call('ZADD', groupsKey(queue), tonumber(last[2] or 0), gid)
    end
  end
end

I.jobs = {
  key = function(r) return r.id end,
  exists = function(r) return redis.call('EXISTS', jobKey(r.id)) == 1 end,
  write = function(r)
    local id = tonumber(r.id)
    redis.call('HSET', jobKey(id), unpack(fields(r, {id = true})))
    placeJob(id, r)
    redis.call('SADD', P .. ':queues', r.queue)
    if v(r, 'batch_id') ~= nil and r.batch_member == '1' then
      redis.call('SADD', Links.membersKey(r.batch_id), id)
    end
    bump('job', id)
  end,
}

I.failed_jobs = {
  key = function(r) return r.id end,
  exists = function(r) return redis.call('EXISTS', P .. ':failed:' .. r.id) == 1 end,
  write = function(r)
    redis.call('HSET', P .. ':failed:' .. r.id, unpack(fields(r)))
    redis.call('ZADD', P .. ':failed', r.failed_at, pad(tonumber(r.id)))
    redis.call('SADD', P .. ':queues', r.queue)
    bump('job', r.id)
  end,
}

I.completed_jobs = {
  key = function(r) return r.id end,
  exists = function(r) return redis.call('EXISTS', P .. ':done:' .. r.id) == 1 end,
  write = function(r)
    local id = pad(tonumber(r.id))
    redis.call('HSET', P .. ':done:' .. r.id, unpack(fields(r)))
    for _, listing in ipairs(History.listings(r.queue, r.name)) do
      redis.call('ZADD', listing, r.finished_at, id)
    end
    redis.call('ZADD', P .. ':done:keep', r.keep_until, id)
    bump('job', r.id)
  end,
}

I.job_keys = {
  key = function(r) return r.key end,
  exists = function(r) return redis.call('EXISTS', P .. ':key:' .. r.key) == 1 end,
  write = function(r)
    redis.call('HSET', P .. ':key:' .. r.key, unpack(fields(r, {key = true})))
    -- The job names the key it releases: its own rather than its schedule's overlap key.
    if redis.call('EXISTS', jobKey(r.job_id)) == 1 then
      local held = redis.call('HGET', jobKey(r.job_id), 'job_key')
      if not held or (M.isOverlapKey(held) and not M.isOverlapKey(r.key)) then
        redis.call('HSET', jobKey(r.job_id), 'job_key', r.key)
      end
    end
  end,
}

I.job_locks = {
  key = function(r) return r.key .. M.US .. r.job_id .. ':' .. r.token end,
  exists = function(r)
    return redis.call('ZSCORE', P .. ':lock:' .. r.key, r.job_id .. ':' .. r.token) ~= false
  end,
  write = function(r)
    redis.call('ZADD', P .. ':lock:' .. r.key, r.expires_at, r.job_id .. ':' .. r.token)
    local job = jobKey(r.job_id)
    if redis.call('EXISTS', job) == 1 then
      local held = redis.call('HGET', job, 'lock_keys')
      local names = held and cjson.decode(held) or {}
      for _, name in ipairs(names) do if name == r.key then return end end
      table.insert(names, r.key)
      redis.call('HSET', job, 'lock_keys', cjson.encode(names))
    end
  end,
}

I.rate_windows = {
  key = function(r) return r.key end,
  exists = function(r) return redis.call('EXISTS', P .. ':rate:' .. r.key) == 1 end,
  write = function(r)
    redis.call('HSET', P .. ':rate:' .. r.key, 'window_start', r.window_start, 'starts', r.starts)
  end,
}

I.schedules = {
  key = function(r) return r.name end,
  exists = function(r) return redis.call('HEXISTS', P .. ':sched', r.name) == 1 end,
  write = function(r, i)
    local state = {name = r.name, job = r.job, queue = r.queue, cron = v(r, 'cron') or NULL,
      everyMs = numOrNull(r, 'every_ms'), timezone = r.timezone, missed = r.missed,
      maxCatchUp = n(r, 'max_catch_up'), overlap = r.overlap, jitterMs = n(r, 'jitter_ms'),
      definition = r.definition, nextSlot = numOrNull(r, 'next_slot'), paused = r.paused == '1',
      lastSlot = numOrNull(r, 'last_slot'), lastJobId = numOrNull(r, 'last_job_id'),
      lastFiredAt = numOrNull(r, 'last_fired_at'), updatedAt = n(r, 'updated_at')}
    -- The SQL stores' overlap rule is a unique key; here it is the schedule's own overlapJob.
    local overlap = redis.call('HMGET', P .. ':key:' .. INPUT.overlapKeys[i], 'kind', 'job_id')
    if overlap[1] == 'unique' then state.overlapJob = tonumber(overlap[2]) end
    redis.call('HSET', P .. ':sched', r.name, cjson.encode(state))
    if not state.paused and state.nextSlot ~= NULL then
      redis.call('ZADD', P .. ':sched:next', r.next_slot, r.name)
    end
  end,
}

I.schedule_runs = {
  key = function(r) return r.job_id end,
  exists = function(r) return redis.call('HEXISTS', P .. ':sched:byjob', r.job_id) == 1 end,
  write = function(r)
    local manual = r.manual == '1'
    redis.call('HSET', P .. ':sched:byjob', r.job_id, cjson.encode({name = r.schedule,
      slot = n(r, 'slot'), manual = manual, firedAt = n(r, 'fired_at')}))
    if not manual then redis.call('HSET', P .. ':sched:' .. r.schedule .. ':runs', r.slot, r.job_id) end
    redis.call('ZADD', P .. ':sched:' .. r.schedule .. ':fired', manual and r.fired_at or r.slot, r.job_id)
    bump('job', r.job_id)
  end,
}

I.queue_pauses = {
  key = function(r) return r.queue end,
  exists = function(r) return redis.call('HEXISTS', P .. ':pauses', r.queue) == 1 end,
  write = function(r)
    local pause = {at = r.paused_at, reason = v(r, 'reason') or NULL}
    if v(r, 'until') ~= nil then pause['until'] = r['until'] end
    redis.call('HSET', P .. ':pauses', r.queue, cjson.encode(pause))
  end,
}

I.group_pauses = {
  key = function(r) return groupId(r.name, r.group_key) end,
  exists = function(r)
    return redis.call('SISMEMBER', P .. ':gpauses', groupId(r.name, r.group_key)) == 1
  end,
  write = function(r)
    local gid = groupId(r.name, r.group_key)
    redis.call('SADD', P .. ':gpauses', gid)
    redis.call('HSET', M.gpausesAt(), gid, r.paused_at)
  end,
}

I.job_groups = {
  key = function(r) return r.queue .. M.US .. groupId(r.name, r.group_key) end,
  exists = function(r)
    return redis.call('HEXISTS', M.gsetKey(r.queue), groupId(r.name, r.group_key)) == 1
  end,
  write = function(r)
    redis.call('HSET', M.gsetKey(r.queue), groupId(r.name, r.group_key),
      (v(r, 'group_limit') or '') .. ':' .. (r.group_ordered == '1' and 1 or 0))
    redis.call('SADD', P .. ':queues', r.queue)
  end,
}

I.job_steps = {
  key = function(r) return r.job_id .. ':' .. r.seq end,
  exists = function(r) return redis.call('HEXISTS', stepsKey(r.job_id), r.seq) == 1 end,
  write = function(r)
    redis.call('HSET', stepsKey(r.job_id), r.seq, cjson.encode({key = r.key, kind = r.kind,
      output = v(r, 'output') or NULL, ['until'] = numOrNull(r, 'until'), done = r.done == '1',
      attempt = n(r, 'attempt'), durationMs = n(r, 'duration_ms'), at = n(r, 'at')}))
    bump('job', r.job_id)
  end,
}

I.job_signals = {
  key = function(r) return r.id end,
  exists = function(r)
    return #redis.call('ZRANGEBYSCORE', signalsKey(r.job_id), r.id, r.id) > 0
  end,
  write = function(r)
    redis.call('ZADD', signalsKey(r.job_id), r.id, cjson.encode({id = n(r, 'id'), name = r.name,
      payload = r.payload, sentAt = n(r, 'sent_at')}))
    bump('signal', r.id)
    bump('job', r.job_id)
  end,
}

-- A job's lines are appended in id order: a line is there when the job's last line is not older.
I.job_logs = {
  key = function(r) return r.id end,
  exists = function(r)
    local last = redis.call('LINDEX', P .. ':log:' .. r.job_id, -1)
    return last ~= false and tonumber(cjson.decode(last).id) >= tonumber(r.id)
  end,
  write = function(r)
    redis.call('RPUSH', P .. ':log:' .. r.job_id, cjson.encode({id = n(r, 'id'),
      attempt = n(r, 'attempt'), at = n(r, 'at'), level = r.level, message = r.message,
      fields = v(r, 'fields') or NULL, encrypted = r.encrypted == '1', bytes = n(r, 'bytes')}))
    redis.call('ZINCRBY', P .. ':logs', r.bytes, r.job_id)
    bump('log', r.id)
    bump('job', r.job_id)
  end,
}

-- A metrics row imported: its counters by column, in its minute's ':moved' hash.
local METRIC_COLUMNS = {'completed', 'failed', 'retried', 'expired', 'runtime_ms', 'wait_ms'}
for bucket = 0, 16 do table.insert(METRIC_COLUMNS, 'runtime_b' .. bucket) end

local function movedKey(r) return P .. ':m:' .. r.minute .. ':moved' end
local function shardField(r) return r.queue .. M.US .. r.name .. M.US .. r.shard end

I.job_metrics = {
  key = function(r) return r.minute .. M.US .. shardField(r) end,
  exists = function(r) return redis.call('HEXISTS', movedKey(r), shardField(r)) == 1 end,
  write = function(r)
    local counters = {}
    for _, column in ipairs(METRIC_COLUMNS) do counters[column] = tonumber(r[column]) end
    redis.call('HSET', movedKey(r), shardField(r), cjson.encode(counters))
    local key = P .. ':m:' .. r.minute
    local row = r.queue .. M.US .. r.name .. M.US
    -- Always one field, so a row of zeros is there too.
    redis.call('HINCRBY', key, row .. 'completed', r.completed)
    for _, column in ipairs({'failed', 'retried', 'expired'}) do
      if tonumber(r[column]) ~= 0 then redis.call('HINCRBY', key, row .. column, r[column]) end
    end
    for _, column in ipairs({'runtime_ms', 'wait_ms'}) do
      if tonumber(r[column]) ~= 0 then redis.call('HINCRBYFLOAT', key, row .. column, r[column]) end
    end
    for bucket = 0, 16 do
      local count = r['runtime_b' .. bucket]
      if tonumber(count) ~= 0 then redis.call('HINCRBY', key, row .. 'b' .. bucket, count) end
    end
    redis.call('ZADD', P .. ':m', r.minute, r.minute)
  end,
}

local handler = I[TABLE]
if handler == nil then return cjson.encode({refused = 'no table ' .. TABLE}) end
-- Checks first: a row that does not fit refuses the whole call before anything is written.
local fresh = {}
local seen = {}
for i, r in ipairs(INPUT.rows) do
  if handler.check ~= nil then
    local refused = handler.check(r)
    if refused ~= nil then
      return cjson.encode({refused = 'Cannot import row ' .. (i - 1) .. ' of ' .. TABLE .. ': ' .. refused})
    end
  end
  local key = handler.key(r)
  if not seen[key] and not handler.exists(r) then table.insert(fresh, i) end
  seen[key] = true
end
for _, i in ipairs(fresh) do handler.write(INPUT.rows[i], i) end
if TABLE == 'jobs' and #fresh > 0 then wake() end
return cjson.encode({stored = #fresh})
`,
);

/** Reply: nothing. Moves every id counter past the highest id an import stored. */
const FINISH_IMPORT = luaScript(
  "finishImport",
  "writes",
  String.raw`
local max = P .. ':move:max'
local counters = {job = P .. ':seq', batch = P .. ':seq:batch', flow = P .. ':seq:flow',
  log = P .. ':log:seq', signal = P .. ':signals:seq', waiting = P .. ':seq:waiting'}
for field, key in pairs(counters) do
  local highest = tonumber(redis.call('HGET', max, field) or '0')
  if highest > tonumber(redis.call('GET', key) or '0') then
    redis.call('SET', key, string.format('%d', highest))
  end
end
redis.call('DEL', max)
`,
);

/**
 * Input: `table`, `after` (the cursor, or null), `limit`, `budget`, `keys`
 * (the names the caller listed, for the tables no key indexes), `count`.
 * Reply: `{rows, after}`: rows as field → value (absent: the column's
 * default or null), and the next cursor (null after the last row). Tables
 * walked by id may give fewer rows than `limit` with a cursor (`budget` ids
 * looked at). With `count`: `{n, after}`, how many rows instead.
 */
const EXPORT = luaScript(
  "exportRows",
  "no-writes",
  AREA_HOOKS,
  MOVE_HELPERS,
  String.raw`
local TABLE = INPUT.table
local LIMIT = INPUT.limit
local AFTER = opt(INPUT.after)
local E = {}

-- The rows of the owners after the cursor ("<owner>": that owner's rows given, or "<owner>:<k>": k
-- rows of it given). owners(start, exclusive) lists up to a budget of owners from start on (all
-- from the first when nil) and whether it reached the last; each(owner) gives an owner's rows.
local function walk(owners, each)
  local start, skip, exclusive = nil, 0, false
  if AFTER ~= nil then
    local owner, k = string.match(AFTER, '^(.-):(%d+)$')
    if owner ~= nil then start, skip = owner, tonumber(k) else start, exclusive = AFTER, true end
  end
  local ids, done = owners(start, exclusive)
  local rows = {}
  for _, owner in ipairs(ids) do
    local mine = each(owner)
    local from = 1
    if not exclusive and tostring(owner) == start then from = skip + 1 end
    for i = from, #mine do
      if #rows >= LIMIT then return rows, tostring(owner) .. ':' .. (i - 1) end
      table.insert(rows, mine[i])
    end
  end
  if done or #ids == 0 then return rows, NULL end
  return rows, tostring(ids[#ids])
end

-- Job ids from the cursor up to the highest id counted, a budget at a time.
local function jobIds(start, exclusive)
  local top = math.max(tonumber(redis.call('GET', P .. ':seq') or '0'),
    tonumber(redis.call('HGET', P .. ':move:max', 'job') or '0'))
  local first = tonumber(start or '1')
  if exclusive then first = first + 1 end
  local last = math.min(top, first + INPUT.budget - 1)
  local ids = {}
  for id = first, last do table.insert(ids, id) end
  return ids, last >= top
end

-- Members of a ZSET scored by id, from the cursor on.
local function byScore(key)
  return function(start, exclusive)
    local from = '-inf'
    if start ~= nil then from = (exclusive and '(' or '') .. start end
    local ids = redis.call('ZRANGEBYSCORE', key, from, '+inf', 'LIMIT', 0, INPUT.budget)
    return ids, #ids < INPUT.budget
  end
end

local function hashRow(key, extra)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then return nil end
  local row = hashTable(flat)
  if row.staged then return nil end
  if extra ~= nil then for field, value in pairs(extra) do row[field] = value end end
  return row
end

local function one(row) if row == nil then return {} end return {row} end

E.jobs = function() return walk(jobIds, function(id) return one(hashRow(jobKey(id), {id = id})) end) end
E.failed_jobs = function()
  return walk(jobIds, function(id) return one(hashRow(P .. ':failed:' .. id, {id = id})) end)
end
E.completed_jobs = function()
  return walk(jobIds, function(id) return one(hashRow(P .. ':done:' .. id, {id = id})) end)
end
E.batches = function()
  return walk(byScore(P .. ':batches'), function(id) return one(hashRow(Links.batchKey(id))) end)
end
E.flows = function()
  return walk(byScore(P .. ':flows'), function(id)
    local row = hashRow(Flows.key(id))
    if row ~= nil then row.nodes = nil end
    return one(row)
  end)
end

local function nodeCount(flow) return tonumber(redis.call('HGET', Flows.key(flow), 'nodes') or '0') end

E.flow_nodes = function()
  return walk(byScore(P .. ':flows'), function(flow)
    local rows = {}
    local nodes = Flows.nodes(flow)
    for pos = 0, nodeCount(flow) - 1 do
      local f = redis.call('HMGET', nodes, pos, pos .. ':s', pos .. ':w', pos .. ':j', pos .. ':o', pos .. ':e')
      if f[1] then
        local meta = cjson.decode(f[1])
        table.insert(rows, {flow_id = flow, position = pos, node_key = meta.key, name = meta.name,
          state = f[2], waiting_for = f[3], job_id = f[4] or NULL, output = f[5] or NULL,
          error = f[6] or NULL})
      end
    end
    return rows
  end)
end

E.flow_edges = function()
  return walk(byScore(P .. ':flows'), function(flow)
    local rows = {}
    for pos = 0, nodeCount(flow) - 1 do
      local raw = redis.call('HGET', Flows.nodes(flow), pos)
      if raw then
        for _, edge in ipairs(cjson.decode(raw).parents) do
          table.insert(rows, {flow_id = flow, parent = edge[1], child = pos, continue_on_failure = edge[2]})
        end
      end
    end
    table.sort(rows, function(a, b) return a.parent < b.parent or (a.parent == b.parent and a.child < b.child) end)
    return rows
  end)
end

-- Steps, signals and logs: per job, each job's in their own order.
E.job_steps = function()
  return walk(jobIds, function(id)
    local rows = {}
    local flat = redis.call('HGETALL', stepsKey(id))
    for i = 1, #flat, 2 do
      local memo = cjson.decode(flat[i + 1])
      table.insert(rows, {job_id = id, seq = tonumber(flat[i]), key = memo.key, kind = memo.kind,
        output = memo.output, ['until'] = memo['until'], done = memo.done, attempt = memo.attempt,
        duration_ms = memo.durationMs, at = memo.at})
    end
    table.sort(rows, function(a, b) return a.seq < b.seq end)
    return rows
  end)
end
E.job_signals = function()
  return walk(jobIds, function(id)
    local rows = {}
    for _, member in ipairs(redis.call('ZRANGE', signalsKey(id), 0, -1)) do
      local signal = cjson.decode(member)
      table.insert(rows, {id = signal.id, job_id = id, name = signal.name, payload = signal.payload,
        sent_at = signal.sentAt})
    end
    return rows
  end)
end
E.job_logs = function()
  return walk(jobIds, function(id)
    local rows = {}
    for _, entry in ipairs(redis.call('LRANGE', P .. ':log:' .. id, 0, -1)) do
      local line = cjson.decode(entry)
      table.insert(rows, {id = line.id, job_id = id, attempt = line.attempt, at = line.at,
        level = line.level, message = line.message, fields = line.fields, encrypted = line.encrypted,
        bytes = line.bytes})
    end
    table.sort(rows, function(a, b) return a.id < b.id end)
    return rows
  end)
end

-- A minute's rows: the shards imported as they came (':moved'), and what the store counted
-- itself besides (the sums less those shards) as shard 0.
E.job_metrics = function()
  local COLUMNS = {'completed', 'failed', 'retried', 'expired', 'runtime_ms', 'wait_ms'}
  for bucket = 0, 16 do table.insert(COLUMNS, 'runtime_b' .. bucket) end
  return walk(byScore(P .. ':m'), function(minute)
    local sums, order = {}, {}
    local flat = redis.call('HGETALL', P .. ':m:' .. minute)
    for i = 1, #flat, 2 do
      local queue, name, column = string.match(flat[i], '^(.*)\031(.*)\031(.*)$')
      if queue ~= nil then
        local id = queue .. '\031' .. name
        if sums[id] == nil then
          sums[id] = {queue = queue, name = name}
          table.insert(order, id)
        end
        local bucket = string.match(column, '^b(%d+)$')
        if bucket ~= nil then column = 'runtime_b' .. bucket end
        sums[id][column] = tonumber(flat[i + 1])
      end
    end
    local shards = {}
    local moved = redis.call('HGETALL', P .. ':m:' .. minute .. ':moved')
    for i = 1, #moved, 2 do
      local queue, name, shard = string.match(moved[i], '^(.*)\031(.*)\031(%d+)$')
      local id = queue .. '\031' .. name
      local row = cjson.decode(moved[i + 1])
      row.minute, row.queue, row.name, row.shard = minute, queue, name, tonumber(shard)
      if shards[id] == nil then shards[id] = {} end
      table.insert(shards[id], row)
    end
    local rows = {}
    for _, id in ipairs(order) do
      local sum = sums[id]
      local own = {minute = minute, queue = sum.queue, name = sum.name, shard = 0}
      local counted = false
      for _, column in ipairs(COLUMNS) do
        local rest = sum[column] or 0
        for _, row in ipairs(shards[id] or {}) do rest = rest - (row[column] or 0) end
        -- Runtimes are sums of floats: a remainder this small is their rounding, not a count.
        if math.abs(rest) < 1e-6 then rest = 0 end
        own[column] = rest
        if rest ~= 0 then counted = true end
      end
      local mine = shards[id] or {}
      if counted or #mine == 0 then
        local merged = false
        for _, row in ipairs(mine) do
          if row.shard == 0 then
            for _, column in ipairs(COLUMNS) do row[column] = (row[column] or 0) + own[column] end
            merged = true
          end
        end
        if not merged then table.insert(rows, own) end
      end
      for _, row in ipairs(mine) do table.insert(rows, row) end
    end
    table.sort(rows, function(a, b)
      if a.queue ~= b.queue then return a.queue < b.queue end
      if a.name ~= b.name then return a.name < b.name end
      return a.shard < b.shard
    end)
    return rows
  end)
end

-- Tables held whole in a few keys: every row, sorted, then a page of them from an offset.
local function page(rows)
  local from = tonumber(AFTER or '0')
  local out = {}
  for i = from + 1, math.min(#rows, from + LIMIT) do table.insert(out, rows[i]) end
  if from + LIMIT >= #rows then return out, NULL end
  return out, tostring(from + LIMIT)
end

-- The held rows: those imported keep their id and position; the store's own get ids after the
-- highest held, in the order chains, batches, flows, then the list.
E.waiting_jobs = function()
  local lists = {}
  -- The held lists of chains and batches, as the caller listed them (SCAN).
  for _, name in ipairs(INPUT.keys) do
    local kind, owner, role = string.match(name, '^([cb]):(%d+):(%a+)$')
    if kind ~= nil then
      table.insert(lists, {kind = kind, owner = tonumber(owner), role = role, key = P .. ':held:' .. name})
    end
  end
  local ROLE = {['c:next'] = {'link', 1}, ['c:catch'] = {'chain-catch', 2}, ['b:then'] = {'then', 1},
    ['b:catch'] = {'catch', 2}, ['b:finally'] = {'finally', 3}}
  local rows = {}
  local function add(held, role, owner, ownerColumn, rank, index)
    local row = cjson.decode(held)
    table.insert(rows, {id = row.id, role = role, [ownerColumn] = owner, position = row.position or index,
      queue = row.queue, name = row.name, payload = row.payload, priority = row.priority,
      delay_ms = row.delayMs, retry_for_ms = row.retryForMs, trace = row.trace,
      expire_in_ms = row.expireInMs, order = {rank, owner, index}})
  end
  for _, held in ipairs(lists) do
    local role = ROLE[held.kind .. ':' .. held.role]
    if role ~= nil then
      local column = held.kind == 'c' and 'chain_id' or 'batch_id'
      for index, entry in ipairs(redis.call('LRANGE', held.key, 0, -1)) do
        add(entry, role[1], held.owner, column, (held.kind == 'c' and 0 or 10) + role[2], index - 1)
      end
    end
  end
  for _, flow in ipairs(redis.call('ZRANGE', P .. ':flows', 0, -1)) do
    local id = tonumber(flow)
    for pos = 0, nodeCount(id) - 1 do
      local held = redis.call('HGET', Flows.nodes(id), pos .. ':h')
      if held then add(held, 'node', id, 'flow_id', 21, pos) end
    end
    for index, entry in ipairs(redis.call('LRANGE', Flows.catchKey(id), 0, -1)) do
      add(entry, 'flow-catch', id, 'flow_id', 22, index - 1)
    end
  end
  local highest = tonumber(redis.call('GET', P .. ':seq:waiting') or '0')
  local unnumbered = {}
  for _, row in ipairs(rows) do
    if type(row.id) == 'number' then highest = math.max(highest, row.id) else table.insert(unnumbered, row) end
  end
  local function before(a, b)
    for i = 1, 3 do if a.order[i] ~= b.order[i] then return a.order[i] < b.order[i] end end
    return false
  end
  table.sort(unnumbered, before)
  for i, row in ipairs(unnumbered) do row.id = highest + i end
  for _, row in ipairs(rows) do row.order = nil end
  table.sort(rows, function(a, b) return a.id < b.id end)
  return page(rows)
end

E.schedules = function()
  local rows = {}
  local flat = redis.call('HGETALL', P .. ':sched')
  for i = 2, #flat, 2 do
    local s = cjson.decode(flat[i])
    table.insert(rows, {name = s.name, job = s.job, queue = s.queue, cron = s.cron, every_ms = s.everyMs,
      timezone = s.timezone, missed = s.missed, max_catch_up = s.maxCatchUp, overlap = s.overlap,
      jitter_ms = s.jitterMs, definition = s.definition, next_slot = s.nextSlot, paused = s.paused,
      last_slot = s.lastSlot, last_job_id = s.lastJobId, last_fired_at = s.lastFiredAt,
      updated_at = s.updatedAt})
  end
  table.sort(rows, function(a, b) return a.name < b.name end)
  return page(rows)
end

E.schedule_runs = function()
  local rows = {}
  local flat = redis.call('HGETALL', P .. ':sched:byjob')
  for i = 1, #flat, 2 do
    local run = cjson.decode(flat[i + 1])
    local firedAt = opt(run.firedAt)
    if firedAt == nil then
      firedAt = tonumber(redis.call('ZSCORE', P .. ':sched:' .. run.name .. ':fired', flat[i])) or run.slot
    end
    table.insert(rows, {job_id = tonumber(flat[i]), schedule = run.name, slot = run.slot,
      manual = run.manual, fired_at = firedAt})
  end
  table.sort(rows, function(a, b) return a.job_id < b.job_id end)
  return page(rows)
end

E.queue_pauses = function()
  local rows = {}
  local flat = redis.call('HGETALL', P .. ':pauses')
  for i = 1, #flat, 2 do
    local pause = cjson.decode(flat[i + 1])
    table.insert(rows, {queue = flat[i], paused_at = pause.at, ['until'] = pause['until'], reason = pause.reason})
  end
  table.sort(rows, function(a, b) return a.queue < b.queue end)
  return page(rows)
end

E.group_pauses = function()
  local rows = {}
  for _, gid in ipairs(redis.call('SMEMBERS', P .. ':gpauses')) do
    local name, key = M.splitGid(gid)
    table.insert(rows, {name = name, group_key = key,
      paused_at = redis.call('HGET', M.gpausesAt(), gid) or NULL})
  end
  table.sort(rows, function(a, b)
    return a.name < b.name or (a.name == b.name and a.group_key < b.group_key)
  end)
  return page(rows)
end

E.job_groups = function()
  local rows = {}
  for _, queue in ipairs(redis.call('SMEMBERS', P .. ':queues')) do
    local flat = redis.call('HGETALL', M.gsetKey(queue))
    for i = 1, #flat, 2 do
      local name, key = M.splitGid(flat[i])
      local limit, ordered = string.match(flat[i + 1], '^(%d*):(%d)$')
      table.insert(rows, {queue = queue, name = name, group_key = key,
        group_limit = tonumber(limit) or NULL, group_ordered = tonumber(ordered), version = 0})
    end
  end
  table.sort(rows, function(a, b)
    if a.queue ~= b.queue then return a.queue < b.queue end
    if a.name ~= b.name then return a.name < b.name end
    return a.group_key < b.group_key
  end)
  return page(rows)
end

-- Keys, locks and rate windows have no index: the caller lists them (SCAN) and asks for these.
E.job_keys = function()
  local rows = {}
  for _, key in ipairs(INPUT.keys) do
    local row = hashRow(P .. ':key:' .. key, {key = key})
    if row ~= nil then table.insert(rows, row) end
  end
  return rows, NULL
end
E.rate_windows = function()
  local rows = {}
  for _, key in ipairs(INPUT.keys) do
    local row = hashRow(P .. ':rate:' .. key, {key = key})
    if row ~= nil then table.insert(rows, row) end
  end
  return rows, NULL
end
E.job_locks = function()
  local rows = {}
  for _, key in ipairs(INPUT.keys) do
    local members = redis.call('ZRANGE', P .. ':lock:' .. key, 0, -1, 'WITHSCORES')
    for i = 1, #members, 2 do
      local jobId, token = string.match(members[i], '^(%d+):(%d+)$')
      if jobId ~= nil then
        table.insert(rows, {key = key, job_id = jobId, token = token, expires_at = members[i + 1]})
      end
    end
  end
  return rows, NULL
end

-- The schedules whose overlap job is still stored, for the job_keys rows they stand for.
E.overlaps = function()
  local rows = {}
  local flat = redis.call('HGETALL', P .. ':sched')
  for i = 2, #flat, 2 do
    local s = cjson.decode(flat[i])
    local holder = opt(s.overlapJob)
    if holder ~= nil and redis.call('EXISTS', jobKey(holder)) == 1 then
      table.insert(rows, {schedule = s.name, job_id = holder})
    end
  end
  return rows, NULL
end

-- Counting (INPUT.count): the tables whose index lists exactly the rows an export gives, at once;
-- the others as an export walks them, without the rows.
local COUNTS = {
  batches = P .. ':batches', flows = P .. ':flows', failed_jobs = P .. ':failed',
  completed_jobs = P .. ':done',
}
if INPUT.count and COUNTS[TABLE] ~= nil then
  return cjson.encode({n = redis.call('ZCARD', COUNTS[TABLE]), after = NULL})
end
local rows, after = E[TABLE]()
if INPUT.count then return cjson.encode({n = #rows, after = after}) end
if #rows == 0 then return '{"rows":[],"after":' .. cjson.encode(after) .. '}' end
return cjson.encode({rows = rows, after = after})
`,
);

/** What the export function gives back. */
interface ExportReply {
  readonly rows: Record<string, string | number | boolean | null>[] | Record<string, never>;
  readonly after: string | null;
}

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

/** The names after `{prefix}:<kind>:` of the keys of one kind (SCAN), sorted. */
async function keyNames(redis: RedisConnection, kind: string): Promise<string[]> {
  const start = `${redis.prefix}:${kind}:`;
  const names: string[] = [];
  let cursor = "0";
  do {
    const [next, keys] = await redis.client.sendCommand([
      "SCAN",
      cursor,
      "MATCH",
      `${start}*`,
      "COUNT",
      "1000",
    ]) as [string, string[]];
    cursor = String(next);
    for (const key of keys) names.push(String(key).slice(start.length));
  } while (cursor !== "0");
  return [...new Set(names)].sort(byCodeUnits);
}

function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

async function exportCall(
  redis: RedisConnection,
  table: string,
  after: string | null,
  limit: number,
  keys: readonly string[] = [],
): Promise<{ rows: Record<string, string | number | boolean | null>[]; after: string | null }> {
  const reply = await redis.call<ExportReply>(EXPORT, {
    now: Date.now(),
    table,
    after,
    limit,
    budget: SCAN_BUDGET,
    keys,
  });
  return { rows: list(reply.rows), after: reply.after };
}

/**
 * Every row of the three tables Redis keeps without an index (`job_keys`,
 * `job_locks`, `rate_windows`), in order: their keys listed with SCAN, read
 * in one call per thousand keys.
 */
async function unindexedRows(
  redis: RedisConnection,
  table: "job_keys" | "job_locks" | "rate_windows",
): Promise<TransferRow[]> {
  const kind = table === "job_keys" ? "key" : table === "job_locks" ? "lock" : "rate";
  const names = await keyNames(redis, kind);
  const raw: Record<string, string | number | boolean | null>[] = [];
  for (let start = 0; start < names.length; start += 1000) {
    const chunk = names.slice(start, start + 1000);
    raw.push(...(await exportCall(redis, table, null, chunk.length, chunk)).rows);
  }
  if (table === "job_keys") {
    // A schedule's overlap rule is its own overlapJob here, a unique key on SQL.
    const held = new Set(names);
    for (const overlap of (await exportCall(redis, "overlaps", null, 0)).rows) {
      const key = JSON.stringify({ schedule: overlap.schedule });
      if (held.has(key)) continue;
      raw.push({
        key,
        kind: "unique",
        job_id: overlap.job_id!,
        expires_at: NEVER,
        release_on_start: 0,
        latest_at: null,
      });
    }
  }
  const rows = raw.map((row) => fromLuaRow(table, row));
  const sortKey = (row: TransferRow) =>
    table === "job_locks"
      ? [row.key as string, row.job_id as number, row.token as number] as const
      : [row.key as string, 0, 0] as const;
  return rows.sort((a, b) => {
    const [ka, ja, ta] = sortKey(a);
    const [kb, jb, tb] = sortKey(b);
    return byCodeUnits(ka, kb) || ja - jb || ta - tb;
  });
}

/** See `MoveStore.exportRows`. */
export async function exportRows(
  redis: RedisConnection,
  table: TransferTable,
  after: string | null,
  limit: number,
): Promise<TransferPage> {
  checkTable(table);
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new RangeError(`limit must be a whole number of rows >= 1: got ${limit}`);
  }
  if (after !== null && !/^-?\d+(:\d+)?$/.test(after)) {
    throw new RangeError(
      `after must be null or the cursor a page of ${table} gave: got ${JSON.stringify(after)}`,
    );
  }
  if (table === "job_keys" || table === "job_locks" || table === "rate_windows") {
    const all = await unindexedRows(redis, table);
    const from = after === null ? 0 : Number(after);
    const rows = all.slice(from, from + limit);
    return { rows, after: from + limit >= all.length ? null : String(from + limit) };
  }
  // Chains and batches keep their waiting jobs in lists no key indexes: listed here, outside
  // the function, so no call holds the server for a walk of its whole keyspace.
  const held = table === "waiting_jobs" ? await keyNames(redis, "held") : [];
  const rows: TransferRow[] = [];
  let cursor = after;
  do {
    const page = await exportCall(redis, table, cursor, limit - rows.length, held);
    for (const row of page.rows) rows.push(fromLuaRow(table, row));
    cursor = page.after;
  } while (cursor !== null && rows.length < limit);
  return { rows, after: cursor };
}

/**
 * See `MoveStore.countRows`: the rows an export yields, from the index that
 * lists them where one does, else counted as an export walks them.
 */
export async function countRows(redis: RedisConnection, table: TransferTable): Promise<number> {
  checkTable(table);
  if (table === "job_keys" || table === "job_locks" || table === "rate_windows") {
    return (await unindexedRows(redis, table)).length;
  }
  const held = table === "waiting_jobs" ? await keyNames(redis, "held") : [];
  let count = 0;
  let after: string | null = null;
  do {
    const reply: { n: number; after: string | null } = await redis.call(EXPORT, {
      now: Date.now(),
      table,
      after,
      limit: Number.MAX_SAFE_INTEGER,
      budget: COUNT_BUDGET,
      keys: held,
      count: true,
    });
    count += reply.n;
    after = reply.after;
  } while (after !== null);
  return count;
}

/** See `MoveStore.importRows`. */
export async function importRows(
  redis: RedisConnection,
  table: TransferTable,
  rows: readonly TransferRow[],
): Promise<number> {
  checkTable(table);
  if (rows.length === 0) return 0;
  const luaRows = toLuaRows(table, rows);
  const reply = await redis.call<{ stored: number } | { refused: string }>(IMPORT, {
    now: Date.now(),
    table,
    columns: TRANSFER_COLUMNS[table].map((column) => column.name),
    rows: luaRows,
    overlapKeys: table === "schedules"
      ? rows.map((row) => JSON.stringify({ schedule: row.name }))
      : [],
  });
  if ("refused" in reply) throw new TypeError(reply.refused);
  return reply.stored;
}

/** See `MoveStore.finishImport`. */
export async function finishImport(redis: RedisConnection): Promise<void> {
  await redis.call(FINISH_IMPORT, { now: Date.now() });
}

function checkTable(table: TransferTable): void {
  if (!Object.hasOwn(TRANSFER_COLUMNS, table)) {
    throw new TypeError(`No table ${JSON.stringify(table)}: expected one of TRANSFER_TABLES`);
  }
}
