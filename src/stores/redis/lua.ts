/**
 * How the Redis store's rules are written: each rule that is one transaction
 * on SQL is one Lua script here, built from the shared {@linkcode PRELUDE}
 * (keys, clocks, job rows, claim-order placement) and the parts it names.
 *
 * Every script is called the same way: `KEYS[1]` is the store's meta key
 * (`{prefix}:meta`, which puts the call on the prefix's Cluster slot), and
 * `ARGV[1]` one JSON object, the input, with at least:
 * - `now`: the caller's now, in ms;
 * - `db`: true when the store goes by the server's clock (`TIME`): every
 *   time in the input is then moved by as much as the server's now differs
 *   from `now` (`at(t)`), and every time given back moved back (`back(t)`);
 * - `epoch`: the epoch the store read at open, checked against the one
 *   `migrate` wrote, so a server that restarted empty fails every call
 *   instead of running on nothing.
 *
 * A script returns one JSON value (a string), or nothing. Tokens travel as
 * decimal strings: Lua's numbers keep 14 digits and tokens have 16.
 *
 * Redis keeps the writes of a script that fails halfway: a script checks
 * first and writes last.
 *
 * @internal
 * @module
 */

/** How a script may run: see the Redis docs on script flags. */
export type ScriptFlags =
  /** A producer's write: refused whole when the server is out of memory. */
  | "writes"
  /** A worker's write that frees memory (claims, settles, deletes): runs out of memory too. */
  | "allow-oom"
  /** A read: runs out of memory and on replicas. */
  | "no-writes";

/** A Lua script of the store, with its name for messages. */
export interface LuaScript {
  /** What the script does, for errors that name it. */
  readonly name: string;
  /** The whole source, shebang and prelude included. */
  readonly source: string;
}

/**
 * A script named `name` whose body is `parts` after the prelude, in order
 * (functions a later part calls come first).
 */
export function luaScript(name: string, flags: ScriptFlags, ...parts: string[]): LuaScript {
  const shebang = flags === "writes" ? "#!lua" : `#!lua flags=${flags}`;
  return { name, source: [shebang, PRELUDE, ...parts].join("\n") };
}

/**
 * What every script starts with: the input, the clock, the epoch check and
 * the helpers on keys and job rows.
 *
 * Key layout (`P` is the prefix, a Cluster hash tag such as `{renox}`):
 * - `P:meta` HASH: `epoch`, `layout`.
 * - `P:seq` STRING: the last job id (failed jobs and finished jobs keep it).
 * - `P:queues` SET: every queue a job was stored in.
 * - `P:job:<id>` HASH: a job, fields named as the SQL `jobs` columns;
 *   a null column is an absent field.
 * - `P:q:<queue>:lv` ZSET: the queue's priority levels holding unleased
 *   jobs, member the priority, score its negation (highest first).
 * - `P:q:<queue>:p:<priority>` ZSET: the unleased jobs of a level, score
 *   the due time, member the zero-padded id (equal due times go by id).
 * - `P:q:<queue>:leased` ZSET: the leased jobs, score the lease's end.
 * - `P:failed` ZSET + `P:failed:<id>` HASH: failed jobs by failure time.
 * - `P:stage:<id>` LIST: what a transaction not yet ended wrote; `P:stages`
 *   ZSET: those transactions by start time.
 * - `P:dispatch:<token>` STRING: the ids a dispatch stored, for a retried
 *   call whose first reply was lost.
 * - channel `P:wake`: published when jobs become claimable.
 */
