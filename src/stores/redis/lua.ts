/**
 * How the Redis store's rules are written: each rule that is one transaction
 * on SQL is one Lua function here, built from the shared {@linkcode PRELUDE}
 * (keys, clocks, job rows, claim-order placement) and the parts it names.
 * Every function of the store is in one Redis function library
 * ({@linkcode functionLibrary}, loaded with `FUNCTION LOAD`): its helpers
 * are defined once when the library loads, not on every call as a script's
 * are (a call of a script with every area's helpers spent 65 µs of the
 * server's time before its first command; the library's function, none).
 *
 * Every function is called the same way: `FCALL name 1 {prefix}:meta json`.
 * The key puts the call on the prefix's Cluster slot; the argument is one
 * JSON object, the input, with at least:
 * - `now`: the caller's now, in ms;
 * - `db`: true when the store goes by the server's clock (`TIME`): every
 *   time in the input is then moved by as much as the server's now differs
 *   from `now` (`at(t)`), and every time given back moved back (`back(t)`);
 * - `epoch`: the epoch the store read at open, checked against the one
 *   `migrate` wrote, so a server that restarted empty fails every call
 *   instead of running on nothing.
 *
 * The same read of `P:meta` gives a write its move fence (`moved_to`): a
 * store whose queue moved to another refuses every write but the few
 * {@linkcode unfencedScript}s, with `RENOX_MOVED <when> <where>`.
 *
 * A function returns one JSON value (a string), or nothing. Tokens travel as
 * decimal strings: Lua's numbers keep 14 digits and tokens have 16.
 *
 * Redis keeps the writes of a function that fails halfway: a rule checks
 * first and writes last.
 *
 * @internal
 * @module
 */
import { SHIFT_KEPT_ABOVE_MS, SHIFT_KEPT_BELOW_MS } from "../steady_shift.ts";

/**
 * How long a transaction may stay open before it counts as abandoned (its
 * process died), in ms: a later transaction's end removes its writes, and
 * the keys its jobs hold no longer hold other dispatches back.
 */
export const ABANDONED_STAGE_MS = 60 * 60 * 1000;

/** How a rule may run: see the Redis docs on function flags. */
export type ScriptFlags =
  /** A producer's write: refused whole when the server is out of memory. */
  | "writes"
  /** A worker's write that frees memory (claims, settles, deletes): runs out of memory too. */
  | "allow-oom"
  /** A read: runs out of memory and on replicas. */
  | "no-writes";

/** A rule of the store: a function of the library, with its name for messages. */
export interface LuaScript {
  /** What the rule does, for errors that name it. */
  readonly name: string;
  /** How it may run. */
  readonly flags: ScriptFlags;
  /**
   * Whether a move's fence refuses it (see `moving.ts`): every write
   * (`writes`, `allow-oom`) but the few that must run on a moved store
   * (taking the epoch at open, setting and lifting the fence).
   */
  readonly fenced: boolean;
  /** Its parts after the prelude: definitions, then its body (the last). */
  readonly parts: readonly string[];
}

/** Every rule defined so far, in the order defined: the library holds them all. */
const rules: LuaScript[] = [];

/**
 * A rule named `name` whose code is `parts` after the prelude, in order
 * (definitions a later part calls come first; the last part is the body,
 * run on each call, whose `return` is the reply).
 */
export function luaScript(name: string, flags: ScriptFlags, ...parts: string[]): LuaScript {
  const rule = { name, flags, fenced: flags !== "no-writes", parts };
  rules.push(rule);
  return rule;
}

/**
 * A write that a move's fence does not refuse, as {@linkcode luaScript}
 * otherwise: only for what must run on a moved store (opening it, the fence).
 */
export function unfencedScript(name: string, flags: ScriptFlags, ...parts: string[]): LuaScript {
  const rule = { name, flags, fenced: false, parts };
  rules.push(rule);
  return rule;
}

/** The function library of every rule defined so far, and each rule's function name in it. */
export interface FunctionLibrary {
  /** Its name: `renox_` and a hash of its code, so two versions of the code never clash. */
  readonly name: string;
  /** The code for `FUNCTION LOAD`. */
  readonly code: string;
  /** The function name of each rule. */
  readonly functions: ReadonlyMap<LuaScript, string>;
}

let built: FunctionLibrary | null = null;

/** The library of every rule defined so far (built again when rules were defined since). */
export async function functionLibrary(): Promise<FunctionLibrary> {
  if (built === null || built.functions.size !== rules.length) built = await libraryOf(rules);
  return built;
}

