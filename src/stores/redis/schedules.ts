/**
 * Schedules on Redis: syncing the jobs module's list, listing, pausing and
 * forgetting them, and the runs stored outside a tick (a trigger, a
 * backfill). The firing of due slots in a worker's claim is in
 * `schedule_firing.ts`.
 *
 * The key layout and the rules a run follows are in `schedule_runs.ts`.
 *
 * @internal
 * @module
 */
import type { ScheduleRow, ScheduleRun, StoredScheduleRow } from "../store.ts";
import type { RedisConnection } from "./connection.ts";
import { AREA_HOOKS } from "./hooks.ts";
import { luaScript, unfencedScript } from "./lua.ts";
import { OVERLAP_NEVER_ENDS, RUNS_PER_CALL, SCHEDULE_RUNS, timesOf } from "./schedule_runs.ts";
import { list } from "./script_replies.ts";

/** Input: none. Reply: the store's now, for slots computed on its clock. */
const STORE_NOW = luaScript("storeNow", "no-writes", "return cjson.encode(NOW)");

/**
 * Input: `rows` (ScheduleRow with `nextSlot`, the first slot after the
 * store's now, and `overlapKey`). Adds new schedules, updates changed ones
 * (a change of cron, interval or time zone restarts at `nextSlot`). A new
 * one takes the overlap a forget kept (see `FORGET`) while its job is stored.
 * Writes nothing when nothing changed, and is then no write the move's
 * fence refuses, as on SQL: an app still opens a store its queue moved from
 * with its jobs module, and reads it.
 */
const SYNC = unfencedScript(
  "syncSchedules",
  "writes",
  AREA_HOOKS,
  SCHEDULE_RUNS,
  String.raw`
for _, row in ipairs(INPUT.rows) do
  local state = S.read(row.name)
  if state == nil or state.definition ~= row.definition then
    local refused = moveRefusal()
    if refused then return refused end
    break
  end
end
for _, row in ipairs(INPUT.rows) do
  local state = S.read(row.name)
  local overlapKey = row.overlapKey
  row.overlapKey = nil
  if state == nil then
    state = row
    local holder = H.uniqueHolder(overlapKey, NOW)
    if holder ~= nil then state.overlapJob = holder end
    redis.call('DEL', P .. ':key:' .. overlapKey)
    state.paused = false
    state.lastSlot = NULL
    state.lastJobId = NULL
    state.lastFiredAt = NULL
    state.updatedAt = NOW
    S.write(state)
    S.index(state)
  elseif state.definition ~= row.definition then
    local slotsChanged = state.cron ~= row.cron or state.everyMs ~= row.everyMs or
      state.timezone ~= row.timezone
    for _, field in ipairs({'job', 'queue', 'cron', 'everyMs', 'timezone', 'missed', 'maxCatchUp',
        'overlap', 'jitterMs', 'definition'}) do
      state[field] = row[field]
    end
    if slotsChanged then state.nextSlot = row.nextSlot end
    state.updatedAt = NOW
    S.write(state)
    S.index(state)
  end
end
`,
);

/** Input: none. Reply: every stored schedule's state, by name. */
const LIST = luaScript(
  "schedules",
  "no-writes",
  String.raw`
local out = {}
local flat = redis.call('HGETALL', P .. ':sched')
for i = 2, #flat, 2 do
  local state = cjson.decode(flat[i])
  -- On the store's clock, as PostgreSQL's reads give the database's (and as a move exports it).
  state.lastFiredAt = stored(opt(state.lastFiredAt))
  table.insert(out, state)
end
table.sort(out, function(a, b) return a.name < b.name end)
return cjson.encode(out)
`,
);

/** Input: `name`, `paused`. Reply: whether the schedule is stored. */
const SET_PAUSED = luaScript(
  "setSchedulePaused",
  "writes",
  AREA_HOOKS,
  SCHEDULE_RUNS,
  String.raw`
local state = S.read(INPUT.name)
if state == nil then return cjson.encode(false) end
state.paused = INPUT.paused
state.updatedAt = NOW
S.write(state)
S.index(state)
return cjson.encode(true)
`,
);

/**
 * Input: `name`, `overlapKey`, `skip` (the run records of stored jobs passed
 * over so far; null on the first call, which removes the schedule). Reply:
 * `{removed, kept, more}`. The schedule's `overlapJob`, while it is stored,
 * keeps the overlap as the SQL stores' key does: `P:key:<overlapKey>`,
 * released when the job settles (when the job holds no key of its own) and
 * taken by a sync that stores the schedule again.
 */
const FORGET = luaScript(
  "forgetSchedule",
  "allow-oom",
  AREA_HOOKS,
  SCHEDULE_RUNS,
  String.raw`
local removed = false
local skip = opt(INPUT.skip)
if skip == nil then
  local state = S.read(INPUT.name)
  local holder = state and opt(state.overlapJob)
  if holder ~= nil and redis.call('EXISTS', jobKey(holder)) == 1 then
    local kept = P .. ':key:' .. INPUT.overlapKey
    redis.call('DEL', kept)
    redis.call('HSET', kept, 'kind', 'unique', 'job_id', holder, 'release_on_start', 0,
      'expires_at', '${OVERLAP_NEVER_ENDS}')
    if not redis.call('HGET', jobKey(holder), 'job_key') then
      redis.call('HSET', jobKey(holder), 'job_key', INPUT.overlapKey, 'keyed', 1)
    end
  end
  removed = redis.call('HDEL', P .. ':sched', INPUT.name) == 1
  redis.call('ZREM', P .. ':sched:next', INPUT.name)
  skip = 0
end
-- The runs of jobs still stored stay: they give those jobs their ctx.scheduled.
local kept, more = S.dropRuns(INPUT.name, '+inf', skip, ${RUNS_PER_CALL}, true)
return cjson.encode({removed = removed, kept = kept, more = more})
`,
);

