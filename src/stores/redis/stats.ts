/**
 * What the dashboard and stats read on Redis: counts per queue, due jobs per
 * name, running jobs and the listing of jobs not yet finished; and, from
 * their own modules, the metrics rollup and the workers' heartbeats.
 *
 * A job's state at `now` follows from where it is: in a level of its queue
 * (unleased), pending once due, else delayed; in the queue's leased set,
 * running until its lease ends, then pending (its worker died), and pending
 * while it is claimed ahead (its worker has not started it). Staged jobs
 * (a transaction not yet committed) are in neither and count nowhere.
 *
 * Counts are exact: `ZCOUNT` per level and expired leases, the live leases
 * read one by one (claimed ahead or not), in one script, then
 * the failed jobs counted per queue from their rows, {@linkcode FAILED_CHUNK}
 * per call until all are (the failed jobs are written and removed by other
 * areas' scripts, so no per-queue counter could be kept exact here; a job
 * failed or retried between two of those calls may count as of the later
 * one). The listings read job rows: each call looks at
 * {@linkcode SCAN_LIMIT} entries at most, the first of each queue's levels
 * and leased set in claim order (see each function). A job's progress comes
 * back as the text its hash holds (the exact double, as `redis.call` wrote
 * it): a Lua number would reach JavaScript through `cjson.encode`, which
 * keeps 14 significant digits (99.99999999999999 would read as 100).
 *
 * @internal
 * @module
 */
import type {
  JobFilter,
  JobList,
  Page,
  PendingByName,
  QueueCountsRow,
  RunningJobOnQueue,
} from "../store.ts";
import { type RunningRow, toRunningJob } from "../sql/stored_rows.ts";
import { type StoredListedJob, toListedJob } from "../sql/metrics_rollup.ts";
import type { RedisConnection } from "./connection.ts";
import { luaScript } from "./lua.ts";
import { list } from "./script_replies.ts";

export { metrics } from "./metrics_rollup.ts";
export { heartbeat, removeWorker, workers } from "./workers.ts";

/** Most job entries a listing (pending by name, running, jobs) reads in one call. */
const SCAN_LIMIT = 10_000;

/** Failed jobs counted per call of the failed-count script (the reads loop until all are). */
const FAILED_CHUNK = 1_000;

/**
 * `ranges(queue, state)`: where the jobs of `queue` in `state` (or every
 * state, for nil) are: `{key, min, max, state}` score ranges.
 */
const RANGES = String.raw`
local function ranges(queue, state)
  local out = {}
  local dueBy, later = NOW, '(' .. NOW
  if state == nil or state == 'pending' or state == 'delayed' then
    for _, level in ipairs(redis.call('ZRANGE', queueKey(queue) .. ':lv', 0, -1)) do
      local key = levelKey(queue, level)
      if state ~= 'delayed' then table.insert(out, {key = key, min = '-inf', max = dueBy, state = 'pending'}) end
      if state ~= 'pending' then table.insert(out, {key = key, min = later, max = '+inf', state = 'delayed'}) end
    end
    -- Grouped jobs wait in their groups, by due time as in a level.
    for _, gid in ipairs(redis.call('ZRANGE', groupsKey(queue), 0, -1)) do
      local key = groupKey(queue, gid)
      if state ~= 'delayed' then table.insert(out, {key = key, min = '-inf', max = dueBy, state = 'pending'}) end
      if state ~= 'pending' then table.insert(out, {key = key, min = later, max = '+inf', state = 'delayed'}) end
    end
  end
  if state ~= 'delayed' then
    local key = leasedKey(queue)
    if state ~= 'running' then table.insert(out, {key = key, min = '-inf', max = dueBy, state = 'pending'}) end
    -- A live lease: running, or pending while claimed ahead (see leasedEntries).
    table.insert(out, {key = key, min = later, max = '+inf', state = 'leased', want = state})
  end
  return out
end

-- Up to limit entries of range, each {id, state}, and how many it read. The jobs of a live
-- lease are read one by one: a job claimed ahead has not started, so it is pending, else it is
-- running; only those in range.want are kept (nil: both).
local function entries(range, limit)
  local ids = redis.call('ZRANGEBYSCORE', range.key, range.min, range.max, 'LIMIT', 0, limit)
  local out = {}
  for _, member in ipairs(ids) do
    local id = tonumber(member)
    local state = range.state
    if state == 'leased' then
      state = redis.call('HGET', jobKey(id), 'claimed_ahead') == '1' and 'pending' or 'running'
    end
    if range.want == nil or range.want == state then table.insert(out, {id = id, state = state}) end
  end
  return out, #ids
end

-- How many jobs range holds by state: pending, delayed, running.
local function countOf(range, counted)
  if range.state == 'leased' then
    for _, entry in ipairs((entries(range, -1))) do counted[entry.state] = counted[entry.state] + 1 end
  else
    counted[range.state] = counted[range.state] + redis.call('ZCOUNT', range.key, range.min, range.max)
  end
end

-- A field of HMGET's reply, JSON null for absent.
local function field(value)
  if value == false then return NULL end
  return value
end
`;

