/**
 * Fair scheduling by group on Redis (docs/groups.md), the rules of
 * src/stores/sql/groups.ts in the claim's one script.
 *
 * Design (keys in src/stores/redis/lua.ts's prelude):
 * - A grouped job's row keeps `group_key`, `group_limit` (absent: none) and
 *   `group_ordered` (1: one at a time, in dispatch order); a failed job
 *   keeps them for its retry. Its group is `<gid>` = `<length of
 *   name>:<name>:<key>` within its queue.
 * - `placeUnleased` and `unplace`, which every rule moves jobs with, put an
 *   unleased grouped job in its group's ZSET (`g:<gid>`, by due time) rather
 *   than its level, and list the group in the queue's turn order
 *   (`groups`, at the back when new) with its setting (`gset`); a leased one
 *   is in the queue's leased set (so renewals, listings and counts see it)
 *   and in its group's `gl:<gid>` SET. An ordered group also keeps every
 *   job by id (`go:<gid>`): its first is the one that may run. A group with
 *   no job left is taken off the list in the same call.
 * - The plain claim's candidates skip grouped jobs (a grouped job's lease
 *   that ran out is its group's to give). `fairCandidates` walks the
 *   queue's groups in turn order, a window at a time, skipping paused
 *   groups (and held ones, until their hold ends) and those of names the
 *   claimer does not run; for each, its live leases (the lease end after
 *   now) take slots of its limit; it picks in rounds (every group's first
 *   free slot, then every group's second) up to the claim's need; the
 *   groups it served or found nothing to take in go to the back of the turn
 *   order, in the order it walked them, each with a score of its own.
 * - The queue's jobs without a group are one more turn (as on SQL): its
 *   place in the turn order is a score (`P:q:<queue>:gplain`), after every
 *   group of that score or lower; absent, after every group (a queue's
 *   first claim starts at its first group, as on SQL). The rounds take
 *   from it as from a group, the plain claim's candidates, and it goes to
 *   the back as a group does. It goes when the queue's last group does.
 * - A group rate limit (the claim's `groupRates`, by job name) is counted
 *   in `P:rate:<key>`, the HASH of `rateLimited` (`window_start`,
 *   `starts`), under the key of src/stores/sql/groups.ts's `groupRateKey`
 *   (U+0001 first, which no `rateLimited` key may start with). A limited
 *   group gives at most what its window has left; each job the claim
 *   leases from it counts (`countGroupClaim`), and the HASH expires a
 *   minute after its window ends. The next-due read makes a group over its limit with a
 *   job due now due when its window turns.
 *
 * @internal
 * @module
 */
import type { PausedGroup } from "../rows/job_control.ts";
import type { Page } from "../rows/read.ts";
import { HoldsPrune, PRUNE_EVERY_MS } from "../sql/upkeep.ts";
import type { RedisConnection } from "./connection.ts";
import { luaScript } from "./lua.ts";
import { list } from "./script_replies.ts";

/** Most holds one settle's prune looks at (a hint to `HSCAN`, as SQL's chunk). */
const HOLDS_PRUNE_CHUNK = 1000;

/** Most groups one window of the grouped claim looks at. */
const MAX_WINDOW = 64;

/**
 * Group rate limits, for the claim's and the next-due read's scripts:
 * `gidName(gid)`, the job name of a group; `groupWindow(queue, gid, rate,
 * T)`, the group's rate window at `T` (`key`, `start`, `used`, `left`);
 * `countGroupClaim(window, T)` counts one claim in it.
 */
export const GROUP_RATES = String.raw`
local function gidName(gid) return (groupIdParts(gid)) end

local function groupWindow(queue, gid, rate, T)
  local key = P .. ':rate:\1' .. #queue .. ':' .. queue .. ':' .. gid
  local start = math.floor(T / rate.perMs) * rate.perMs
  local row = redis.call('HMGET', key, 'window_start', 'starts')
  local used = 0
  local stored = tonumber(row[1])
  if stored == start then used = tonumber(row[2])
  -- A later window than T (a claim that read its clock before another claimed, or a clock
  -- behind): T's window is over, and that one is not this claim's to count.
  elseif stored ~= nil and stored > start then used = rate.max end
  return {key = key, start = start, used = used, left = math.max(0, rate.max - used),
    ends = start + rate.perMs}
end

-- The HASH goes a minute after its window ends, by the server's timer: the window is on the
-- store's clock, which may be the caller's (it need not run with the server's).
local function countGroupClaim(window, T)
  window.used = window.used + 1
  redis.call('HSET', window.key, 'window_start', window.start, 'starts', window.used)
  redis.call('PEXPIRE', window.key, window.ends - T + 60000)
end
`;

