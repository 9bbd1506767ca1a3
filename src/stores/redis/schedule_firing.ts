/**
 * The firing of due schedule slots in a worker's claim on Redis, and the
 * `scheduled` of claimed jobs.
 *
 * The SQL stores fire in the claim's transaction, computing slots in JS
 * between statements. Lua cannot call JS, so here JS reads the due
 * schedules (a read), computes their slots and builds their jobs
 * (`ScheduleFiring.row`), and one script applies them with a precondition:
 * a schedule whose next slot is no longer the one read (another process
 * fired it, or it was paused or changed) is passed over, and a slot already
 * recorded is not fired again. Slots and rows are on the store's clock, as
 * the SQL stores count them on the database's.
 *
 * Missed slots follow the SQL stores (`dueSlots`): one slot due fires; more
 * than one means slots were missed, and `skip` fires none, `once` the
 * latest, `all` the latest `max_catch_up`; the next slot then becomes the
 * first after now. A slot whose row this process cannot build yet (an
 * encrypted payload not sealed) leaves the schedule where it is, for a
 * later tick.
 *
 * @internal
 * @module
 */
import { dueSlots } from "../../schedule_times.ts";
import type { ClaimedJob, ScheduleFiring, ScheduleRun } from "../store.ts";
import type { RedisConnection } from "./connection.ts";
import { AREA_HOOKS } from "./hooks.ts";
import { luaScript } from "./lua.ts";
import { SCHEDULE_RUNS, timesOf } from "./schedule_runs.ts";

/** Most due schedules one tick reads. */
const DUE_PER_TICK = 1000;

/** A due schedule as {@linkcode DUE} reads it. */
interface DueSchedule {
  readonly name: string;
  readonly cron: string | null;
  readonly everyMs: number | null;
  readonly timezone: string;
  readonly missed: string;
  readonly maxCatchUp: number;
  readonly nextSlot: number;
}

/** What one schedule fires: its slots' runs, and where it goes next. */
interface FiringPlan {
  readonly name: string;
  /** The next slot read: the firing is passed over when it changed since. */
  readonly expected: number;
  readonly runs: readonly ScheduleRun[];
  /** False when a slot waits for its row: the next slot stays. */
  readonly advance: boolean;
  /** The first slot after now, or null when there is none. */
  readonly next: number | null;
}

/**
 * Input: `names`, the schedules the caller defines. Reply: `{now, due}`, the
 * store's now and those of them due and not paused, {@linkcode DUE_PER_TICK}
 * at most. Due schedules of other names never hold them up.
 */
const DUE = luaScript(
  "dueSchedules",
  "no-writes",
  String.raw`
local due = {}
local names = INPUT.names
for first = 1, #names, ${DUE_PER_TICK} do
  if #due >= ${DUE_PER_TICK} then break end
  local page = {}
  for i = first, math.min(first + ${DUE_PER_TICK} - 1, #names) do page[#page + 1] = names[i] end
  local slots = redis.call('ZMSCORE', P .. ':sched:next', unpack(page))
  for i, slot in ipairs(slots) do
    if slot and tonumber(slot) <= NOW and #due < ${DUE_PER_TICK} then
      local raw = redis.call('HGET', P .. ':sched', page[i])
      if raw then
        local state = cjson.decode(raw)
        if not state.paused then
          table.insert(due, {name = page[i], cron = state.cron, everyMs = state.everyMs,
            timezone = state.timezone, missed = state.missed, maxCatchUp = state.maxCatchUp,
            nextSlot = state.nextSlot})
        end
      end
    end
  end
end
return cjson.encode({now = NOW, due = due})
`,
);

/** Input: `plans` (FiringPlan[], times on the store's clock). Reply: how many jobs it stored. */
const FIRE = luaScript(
  "fireSchedules",
  "allow-oom",
  AREA_HOOKS,
  SCHEDULE_RUNS,
  String.raw`
local stored = 0
for _, plan in ipairs(INPUT.plans) do
  local state = S.read(plan.name)
  if state ~= nil and not state.paused and state.nextSlot == plan.expected then
    local last = nil
    for _, run in ipairs(plan.runs) do
      if not S.slotFired(state.name, run.slot) then
        local id = S.store(state, run, false, true)
        if id ~= nil then
          stored = stored + 1
          last = {slot = run.slot, id = id}
        end
      end
    end
    if plan.advance then state.nextSlot = plan.next end
    S.ranLast(state, last)
    S.write(state)
    S.index(state)
    if last ~= nil and plan.advance then S.prune(state.name) end
  end
end
if stored > 0 then wake() end
return cjson.encode(stored)
`,
);

/** Input: `ids`. Reply: `[{id, name, slot}]` for the jobs a schedule stored. */
const RUNS_OF = luaScript(
  "scheduledRuns",
  "no-writes",
  String.raw`
local out = {}
local values = redis.call('HMGET', P .. ':sched:byjob', unpack(INPUT.ids))
for i, raw in ipairs(values) do
  if raw then
    local run = cjson.decode(raw)
    table.insert(out, {id = INPUT.ids[i], name = run.name, slot = run.slot})
  end
end
return cjson.encode(out)
`,
);

/**
 * Fires every due slot of the schedules `firing` can build jobs for, at
 * `now` (the store's clock); how many jobs it stored.
 */
export async function fireDue(
  redis: RedisConnection,
  firing: ScheduleFiring,
  now: number,
): Promise<number> {
  if (firing.names.length === 0) return 0;
  const read = await redis.call<{ now: number; due: DueSchedule[] | Record<string, never> }>(
    DUE,
    { now, names: firing.names },
  );
  const due = Array.isArray(read.due) ? read.due : [];
  const plans: FiringPlan[] = [];
  for (const schedule of due.sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) {
    const times = timesOf(schedule);
    const slots = dueSlots(
      times,
      schedule.nextSlot,
      read.now,
      schedule.missed,
      schedule.maxCatchUp,
    );
    const runs: ScheduleRun[] = [];
    let waiting = false;
    for (const slot of slots) {
      const row = firing.row(schedule.name, slot, read.now);
      if (row === undefined) {
        waiting = true; // another process, or a later tick, fires it
        break;
      }
      if (row !== null) runs.push({ slot, manual: false, row });
    }
    plans.push({
      name: schedule.name,
      expected: schedule.nextSlot,
      runs,
      advance: !waiting,
      next: waiting ? null : times.next(read.now),
    });
  }
  if (plans.length === 0) return 0;
  return await redis.call<number>(FIRE, { now, plans });
}

/** Jobs claimed, each with the slot it was fired for when a schedule stored it. */
export async function withScheduled(
  redis: RedisConnection,
  jobs: ClaimedJob[],
): Promise<ClaimedJob[]> {
  if (jobs.length === 0) return jobs;
  const runs = await redis.call<{ id: number; name: string; slot: number }[]>(
    RUNS_OF,
    { now: Date.now(), ids: jobs.map((job) => job.id) },
  );
  if (!Array.isArray(runs) || runs.length === 0) return jobs;
  const byJob = new Map(runs.map((run) => [Number(run.id), run]));
  return jobs.map((job) => {
    const run = byJob.get(job.id);
    return run === undefined ? job : { ...job, scheduled: { name: run.name, slot: run.slot } };
  });
}