/** Reply: `[queue, pending, delayed, reserved]` per queue holding a job. */
const COUNTS = luaScript(
  "counts",
  "no-writes",
  RANGES,
  String.raw`
local rows = {}
for _, queue in ipairs(redis.call('SMEMBERS', P .. ':queues')) do
  local counted = {pending = 0, delayed = 0, running = 0}
  for _, range in ipairs(ranges(queue, nil)) do countOf(range, counted) end
  if counted.pending + counted.delayed + counted.running > 0 then
    table.insert(rows, {queue, counted.pending, counted.delayed, counted.running})
  end
end
return cjson.encode(rows)
`,
);

/**
 * Input: `after` (null, or `{score, member, floor}`: where the last call
 * stopped). Reply: `{queues, after}`, the failed jobs per queue among up to
 * {@linkcode FAILED_CHUNK} more in failure order, and where to go on from
 * (null at the end). A call goes on after the last entry the previous one
 * read (by its rank, found again; by its score when it went meanwhile) and
 * counts only entries past `floor`, the furthest counted: entries removed
 * between calls shift nothing twice.
 */
const FAILED_COUNTS = luaScript(
  "failedCounts",
  "no-writes",
  String.raw`
local key = P .. ':failed'
local after = opt(INPUT.after)
local start = 0
local floor = nil
if after ~= nil then
  floor = after.floor
  local rank = redis.call('ZRANK', key, after.member)
  if rank and tonumber(redis.call('ZSCORE', key, after.member)) == after.score then start = rank + 1
  else start = redis.call('ZCOUNT', key, '-inf', '(' .. after.score) end
end
local entries = redis.call('ZRANGE', key, start, start + ${FAILED_CHUNK} - 1, 'WITHSCORES')
local queues = {}
for i = 1, #entries, 2 do
  local member, score = entries[i], tonumber(entries[i + 1])
  if floor == nil or score > floor.score or (score == floor.score and member > floor.member) then
    local queue = redis.call('HGET', P .. ':failed:' .. tonumber(member), 'queue')
    if queue then queues[queue] = (queues[queue] or 0) + 1 end
    floor = {score = score, member = member}
  end
end
local reply = {queues = queues, after = NULL}
if #entries == ${FAILED_CHUNK} * 2 then
  reply.after = {member = entries[#entries - 1], score = tonumber(entries[#entries]), floor = floor}
end
return cjson.encode(reply)
`,
);

/**
 * Reply: `[queue, name, pending]` per queue and name with due jobs, from
 * up to {@linkcode SCAN_LIMIT} due jobs.
 */
const PENDING_BY_NAME = luaScript(
  "pendingByName",
  "no-writes",
  RANGES,
  String.raw`
local rows = {}
local left = ${SCAN_LIMIT}
for _, queue in ipairs(redis.call('SMEMBERS', P .. ':queues')) do
  local byName = {}
  for _, range in ipairs(ranges(queue, 'pending')) do
    if left <= 0 then break end
    -- Due, not claimed: a job claimed ahead is pending, but a worker holds it.
    if range.state ~= 'leased' then
      local ids = redis.call('ZRANGEBYSCORE', range.key, range.min, range.max, 'LIMIT', 0, left)
      left = left - #ids
      for _, member in ipairs(ids) do
        local name = redis.call('HGET', jobKey(tonumber(member)), 'name')
        if name then byName[name] = (byName[name] or 0) + 1 end
      end
    end
  end
  for name, pending in pairs(byName) do table.insert(rows, {queue, name, pending}) end
end
return cjson.encode(rows)
`,
);

/** Reply: RunningRow[] of up to {@linkcode SCAN_LIMIT} leased jobs whose lease has not ended. */
const RUNNING = luaScript(
  "running",
  "no-writes",
  RANGES,
  String.raw`
local rows = {}
local left = ${SCAN_LIMIT}
for _, queue in ipairs(redis.call('SMEMBERS', P .. ':queues')) do
  for _, range in ipairs(ranges(queue, 'running')) do
    if left <= 0 then break end
    local found, read = entries(range, left)
    left = left - read
    for _, entry in ipairs(found) do
      local id = entry.id
      local job = redis.call('HMGET', jobKey(id), 'name', 'attempts', 'progress', 'available_at', 'batch_id')
      if job[1] then
        table.insert(rows, {id = id, queue = queue, name = job[1], attempts = tonumber(job[2]),
          progress = field(job[3]), available_at = stored(tonumber(job[4])),
          batch_id = tonumber(field(job[5])) or NULL})
      end
    end
  end
end
return cjson.encode(rows)
`,
);

/**
 * Input: `filter` (a JobFilter), `limit`, `offset`. Reply: `{total, jobs}`
 * (StoredListedJob rows). Without a name filter `total` is exact
 * (`ZCOUNT`); the listing sorts by id the first {@linkcode SCAN_LIMIT}
 * matching entries it reads, each queue's levels and leased set in turn,
 * so past that many matches a page shows some of them, not the lowest ids,
 * and a name filter counts only the matches among them.
 */