/**
 * `fairCandidates(queue, T, need, names, rates)`: up to `need` due jobs of
 * `queue` in round-robin order, the plain turn's as `candidates` gives them
 * and each grouped one as `{id, due, gid, window}` (`window`: its group's
 * rate window, when `rates` limits its name); moves the turns it looked at
 * as the module doc says. A queue without groups: `candidates` alone. For
 * the claim's script (tick.ts), after `candidates` and
 * {@linkcode GROUP_RATES}.
 */
export const FAIR_CANDIDATES = String.raw`
local PLAIN_TURN = {}

local function fairCandidates(queue, T, need, names, rates)
  if need <= 0 then return {} end
  if redis.call('EXISTS', groupsKey(queue)) == 0 then return candidates(queue, T, need, names) end
  local out = {}
  local plainAt = tonumber(redis.call('GET', plainTurnKey(queue)))
  local plainListed = false
  local sawGroup = false
  local size = math.min(${MAX_WINDOW}, math.max(4, need))
  local offset = 0
  local toBack = {}
  while #out < need do
    local window = redis.call('ZRANGE', groupsKey(queue), offset, offset + size - 1, 'WITHSCORES')
    offset = offset + #window / 2
    -- The window's turns: its groups, and the plain turn where its score falls (past the end of
    -- the list when it has none).
    local turns = {}
    for i = 1, #window, 2 do
      if not plainListed and plainAt ~= nil and tonumber(window[i + 1]) > plainAt then
        plainListed = true
        table.insert(turns, PLAIN_TURN)
      end
      table.insert(turns, window[i])
    end
    if not plainListed and #window / 2 < size then
      plainListed = true
      table.insert(turns, PLAIN_TURN)
    end
    if #turns == 0 then break end
    local lists = {}
    local eligible = {}
    local windows = {}
    for gi, gid in ipairs(turns) do
      local list = {}
      if gid == PLAIN_TURN then
        eligible[gi] = true
        list = candidates(queue, T, need - #out, names)
      else
        local name = gidName(gid)
        eligible[gi] = (names == nil or names[name] == true) and not groupPaused(gid, T)
        if eligible[gi] then
          sawGroup = true
          local setting = redis.call('HGET', groupSettingsKey(queue), gid) or ':0'
          local sep = string.find(setting, ':', 1, true)
          local limit = tonumber(string.sub(setting, 1, sep - 1))
          local ordered = string.sub(setting, sep + 1) == '1'
          local rate = rates and rates[name]
          local cap = need
          if rate ~= nil then
            windows[gi] = groupWindow(queue, gid, rate, T)
            cap = math.min(need, windows[gi].left)
          end
          local live = 0
          local expired = {}
          for _, member in ipairs(redis.call('SMEMBERS', groupLeasedKey(queue, gid))) do
            local leaseEnd = tonumber(redis.call('ZSCORE', leasedKey(queue), member))
            if leaseEnd ~= nil and leaseEnd > T then live = live + 1
            elseif leaseEnd ~= nil then table.insert(expired, {id = tonumber(member), due = leaseEnd}) end
          end
          if ordered then
            local head = redis.call('ZRANGE', groupOrderKey(queue, gid), 0, 0)[1]
            if live == 0 and head ~= nil and cap > 0 then
              local due = tonumber(redis.call('ZSCORE', groupKey(queue, gid), head))
              for _, lease in ipairs(expired) do
                if lease.id == tonumber(head) then due = lease.due end
              end
              if due ~= nil and due <= T then table.insert(list, {id = tonumber(head), due = due}) end
            end
          else
            local free = cap
            if limit ~= nil then free = math.min(cap, limit - live) end
            if free > 0 then
              local due = redis.call('ZRANGEBYSCORE', groupKey(queue, gid), '-inf', T, 'WITHSCORES',
                'LIMIT', 0, free)
              for i = 1, #due, 2 do
                table.insert(list, {id = tonumber(due[i]), due = tonumber(due[i + 1])})
              end
              if #expired > 0 then
                for _, lease in ipairs(expired) do table.insert(list, lease) end
                table.sort(list, function(a, b) return a.due < b.due or (a.due == b.due and a.id < b.id) end)
                while #list > free do table.remove(list) end
              end
            end
          end
        end
      end
      lists[gi] = list
    end
    local served = {}
    local lastServed = 0
    local round = 1
    while #out < need do
      local any = false
      for gi, gid in ipairs(turns) do
        local candidate = lists[gi][round]
        if candidate ~= nil and #out < need then
          if gid ~= PLAIN_TURN then
            candidate = {id = candidate.id, due = candidate.due, gid = gid, window = windows[gi]}
          end
          table.insert(out, candidate)
          served[gi] = true
          lastServed = gi
          any = true
        end
      end
      if not any then break end
      round = round + 1
    end
    -- Every turn looked at goes to the back where the rounds took all they had; else those up to
    -- the turn of the last job taken and the empty ones after it (as SQL's cursor passes them):
    -- the next claim goes on with the first turn this claim's last round did not come to.
    local passed = #turns
    if #out >= need then
      passed = lastServed
      while passed < #turns and not (eligible[passed + 1] and #lists[passed + 1] > 0) do
        passed = passed + 1
      end
    end
    for gi = 1, passed do
      if served[gi] or (eligible[gi] and #lists[gi] == 0) then table.insert(toBack, turns[gi]) end
    end
    if #window / 2 < size then break end
  end
  -- Where no group could be looked at (all paused, or of other names), the plain turn keeps its
  -- place, as SQL's cursor does.
  if #toBack > 0 and sawGroup then
    local last = redis.call('ZRANGE', groupsKey(queue), -1, -1, 'WITHSCORES')
    local top = tonumber(last[2] or 0)
    if plainAt ~= nil and plainAt > top then top = plainAt end
    -- The plain turn with no place of its own is after every group: the groups that go to the
    -- back go after it.
    if plainAt == nil then redis.call('SET', plainTurnKey(queue), string.format('%.17g', top)) end
    local args = {}
    for i, gid in ipairs(toBack) do
      if gid == PLAIN_TURN then
        redis.call('SET', plainTurnKey(queue), string.format('%.17g', top + i))
      else
        table.insert(args, top + i); table.insert(args, gid)
      end
    end
    if #args > 0 then redis.call('ZADD', groupsKey(queue), unpack(args)) end
  end
  return out
end
`;

