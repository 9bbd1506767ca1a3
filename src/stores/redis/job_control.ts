/**
 * Job control on Redis: results and the kept history, awaiting, cancels,
 * pauses. The keys and the Lua other areas' scripts include (the history's
 * helpers, `H.paused`, `H.finished`) are in job_control_hooks.ts.
 *
 * A job in a transaction not yet committed (`staged`) is not there yet for
 * these reads and writes, as another connection sees nothing of an open SQL
 * transaction.
 *
 * @internal
 * @module
 */
import type {
  CancelOutcome,
  CancelRequest,
  CancelRequested,
  FinishedFilter,
  FinishedJob,
  JobResultRow,
  Lease,
  Page,
  PausedQueue,
} from "../store.ts";
import { type StoredFinished, toFinishedJob } from "../sql/stored_rows.ts";
import type { RedisConnection } from "./connection.ts";
import { HISTORY, PRUNE_CHUNK } from "./job_control_hooks.ts";
import { AREA_HOOKS } from "./hooks.ts";
import { luaScript } from "./lua.ts";
import { list } from "./script_replies.ts";

/** Most ids or leases one script reads; callers loop over chunks. */
const CHUNK = 1000;

/**
 * Input: `ids`. Reply: `{id, state, name, attempts, output, error,
 * cancel_requested}` for each id a failed job, a kept job or a job holds,
 * read from the first of them that does (as the SQL stores, whose last row
 * for an id wins).
 */
const RESULTS = luaScript(
  "results",
  "no-writes",
  String.raw`
local found = {}
for _, id in ipairs(INPUT.ids) do
  local row = nil
  local failed = redis.call('HMGET', P .. ':failed:' .. id, 'name', 'attempts', 'error')
  local kept = redis.call('HMGET', P .. ':done:' .. id, 'name', 'attempts', 'state', 'output', 'error')
  if failed[1] then
    row = {state = 'failed', name = failed[1], attempts = tonumber(failed[2]), output = NULL,
      error = failed[3] or NULL, cancel_requested = NULL}
  elseif kept[1] then
    row = {state = kept[3], name = kept[1], attempts = tonumber(kept[2]), output = kept[4] or NULL,
      error = kept[5] or NULL, cancel_requested = NULL}
  else
    local job = readJob(id)
    if job ~= nil and job.staged == nil then
      local running = job.token ~= nil and num(job, 'available_at') > NOW and job.claimed_ahead ~= '1'
      row = {state = running and 'running' or 'pending', name = job.name,
        attempts = startedAttempts(job), output = NULL, error = NULL,
        cancel_requested = job.cancel_requested or NULL}
    end
  end
  if row ~= nil then
    row.id = id
    table.insert(found, row)
  end
end
return cjson.encode(found)
`,
);

/** Input: `name`, `queue` (either may be null), `limit`, `offset`. Reply: kept rows, newest first. */
const FINISHED = luaScript(
  "finished",
  "no-writes",
  HISTORY,
  String.raw`
local rows = {}
for _, member in ipairs(History.page(opt(INPUT.queue), opt(INPUT.name), INPUT.offset, INPUT.limit)) do
  local row = History.row(tonumber(member))
  if row ~= nil then table.insert(rows, row) end
end
return cjson.encode(rows)
`,
);

/** Input: `id`. Reply: the kept row, or null. */
const FINISHED_JOB = luaScript(
  "finishedJob",
  "no-writes",
  HISTORY,
  "return cjson.encode(History.row(INPUT.id) or NULL)",
);

/**
 * Input: `before` (caller's clock). Deletes up to a chunk of kept jobs
 * finished before it, listing by listing; how many.
 */
const PRUNE_FINISHED = luaScript(
  "pruneFinished",
  "allow-oom",
  HISTORY,
  String.raw`
local before = '(' .. string.format('%d', at(INPUT.before))
local forgotten = 0
for _, listing in ipairs(History.listings(nil, nil)) do
  if forgotten >= ${PRUNE_CHUNK} then break end
  local old = redis.call('ZRANGEBYSCORE', listing, '-inf', before, 'LIMIT', 0, ${PRUNE_CHUNK} - forgotten)
  for _, member in ipairs(old) do forgotten = forgotten + History.forget(tonumber(member)) end
end
return cjson.encode(forgotten)
`,
);

