/**
 * A move's import into Redis (see moving.ts for which keys each table maps
 * to): rows checked against their table's columns, then one function call
 * per page that checks every row before it writes any, stores each row not
 * there yet and builds the indexes the store's own writes keep (a row of
 * `id_counters` raises its counter); and the id counters moved past what
 * was imported.
 *
 * @internal
 * @module
 */
import type { TransferRow, TransferTable } from "../rows/transfer.ts";
import { assertTransferRows, TRANSFER_COLUMNS } from "../rows/transfer_columns.ts";
import type { RedisConnection } from "./connection.ts";
import { AREA_HOOKS } from "./hooks.ts";
import { luaScript } from "./lua.ts";
import { toLuaRows } from "./move_columns.ts";
import { MOVE_HELPERS } from "./moving.ts";

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
    if redis.call('ZSCORE', groupsKey(queue), gid) == false then listGroup(queue, gid) end
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
    redis.call('HSET', P .. ':done:' .. r.id, unpack(fields(r)))
    History.list(tonumber(r.id), r.queue, r.name, r.finished_at, r.keep_until)
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
    local window = P .. ':rate:' .. r.key
    redis.call('HSET', window, unpack(fields(r, {key = true})))
    -- A minute after its window ends, as the acquire leaves it, or after the import if it ended
    -- before (the source's clock need not be this one). A group's window has no length.
    local perMs = n(r, 'per_ms')
    if perMs ~= nil then
      redis.call('PEXPIRE', window, math.max(n(r, 'window_start') + perMs - NOW, 0) + 60000)
    end
  end,
}

I.schedules = {
  key = function(r) return r.name end,
  -- A schedule there that never fired (the app's open stored it from its jobs module) takes the
  -- row whole when the row's fired or was paused, as the SQL import's SCHEDULE_TAKES_STATE says.
  exists = function(r)
    local there = redis.call('HGET', P .. ':sched', r.name)
    if not there then return false end
    local state = cjson.decode(there)
    local neverFired = state.lastSlot == nil or state.lastSlot == NULL
    return not (neverFired and (v(r, 'last_slot') ~= nil or (r.paused == '1') ~= (state.paused == true)))
  end,
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
    else
      redis.call('ZREM', P .. ':sched:next', r.name)
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
    -- Scored by when it was fired, as S.store scores a run: a record is kept that long after it.
    redis.call('ZADD', P .. ':sched:' .. r.schedule .. ':fired', n(r, 'fired_at') or n(r, 'slot'), r.job_id)
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
    if v(r, 'until') ~= nil then redis.call('HSET', M.gpausesUntil(), gid, r['until']) end
  end,
}

I.job_groups = {
  key = function(r) return r.queue .. M.US .. groupId(r.name, r.group_key) end,
  exists = function(r)
    return redis.call('HEXISTS', groupSettingsKey(r.queue), groupId(r.name, r.group_key)) == 1
  end,
  write = function(r)
    redis.call('HSET', groupSettingsKey(r.queue), groupId(r.name, r.group_key),
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
    -- As the text it came as: a number would keep 14 digits of a runtime through cjson.encode.
    for _, column in ipairs(METRIC_COLUMNS) do counters[column] = v(r, column) end
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

-- A counter is there when it is at or past the row's value; an import only raises it.
I.id_counters = {
  key = function(r) return r.name end,
  exists = function(r) return M.counter(r.name) >= tonumber(r.value) end,
  write = function(r) redis.call('SET', P .. M.COUNTERS[r.name][1], r.value) end,
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
  MOVE_HELPERS,
  String.raw`
local max = P .. ':move:max'
for name, counter in pairs(M.COUNTERS) do
  local highest = tonumber(redis.call('HGET', max, counter[2]) or '0')
  if highest > M.counter(name) then
    redis.call('SET', P .. counter[1], string.format('%d', highest))
  end
end
redis.call('DEL', max)
`,
);

/** See `MoveStore.importRows`. */
export async function importRows(
  redis: RedisConnection,
  table: TransferTable,
  rows: readonly TransferRow[],
): Promise<number> {
  assertTransferRows(table, rows);
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
