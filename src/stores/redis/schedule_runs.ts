/**
 * How a schedule's runs are stored on Redis, shared by the admin writes
 * (`schedules.ts`) and the firing of due slots in a worker's claim
 * (`schedule_firing.ts`): a Lua part recording each run once, and the
 * slots of a schedule computed in JS (croner), which Lua cannot call.
 *
 * Keys (`P` the prefix):
 * - `P:sched` HASH: schedule name → its definition and state, as JSON
 *   (the SQL `schedules` columns, camelCase, plus `overlapJob`: the job
 *   that holds the overlap rule, while it is stored).
 * - `P:sched:next` ZSET: the schedules not paused that have a next slot,
 *   scored by it.
 * - `P:sched:<name>:runs` HASH: slot → the job fired for it (slot runs
 *   only: a slot is fired once).
 * - `P:sched:<name>:fired` ZSET: every run's job id, scored by when it was
 *   stored (by its slot in records of older code), for pruning: a record
 *   is kept {@linkcode RUNS_KEPT_MS} after its run was stored, whatever its
 *   slot, so a backfill of old slots asked again skips them.
 * - `P:sched:byjob` HASH: job id → `{name, slot, manual}`, which gives a
 *   claimed job its `scheduled`.
 *
 * Slots are wall times of the schedule's grid on the store's clock, stored
 * and given back as they are (as the SQL stores keep the database's); the
 * other times of a schedule (when it last fired) go through `at()` and
 * `back()` like every time of the input.
 *
 * The overlap rule `"skip"` is the schedule's own `overlapJob`: while that
 * job is stored (pending, running, retrying, or left by a crash), the next
 * slots store nothing; once it is gone (settled, cancelled, cleared), the
 * next slot fires. That is the SQL stores' overlap key, held until its job
 * settles, with "a key whose job is gone counts as free". A job the
 * schedule fired that a retry moves back from the failed jobs becomes the
 * `overlapJob` again unless another stored job is ({@linkcode OVERLAP_RETRIED}).
 * Forgetting a schedule whose `overlapJob` is stored keeps it as the SQL
 * key, `P:key:{"schedule":<name>}` (keys.ts's layout, which a move exports
 * as that key): a sync that stores the schedule again takes it back.
 *
 * @internal
 * @module
 */
import { type ScheduleTimes, scheduleTimes } from "../../schedule_times.ts";

/** How long a fired slot is remembered (so a backfill does not fire it again), in ms. */
export const RUNS_KEPT_MS = 7 * 86_400_000;

/** The expiry of an overlap a forgotten schedule's job keeps: never (it ends with its job). */
export const OVERLAP_NEVER_ENDS = 8_640_000_000_000_000;

/** Most run records one script forgets. */
export const RUNS_PER_CALL = 1000;

/** Most run records a firing or a run prunes. */
const RUNS_PRUNED = 100;

/**
 * The Lua helpers on schedules, in the table `S` (after the hooks):
 * - `S.read(name)` / `S.write(state)`: a schedule's JSON state, or nil.
 * - `S.index(state)`: puts it in (or out of) `P:sched:next`.
 * - `S.slotFired(name, slot)`: whether that slot was fired already.
 * - `S.store(state, run, force, onStoreClock)`: stores the job of one run
 *   and records it; its id, or nil when the overlap rule or the job's own
 *   key kept it out (also a key an open transaction holds). `force` (a person asked for it) stores it whatever the
 *   overlap rule; `onStoreClock`: the row's times are the store's already.
 * - `S.dropRuns(name, before, skip, limit, onlyEnded)`: drops run records
 *   (see there).
 * - `S.prune(name)`: drops the records of runs stored longer ago than the
 *   time kept.
 * - `S.ranLast(state, last)`: records `last` ({slot, id}, or nil for no run)
 *   as the schedule's last run, fired now.
 */