/** Input: `id`. Marks the job awaited; whether it is stored. */
const MARK_AWAITED = luaScript(
  "markAwaited",
  "writes",
  String.raw`
local fields = redis.call('HMGET', jobKey(INPUT.id), 'queue', 'staged')
if not fields[1] or fields[2] then return cjson.encode(false) end
redis.call('HSET', jobKey(INPUT.id), 'awaited', 1)
return cjson.encode(true)
`,
);

/**
 * Input: `id`, `reason`, `keepUntil`. Reply: the CancelOutcome. A job not
 * started is recorded as cancelled (when kept), deleted, its chain, batch
 * and flow moved on and its keys released; a running one gets
 * `cancel_requested` (`H.cancel`, job_control_hooks.ts).
 */
const CANCEL = luaScript(
  "cancel",
  "allow-oom",
  AREA_HOOKS,
  String.raw`
local id = INPUT.id
local job = readJob(id)
if job == nil or job.staged ~= nil then
  if redis.call('EXISTS', P .. ':done:' .. id) == 1 or redis.call('EXISTS', P .. ':failed:' .. id) == 1 then
    return cjson.encode('finished')
  end
  return cjson.encode('not-found')
end
local outcome = H.cancel({{id = id, job = job, keepUntil = INPUT.keepUntil}}, INPUT.reason)[1]
wake()
return cjson.encode(outcome)
`,
);

/** Input: `leases` (tokens as strings). Reply: `{id, token, reason}` of those asked to cancel. */
const CANCELS_ASKED = luaScript(
  "cancelsAsked",
  "no-writes",
  String.raw`
local asked = {}
local seen = {}
for _, lease in ipairs(INPUT.leases) do
  local fields = redis.call('HMGET', jobKey(lease.id), 'token', 'cancel_requested')
  if fields[1] == lease.token and fields[2] and not seen[lease.id] then
    seen[lease.id] = true
    table.insert(asked, {id = lease.id, token = lease.token, reason = fields[2]})
  end
end
return cjson.encode(asked)
`,
);

/** Input: `queue`, `until` (caller's clock, or null), `reason`. Pauses the queue from now. */
const PAUSE = luaScript(
  "pause",
  "writes",
  String.raw`
local untilAt = at(opt(INPUT['until']))
local pause = {at = string.format('%d', NOW), reason = INPUT.reason}
if untilAt ~= nil then pause['until'] = string.format('%d', untilAt) end
redis.call('HSET', P .. ':pauses', INPUT.queue, cjson.encode(pause))
`,
);

/** Input: `queue`. Deletes its pause; whether it was in effect. Wakes idle workers. */
const RESUME = luaScript(
  "resume",
  "allow-oom",
  String.raw`
local pause = redis.call('HGET', P .. ':pauses', INPUT.queue)
local inEffect = false
if pause then
  local untilAt = tonumber(cjson.decode(pause)['until'])
  inEffect = untilAt == nil or untilAt > NOW
  redis.call('HDEL', P .. ':pauses', INPUT.queue)
end
wake()
return cjson.encode(inEffect)
`,
);

/** Reply: `{queue, at, until, reason}` of the pauses in effect (times as strings), by queue. */
const PAUSED = luaScript(
  "paused",
  "no-writes",
  String.raw`
local pauses = {}
local flat = redis.call('HGETALL', P .. ':pauses')
for i = 1, #flat, 2 do
  local pause = cjson.decode(flat[i + 1])
  local untilAt = tonumber(pause['until'])
  if untilAt == nil or untilAt > NOW then
    table.insert(pauses, {queue = flat[i], at = string.format('%d', tonumber(pause.at)),
      ['until'] = untilAt and string.format('%d', untilAt) or NULL,
      reason = pause.reason or NULL})
  end
end
table.sort(pauses, function(a, b) return a.queue < b.queue end)
return cjson.encode(pauses)
`,
);

/** A row of the results script. */
interface StoredResult {
  readonly id: number;
  readonly state: JobResultRow["state"];
  readonly name: string;
  readonly attempts: number;
  readonly output: string | null;
  readonly error: string | null;
  readonly cancel_requested: string | null;
}

/** Where job `id` stands at `now`, or null when nothing holds it. */
export async function result(
  redis: RedisConnection,
  id: number,
  now: number,
): Promise<JobResultRow | null> {
  return (await results(redis, [id], now)).get(id) ?? null;
}