const JOBS = luaScript(
  "jobs",
  "no-writes",
  RANGES,
  String.raw`
local filter = INPUT.filter
local state, name = opt(filter.state), opt(filter.name)
local queues = {opt(filter.queue)}
if queues[1] == nil then queues = redis.call('SMEMBERS', P .. ':queues') end
local found = {}
local total = 0
local left = ${SCAN_LIMIT}
for _, queue in ipairs(queues) do
  for _, range in ipairs(ranges(queue, state)) do
    if name == nil then
      if range.state == 'leased' then total = total + #(entries(range, -1))
      else total = total + redis.call('ZCOUNT', range.key, range.min, range.max) end
    end
    if left > 0 then
      local some, read = entries(range, left)
      left = left - read
      for _, entry in ipairs(some) do
        if name == nil or redis.call('HGET', jobKey(entry.id), 'name') == name then
          table.insert(found, entry)
        end
      end
    end
  end
end
if name ~= nil then total = #found end
table.sort(found, function(a, b) return a.id < b.id end)
local jobs = {}
for i = INPUT.offset + 1, math.min(#found, INPUT.offset + INPUT.limit) do
  local entry = found[i]
  local job = redis.call('HMGET', jobKey(entry.id), 'queue', 'name', 'priority', 'attempts',
    'available_at', 'created_at', 'progress', 'batch_id', 'last_error', 'token', 'claimed_ahead')
  local attempts = startedAttempts({attempts = job[4], token = job[10] or nil,
    claimed_ahead = job[11] or nil})
  table.insert(jobs, {id = entry.id, queue = job[1], name = job[2], state = entry.state,
    priority = tonumber(job[3]), attempts = attempts, available_at = stored(tonumber(job[5])),
    created_at = stored(tonumber(job[6])), progress = field(job[7]),
    batch_id = tonumber(field(job[8])) or NULL, last_error = field(job[9])})
end
return cjson.encode({total = total, jobs = jobs})
`,
);

/**
 * Jobs per queue by state at `now`, failed jobs included, by queue name:
 * one script for the jobs, then the failed jobs counted
 * {@linkcode FAILED_CHUNK} at a time.
 */
export async function counts(redis: RedisConnection, now: number): Promise<QueueCountsRow[]> {
  const byQueue = new Map<string, QueueCountsRow>();
  const rows = list(await redis.call<[string, number, number, number][]>(COUNTS, { now }));
  for (const [queue, pending, delayed, reserved] of rows) {
    byQueue.set(queue, { queue, pending, delayed, reserved, failed: 0 });
  }
  let after: unknown = null;
  do {
    const chunk: { queues: Record<string, number>; after: unknown } = await redis.call(
      FAILED_COUNTS,
      { now, after },
    );
    for (const [queue, failed] of Object.entries(chunk.queues)) {
      const counted = byQueue.get(queue) ??
        { queue, pending: 0, delayed: 0, reserved: 0, failed: 0 };
      byQueue.set(queue, { ...counted, failed: counted.failed + failed });
    }
    after = chunk.after;
  } while (after !== null);
  return [...byQueue.values()].sort((a, b) => byText(a.queue, b.queue));
}

/** Due jobs per queue and name at `now` (expired leases included), by queue then name. */
export async function pendingByName(
  redis: RedisConnection,
  now: number,
): Promise<PendingByName[]> {
  const rows = list(await redis.call<[string, string, number][]>(PENDING_BY_NAME, { now }));
  return rows
    .map(([queue, name, pending]) => ({ queue, name, pending }))
    .sort((a, b) => byText(a.queue, b.queue) || byText(a.name, b.name));
}

/** Jobs leased at `now`, with their progress, in id order. */
export async function running(redis: RedisConnection, now: number): Promise<RunningJobOnQueue[]> {
  const rows = list(await redis.call<WithProgressText<RunningRow>[]>(RUNNING, { now }));
  return rows.sort((a, b) => a.id - b.id).map((row) => toRunningJob(progressRead(row)));
}

/** A page of the jobs not yet finished that match `filter`, in id order, and how many match, at `now`. */
export async function jobs(
  redis: RedisConnection,
  filter: JobFilter,
  page: Page,
  now: number,
): Promise<JobList> {
  const reply = await redis.call<{ total: number; jobs: WithProgressText<StoredListedJob>[] }>(
    JOBS,
    {
      now,
      filter,
      limit: page.limit,
      offset: page.offset,
    },
  );
  return {
    total: reply.total,
    jobs: list(reply.jobs).map((row) => toListedJob(progressRead(row))),
  };
}

/** A row of a script's reply, its progress the text the job's hash holds. */
type WithProgressText<R extends { progress: number | null }> =
  & Omit<R, "progress">
  & { readonly progress: string | null };

/** A row with its progress read from the text: the double JavaScript wrote. */
function progressRead<R extends { progress: number | null }>(row: WithProgressText<R>): R {
  return { ...row, progress: row.progress === null ? null : Number(row.progress) } as R;
}

function byText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