export const SCHEDULE_RUNS = String.raw`
local S = {}

function S.read(name)
  local raw = redis.call('HGET', P .. ':sched', name)
  if not raw then return nil end
  return cjson.decode(raw)
end

function S.write(state) redis.call('HSET', P .. ':sched', state.name, cjson.encode(state)) end

function S.index(state)
  if state.paused or opt(state.nextSlot) == nil then
    redis.call('ZREM', P .. ':sched:next', state.name)
  else
    redis.call('ZADD', P .. ':sched:next', state.nextSlot, state.name)
  end
end

local function runsKey(name) return P .. ':sched:' .. name .. ':runs' end
local function firedKey(name) return P .. ':sched:' .. name .. ':fired' end

function S.slotFired(name, slot) return redis.call('HEXISTS', runsKey(name), slot) == 1 end

-- A row whose times are on the store's clock, on the caller's (insertJob moves them back with at()).
local function onCallerClock(row)
  local moved = {}
  for field, value in pairs(row) do moved[field] = value end
  moved.availableAt = row.availableAt - SHIFT
  moved.createdAt = row.createdAt - SHIFT
  if opt(row.retryUntil) ~= nil then moved.retryUntil = row.retryUntil - SHIFT end
  if opt(row.expireAt) ~= nil then moved.expireAt = row.expireAt - SHIFT end
  local key = opt(row.key)
  if key ~= nil then
    local movedKey = {}
    for field, value in pairs(key) do movedKey[field] = value end
    if opt(key.expiresAt) ~= nil then movedKey.expiresAt = key.expiresAt - SHIFT end
    if opt(key.latestAt) ~= nil then movedKey.latestAt = key.latestAt - SHIFT end
    moved.key = movedKey
  end
  return moved
end

function S.store(state, run, force, onStoreClock)
  local holds = state.overlap == 'skip'
  local holder = opt(state.overlapJob)
  if holds and holder ~= nil and redis.call('EXISTS', jobKey(holder)) == 1 then
    if not force then return nil end
    -- Stored anyway; the job holding the rule keeps the next slots out until it ends.
    holds = false
  end
  local row = run.row
  if onStoreClock then row = onCallerClock(row) end
  local id
  if opt(row.key) ~= nil then
    -- A key an open transaction holds keeps the run out, as its job would (a firing cannot wait).
    if H.openHolder(row.key) ~= nil then return nil end
    local outcome
    id, outcome = H.insertKeyed(row)
    if outcome ~= 'stored' then return nil end
  else
    id = insertJob(row, nil)
  end
  if holds then state.overlapJob = id end
  if not run.manual then redis.call('HSET', runsKey(state.name), run.slot, id) end
  redis.call('HSET', P .. ':sched:byjob', id,
    cjson.encode({name = state.name, slot = run.slot, manual = run.manual}))
  redis.call('ZADD', firedKey(state.name), NOW, id)
  return id
end

-- Drops the records of the runs of name scored before before, looking at most at limit of them
-- after the first skip; only those whose job has ended when onlyEnded. How many it kept, and
-- whether more remain.
function S.dropRuns(name, before, skip, limit, onlyEnded)
  local ids = redis.call('ZRANGEBYSCORE', firedKey(name), '-inf', before, 'LIMIT', skip, limit)
  local kept = 0
  for _, id in ipairs(ids) do
    if onlyEnded and redis.call('EXISTS', jobKey(id)) == 1 then
      kept = kept + 1
    else
      local raw = redis.call('HGET', P .. ':sched:byjob', id)
      if raw then
        local run = cjson.decode(raw)
        if not run.manual and redis.call('HGET', runsKey(name), run.slot) == id then
          redis.call('HDEL', runsKey(name), run.slot)
        end
        redis.call('HDEL', P .. ':sched:byjob', id)
      end
      redis.call('ZREM', firedKey(name), id)
    end
  end
  return kept, #ids == limit
end

function S.prune(name) S.dropRuns(name, '(' .. (NOW - ${RUNS_KEPT_MS}), 0, ${RUNS_PRUNED}, false) end

function S.ranLast(state, last)
  if last == nil then return end
  state.lastSlot = last.slot
  state.lastJobId = last.id
  state.lastFiredAt = NOW
end
`;

/**
 * `overlapRetried(id)`: job `id`, just moved back from the failed jobs,
 * becomes its schedule's `overlapJob` when a schedule fired it, that
 * schedule is stored and skips overlaps, and no other stored job is its
 * `overlapJob` (the SQL stores' `overlapRetried`).
 */
export const OVERLAP_RETRIED = String.raw`
local function overlapRetried(id)
  local run = redis.call('HGET', P .. ':sched:byjob', id)
  if not run then return end
  local name = cjson.decode(run).name
  local raw = redis.call('HGET', P .. ':sched', name)
  if not raw then return end
  local state = cjson.decode(raw)
  if state.overlap ~= 'skip' then return end
  local holder = opt(state.overlapJob)
  if holder ~= nil and holder ~= id and redis.call('EXISTS', jobKey(holder)) == 1 then return end
  state.overlapJob = id
  redis.call('HSET', P .. ':sched', name, cjson.encode(state))
end
`;

const timesCache = new Map<string, ScheduleTimes>();

/** The slots of a schedule, cached by its rule. */
export function timesOf(
  rule: { cron: string | null; everyMs: number | null; timezone: string },
): ScheduleTimes {
  const cacheKey = JSON.stringify([rule.cron, rule.everyMs, rule.timezone]);
  let times = timesCache.get(cacheKey);
  if (times === undefined) {
    times = rule.cron === null
      ? scheduleTimes({ everyMs: Number(rule.everyMs) })
      : scheduleTimes({ cron: rule.cron, timezone: rule.timezone });
    if (timesCache.size > 1_000) timesCache.clear();
    timesCache.set(cacheKey, times);
  }
  return times;
}