/**
 * Input: `name`, `key`, `forMs` (null: until resumed). Pauses the group in
 * every queue, as SQL's `pauseGroup` (src/stores/sql/group_pauses.ts):
 * `P:gpauses:at` keeps when (store clock), for a move to another store,
 * and `P:gpauses:until` when a hold ends. A pause in force keeps its time
 * and is only ever lengthened; a hold that has passed is replaced.
 */
const PAUSE_GROUP = luaScript(
  "pauseGroup",
  "writes",
  String.raw`
local forMs = opt(INPUT.forMs)
local ends = nil
if forMs ~= nil then ends = NOW + forMs end
pauseGroupUntil(groupId(INPUT.name, INPUT.key), ends)
`,
);

/**
 * Input: `name`, `key`. Resumes the group (ending a hold early); whether it
 * was paused now. Wakes idle workers.
 */
const RESUME_GROUP = luaScript(
  "resumeGroup",
  "allow-oom",
  String.raw`
local gid = groupId(INPUT.name, INPUT.key)
local held = groupPaused(gid, NOW)
redis.call('SREM', P .. ':gpauses', gid)
redis.call('HDEL', P .. ':gpauses:at', gid)
redis.call('HDEL', P .. ':gpauses:until', gid)
if held then wake() end
return cjson.encode(held)
`,
);

/**
 * Pauses group `key` of job `name` in every queue until `until` (the
 * caller's clock, held as long after the store's now; null: until
 * resumed): claims skip its jobs; running ones go on.
 */
