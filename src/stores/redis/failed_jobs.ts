/**
 * Failed jobs and clearing queues on Redis: listing failed jobs, retrying
 * them (a job keeps its id and is in exactly one place throughout: its job
 * hash or its failed hash), forgetting, flushing and pruning them, and
 * clearing queues of their waiting, delayed and leased jobs.
 *
 * A failed job is `P:failed:<id>` (HASH, the SQL `failed_jobs` columns) and
 * its member in `P:failed` (ZSET, score the failure time on the store's
 * clock, member the zero-padded id), both written by the settle script.
 *
 * Bulk operations (`retry("all")`, `retry({ batchId })`, `flushFailed`,
 * `pruneFailed`, `clear`) never hold the server for long: each script call
 * handles at most {@linkcode CHUNK} jobs and the caller loops until nothing
 * is left. Each call is atomic; the whole is not, unlike the one SQL
 * transaction it mirrors: a job that fails while a retry of all runs may be
 * retried too. A clear deletes only the jobs whose ids its first call saw
 * given out (`P:seq`), as the SQL clear's one `DELETE` sees only the jobs
 * before it: what it queues itself (a batch's callbacks, a flow's nodes
 * that run on a failure) and what is dispatched while it runs stay.
 *
 * @internal
 * @module
 */
import type { FailedJob, Page, UnfinishedJobRow } from "../store.ts";
import { type FailedRow, toFailedJob } from "../sql/stored_rows.ts";
import type { RedisConnection } from "./connection.ts";
import { AREA_HOOKS } from "./hooks.ts";
import { type LuaScript, luaScript } from "./lua.ts";
import { OVERLAP_RETRIED } from "./schedule_runs.ts";
import { list } from "./script_replies.ts";

/**
 * Most jobs one call of a bulk script handles: a clear of 100,000 jobs took
 * 26.5 ms per call of 1,000 on a busy 2-core machine, its slowest 96 ms
 * (tests/faults/redis_faults_test.ts); 250 keeps each call well under 50 ms.
 */
const CHUNK = 250;

/** `failedRow(id)`: the failed job `id` as a FailedRow (times on the caller's clock), or nil. */
const FAILED_ROW = String.raw`
local function failedRow(id)
  local flat = redis.call('HGETALL', P .. ':failed:' .. id)
  if #flat == 0 then return nil end
  local f = hashTable(flat)
  return {
    id = tonumber(id), queue = f.queue, name = f.name, payload = f.payload, error = f.error,
    stack = f.stack or NULL, attempts = num(f, 'attempts'), crashes = num(f, 'crashes'),
    created_at = stored(tonumber(f.created_at)), failed_at = stored(tonumber(f.failed_at)),
    batch_id = tonumber(f.batch_id) or NULL, chain_id = tonumber(f.chain_id) or NULL,
  }
end
`;

/**
 * `moveBack(id)`: moves the failed job `id` back to its queue, due now on
 * the store's clock with fresh attempts, then hands it to its chain and
 * batch (its memos and mailbox stay: it resumes from them); whether it was
 * a failed job; a job a schedule fired takes its overlap rule back when
 * free (`overlapRetried`). `deleteFailed(id)`: deletes the failed job `id` with its
 * memos and mailbox, then drops the waiting links its chain can never run;
 * whether it was there.
 */
const FAILED_MOVES = String.raw`
-- Defined by the chains and batches area; kept for a branch that lacks them.
${OVERLAP_RETRIED}

local function failedKey(id) return P .. ':failed:' .. id end

local function moveBack(id)
  local flat = redis.call('HGETALL', failedKey(id))
  if #flat == 0 or redis.call('EXISTS', jobKey(id)) == 1 then return false end
  local failed = hashTable(flat)
  local fields = {'queue', failed.queue, 'name', failed.name, 'payload', failed.payload or '',
    'priority', failed.priority, 'available_at', NOW, 'created_at', failed.created_at,
    'attempts', 0, 'crashes', 0}
  for _, field in ipairs({'batch_id', 'batch_member', 'chain_id', 'flow_id', 'flow_parents',
    'trace', 'group_key', 'group_limit', 'group_ordered'}) do
    if failed[field] ~= nil then table.insert(fields, field); table.insert(fields, failed[field]) end
  end
  redis.call('HSET', jobKey(id), unpack(fields))
  placeUnleased(id, failed.queue, tonumber(failed.priority), NOW)
  redis.call('SADD', P .. ':queues', failed.queue)
  redis.call('DEL', failedKey(id))
  redis.call('ZREM', P .. ':failed', pad(id))
  H.linksRetried(id, failed, NOW)
  H.flowRetried(id, failed, NOW)
  overlapRetried(id)
  return true
end

local function deleteFailed(id)
  local flat = redis.call('HGETALL', failedKey(id))
  redis.call('ZREM', P .. ':failed', pad(id))
  if #flat == 0 then return false end
  redis.call('DEL', failedKey(id))
  dropSteps(id)
  H.linksForgotten(id, hashTable(flat))
  return true
end
`;

