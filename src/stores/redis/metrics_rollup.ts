/**
 * The metrics rollup on Redis: what a settle adds per (minute, queue, job
 * name), and the read of a range of minutes.
 *
 * Layout: `P:m:<minute>` HASH, one field per `queue US name US column`
 * (US the ASCII unit separator), read back from both ends (a queue name and
 * a column have no US; a job name may: names.ts), each a counter (`completed`, `failed`,
 * `retried`, `expired`, `runtime_ms`, `wait_ms`, `b0` … `b16` for the runtime
 * buckets); `P:m` ZSET of the minutes held (score and member the minute);
 * `P:m:<minute>:moved` HASH, the rows a move imported into the minute
 * (moving.ts), pruned with it; `P:m:<METRICS_CARRIED_MINUTE>` HASH (in
 * `P:m` with that score, a minute after every cutoff), the carried totals:
 * what a prune deletes is added to it, so the rollup's totals never fall.
 * Minutes are those of the settlements' times, on the caller's clock, as on
 * SQL. When a settle last pruned is kept by
 * each store's process (tick.ts), as on SQL; older code kept it for every
 * process in `P:m:pruned`, which this code neither reads nor writes.
 *
 * Without row locks there is no need for the SQL stores' shards: every
 * settle adds to the one hash of its minute.
 *
 * @internal
 * @module
 */
import { METRICS_CARRIED_MINUTE, type MetricsRow, RUNTIME_BUCKETS_MS } from "../store.ts";
import type { RedisConnection } from "./connection.ts";
import { luaScript } from "./lua.ts";
import { list } from "./script_replies.ts";

const MINUTE_MS = 60_000;

/** Most minutes one prune deletes: one a minute is written, so a prune keeps up. */
const PRUNE_MINUTES = 60;

/** What separates the parts of a rollup field. */
const SEPARATOR = "\x1f";

/**
 * The settle's metrics hooks, by call: `H.metricsBatch()` gives a batch,
 * `H.metrics(batch, s, job)` adds settlement `s` applied to `job` (its row
 * before the settle) to it, as `WorkerStore.settle` specifies, and
 * `H.flushMetrics(batch)` writes the batch's sums to the rollup (one
 * increment per field of a minute, whatever the number of settlements).
 * `H.pruneMetrics(before)` deletes up
 * to {@linkcode PRUNE_MINUTES} minutes before `before` (a settle passes the
 * time `METRICS_RETENTION_MS` before its latest settlement when its process
 * finds a prune due: tick.ts).
 */
export const METRICS_HOOK = String.raw`
local RUNTIME_BOUNDS = {${RUNTIME_BUCKETS_MS.join(", ")}}

function H.metricsBatch() return {minutes = {}, order = {}, latest = nil, texts = {}, names = {}} end

-- The start of (queue, name)'s hash fields, and its fields made so far (by what they count).
local function metricsRow(queue, name)
  return {row = queue .. '${SEPARATOR}' .. name .. '${SEPARATOR}', fields = {}}
end

-- The hash field of (queue, name) and what is counted (a column, or a runtime bucket's number),
-- each made once per batch.
local function metricsField(batch, queue, name, what)
  local made = madeOnce(batch.names, queue, name, metricsRow)
  local field = made.fields[what]
  if field == nil then
    if type(what) == 'number' then field = made.row .. 'b' .. what else field = made.row .. what end
    made.fields[what] = field
  end
  return field
end

-- Adds by to field of minute's hash in batch (float: HINCRBYFLOAT, else HINCRBY).
local function metricsAdd(batch, minute, field, by, float)
  local sums = batch.minutes[minute]
  if sums == nil then
    sums = {ints = {}, floats = {}, fields = {}}
    batch.minutes[minute] = sums
    table.insert(batch.order, minute)
  end
  local into = float and sums.floats or sums.ints
  if into[field] == nil then
    into[field] = 0
    table.insert(sums.fields, field)
  end
  into[field] = into[field] + by
end

function H.metrics(batch, s, job)
  if batch.latest == nil or s.at > batch.latest then batch.latest = s.at end
  if s.kind == 'complete' or s.kind == 'fail' or s.kind == 'release' or
      (s.kind == 'cancel' and s.expired == true) then
    local column = nil
    if s.kind == 'cancel' then column = 'expired'
    elseif s.kind == 'complete' then column = 'completed'
    elseif s.kind == 'fail' then column = 'failed'
    elseif opt(s.error) ~= nil and not s.refundAttempt then column = 'retried' end
    local duration = opt(s.durationMs)
    if column ~= nil or duration ~= nil then
      local start = math.floor(s.at / ${MINUTE_MS}) * ${MINUTE_MS}
      local minute = batch.texts[start]
      if minute == nil then
        minute = string.format('%d', start)
        batch.texts[start] = minute
      end
      if column ~= nil then metricsAdd(batch, minute, metricsField(batch, job.queue, job.name, column), 1, false) end
      if duration ~= nil then
        local bucket = #RUNTIME_BOUNDS
        for i, bound in ipairs(RUNTIME_BOUNDS) do
          if duration <= bound then bucket = i - 1; break end
        end
        metricsAdd(batch, minute, metricsField(batch, job.queue, job.name, 'runtime_ms'), duration, true)
        metricsAdd(batch, minute, metricsField(batch, job.queue, job.name, 'wait_ms'), num(job, 'waited_ms'), true)
        metricsAdd(batch, minute, metricsField(batch, job.queue, job.name, bucket), 1, false)
      end
    end
  end
end

function H.flushMetrics(batch)
  if batch.latest == nil then return end
  for _, minute in ipairs(batch.order) do
    local key = P .. ':m:' .. minute
    local sums = batch.minutes[minute]
    for _, field in ipairs(sums.fields) do
      if sums.ints[field] ~= nil then redis.call('HINCRBY', key, field, sums.ints[field]) end
      if sums.floats[field] ~= nil then redis.call('HINCRBYFLOAT', key, field, sums.floats[field]) end
    end
    redis.call('ZADD', P .. ':m', minute, minute)
  end
end

-- Deletes up to ${PRUNE_MINUTES} minutes before before, and adds their counters to the carried totals'
-- hash (minute ${METRICS_CARRIED_MINUTE}, after every cutoff), so that the rollup's totals never fall.
-- Reads and adds up first, writes last.
function H.pruneMetrics(before)
  local cutoff = string.format('%d', before)
  local minutes = redis.call('ZRANGEBYSCORE', P .. ':m', '-inf', '(' .. cutoff, 'LIMIT', 0, ${PRUNE_MINUTES})
  if #minutes == 0 then return end
  local ints, floats, fields = {}, {}, {}
  for _, old in ipairs(minutes) do
    local flat = redis.call('HGETALL', P .. ':m:' .. old)
    for i = 1, #flat, 2 do
      local field = flat[i]
      local column = string.match(field, '${SEPARATOR}([^${SEPARATOR}]*)$')
      local into = (column == 'runtime_ms' or column == 'wait_ms') and floats or ints
      if ints[field] == nil and floats[field] == nil then table.insert(fields, field) end
      into[field] = (into[field] or 0) + tonumber(flat[i + 1])
    end
  end
  local carried = P .. ':m:${METRICS_CARRIED_MINUTE}'
  for _, field in ipairs(fields) do
    if ints[field] ~= nil then redis.call('HINCRBY', carried, field, string.format('%d', ints[field])) end
    if floats[field] ~= nil then redis.call('HINCRBYFLOAT', carried, field, floats[field]) end
  end
  if #fields > 0 then redis.call('ZADD', P .. ':m', ${METRICS_CARRIED_MINUTE}, '${METRICS_CARRIED_MINUTE}') end
  for _, old in ipairs(minutes) do
    redis.call('DEL', P .. ':m:' .. old, P .. ':m:' .. old .. ':moved')
    redis.call('ZREM', P .. ':m', old)
  end
end
`;

