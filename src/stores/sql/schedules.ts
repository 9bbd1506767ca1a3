/**
 * Schedules in the store: syncing the jobs module's list, firing the slots
 * that are due inside a worker's claim transaction, and the admin writes
 * (pause, resume, trigger, backfill).
 *
 * A slot is exactly one job because firing it and recording it happen in
 * one transaction that first locks the schedule's row (SQLite's one writer
 * serializes it; PostgreSQL's `FOR UPDATE` makes a second process wait and
 * then see the slot gone), and `schedule_runs` holds a unique index on
 * `(schedule, slot)` besides. The overlap rule is a unique key in
 * `job_keys` held by the schedule's job until it settles, like a unique
 * job's: a crash leaves the job (and the key) until it is recovered, and a
 * key whose job is gone counts as free. A job that failed for good and is
 * retried takes the key again when no other job holds it by then
 * ({@linkcode overlapRetried}), and a forgotten schedule's key stays with
 * its job: the jobs a schedule stored count for its overlap until they end.
 *
 * Missed slots, when the tick finds slots `next_slot <= s <= now`: one slot
 * is on time and fires; more than one means slots were missed, and then
 * `skip` fires none, `once` the latest, `all` the latest `max_catch_up`
 * oldest first. Either way the next slot becomes the first after now.
 *
 * @internal
 * @module
 */
import { dueSlots, type ScheduleTimes, scheduleTimes } from "../../schedule_times.ts";
import type { ClaimedJob } from "../store.ts";
import type {
  FiredJobRow,
  ScheduleFiring,
  ScheduleRow,
  ScheduleRun,
  StoredScheduleRow,
} from "../rows/schedules.ts";
import { clockParam, type Dialect, KEYED } from "./dialect.ts";
import { holdUnique, insertKeyed, uniqueHolder } from "./keys.ts";
import { exec, type Script, wakeAfterCommit } from "./script.ts";
import { statement } from "./statement.ts";

/** How long a fired slot is remembered (so a backfill does not fire it again). */
export const RUNS_KEPT_MS = 7 * 86_400_000;
/** An overlap key's expiry: never on its own; it ends with its job. */
const NEVER = 8_640_000_000_000_000;

const COLUMNS =
  "name, job, queue, cron, every_ms, timezone, missed, max_catch_up, overlap, jitter_ms, next_slot, paused, last_slot, last_job_id, last_fired_at";

const FIND = statement(
  "SELECT definition, cron, every_ms, timezone FROM schedules WHERE name = $1 {{forUpdate}}",
  { oneRow: true },
);
const INSERT = statement(
  `INSERT INTO schedules (name, job, queue, cron, every_ms, timezone, missed, max_catch_up,
    overlap, jitter_ms, definition, next_slot, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
  ON CONFLICT (name) DO NOTHING`,
);
const UPDATE = statement(
  `UPDATE schedules SET job = $2, queue = $3, cron = $4, every_ms = $5, timezone = $6,
    missed = $7, max_catch_up = $8, overlap = $9, jitter_ms = $10, definition = $11,
    next_slot = CASE WHEN $14 = 1 THEN $12 ELSE next_slot END, updated_at = $13
  WHERE name = $1`,
);
const FORGET = statement("DELETE FROM schedules WHERE name = $1");
const FORGET_RUNS = statement(
  // The runs of jobs still stored stay: they give those jobs their ctx.scheduled.
  `DELETE FROM schedule_runs WHERE schedule = $1
    AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = schedule_runs.job_id)`,
);
/**
 * The due schedules of the names `$2` (the process's own), read through the
 * index of due schedules, by name (the order every worker locks them in):
 * `name || ''` keeps the name's index out of the plan, which SQLite would
 * otherwise walk whole for the order, or seek once per name on every tick.
 */