/** Input: `limit`, `offset`. Reply: FailedRow[], newest first (then highest id). */
const FAILED_PAGE = luaScript(
  "failed",
  "no-writes",
  FAILED_ROW,
  String.raw`
local rows = {}
local last = INPUT.offset + INPUT.limit - 1
for _, member in ipairs(redis.call('ZREVRANGE', P .. ':failed', INPUT.offset, last)) do
  local row = failedRow(tonumber(member))
  if row ~= nil then table.insert(rows, row) end
end
return cjson.encode(rows)
`,
);

/** Input: `id`. Reply: its FailedRow, or null. */
const FAILED_ONE = luaScript(
  "failedJob",
  "no-writes",
  FAILED_ROW,
  "return cjson.encode(failedRow(INPUT.id) or NULL)",
);

/** Input: `id`. Reply: `{payload, lastError}` of a job not yet finished, or null. */
const UNFINISHED_ONE = luaScript(
  "unfinishedJob",
  "no-writes",
  String.raw`
local job = readJob(INPUT.id)
-- A transaction's job is not there until it commits.
if job == nil or job.staged ~= nil then return cjson.encode(NULL) end
return cjson.encode({payload = job.payload, lastError = job.last_error or NULL})
`,
);

/**
 * Input: one of `ids` (at most {@linkcode CHUNK}), `all` (the first chunk
 * of failed jobs) or `batchId` with `cursor` (a `ZSCAN` cursor, "0" to
 * start). Reply: `{moved, more, cursor}`: the ids moved back, whether
 * another call may find more, and the cursor to go on with.
 */
const RETRY = luaScript(
  "retryFailed",
  "allow-oom",
  AREA_HOOKS,
  FAILED_MOVES,
  String.raw`
local moved = {}
local more = false
local cursor = '0'
if opt(INPUT.ids) ~= nil then
  for _, id in ipairs(INPUT.ids) do
    if moveBack(id) then table.insert(moved, id) end
  end
elseif opt(INPUT.batchId) ~= nil then
  local scan = redis.call('ZSCAN', P .. ':failed', INPUT.cursor, 'COUNT', ${CHUNK})
  cursor = scan[1]
  more = cursor ~= '0'
  for i = 1, #scan[2], 2 do
    local id = tonumber(scan[2][i])
    local links = redis.call('HMGET', failedKey(id), 'batch_id', 'batch_member')
    if tonumber(links[1]) == INPUT.batchId and links[2] == '1' and moveBack(id) then
      table.insert(moved, id)
    end
  end
else
  local members = redis.call('ZRANGE', P .. ':failed', 0, ${CHUNK - 1})
  for _, member in ipairs(members) do
    local id = tonumber(member)
    if moveBack(id) then table.insert(moved, id) end
  end
  -- Every member moved: more may follow; one that stayed would be looked at again forever.
  more = #moved == ${CHUNK}
end
if #moved > 0 then wake() end
return cjson.encode({moved = moved, more = more, cursor = cursor})
`,
);

/** Input: `id`. Reply: whether the failed job was there. */
const FORGET = luaScript(
  "forget",
  "allow-oom",
  AREA_HOOKS,
  FAILED_MOVES,
  "return cjson.encode(deleteFailed(INPUT.id))",
);

/**
 * Input: `before` (caller's clock) or null for every failed job. Reply:
 * `{deleted, more}`: how many of the first chunk that failed before
 * `before` were deleted, and whether another call may find more.
 */