/** Where each of the jobs `ids` stands at `now`, by id; a job nothing holds has no entry. */
export async function results(
  redis: RedisConnection,
  ids: readonly number[],
  now: number,
): Promise<Map<number, JobResultRow>> {
  const found = new Map<number, JobResultRow>();
  for (let start = 0; start < ids.length; start += CHUNK) {
    const chunk = ids.slice(start, start + CHUNK);
    const rows = await redis.call<StoredResult[] | Record<string, never>>(RESULTS, {
      now,
      ids: chunk,
    });
    for (const row of list(rows)) {
      found.set(row.id, {
        state: row.state,
        name: row.name,
        attempts: row.attempts,
        output: row.output,
        error: row.error,
        cancelRequested: row.cancel_requested,
      });
    }
  }
  return found;
}

/** Kept jobs matching `filter`, last finished first. */
export async function finished(
  redis: RedisConnection,
  filter: FinishedFilter,
  page: Page,
): Promise<FinishedJob[]> {
  const rows = await redis.call<StoredFinished[] | Record<string, never>>(FINISHED, {
    now: Date.now(),
    name: filter.name ?? null,
    queue: filter.queue ?? null,
    limit: page.limit,
    offset: page.offset,
  });
  return list(rows).map(toFinishedJob);
}

/** One kept job, or null. */
export async function finishedJob(redis: RedisConnection, id: number): Promise<FinishedJob | null> {
  const row = await redis.call<StoredFinished | null>(FINISHED_JOB, { now: Date.now(), id });
  return row === null ? null : toFinishedJob(row);
}

/** Deletes kept jobs that finished before `before`, `now` being the caller's now; how many. */
export async function pruneFinished(
  redis: RedisConnection,
  before: number,
  now: number,
): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await redis.call<number>(PRUNE_FINISHED, { now, before });
    total += deleted;
    if (deleted < PRUNE_CHUNK) return total;
  }
}

/** Marks job `id` awaited, so the settle that ends it publishes on the wake-up channel; whether it is stored. */
export function markAwaited(redis: RedisConnection, id: number): Promise<boolean> {
  return redis.call<boolean>(MARK_AWAITED, { now: Date.now(), id });
}

/**
 * Cancels a job: one not started (not leased, claimed ahead and not yet
 * started, or whose lease ran out) is deleted and kept as cancelled until
 * `keepUntil`; a running one gets its cancel asked, for its worker to see.
 */
export function cancel(redis: RedisConnection, request: CancelRequest): Promise<CancelOutcome> {
  return redis.call<CancelOutcome>(CANCEL, {
    now: request.now,
    id: request.id,
    reason: request.reason,
    keepUntil: request.keepUntil,
  });
}

/** The leases among `leases` whose job had a cancel asked, with the reason. */
export async function cancelsAsked(
  redis: RedisConnection,
  leases: readonly Lease[],
): Promise<CancelRequested[]> {
  const asked: CancelRequested[] = [];
  for (let start = 0; start < leases.length; start += CHUNK) {
    const chunk = leases.slice(start, start + CHUNK);
    const rows = await redis.call<
      { id: number; token: string; reason: string }[] | Record<string, never>
    >(CANCELS_ASKED, {
      now: Date.now(),
      leases: chunk.map((lease) => ({ id: lease.id, token: String(lease.token) })),
    });
    for (const row of list(rows)) {
      asked.push({ id: row.id, token: Number(row.token), reason: row.reason });
    }
  }
  return asked;
}

/** Pauses `queue` from `now` until `until` (null: until resumed). */
export async function pause(
  redis: RedisConnection,
  queue: string,
  now: number,
  until: number | null,
  reason: string | null,
): Promise<void> {
  await redis.call(PAUSE, { now, queue, until, reason });
}

/** Resumes `queue`; whether it was paused at `now`. Wakes idle workers. */
export function resume(redis: RedisConnection, queue: string, now: number): Promise<boolean> {
  return redis.call<boolean>(RESUME, { now, queue });
}

/** The queues paused at `now`, by name. */
export async function paused(redis: RedisConnection, now: number): Promise<PausedQueue[]> {
  const rows = await redis.call<
    | { queue: string; at: string; until: string | null; reason: string | null }[]
    | Record<
      string,
      never
    >
  >(PAUSED, { now });
  return list(rows).map((row) => ({
    queue: row.queue,
    pausedAt: new Date(Number(row.at)),
    until: row.until === null ? null : new Date(Number(row.until)),
    reason: row.reason,
  }));
}