const DUE = statement(
  `SELECT name, cron, every_ms, timezone, missed, max_catch_up, overlap, next_slot,
    {{now $1}} AS now
  FROM schedules WHERE paused = 0 AND next_slot <= {{now $1}} AND name || '' IN {{texts $2}}
  ORDER BY name || '' {{forUpdate}}`,
);
const LOCK = statement(
  `SELECT ${COLUMNS} FROM schedules WHERE name = $1 {{forUpdate}}`,
  { oneRow: true },
);
const FIND_RUN = statement(
  "SELECT job_id FROM schedule_runs WHERE schedule = $1 AND slot = $2 AND manual = 0",
  { oneRow: true },
);
const RECORD_RUN = statement(
  "INSERT INTO schedule_runs (job_id, schedule, slot, manual, fired_at) VALUES ($1, $2, $3, $4, $5)",
);
const ADVANCE = statement("UPDATE schedules SET next_slot = $2 WHERE name = $1");
const FIRED = statement(
  "UPDATE schedules SET last_slot = $2, last_job_id = $3, last_fired_at = $4 WHERE name = $1",
);
/**
 * Drops the slot runs of schedule `$1` fired before `$2`, the rule Redis
 * keeps too (`S.prune`). A slot is never after the time its run was fired
 * (beyond the skew between a caller's clock and the database's), so
 * `slot < $2` drops nothing more: it only narrows the index seek.
 */
const PRUNE_RUNS = statement(
  "DELETE FROM schedule_runs WHERE schedule = $1 AND slot < $2 AND fired_at < $2 AND manual = 0",
);
const PRUNE_MANUAL_RUNS = statement(
  "DELETE FROM schedule_runs WHERE schedule = $1 AND manual = 1 AND fired_at < $2",
);
/**
 * The schedules that skip overlaps of the jobs `{{ids $1}}`, which a
 * retry just moved back, their rows locked as a firing locks them.
 */
const RETRIED_RUNS = statement(
  `SELECT r.job_id, r.schedule FROM schedule_runs r JOIN schedules s ON s.name = r.schedule
  WHERE r.job_id IN {{ids $1}} AND s.overlap = 'skip' ORDER BY s.name {{forUpdate s}}`,
);
const MARK_KEYED = statement("UPDATE jobs SET keyed = $2 WHERE id = $1");
const RUNS_OF = statement(
  "SELECT job_id, schedule, slot FROM schedule_runs WHERE job_id IN {{ids $1}}",
);
const LIST = statement(`SELECT ${COLUMNS} FROM schedules ORDER BY name`);
const SET_PAUSED = statement(
  "UPDATE schedules SET paused = $2, updated_at = $3 WHERE name = $1",
);

interface DueRow {
  readonly name: string;
  readonly cron: string | null;
  readonly every_ms: number | null;
  readonly timezone: string;
  readonly missed: string;
  readonly max_catch_up: number;
  readonly overlap: string;
  readonly next_slot: number;
  readonly now: number;
}

interface ScheduleTableRow {
  readonly name: string;
  readonly job: string;
  readonly queue: string;
  readonly cron: string | null;
  readonly every_ms: number | null;
  readonly timezone: string;
  readonly missed: string;
  readonly max_catch_up: number;
  readonly overlap: string;
  readonly jitter_ms: number;
  readonly next_slot: number | null;
  readonly paused: number;
  readonly last_slot: number | null;
  readonly last_job_id: number | null;
  readonly last_fired_at: number | null;
}

/**
 * Stores the schedules one process defines: adds new ones, updates changed
 * ones (a change of cron, interval or time zone restarts at its first slot
 * after now; other changes keep the next slot). Schedules not in `rows` are
 * left as they are (another process may define them: only
 * {@linkcode forgetSchedule} removes one), and so are a schedule's paused
 * state and last run. Now is the store's (the database's on PostgreSQL, so
 * a host whose clock is off does not start a schedule early or late), else
 * `now`.
 */
export function* syncSchedules(
  dialect: Dialect,
  rows: readonly ScheduleRow[],
  now: number,
): Script<void> {
  const at = yield* dialect.now(now);
  for (const row of [...rows].sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) {
    const { rows: [stored] } = yield* exec<
      { definition: string; cron: string | null; every_ms: number | null; timezone: string }
    >(FIND, row.name);
    const values = [
      row.name,
      row.job,
      row.queue,
      row.cron,
      row.everyMs,
      row.timezone,
      row.missed,
      row.maxCatchUp,
      row.overlap,
      row.jitterMs,
      row.definition,
      timesOf({ cron: row.cron, every_ms: row.everyMs, timezone: row.timezone }).next(at),
      at,
    ];
    if (stored === undefined) {
      yield* exec(INSERT, ...values);
    } else if (stored.definition !== row.definition) {
      const slotsChanged = stored.cron !== row.cron ||
        numberOrNull(stored.every_ms) !== row.everyMs || stored.timezone !== row.timezone;
      yield* exec(UPDATE, ...values, slotsChanged ? 1 : 0);
    }
  }
}