const DELETE_FAILED = luaScript(
  "deleteFailed",
  "allow-oom",
  AREA_HOOKS,
  FAILED_MOVES,
  String.raw`
local members
if opt(INPUT.before) == nil then
  members = redis.call('ZRANGE', P .. ':failed', 0, ${CHUNK - 1})
else
  members = redis.call('ZRANGEBYSCORE', P .. ':failed', '-inf', '(' .. at(INPUT.before),
    'LIMIT', 0, ${CHUNK})
end
local deleted = 0
for _, member in ipairs(members) do
  if deleteFailed(tonumber(member)) then deleted = deleted + 1 end
end
return cjson.encode({deleted = deleted, more = #members == ${CHUNK}})
`,
);

/**
 * Input: `queue`, or null for every queue, and `upTo`: the highest job id to
 * delete, null in the first call (which takes the last id given out).
 * Deletes the first chunk of the queues' unleased (waiting or delayed) then
 * leased jobs with ids up to it, but for those running (left to finish, with
 * their keys and locks); batch jobs among them count as skipped, and
 * a batch left with nothing pending finishes now (store clock). Reply:
 * `{deleted, more, upTo}`.
 */
const CLEAR = luaScript(
  "clear",
  "allow-oom",
  AREA_HOOKS,
  String.raw`
-- Defined by the chains and batches area; kept for a branch that lacks it.

local upTo = opt(INPUT.upTo)
if upTo == nil then upTo = tonumber(redis.call('GET', P .. ':seq') or '0') end

-- Calls visit(member) for each member of the ZSET key in order, a page at a time, until it
-- returns true (found is full); whether one did.
local function walk(key, visit)
  local offset = 0
  while true do
    local members = redis.call('ZRANGE', key, offset, offset + ${CHUNK} - 1)
    for _, member in ipairs(members) do
      if visit(member) then return true end
    end
    if #members < ${CHUNK} then return false end
    offset = offset + #members
  end
end

-- Adds the jobs of the ZSET key with ids up to upTo to found ({id, from}), but those for which
-- keep(id) holds; whether it is full. Those left stay, at the head of a level or not: each call
-- walks past them.
local function collectFrom(key, found, keep)
  return walk(key, function(member)
    local id = tonumber(member)
    if id <= upTo and not (keep and keep(id)) then table.insert(found, {id = id, from = key}) end
    return #found >= ${CHUNK}
  end)
end

-- Whether job id runs (H.running): left to finish.
local function running(id)
  local job = readJob(id)
  return job ~= nil and H.running(job)
end

-- Adds the queue's jobs to found until it holds CHUNK; whether it does.
local function collect(queue, found)
  for _, priority in ipairs(redis.call('ZRANGE', queueKey(queue) .. ':lv', 0, -1)) do
    if collectFrom(levelKey(queue, priority), found) then return true end
  end
  if walk(groupsKey(queue), function(gid) return collectFrom(groupKey(queue, gid), found) end) then
    return true
  end
  return collectFrom(leasedKey(queue), found, running)
end

local queues
if opt(INPUT.queue) == nil then queues = redis.call('SMEMBERS', P .. ':queues')
else queues = {INPUT.queue} end
local found = {}
for _, queue in ipairs(queues) do
  if collect(queue, found) then break end
end

local removed = {}
for _, each in ipairs(found) do
  local job = readJob(each.id)
  if job == nil then
    redis.call('ZREM', each.from, pad(each.id))
  else
    deleteJob(each.id, job)
    table.insert(removed, {id = each.id, job = job})
  end
end
-- Chains and batches first, keys and locks last, as the settle does.
local queued = 0
for _, each in ipairs(removed) do
  queued = queued + H.linksRemoved(each.id, each.job, NOW, 'clear')
  queued = queued + H.flowSettled(each.id, each.job, 'clear', NULL, 'deleted by a clear of its queue', NOW)
end
-- An awaited job deleted: its awaiters (who watch the wake-up channel too) look again.
local awaitedEnded = false
for _, each in ipairs(removed) do
  H.keysRemoved(each.id, each.job)
  if each.job.awaited == '1' then awaitedEnded = true end
end
if queued > 0 or awaitedEnded then wake() end
return cjson.encode({deleted = #removed, more = #found == ${CHUNK}, upTo = upTo})
`,
);