/** Input: `since`, `until` (score bounds as strings). Reply: `[minute, HGETALL of its hash]` per minute held in the range. */
const METRICS = luaScript(
  "metrics",
  "no-writes",
  String.raw`
local minutes = {}
local range = redis.call('ZRANGEBYSCORE', P .. ':m', INPUT.since, '(' .. INPUT['until'])
for _, minute in ipairs(range) do
  table.insert(minutes, {tonumber(minute), redis.call('HGETALL', P .. ':m:' .. minute)})
end
return cjson.encode(minutes)
`,
);

/** The rollup's rows with `since <= minute < until`, by minute, then queue, then name. */
export async function metrics(
  redis: RedisConnection,
  since: number,
  until: number,
): Promise<MetricsRow[]> {
  const minutes = list(
    await redis.call<[number, string[] | Record<string, never>][]>(METRICS, {
      now: Date.now(),
      since: scoreBound(since),
      until: scoreBound(until),
    }),
  );
  const rows: MetricsRow[] = [];
  for (const [minute, flat] of minutes) {
    const byJob = new Map<
      string,
      { queue: string; name: string; counters: Record<string, number> }
    >();
    const fields = list(flat);
    for (let index = 0; index < fields.length; index += 2) {
      const { queue, name, column } = rollupField(fields[index]!);
      const key = `${queue}${SEPARATOR}${name}`;
      const row = byJob.get(key) ?? { queue, name, counters: {} };
      row.counters[column] = Number(fields[index + 1]);
      byJob.set(key, row);
    }
    const ofMinute = [...byJob.values()].map(({ queue, name, counters }): MetricsRow => {
      return {
        minute,
        queue,
        name,
        completed: counters.completed ?? 0,
        failed: counters.failed ?? 0,
        retried: counters.retried ?? 0,
        expired: counters.expired ?? 0,
        runtimeMs: counters.runtime_ms ?? 0,
        waitMs: counters.wait_ms ?? 0,
        runtimeBuckets: Array.from(
          { length: RUNTIME_BUCKETS_MS.length + 1 },
          (_, bucket) => counters[`b${bucket}`] ?? 0,
        ),
      };
    });
    ofMinute.sort((a, b) => byText(a.queue, b.queue) || byText(a.name, b.name));
    rows.push(...ofMinute);
  }
  return rows;
}

/**
 * A rollup field's parts: the queue up to the first separator, the column
 * after the last, the job name (which may hold the separator) between.
 */
function rollupField(field: string): { queue: string; name: string; column: string } {
  const first = field.indexOf(SEPARATOR);
  const last = field.lastIndexOf(SEPARATOR);
  return {
    queue: field.slice(0, first),
    name: field.slice(first + 1, last),
    column: field.slice(last + 1),
  };
}

/** A time as a bound on whole minutes (ms): `minute >= t` and `minute < t` hold as for the ceiling of `t`. */
function scoreBound(t: number): string {
  if (Number.isNaN(t)) throw new RangeError(`a metrics range must be numbers: got ${t}`);
  return Number.isFinite(t) ? String(Math.ceil(t)) : t > 0 ? "+inf" : "-inf";
}

function byText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