export async function pauseGroup(
  redis: RedisConnection,
  name: string,
  key: string,
  now: number,
  until: number | null,
): Promise<void> {
  await redis.call(PAUSE_GROUP, { now, name, key, forMs: until === null ? null : until - now });
}

/** Resumes group `key` of job `name`; whether it was paused. Wakes idle workers. */
export function resumeGroup(
  redis: RedisConnection,
  name: string,
  key: string,
  now: number,
): Promise<boolean> {
  return redis.call<boolean>(RESUME_GROUP, { now, name, key });
}

/**
 * Where a store's walk through `P:gpauses:until` stands: the `HSCAN` cursor
 * its next chunk starts from (`"0"` begins a walk).
 */
export type HoldsWalk = HoldsPrune<string>;

/** A walk through `P:gpauses:until` not yet begun. */
export function holdsWalk(): HoldsWalk {
  return new HoldsPrune<string>("0");
}

/**
 * The settle's prune of passed holds, as SQL's `pruneHolds`
 * (src/stores/sql/group_pauses.ts): `pruneHolds(cursor)` reads the chunk of
 * `P:gpauses:until` (holds only: a pause without an end has no field
 * there) that `HSCAN` gives from `cursor`, deletes each hold whose end
 * passed at least a minute before `NOW`, and returns the cursor the walk
 * goes on from (`"0"`: it reached the end). The store's process keeps the
 * cursor and when its last walk ended ({@linkcode HoldsWalk}) and passes the
 * cursor only to a settle a walk is due in, so a settle between walks reads
 * nothing for it.
 */
export const PRUNE_HOLDS = String.raw`
local function pruneHolds(cursor)
  local untilKey = P .. ':gpauses:until'
  local scan = redis.call('HSCAN', untilKey, cursor, 'COUNT', ${HOLDS_PRUNE_CHUNK})
  local fields = scan[2]
  for i = 1, #fields, 2 do
    local ends = tonumber(fields[i + 1])
    if ends ~= nil and ends <= NOW - ${PRUNE_EVERY_MS} then
      redis.call('SREM', P .. ':gpauses', fields[i])
      redis.call('HDEL', P .. ':gpauses:at', fields[i])
      redis.call('HDEL', untilKey, fields[i])
    end
  end
  return scan[1]
end
`;

/**
 * Input: `now`, `limit`, `offset`. The groups paused or held now, by job
 * name then key, that slice of them, as `{name, key, at, until}` (times on
 * the store's clock, as decimal strings; `until` null for a pause without
 * an end). It reads every member of `P:gpauses` to sort them.
 */
const PAUSED_GROUPS = luaScript(
  "pausedGroups",
  "no-writes",
  String.raw`
local out = {}
local untilKey = P .. ':gpauses:until'
for _, gid in ipairs(redis.call('SMEMBERS', P .. ':gpauses')) do
  local ends = tonumber(redis.call('HGET', untilKey, gid))
  if ends == nil or ends > NOW then
    local name, key = groupIdParts(gid)
    table.insert(out, {name = name, key = key,
      at = redis.call('HGET', P .. ':gpauses:at', gid) or '0',
      ['until'] = ends and string.format('%d', ends) or NULL})
  end
end
table.sort(out, function(a, b) return a.name < b.name or (a.name == b.name and a.key < b.key) end)
local slice = {}
for i = INPUT.offset + 1, math.min(#out, INPUT.offset + INPUT.limit) do table.insert(slice, out[i]) end
return cjson.encode(slice)
`,
);

/** The groups paused or held at `now`, by job name then key, the slice `page` of them. */
export async function pausedGroups(
  redis: RedisConnection,
  now: number,
  page: Page,
): Promise<PausedGroup[]> {
  const rows = await redis.call<
    | { name: string; key: string; at: string; until: string | null }[]
    | Record<string, never>
  >(PAUSED_GROUPS, { now, limit: page.limit, offset: page.offset });
  return list(rows).map((row) => ({
    name: row.name,
    key: row.key,
    pausedAt: new Date(Number(row.at)),
    until: row.until === null ? null : new Date(Number(row.until)),
  }));
}