/** Failed jobs, newest first. */
export async function failed(redis: RedisConnection, page: Page): Promise<FailedJob[]> {
  if (page.limit <= 0) return [];
  const rows = await redis.call<FailedRow[] | Record<string, never>>(FAILED_PAGE, {
    now: Date.now(),
    limit: page.limit,
    offset: page.offset,
  });
  return list(rows).map(toFailedJob);
}

/** One failed job, or null. */
export async function failedJob(redis: RedisConnection, id: number): Promise<FailedJob | null> {
  const row = await redis.call<FailedRow | null>(FAILED_ONE, { now: Date.now(), id });
  return row === null ? null : toFailedJob(row);
}

/** A job not yet finished: its stored payload and last error, or null. */
export function unfinishedJob(
  redis: RedisConnection,
  id: number,
): Promise<UnfinishedJobRow | null> {
  return redis.call<UnfinishedJobRow | null>(UNFINISHED_ONE, { now: Date.now(), id });
}

/** What one call of the retry script gives back. */
interface RetryChunk {
  readonly moved: number[] | Record<string, never>;
  readonly more: boolean;
  readonly cursor: string;
}

/**
 * Moves failed jobs back to their queues, due at `now` on the store's clock,
 * with fresh attempts; the ids moved (in the order given, or by id for
 * `"all"` and `{ batchId }`). Chunked: see the module doc.
 */
export async function retry(
  redis: RedisConnection,
  ids: readonly number[] | "all" | { readonly batchId: number },
  now: number,
): Promise<number[]> {
  const moved: number[] = [];
  if (Array.isArray(ids)) {
    for (let start = 0; start < ids.length; start += CHUNK) {
      const chunk = ids.slice(start, start + CHUNK);
      moved.push(...list((await redis.call<RetryChunk>(RETRY, { now, ids: chunk })).moved));
    }
    return moved;
  }
  const selection = ids === "all"
    ? { all: true }
    : { batchId: (ids as { batchId: number }).batchId };
  let cursor = "0";
  for (let more = true; more;) {
    const chunk = await redis.call<RetryChunk>(RETRY, { now, ...selection, cursor });
    moved.push(...list(chunk.moved));
    more = chunk.more;
    cursor = chunk.cursor;
  }
  return moved.sort((a, b) => a - b);
}

/** Deletes one failed job (and the waiting links of its chain); whether it existed. */
export function forget(redis: RedisConnection, id: number): Promise<boolean> {
  return redis.call<boolean>(FORGET, { now: Date.now(), id });
}

/** Deletes every failed job; how many. Chunked: see the module doc. */
export function flushFailed(redis: RedisConnection): Promise<number> {
  return deleteInChunks(redis, DELETE_FAILED, { now: Date.now(), before: null });
}

/**
 * Deletes failed jobs that failed before `before`, `now` being the caller's
 * now (a store on the server's clock cuts as long before its own now); how
 * many. Chunked: see the module doc.
 */
export function pruneFailed(redis: RedisConnection, before: number, now: number): Promise<number> {
  return deleteInChunks(redis, DELETE_FAILED, { now, before });
}

/**
 * Deletes the waiting, delayed and leased jobs of `queue`, or of every
 * queue; batch jobs among them count as skipped, and a batch left with
 * nothing pending finishes at `now`. How many. Chunked: see the module doc.
 */
export function clear(
  redis: RedisConnection,
  queue: string | undefined,
  now: number,
): Promise<number> {
  return deleteInChunks(redis, CLEAR, { now, queue: queue ?? null, upTo: null });
}

/** What one call of a deleting script gives back: `upTo`, where given, goes into the next call. */
interface DeletedChunk {
  readonly deleted: number;
  readonly more: boolean;
  readonly upTo?: number;
}

/** Calls a deleting script until it says nothing is left; how many it deleted in all. */
async function deleteInChunks(
  redis: RedisConnection,
  script: LuaScript,
  input: { readonly now: number } & Record<string, unknown>,
): Promise<number> {
  let deleted = 0;
  for (let more = true; more;) {
    const chunk = await redis.call<DeletedChunk>(script, input);
    deleted += chunk.deleted;
    more = chunk.more;
    if (chunk.upTo !== undefined) input = { ...input, upTo: chunk.upTo };
  }
  return deleted;
}