export const PRELUDE = String.raw`
local P = string.sub(KEYS[1], 1, -6)
local INPUT = cjson.decode(ARGV[1])
local NULL = cjson.null

-- The input's value, or nil for JSON null.
local function opt(value)
  if value == NULL then return nil end
  return value
end

local SHIFT = 0
if INPUT.db then
  local time = redis.call('TIME')
  SHIFT = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) - INPUT.now
end
-- A time of the caller's clock on the store's clock, and back.
local function at(t) if t == nil or t == NULL then return nil end return t + SHIFT end
local function back(t) if t == nil then return NULL end return t - SHIFT end
-- A stored time as reads give it back: on the store's clock, as PostgreSQL's reads give the
-- database's (JSON null for none). Only what the caller computes with (due times it sleeps until,
-- retry times) goes back to its clock with back().
local function stored(t) if t == nil then return NULL end return t end
local NOW = INPUT.now + SHIFT

if INPUT.epoch ~= nil then
  local epoch = redis.call('HGET', P .. ':meta', 'epoch')
  if epoch ~= INPUT.epoch then
    return redis.error_reply('RENOX_EPOCH the Redis store lost its data: the server answers without the epoch ' ..
      'this store read at open (it restarted without persistence, or its keys were deleted); ' ..
      'run migrate to start again on an empty store')
  end
end

-- The transaction this call writes in, or nil: its jobs stay out of claim order until it commits.
local STAGE = opt(INPUT.stage)
-- Records a write of the transaction, for its commit or rollback (see hooks.ts).
local function staged(entry) redis.call('RPUSH', P .. ':stage:' .. STAGE, entry) end

local function pad(id) return string.format('%016d', id) end
local function jobKey(id) return P .. ':job:' .. id end
local function queueKey(queue) return P .. ':q:' .. queue end
local function levelKey(queue, priority) return P .. ':q:' .. queue .. ':p:' .. priority end
local function leasedKey(queue) return P .. ':q:' .. queue .. ':leased' end

-- A hash's fields as a table (HGETALL's flat reply).
local function hashTable(flat)
  local t = {}
  for i = 1, #flat, 2 do t[flat[i]] = flat[i + 1] end
  return t
end

-- The job row of id, or nil.
local function readJob(id)
  local flat = redis.call('HGETALL', jobKey(id))
  if #flat == 0 then return nil end
  return hashTable(flat)
end

-- Puts an unleased job in its level, due at due.
local function placeUnleased(id, queue, priority, due)
  redis.call('ZADD', levelKey(queue, priority), due, pad(id))
  redis.call('ZADD', queueKey(queue) .. ':lv', -priority, priority)
end

-- Takes a job out of its level (or of the leased set), dropping an emptied level. leased: true
-- when the row read said it holds a lease (a job with a token is in the leased set, and only
-- then): the leased set is tried first (a script may have put it back in its level since).
local function unplace(id, queue, priority, leased)
  if leased and redis.call('ZREM', leasedKey(queue), pad(id)) == 1 then return end
  local level = levelKey(queue, priority)
  if redis.call('ZREM', level, pad(id)) == 1 then
    if redis.call('ZCARD', level) == 0 then redis.call('ZREM', queueKey(queue) .. ':lv', priority) end
  elseif not leased then
    redis.call('ZREM', leasedKey(queue), pad(id))
  end
end

-- Deletes a job's row and takes it out of claim order.
local function deleteJob(id, job)
  unplace(id, job.queue, job.priority, job.token ~= nil)
  redis.call('DEL', jobKey(id))
end

-- Stores a new job (a NewJobRow of the input, its times on the caller's clock) with the
-- extra fields given (batch_id, chain_id, keyed, ...); its id.
local function insertJob(row, extra)
  local id = redis.call('INCR', P .. ':seq')
  local due = at(row.availableAt)
  local fields = {'queue', row.queue, 'name', row.name, 'payload', row.payload,
    'priority', row.priority, 'available_at', due, 'created_at', at(row.createdAt),
    'attempts', 0, 'crashes', 0}
  if opt(row.retryUntil) ~= nil then
    table.insert(fields, 'retry_until'); table.insert(fields, at(row.retryUntil))
  end
  if opt(row.trace) ~= nil then table.insert(fields, 'trace'); table.insert(fields, row.trace) end
  if extra ~= nil then
    for field, value in pairs(extra) do
      if value ~= NULL then table.insert(fields, field); table.insert(fields, value) end
    end
  end
  if STAGE ~= nil then
    table.insert(fields, 'staged'); table.insert(fields, STAGE)
    redis.call('HSET', jobKey(id), unpack(fields))
    staged('job:' .. id)
  else
    redis.call('HSET', jobKey(id), unpack(fields))
    placeUnleased(id, row.queue, row.priority, due)
  end
  redis.call('SADD', P .. ':queues', row.queue)
  return id
end

-- Wakes idle workers of every process: jobs became claimable.
local function wake() redis.call('PUBLISH', P .. ':wake', '') end

-- A number field of a job row (absent = 0).
local function num(job, field) return tonumber(job[field] or 0) end
`;