/**
 * The library of `defined`. Each rule is a `do … end` block of its own: the
 * prelude, its parts and its body, so each sees exactly the helpers it
 * names, as a script would, and they are made once, when the library loads.
 * The rules go in by name, not in the order they were defined: that order
 * is the order modules were imported in (a process that imports one of the
 * store's modules before `mod.ts` defines them in another), and each order
 * was a library of its own on the server, of the same code.
 *
 * @internal
 */
export async function libraryOf(defined: readonly LuaScript[]): Promise<FunctionLibrary> {
  const ordered = [...defined].sort((a, b) =>
    compare(a.name, b.name) || compare(a.parts.join("\n"), b.parts.join("\n"))
  );
  const blocks = ordered.map((rule, index) => {
    const definitions = rule.parts.slice(0, -1);
    const body = rule.parts.at(-1) ?? "";
    const flags = rule.flags === "writes" ? "" : `'${rule.flags}'`;
    return [
      "do",
      PRELUDE,
      ...definitions,
      "local function body()",
      body,
      "end",
      `redis.register_function{function_name = NAME .. '_${index}', flags = {${flags}},`,
      "  callback = function(keys, args)",
      `    local refused = enter(keys, args, ${rule.fenced})`,
      "    if refused ~= nil then return refused end",
      "    return body()",
      "  end}",
      "end",
    ].join("\n");
  });
  const code = blocks.join("\n");
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-1", new TextEncoder().encode(code)),
  );
  const hash = [...digest.slice(0, 8)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
  const name = `renox_${hash}`;
  return {
    name,
    code: `#!lua name=${name}\nlocal NAME = '${name}'\n${code}`,
    functions: new Map(ordered.map((rule, index) => [rule, `${name}_${index}`])),
  };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * What every rule starts with: the call's input, clock and epoch check
 * (`enter`), and the helpers on keys and job rows.
 *
 * Key layout (`P` is the prefix, a Cluster hash tag such as `{renox}`):
 * - `P:meta` HASH: `epoch`, `layout`, and while a move fences the store
 *   `moved_to` (where the queue went) and `moved_at` (when, in ms).
 * - `P:seq` STRING: the last job id (failed jobs and finished jobs keep it).
 * - `P:queues` SET: every queue a job was stored in.
 * - `P:job:<id>` HASH: a job, fields named as the SQL `jobs` columns;
 *   a null column is an absent field.
 * - `P:q:<queue>:…`: a queue's keys, `<queue>` being its name with each
 *   `:` written `|` (which no queue name holds), so that no queue's keys are
 *   another queue's (layout 4; before it, `mail:g:4:send` beside the group
 *   `lv` of job `send` in `mail` shared a key):
 * - `P:q:<queue>:lv` ZSET: the queue's priority levels holding unleased
 *   jobs, member the priority, score its negation (highest first).
 * - `P:q:<queue>:p:<priority>` ZSET: the unleased jobs of a level, score
 *   the due time, member the zero-padded id (equal due times go by id).
 * - `P:q:<queue>:leased` ZSET: the leased jobs, score the lease's end.
 * - Grouped jobs (src/stores/redis/groups.ts has the design): a job row
 *   with `group_key` (and `group_limit`, `group_ordered`) is in its group's
 *   keys instead of its level, `<gid>` being `<length of name>:<name>:<key>`:
 *   `P:q:<queue>:groups` ZSET the queue's groups with jobs, score the turn;
 *   `P:q:<queue>:gset` HASH gid → `<limit>:<ordered>` (limit empty for none);
 *   `P:q:<queue>:g:<gid>` ZSET its unleased jobs, score the due time;
 *   `P:q:<queue>:gl:<gid>` SET its leased jobs (also in the leased set);
 *   `P:q:<queue>:go:<gid>` ZSET, ordered groups only: every job, score its id;
 *   `P:q:<queue>:gplain` STRING the turn of the queue's jobs without a group
 *   among its groups, a score of `groups` (absent: after every group);
 *   `P:gpauses` SET the paused groups, member `<length of name>:<name>:<key>`;
 *   `P:gpauses:at` HASH that member → when it was paused (store clock);
 *   `P:gpauses:until` HASH that member → when a hold ends (store clock;
 *   absent: paused until resumed). A hold that has passed no longer holds,
 *   and a settle deletes it a minute after its end (groups.ts: each store's
 *   process keeps its walk's cursor; older code kept one for every process
 *   in `P:gpauses:pruned`, which this code neither reads nor writes).
 * - `P:failed` ZSET + `P:failed:<id>` HASH: failed jobs by failure time.
 * - `P:stage:<id>` LIST: what a transaction not yet ended wrote; `P:stages`
 *   ZSET: those transactions by start time; `P:stages:waiting` HASH: a
 *   transaction whose dispatch waits for a key another open transaction
 *   holds → `<until> <holder>` (until when it waits, on the server's
 *   clock, and the holder's id), for finding deadlocks (keys.ts).
 * - `P:dispatch:<token>` STRING: the ids a dispatch stored, for a retried
 *   call whose first reply was lost.
 * - `P:steps:<id>` HASH: job `id`'s durable-step memos, field the memo's
 *   `seq`, value a JSON object (`key`, `kind`, `output`, `until` and `at` on
 *   the store's clock, `done`, `attempt`, `durationMs`).
 * - `P:signals:<id>` ZSET: job `id`'s mailbox, the signals no wait took
 *   yet, score the signal's id, member a JSON object (`id`, `name`,
 *   `payload`, `sentAt` on the store's clock); `P:signals:seq` STRING: the
 *   last signal id. A job's memos and mailbox stay while it is a job, a
 *   failed job (`P:failed:<id>`) or a kept finished one (`P:done:<id>`),
 *   and go with the last of them (`dropSteps`, see step_hooks.ts).
 * - channel `P:wake`: published (an empty message) when jobs may have
 *   become claimable, and when an awaited job ended (job_control_hooks.ts).
 */
export const PRELUDE = String.raw`
-- JSON null, and the call's prefix, input, clock shift, now, the store's now as read and
-- transaction: set by enter() at each call (cjson is not there while the library loads).
local NULL, P, INPUT, SHIFT, NOW, READ_NOW, STAGE

-- The input's value, or nil for JSON null.
local function opt(value)
  if value == NULL then return nil end
  return value
end

-- A time of the caller's clock on the store's clock, and back. A time not after the call's now
-- (a job's creation, a due time with no delay) is never past the store's now as read: a dispatch's
-- steady shift may be a ms or two over the one read (see enter).
local function at(t)
  if t == nil or t == NULL then return nil end
  if t <= INPUT.now and t + SHIFT > READ_NOW then return READ_NOW end
  return t + SHIFT
end
local function back(t) if t == nil then return NULL end return t - SHIFT end
-- A stored time as reads give it back: on the store's clock, as PostgreSQL's reads give the
-- database's (JSON null for none). Only what the caller computes with (due times it sleeps until,
-- retry times) goes back to its clock with back().
local function stored(t) if t == nil then return NULL end return t end

-- The move fence's refusal of a write to a store whose data moved to movedTo at movedAt.
local function movedReply(movedTo, movedAt)
  return redis.error_reply('RENOX_MOVED ' .. (movedAt or '0') .. ' ' .. movedTo)
end

-- The move fence's refusal when the store moved, or nil: for an unfenced rule that writes only now
-- and then, checked before its first write.
local function moveRefusal()
  local meta = redis.call('HMGET', P .. ':meta', 'moved_to', 'moved_at')
  if meta[1] then return movedReply(meta[1], meta[2]) end
  return nil
end

-- Starts a call: reads its prefix and input, the server's clock, and checks the epoch and, for a
-- fenced write, the move fence (one read of the meta hash); an error reply when the store lost its
-- data or its queue moved to another store.
local function enter(keys, args, fenced)
  NULL = cjson.null
  P = string.sub(keys[1], 1, -6)
  INPUT = cjson.decode(args[1])
  SHIFT = 0
  if INPUT.db then
    local time = redis.call('TIME')
    SHIFT = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) - INPUT.now
    -- A dispatch's hint, the shift its store's last dispatch used: kept while the shift read is
    -- within the band around it, so jobs for the same time stay in order (steady_shift.ts).
    READ_NOW = INPUT.now + SHIFT
    local hint = INPUT.shiftHint
    if hint ~= nil and SHIFT >= hint - ${SHIFT_KEPT_BELOW_MS} and SHIFT <= hint + ${SHIFT_KEPT_ABOVE_MS} then
      SHIFT = hint
    end
  else
    READ_NOW = INPUT.now
  end
  NOW = INPUT.now + SHIFT
  -- The transaction this call writes in, or nil: its jobs stay out of claim order until it commits.
  STAGE = opt(INPUT.stage)
  if INPUT.epoch ~= nil or fenced then
    local meta = redis.call('HMGET', P .. ':meta', 'epoch', 'moved_to', 'moved_at')
    if INPUT.epoch ~= nil and meta[1] ~= INPUT.epoch then
      return redis.error_reply('RENOX_EPOCH the Redis store lost its data: the server answers without the epoch ' ..
        'this store read at open (it restarted without persistence, or its keys were deleted); ' ..
        'open the queue again (a new process) to start on the empty store')
    end
    if fenced and meta[2] then return movedReply(meta[2], meta[3]) end
  end
  return nil
end

-- Records a write of the transaction, for its commit or rollback (see hooks.ts).
local function staged(entry) redis.call('RPUSH', P .. ':stage:' .. STAGE, entry) end

-- The server's clock in ms, whatever clock the call goes by: transactions' ages are kept on it.
local function serverMs()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- Whether transaction stage is open: begun, not ended, and not abandoned (begun less than
-- ABANDONED_STAGE_MS ago).
local function stageOpen(stage)
  local began = redis.call('ZSCORE', P .. ':stages', stage)
  return began ~= false and tonumber(began) > serverMs() - ${ABANDONED_STAGE_MS}
end

-- The error reply of a write into, or the commit of, a transaction that counts as abandoned (see
-- stageOpen): it was rolled back, or will be, so nothing it wrote is kept.
local function abandonedStage()
  return redis.error_reply('RENOX_ABANDONED This transaction was rolled back as abandoned, storing ' ..
    'nothing: it stayed open over ${
  ABANDONED_STAGE_MS / 60_000
} minutes, after which the Redis store takes its process ' ..
    'for dead (docs/redis.md)')
end

local function pad(id) return string.format('%016d', id) end
local function jobKey(id) return P .. ':job:' .. id end
-- A queue's keys start with queueKey(queue): its name with each ':' written '|', which no queue
-- name holds, so that no queue's keys are another queue's (layout 4; migrate.ts).
local function queueKey(queue)
  if string.find(queue, ':', 1, true) == nil then return P .. ':q:' .. queue end
  return P .. ':q:' .. (string.gsub(queue, ':', '|'))
end
local function levelKey(queue, priority) return queueKey(queue) .. ':p:' .. priority end
local function leasedKey(queue) return queueKey(queue) .. ':leased' end
local function groupId(name, key) return #name .. ':' .. name .. ':' .. key end
-- A group id's job name and key: groupId read back.
local function groupIdParts(gid)
  local colon = string.find(gid, ':', 1, true)
  local length = tonumber(string.sub(gid, 1, colon - 1))
  return string.sub(gid, colon + 1, colon + length), string.sub(gid, colon + length + 2)
end
-- t[a][b], made by make(a, b) the first time it is asked for and kept in t: what a call builds
-- per pair of names (a kept job's listing, a rollup field) is built once per batch.
local function madeOnce(t, a, b, make)
  local byB = t[a]
  if byB == nil then
    byB = {}
    t[a] = byB
  end
  local made = byB[b]
  if made == nil then
    made = make(a, b)
    byB[b] = made
  end
  return made
end
local function groupsKey(queue) return queueKey(queue) .. ':groups' end
local function groupSettingsKey(queue) return queueKey(queue) .. ':gset' end
local function groupKey(queue, gid) return queueKey(queue) .. ':g:' .. gid end
local function groupLeasedKey(queue, gid) return queueKey(queue) .. ':gl:' .. gid end
local function groupOrderKey(queue, gid) return queueKey(queue) .. ':go:' .. gid end
local function plainTurnKey(queue) return queueKey(queue) .. ':gplain' end
-- Whether group gid is paused at T (store clock): listed, and without an end or ending after T.
local function groupPaused(gid, T)
  if redis.call('SISMEMBER', P .. ':gpauses', gid) == 0 then return false end
  local ends = tonumber(redis.call('HGET', P .. ':gpauses:until', gid))
  return ends == nil or ends > T
end

-- Pauses group gid at NOW until ends (store clock; nil: until resumed), as SQL's pauseGroup: a
-- pause in force keeps its time and is only ever lengthened; a hold that has passed is replaced.
local function pauseGroupUntil(gid, ends)
  local untilKey = P .. ':gpauses:until'
  if groupPaused(gid, NOW) then
    local held = tonumber(redis.call('HGET', untilKey, gid))
    if held ~= nil and ends == nil then redis.call('HDEL', untilKey, gid)
    elseif held ~= nil and ends > held then
      redis.call('HSET', untilKey, gid, string.format('%d', ends))
    end
  else
    -- New, or a hold that has passed (or a time left by a resume of older code): replaced.
    redis.call('SADD', P .. ':gpauses', gid)
    redis.call('HSET', P .. ':gpauses:at', gid, string.format('%d', NOW))
    if ends == nil then redis.call('HDEL', untilKey, gid)
    else redis.call('HSET', untilKey, gid, string.format('%d', ends)) end
  end
end

-- The group of job id as its row says, {id, setting, ordered}, or nil for a job without one;
-- from row, its row as read (readJob) when the caller has it, else read here.
local function groupOf(id, row)
  local f
  if row ~= nil then f = {row.name, row.group_key, row.group_limit, row.group_ordered}
  else f = redis.call('HMGET', jobKey(id), 'name', 'group_key', 'group_limit', 'group_ordered') end
  if not f[2] then return nil end
  local ordered = f[4] == '1'
  return {id = groupId(f[1], f[2]), setting = (f[3] or '') .. ':' .. (ordered and 1 or 0),
    ordered = ordered}
end

-- Lists group gid in its queue's turn order at the back: one more than the highest score, so
-- that groups listed one after the other (in one call too) keep that order. Equal scores would
-- go by the member's text (code before this listed every new group at the last score).
local function listGroup(queue, gid)
  local last = redis.call('ZRANGE', groupsKey(queue), -1, -1, 'WITHSCORES')
  redis.call('ZADD', groupsKey(queue), tonumber(last[2] or 0) + 1, gid)
end

-- Lists a group with jobs in its queue's turn order (at the back when new). A dispatch into it
-- sets its setting (the latest dispatch's, as SQL keeps); a job placed again (a retry, a park, a
-- move back from the failed jobs, a debounce) sets it only where the group has none.
local function enterGroup(queue, group, dispatched)
  if dispatched then
    redis.call('HSET', groupSettingsKey(queue), group.id, group.setting)
  else
    redis.call('HSETNX', groupSettingsKey(queue), group.id, group.setting)
  end
  if redis.call('ZSCORE', groupsKey(queue), group.id) == false then listGroup(queue, group.id) end
end

-- A hash's fields as a table (HGETALL's flat reply).
local function hashTable(flat)
  local t = {}
  for i = 1, #flat, 2 do t[flat[i]] = flat[i + 1] end
  return t
end

-- The job row of id (at key, when the caller has it), or nil.
-- A row whose payload field is gone (deleted by another writer) reads with an empty one, as no
-- SQL row lacks it: the job then fails at its start for a payload that is not JSON (or not
-- sealed), and the scripts that carry the payload on (claim replies, failed rows) never meet a nil.
local function readJob(id, key)
  local flat = redis.call('HGETALL', key or jobKey(id))
  if #flat == 0 then return nil end
  local job = hashTable(flat)
  if job.payload == nil then job.payload = '' end
  return job
end

-- Puts an unleased job in its level (a grouped job in its group), due at due. dispatched: true
-- for a job just dispatched (its group takes its setting). row: its row as read, when the
-- caller has it (its group fields as stored).
local function placeUnleased(id, queue, priority, due, dispatched, row)
  local group = groupOf(id, row)
  if group ~= nil then
    redis.call('ZADD', groupKey(queue, group.id), due, pad(id))
    redis.call('SREM', groupLeasedKey(queue, group.id), pad(id))
    if group.ordered then redis.call('ZADD', groupOrderKey(queue, group.id), id, pad(id)) end
    enterGroup(queue, group, dispatched)
    return
  end
  redis.call('ZADD', levelKey(queue, priority), due, pad(id))
  redis.call('ZADD', queueKey(queue) .. ':lv', -priority, priority)
end

-- Takes a job out of its level (or of the leased set), dropping an emptied level. leased: true
-- when the row read said it holds a lease (a job with a token is in the leased set, and only
-- then): the leased set is tried first (a script may have put it back in its level since).
-- row: its row as read, when the caller has it (its group fields as stored).
local function unplace(id, queue, priority, leased, row)
  local group = groupOf(id, row)
  if group ~= nil then
    -- A grouped job: out of every key of its group, and the group off the list once it has none.
    redis.call('ZREM', leasedKey(queue), pad(id))
    redis.call('ZREM', groupKey(queue, group.id), pad(id))
    redis.call('SREM', groupLeasedKey(queue, group.id), pad(id))
    redis.call('ZREM', groupOrderKey(queue, group.id), pad(id))
    if redis.call('EXISTS', groupKey(queue, group.id), groupLeasedKey(queue, group.id)) == 0 then
      redis.call('ZREM', groupsKey(queue), group.id)
      redis.call('HDEL', groupSettingsKey(queue), group.id)
      -- The last group gone: the plain turn's place goes too (the next groups listed go first).
      if redis.call('EXISTS', groupsKey(queue)) == 0 then redis.call('DEL', plainTurnKey(queue)) end
    end
    return
  end
  if leased and redis.call('ZREM', leasedKey(queue), pad(id)) == 1 then return end
  local level = levelKey(queue, priority)
  if redis.call('ZREM', level, pad(id)) == 1 then
    if redis.call('ZCARD', level) == 0 then redis.call('ZREM', queueKey(queue) .. ':lv', priority) end
  elseif not leased then
    redis.call('ZREM', leasedKey(queue), pad(id))
  end
end

local function stepsKey(id) return P .. ':steps:' .. id end
local function signalsKey(id) return P .. ':signals:' .. id end

-- Deletes job id's memos and mailbox once it is in none of the jobs, the failed jobs and the
-- kept finished jobs (it left for good). Called after each of those deletes a job.
local function dropSteps(id)
  if redis.call('EXISTS', stepsKey(id), signalsKey(id)) == 0 then return end
  if redis.call('EXISTS', jobKey(id), P .. ':failed:' .. id, P .. ':done:' .. id) == 0 then
    redis.call('DEL', stepsKey(id), signalsKey(id))
  end
end

-- Deletes a job's row and takes it out of claim order; its memos and mailbox go too unless it
-- was kept (failed or finished) first.
local function deleteJob(id, job)
  unplace(id, job.queue, job.priority, job.token ~= nil, job)
  redis.call('DEL', jobKey(id))
  dropSteps(id)
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
  if opt(row.expireAt) ~= nil then
    table.insert(fields, 'expire_at'); table.insert(fields, at(row.expireAt))
  end
  if opt(row.trace) ~= nil then table.insert(fields, 'trace'); table.insert(fields, row.trace) end
  -- Its group fields as a read of the row would give them, so that placing it reads nothing back.
  local placed = {name = row.name}
  local group = opt(row.group)
  if group ~= nil then
    table.insert(fields, 'group_key'); table.insert(fields, group.key)
    placed.group_key = group.key
    if opt(group.limit) ~= nil then
      table.insert(fields, 'group_limit'); table.insert(fields, group.limit)
      placed.group_limit = group.limit
    end
    if group.ordered then
      table.insert(fields, 'group_ordered'); table.insert(fields, 1)
      placed.group_ordered = '1'
    end
  end
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
    placeUnleased(id, row.queue, row.priority, due, true, placed)
  end
  redis.call('SADD', P .. ':queues', row.queue)
  return id
end

-- Most arguments callInChunks passes to one command (Lua's unpack has a limit).
local CALL_CHUNK = 1000

-- Calls a variadic command with the list args (after key, when key is not nil), up to CALL_CHUNK
-- of them at a time (whole pairs: CALL_CHUNK is even); the sum of its replies.
local function callInChunks(command, key, args)
  local sum = 0
  for first = 1, #args, CALL_CHUNK do
    local last = math.min(#args, first + CALL_CHUNK - 1)
    local reply
    if key == nil then reply = redis.call(command, unpack(args, first, last))
    else reply = redis.call(command, key, unpack(args, first, last)) end
    if type(reply) == 'number' then sum = sum + reply end
  end
  return sum
end

-- Wakes idle workers of every process: jobs became claimable.
local function wake() redis.call('PUBLISH', P .. ':wake', '') end

-- A number field of a job row (absent = 0).
local function num(job, field) return tonumber(job[field] or 0) end

-- A job row's attempts as the queue counts them, the starts of its handler: a job held ahead
-- (leased, claimed_ahead '1') has not started, so the attempt its claim counted is not one yet
-- (as the SQL stores' STARTED_ATTEMPTS). What every read of an unfinished job's attempts reports.
local function startedAttempts(job)
  local attempts = num(job, 'attempts')
  if job.token ~= nil and job.claimed_ahead == '1' then return attempts - 1 end
  return attempts
end
`;
