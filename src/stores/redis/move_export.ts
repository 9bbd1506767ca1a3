/**
 * A move's export from Redis (see moving.ts for which keys each table maps
 * to): pages of a table's rows in the SQL layout, and how many rows a table
 * holds. Reads only (a fenced store still answers them); no call walks the
 * whole keyspace: the keys no index lists are listed with SCAN from here.
 *
 * @internal
 * @module
 */
import {
  assertPageBytes,
  assertTransferTable,
  MOVE_PAGE_BYTES,
  rowsWithin,
  rowText,
  type TransferPage,
  type TransferRow,
  type TransferTable,
} from "../rows/transfer.ts";
import type { RedisConnection } from "./connection.ts";
import { AREA_HOOKS } from "./hooks.ts";
import { luaScript } from "./lua.ts";
import { fromLuaRow } from "./move_columns.ts";
import { MOVE_HELPERS } from "./moving.ts";
import { list } from "./script_replies.ts";

/** Most ids one export call looks at when it walks ids (jobs and what hangs on them). */
const SCAN_BUDGET = 2000;

/** Most ids one count call looks at (it keeps no rows: a few ms of the server's time). */
const COUNT_BUDGET = 10_000;

/** How far an overlap key's expiry lies: never on its own (the SQL stores' own value). */
const NEVER = 8_640_000_000_000_000;

/**
 * Input: `table`, `after` (the cursor, or null), `limit`, `budget`, `keys`
 * (the names the caller listed, for the tables no key indexes), `count`;
 * `maxBytes`, the page's bound of text bytes, and `given` and `bytes`, the
 * rows earlier calls put in the page and their text bytes. Reply: `{rows,
 * after, bytes, full}`: rows as field → value (absent: the column's default
 * or null), the next cursor (null after the last row), the page's text
 * bytes now, and whether the call ended the page on `maxBytes`. Tables
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

-- A page ends once its rows' text would pass MAX_BYTES; it always takes one row (BYTES: the text
-- in the page, with what earlier calls gave; FULL: this call ended the page on it).
local MAX_BYTES = opt(INPUT.maxBytes) or math.huge
local GIVEN = opt(INPUT.given) or 0
local BYTES = opt(INPUT.bytes) or 0
local FULL = false

-- Whether row goes in the page after count rows of this call; its text counted if so.
local function fits(row, count)
  if MAX_BYTES == math.huge then return true end
  local size = 0
  for _, value in pairs(row) do if type(value) == 'string' then size = size + #value end end
  if GIVEN + count > 0 and BYTES + size > MAX_BYTES then
    FULL = true
    return false
  end
  BYTES = BYTES + size
  return true
end

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
      if #rows >= LIMIT or not fits(mine[i], #rows) then
        return rows, tostring(owner) .. ':' .. (i - 1)
      end
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
      local queue, name, column = string.match(flat[i], '^([^\031]*)\031(.*)\031([^\031]*)$')
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
      local queue, name, shard = string.match(moved[i], '^([^\031]*)\031(.*)\031(%d+)$')
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
    -- As text that reads back as the same double: cjson.encode keeps 14 digits of a runtime.
    for _, row in ipairs(rows) do
      for _, column in ipairs(COLUMNS) do
        if type(row[column]) == 'number' then row[column] = string.format('%.17g', row[column]) end
      end
    end
    return rows
  end)
end

-- Tables held whole in a few keys: every row, sorted, then a page of them from an offset.
local function page(rows)
  local from = tonumber(AFTER or '0')
  local out = {}
  for i = from + 1, math.min(#rows, from + LIMIT) do
    if not fits(rows[i], #out) then return out, tostring(i - 1) end
    table.insert(out, rows[i])
  end
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

E.id_counters = function()
  local rows = {}
  for name in pairs(M.COUNTERS) do
    local value = M.counter(name)
    if value > 0 then table.insert(rows, {name = name, value = value}) end
  end
  table.sort(rows, function(a, b) return a.name < b.name end)
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
    local name, key = groupIdParts(gid)
    table.insert(rows, {name = name, group_key = key,
      paused_at = redis.call('HGET', M.gpausesAt(), gid) or NULL,
      ['until'] = redis.call('HGET', M.gpausesUntil(), gid) or NULL})
  end
  table.sort(rows, function(a, b)
    return a.name < b.name or (a.name == b.name and a.group_key < b.group_key)
  end)
  return page(rows)
end

E.job_groups = function()
  local rows = {}
  for _, queue in ipairs(redis.call('SMEMBERS', P .. ':queues')) do
    local flat = redis.call('HGETALL', groupSettingsKey(queue))
    for i = 1, #flat, 2 do
      local name, key = groupIdParts(flat[i])
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
  completed_jobs = P .. ':done:keep',
}
if INPUT.count and COUNTS[TABLE] ~= nil then
  return cjson.encode({n = redis.call('ZCARD', COUNTS[TABLE]), after = NULL})
end
local rows, after = E[TABLE]()
if INPUT.count then return cjson.encode({n = #rows, after = after}) end
-- No rows encode as {}: the caller reads them as none.
return cjson.encode({rows = rows, after = after, bytes = BYTES, full = FULL})
`,
);

/** What the export function gives back. */
interface ExportReply {
  readonly rows: Record<string, string | number | boolean | null>[] | Record<string, never>;
  readonly after: string | null;
  readonly bytes: number;
  readonly full: boolean;
}