/**
 * Input: `name`, `runs` (ScheduleRun[], times on the caller's clock).
 * Reply: `{stored, ids}`: whether the schedule is stored, and each run's
 * job id, or null.
 */
const RUN = luaScript(
  "runSchedule",
  "writes",
  AREA_HOOKS,
  SCHEDULE_RUNS,
  String.raw`
local state = S.read(INPUT.name)
if state == nil then return cjson.encode({stored = false}) end
local ids = {}
local last = nil
for i, run in ipairs(INPUT.runs) do
  ids[i] = NULL
  if run.manual or not S.slotFired(state.name, run.slot) then
    -- Asked for by a person: stored whatever the overlap rule.
    local id = S.store(state, run, true, false)
    if id ~= nil then
      ids[i] = id
      last = {slot = run.slot, id = id}
    end
  end
end
S.ranLast(state, last)
S.write(state)
S.prune(state.name)
if last ~= nil then wake() end
return cjson.encode({stored = true, ids = ids})
`,
);

/**
 * Stores the schedules one process defines: adds new ones, updates changed
 * ones (a change of cron, interval or time zone restarts at its first slot
 * after now; other changes keep the next slot). Schedules not in `rows` are
 * left as they are, and so are a schedule's paused state and last run. The
 * slots are counted from the store's now.
 */
export async function syncSchedules(
  redis: RedisConnection,
  rows: readonly ScheduleRow[],
  now: number,
): Promise<void> {
  const storeNow = await redis.call<number>(STORE_NOW, { now });
  const withNext = rows.map((row) => ({
    ...row,
    nextSlot: timesOf(row).next(storeNow),
    overlapKey: overlapKey(row.name),
  }));
  await redis.call(SYNC, { now, rows: withNext });
}

/** Every stored schedule, by name. */
export async function schedules(redis: RedisConnection): Promise<StoredScheduleRow[]> {
  const states = list(await redis.call<StoredScheduleRow[]>(LIST, { now: Date.now() }));
  return states.map((state) => ({
    name: state.name,
    job: state.job,
    queue: state.queue,
    cron: state.cron,
    everyMs: state.everyMs,
    timezone: state.timezone,
    missed: state.missed,
    maxCatchUp: state.maxCatchUp,
    overlap: state.overlap,
    jitterMs: state.jitterMs,
    nextSlot: state.nextSlot,
    paused: state.paused,
    lastSlot: state.lastSlot,
    lastJobId: state.lastJobId,
    lastFiredAt: state.lastFiredAt,
  }));
}

/** Pauses or resumes a schedule; whether it is stored. */
export function setSchedulePaused(
  redis: RedisConnection,
  name: string,
  paused: boolean,
  now: number,
): Promise<boolean> {
  return redis.call<boolean>(SET_PAUSED, { now, name, paused });
}

/**
 * Removes schedule `name`, with its paused state and the records of the
 * slots it fired whose jobs have ended (the jobs still stored keep theirs,
 * and their `ctx.scheduled`, and the one holding its overlap keeps it);
 * whether it was stored. The records go in chunks, one script each.
 */
export async function forgetSchedule(redis: RedisConnection, name: string): Promise<boolean> {
  const input = { name, overlapKey: overlapKey(name) };
  const first = await redis.call<ForgetReply>(FORGET, { now: Date.now(), ...input, skip: null });
  let { kept, more } = first;
  while (more) {
    const reply = await redis.call<ForgetReply>(FORGET, { now: Date.now(), ...input, skip: kept });
    kept += reply.kept;
    more = reply.more;
  }
  return first.removed;
}

interface ForgetReply {
  readonly removed: boolean;
  readonly kept: number;
  readonly more: boolean;
}

/**
 * Stores jobs of schedule `name` outside its tick (a trigger, a backfill);
 * for each run, its job's id, or null when its slot was fired already (or
 * a unique job holds its key). Throws when there is no such schedule stored.
 */
export async function runSchedule(
  redis: RedisConnection,
  name: string,
  runs: readonly ScheduleRun[],
  now: number,
): Promise<(number | null)[]> {
  const reply = await redis.call<{ stored: boolean; ids?: (number | null)[] }>(RUN, {
    now,
    name,
    runs,
  });
  if (!reply.stored) {
    throw new TypeError(
      `Cannot run schedule "${name}": it is not stored: it was forgotten since this queue opened (open the queue again to store it)`,
    );
  }
  return list(reply.ids ?? []);
}

/** The key of schedule `name`'s overlap rule, as the SQL stores name it in `job_keys`. */
function overlapKey(name: string): string {
  return JSON.stringify({ schedule: name });
}