/**
 * Removes schedule `name` from the store, with its paused state and the
 * record of the slots it fired whose jobs have ended (the jobs still stored
 * stay, and keep their `ctx.scheduled`); whether it was stored.
 */
export function* forgetSchedule(name: string): Script<boolean> {
  yield* exec(FORGET_RUNS, name);
  return (yield* exec(FORGET, name)).count === 1;
}

/**
 * Fires every due slot of the schedules `firing` can build jobs for, at
 * `now` (the database's clock where the dialect reads it); how many jobs it stored.
 */
export function* fireDue(dialect: Dialect, firing: ScheduleFiring, now: number): Script<number> {
  if (firing.names.length === 0) return 0;
  const { rows } = yield* exec<DueRow>(DUE, clockParam(dialect, now), firing.names);
  let stored = 0;
  for (const due of rows) {
    const at = Number(due.now);
    const times = timesOf(due);
    const nextSlot = Number(due.next_slot);
    const slots = dueSlots(times, nextSlot, at, due.missed, Number(due.max_catch_up));
    let waiting = false;
    let last: { slot: number; id: number } | null = null;
    for (const slot of slots) {
      const row = firing.row(due.name, slot, at);
      if (row === undefined) {
        waiting = true; // another process, or a later tick, fires it
        break;
      }
      if (row === null) continue;
      if ((yield* exec(FIND_RUN, due.name, slot)).rows.length > 0) continue;
      const id = yield* storeRun(dialect, due.name, due.overlap === "skip", {
        slot,
        manual: false,
        row,
      }, at);
      if (id !== null) {
        stored++;
        last = { slot, id };
      }
    }
    if (waiting) {
      if (last !== null) yield* exec(FIRED, due.name, last.slot, last.id, at);
      continue;
    }
    yield* exec(ADVANCE, due.name, times.next(at));
    if (last !== null) {
      yield* exec(FIRED, due.name, last.slot, last.id, at);
      yield* exec(PRUNE_RUNS, due.name, at - RUNS_KEPT_MS);
    }
  }
  if (stored > 0) yield* wakeAfterCommit();
  return stored;
}

/**
 * Gives the overlap key back to jobs a schedule fired that a retry just
 * moved back from the failed jobs (`ids`, in the order moved): each takes
 * its schedule's key when its schedule is stored, skips overlaps and no job
 * holds the key at `now` (the store's clock), so the next slot waits for it
 * as for any job the schedule fired. A newer job holding the key keeps it.
 */
export function* overlapRetried(ids: readonly number[], now: number): Script<void> {
  if (ids.length === 0) return;
  const { rows } = yield* exec<{ job_id: number; schedule: string }>(RETRIED_RUNS, ids);
  if (rows.length === 0) return;
  const scheduleOf = new Map(rows.map((row) => [Number(row.job_id), row.schedule]));
  for (const id of ids) {
    const name = scheduleOf.get(id);
    if (name === undefined) continue;
    const key = overlapKey(name);
    if ((yield* uniqueHolder(key, now)) !== null) continue;
    yield* exec(MARK_KEYED, id, KEYED.untilSettled);
    yield* holdUnique(key, id, NEVER);
  }
}

/** Jobs claimed, each with the slot it was fired for when a schedule stored it. */
export function* withScheduled(jobs: ClaimedJob[]): Script<ClaimedJob[]> {
  if (jobs.length === 0) return jobs;
  const { rows } = yield* exec<{ job_id: number; schedule: string; slot: number }>(
    RUNS_OF,
    jobs.map((job) => job.id),
  );
  if (rows.length === 0) return jobs;
  const byJob = new Map(rows.map((row) => [Number(row.job_id), row]));
  return jobs.map((job) => {
    const run = byJob.get(job.id);
    return run === undefined
      ? job
      : { ...job, scheduled: { name: run.schedule, slot: Number(run.slot) } };
  });
}

/**
 * Stores jobs of schedule `name` outside its tick (a trigger, a backfill),
 * after locking its row; for each run, its job's id, or null when its slot
 * was fired already (or a unique job holds its key). Throws when there is no
 * such schedule stored.
 */