/** A page being filled over several export calls: its bound, and what it holds so far. */
interface PageSoFar {
  readonly maxBytes: number;
  readonly given: number;
  readonly bytes: number;
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
  page?: PageSoFar,
): Promise<
  { rows: Record<string, string | number | boolean | null>[] } & Omit<ExportReply, "rows">
> {
  const reply = await redis.call<ExportReply>(EXPORT, {
    now: Date.now(),
    table,
    after,
    limit,
    budget: SCAN_BUDGET,
    keys,
    ...page,
  });
  return { rows: list(reply.rows), after: reply.after, bytes: reply.bytes, full: reply.full };
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

/**
 * See `MoveStore.exportRows`: a page may take several calls (each looks at
 * a budget of ids), each told what the page holds so far.
 */
export async function exportRows(
  redis: RedisConnection,
  table: TransferTable,
  after: string | null,
  limit: number,
  maxBytes: number = MOVE_PAGE_BYTES,
): Promise<TransferPage> {
  assertTransferTable(table);
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new RangeError(`limit must be a whole number of rows >= 1: got ${limit}`);
  }
  assertPageBytes(maxBytes);
  if (after !== null && !/^-?\d+(:\d+)?$/.test(after)) {
    throw new RangeError(
      `after must be null or the cursor a page of ${table} gave: got ${JSON.stringify(after)}`,
    );
  }
  if (table === "job_keys" || table === "job_locks" || table === "rate_windows") {
    const all = await unindexedRows(redis, table);
    const from = after === null ? 0 : Number(after);
    const upTo = all.slice(from, from + limit);
    const rows = upTo.slice(0, rowsWithin(upTo.map(rowText), maxBytes));
    const next = from + rows.length;
    return { rows, after: next >= all.length ? null : String(next) };
  }
  // Chains and batches keep their waiting jobs in lists no key indexes: listed here, outside
  // the function, so no call holds the server for a walk of its whole keyspace.
  const held = table === "waiting_jobs" ? await keyNames(redis, "held") : [];
  const rows: TransferRow[] = [];
  let cursor = after;
  let bytes = 0;
  let full = false;
  do {
    const page = await exportCall(redis, table, cursor, limit - rows.length, held, {
      maxBytes,
      given: rows.length,
      bytes,
    });
    for (const row of page.rows) rows.push(fromLuaRow(table, row));
    ({ after: cursor, bytes, full } = page);
  } while (cursor !== null && rows.length < limit && !full);
  return { rows, after: cursor };
}

/**
 * See `MoveStore.countRows`: the rows an export yields, from the index that
 * lists them where one does, else counted as an export walks them.
 */
export async function countRows(redis: RedisConnection, table: TransferTable): Promise<number> {
  assertTransferTable(table);
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