export function* runSchedule(
  dialect: Dialect,
  name: string,
  runs: readonly ScheduleRun[],
  now: number,
): Script<(number | null)[]> {
  const { rows: [schedule] } = yield* exec<ScheduleTableRow>(LOCK, name);
  if (schedule === undefined) {
    throw new TypeError(
      `Cannot run schedule "${name}": it is not stored: it was forgotten since this queue opened (open the queue again to store it)`,
    );
  }
  const ids: (number | null)[] = [];
  let last: { slot: number; id: number } | null = null;
  for (const run of runs) {
    if (!run.manual && (yield* exec(FIND_RUN, name, run.slot)).rows.length > 0) {
      ids.push(null);
      continue;
    }
    // Asked for by a person: fired whatever the overlap rule.
    const id = yield* storeRun(dialect, name, schedule.overlap === "skip", run, now, true);
    ids.push(id);
    if (id !== null) last = { slot: run.slot, id };
  }
  if (last !== null) yield* exec(FIRED, name, last.slot, last.id, now);
  yield* exec(PRUNE_MANUAL_RUNS, name, now - RUNS_KEPT_MS);
  if (last !== null) yield* wakeAfterCommit();
  return ids;
}

/** Every stored schedule, by name. */
export function* listSchedules(): Script<StoredScheduleRow[]> {
  return (yield* exec<ScheduleTableRow>(LIST)).rows.map((row) => ({
    name: row.name,
    job: row.job,
    queue: row.queue,
    cron: row.cron,
    everyMs: numberOrNull(row.every_ms),
    timezone: row.timezone,
    missed: row.missed,
    maxCatchUp: Number(row.max_catch_up),
    overlap: row.overlap,
    jitterMs: Number(row.jitter_ms),
    nextSlot: numberOrNull(row.next_slot),
    paused: Number(row.paused) === 1,
    lastSlot: numberOrNull(row.last_slot),
    lastJobId: numberOrNull(row.last_job_id),
    lastFiredAt: numberOrNull(row.last_fired_at),
  }));
}

/** Pauses or resumes a schedule; whether it is stored. */
export function* setPaused(name: string, paused: boolean, now: number): Script<boolean> {
  return (yield* exec(SET_PAUSED, name, paused ? 1 : 0, now)).count === 1;
}

/**
 * Stores one job of schedule `name` and records the run; its id, or null
 * when the overlap rule or the job's own unique key kept it out. A `force`d
 * run (asked for by a person) is stored whatever the overlap rule; it takes
 * the overlap key only when no job holds it, so the job holding it keeps
 * the next slots out until it ends.
 */
function* storeRun(
  dialect: Dialect,
  name: string,
  overlapSkip: boolean,
  run: ScheduleRun,
  now: number,
  force = false,
): Script<number | null> {
  const key = overlapKey(name);
  let holdsOverlap = overlapSkip;
  if (overlapSkip && (yield* uniqueHolder(key, now)) !== null) {
    if (!force) return null;
    holdsOverlap = false;
  }
  const id = yield* insertJob(dialect, run.row, holdsOverlap);
  if (id === null) return null;
  if (holdsOverlap) yield* holdUnique(key, id, NEVER);
  yield* exec(RECORD_RUN, id, name, run.slot, run.manual ? 1 : 0, now);
  return id;
}

/** Inserts a fired job (through its unique or debounce key when it has one); its id, or null. */
function* insertJob(
  dialect: Dialect,
  row: FiredJobRow,
  holdsOverlap: boolean,
): Script<number | null> {
  const { key, ...plain } = row;
  if (key !== undefined) {
    const [pushed] = yield* insertKeyed(dialect, [{ ...plain, key }]);
    return pushed!.outcome === "stored" ? pushed!.id : null;
  }
  const keyed = holdsOverlap ? KEYED.untilSettled : KEYED.none;
  const [id] = yield* dialect.insertJobs([plain], { batchId: null, keyed });
  return id!;
}

/** The unique key of schedule `name`'s overlap rule. */
function overlapKey(name: string): string {
  return JSON.stringify({ schedule: name });
}

const timesCache = new Map<string, ScheduleTimes>();

/** The slots of a stored schedule (a cron or interval that no longer parses fires nothing). */
function timesOf(row: { cron: string | null; every_ms: number | null; timezone: string }) {
  const cacheKey = JSON.stringify([row.cron, row.every_ms, row.timezone]);
  let times = timesCache.get(cacheKey);
  if (times === undefined) {
    times = row.cron === null
      ? scheduleTimes({ everyMs: Number(row.every_ms) })
      : scheduleTimes({ cron: row.cron, timezone: row.timezone });
    if (timesCache.size > 1_000) timesCache.clear();
    timesCache.set(cacheKey, times);
  }
  return times;
}

function numberOrNull(value: number | null): number | null {
  return value === null ? null : Number(value);
}
