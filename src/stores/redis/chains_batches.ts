/**
 * Chains and batches on Redis: inserting them, moving them on as their jobs
 * settle (in the tick's scripts, through the hooks below), and keeping batch
 * counters exact. Follow-up jobs wait ("held") in lists of JSON
 * `WaitingJobRow`s; taking one out of its list is what makes it fire at most
 * once.
 *
 * Keys (`P` is the prefix):
 * - `P:seq:batch` STRING: the last batch id (a chain's id is its first job's).
 * - `P:batch:<id>` HASH: a batch, fields named as the SQL `batches` columns
 *   (a null column is an absent field), plus `staged` while the transaction
 *   that inserted it is open.
 * - `P:batches` ZSET: committed batches, score and member the id (newest
 *   first is highest first).
 * - `P:batches:ended` ZSET: batches that ended (nothing pending, cancelled
 *   or not), score `finished_at`, for `pruneBatches`. Older code scored a
 *   cancelled batch by `cancelled_at`, still pending or not; the prune moves
 *   such an entry to its place.
 * - `P:batch:<id>:members` SET: the ids of its counted members still stored
 *   as jobs (not settled, skipped or failed), for the skips of a cancel.
 * - `P:held:c:<chain>:next` and `:catch`, `P:held:b:<batch>:then`, `:catch`
 *   and `:finally` LISTs: the jobs each waits to queue.
 *
 * Job fields: `batch_id`, `batch_member` (1 for a counted member; a
 * callback carries `batch_id` only) and `chain_id`, as the SQL columns.
 *
 * @internal
 * @module
 */
import type {
  BatchRow,
  InsertedBatch,
  NewBatchRow,
  NewChainRow,
  NewJobRow,
  Page,
} from "../store.ts";
import { type StoredBatch, toBatchRow } from "../sql/stored_rows.ts";
import type { RedisConnection } from "./connection.ts";
import { AREA_HOOKS } from "./hooks.ts";
import { dispatch, dispatchScript } from "./dispatch_script.ts";
import { luaScript } from "./lua.ts";

/** Most batches one call of the prune script looks at; `pruneBatches` calls it again until done. */
const PRUNE_CHUNK = 1000;

/** Input: `chain` (a NewChainRow), `token`. Reply: the chain's id. */
const INSERT_CHAIN = dispatchScript(
  "insertChain",
  String.raw`
local chain = INPUT.chain
local id = insertJob(chain.first, nil)
redis.call('HSET', jobKey(id), 'chain_id', id)
Links.hold(Links.chainHeld(id, 'next'), chain.next)
Links.hold(Links.chainHeld(id, 'catch'), chain.onFailure)
if STAGE ~= nil then staged('chain:' .. id) end
reply = cjson.encode(id)
`,
);

/** Input: `batch` (a NewBatchRow), `token`. Reply: `{id, jobIds}`. */
const INSERT_BATCH = dispatchScript(
  "insertBatch",
  String.raw`
local batch = INPUT.batch
local id = redis.call('INCR', P .. ':seq:batch')
local key = Links.batchKey(id)
local createdAt = at(batch.createdAt)
redis.call('HSET', key, 'id', id, 'name', batch.name, 'total', #batch.jobs, 'pending', #batch.jobs,
  'failed', 0, 'skipped', 0, 'allow_failures', batch.allowFailures and 1 or 0, 'created_at', createdAt)
if STAGE ~= nil then
  redis.call('HSET', key, 'staged', STAGE)
  staged('batch:' .. id)
else
  redis.call('ZADD', P .. ':batches', id, id)
end
local jobIds = {}
for i, row in ipairs(batch.jobs) do
  jobIds[i] = insertJob(row, {batch_id = id, batch_member = 1})
  redis.call('SADD', Links.membersKey(id), jobIds[i])
end
Links.hold(Links.batchHeld(id, 'then'), batch['then'])
Links.hold(Links.batchHeld(id, 'catch'), batch['catch'])
Links.hold(Links.batchHeld(id, 'finally'), batch['finally'])
Links.finishIfDone(id, createdAt)
reply = cjson.encode({id = id, jobIds = jobIds})
`,
);

/** Input: `batchId`, `rows` (NewJobRow[]), `token`. Reply: the ids, or `{refused}` naming why. */
const ADD_TO_BATCH = dispatchScript(
  "addToBatch",
  String.raw`
local batchId = INPUT.batchId
local fields = redis.call('HMGET', Links.batchKey(batchId), 'id', 'cancelled_at', 'finished_at', 'staged')
local refusal = nil
if not fields[1] or fields[4] then refusal = 'no such batch'
elseif fields[2] then refusal = 'it was cancelled'
elseif fields[3] then refusal = 'it has finished' end
if refusal ~= nil then
  reply = cjson.encode({refused = 'Cannot add jobs to batch ' .. batchId .. ': ' .. refusal})
  storedNothing = true
else
  local ids = {}
  for i, row in ipairs(INPUT.rows) do
    ids[i] = insertJob(row, {batch_id = batchId, batch_member = 1})
    redis.call('SADD', Links.membersKey(batchId), ids[i])
  end
  redis.call('HINCRBY', Links.batchKey(batchId), 'total', #ids)
  redis.call('HINCRBY', Links.batchKey(batchId), 'pending', #ids)
  reply = cjson.encode(ids)
end
`,
);

/** A batch hash as a StoredBatch, its times moved back onto the caller's clock. */
const READ_BATCH = String.raw`
local function readBatch(id)
  local flat = redis.call('HGETALL', P .. ':batch:' .. id)
  if #flat == 0 then return nil end
  local b = hashTable(flat)
  if b.staged then return nil end
  return {
    id = tonumber(b.id), name = b.name, total = tonumber(b.total), pending = tonumber(b.pending),
    failed = tonumber(b.failed), skipped = tonumber(b.skipped),
    allow_failures = tonumber(b.allow_failures), created_at = stored(tonumber(b.created_at)),
    cancelled_at = stored(tonumber(b.cancelled_at)), finished_at = stored(tonumber(b.finished_at)),
  }
end
`;

/** Input: `id`. Reply: a StoredBatch or null. */
const BATCH = luaScript(
  "batch",
  "no-writes",
  READ_BATCH,
  "return cjson.encode(readBatch(INPUT.id) or NULL)",
);

/** Input: `limit`, `offset`. Reply: StoredBatch[], newest first. */
const BATCHES = luaScript(
  "batches",
  "no-writes",
  READ_BATCH,
  String.raw`
local rows = {}
local ids = redis.call('ZREVRANGE', P .. ':batches', INPUT.offset, INPUT.offset + INPUT.limit - 1)
for _, id in ipairs(ids) do
  local row = readBatch(id)
  if row ~= nil then table.insert(rows, row) end
end
return cjson.encode(rows)
`,
);

/** Input: `id`. Reply: whether the batch was cancelled now. */
const CANCEL_BATCH = luaScript(
  "cancelBatch",
  "allow-oom",
  AREA_HOOKS,
  String.raw`
local queued = Links.cancelBatch(INPUT.id, NOW)
if queued == nil then return cjson.encode(false) end
if queued > 0 then wake() end
return cjson.encode(true)
`,
);

/**
 * Input: `before`, `limit`. Deletes the batches that ended before `before`,
 * with what they still hold, among the `limit` first listed as ended before
 * it (an entry older code scored by its cancel is moved to its place
 * instead). Reply: `{pruned, looked}`, how many it deleted and looked at.
 */
const PRUNE_BATCHES = luaScript(
  "pruneBatches",
  "allow-oom",
  AREA_HOOKS,
  String.raw`
local ended = P .. ':batches:ended'
local cutoff = at(INPUT.before)
local ids = redis.call('ZRANGEBYSCORE', ended, '-inf', '(' .. cutoff, 'LIMIT', 0, INPUT.limit)
local pruned = 0
for _, id in ipairs(ids) do
  local finished = tonumber(redis.call('HGET', Links.batchKey(id), 'finished_at'))
  if finished ~= nil and finished < cutoff then
    H.undo_batch(id)
    redis.call('ZREM', ended, id)
    redis.call('ZREM', P .. ':batches', id)
    pruned = pruned + 1
  else
    Links.ended(id)
  end
end
return cjson.encode({pruned = pruned, looked = #ids})
`,
);

/** Inserts a chain: its first link queued now (its id is the chain's), the rest held. */
export function insertChain(
  redis: RedisConnection,
  chain: NewChainRow,
  stage?: string,
): Promise<number> {
  return dispatch<number>(redis, INSERT_CHAIN, { now: chain.first.createdAt, chain }, stage);
}

/** Inserts a batch with its jobs and callbacks; a batch without jobs finishes at once. */
export async function insertBatch(
  redis: RedisConnection,
  batch: NewBatchRow,
  stage?: string,
): Promise<InsertedBatch> {
  const inserted = await dispatch<{ id: number; jobIds: number[] }>(
    redis,
    INSERT_BATCH,
    { now: batch.createdAt, batch },
    stage,
  );
  return { id: inserted.id, jobIds: list(inserted.jobIds) };
}

/** Adds counted jobs to a running batch; throws naming why it cannot. */
export async function addToBatch(
  redis: RedisConnection,
  batchId: number,
  rows: readonly NewJobRow[],
): Promise<number[]> {
  const reply = await dispatch<number[] | { refused: string }>(redis, ADD_TO_BATCH, {
    now: rows[0]?.createdAt ?? Date.now(),
    batchId,
    rows,
  });
  if ("refused" in reply) throw new Error(reply.refused);
  return list(reply);
}

/** One batch, or null. */
export async function batch(redis: RedisConnection, id: number): Promise<BatchRow | null> {
  const row = await redis.call<StoredBatch | null>(BATCH, { now: Date.now(), id });
  return row === null ? null : toBatchRow(row);
}

/** Batches, newest first. */
export async function batches(redis: RedisConnection, page: Page): Promise<BatchRow[]> {
  if (page.limit <= 0) return [];
  const rows = await redis.call<StoredBatch[] | Record<string, never>>(BATCHES, {
    now: Date.now(),
    limit: page.limit,
    offset: page.offset,
  });
  return list(rows).map(toBatchRow);
}

/**
 * Cancels a running batch: skips its members no worker holds and drops its
 * then; false when it was cancelled or finished already, or is not there.
 */
export function cancelBatch(redis: RedisConnection, id: number, now: number): Promise<boolean> {
  return redis.call<boolean>(CANCEL_BATCH, { now, id });
}

/**
 * Deletes batches that ended (nothing pending, cancelled or not) before
 * `before` (`now` being the caller's now: on the store's clock, as long
 * before its now), and the callbacks they still hold; how many.
 */
export async function pruneBatches(
  redis: RedisConnection,
  before: number,
  now: number,
): Promise<number> {
  let pruned = 0;
  for (;;) {
    const reply = await redis.call<{ pruned: number; looked: number }>(PRUNE_BATCHES, {
      now,
      before,
      limit: PRUNE_CHUNK,
    });
    pruned += reply.pruned;
    if (reply.looked < PRUNE_CHUNK) return pruned;
  }
}

/** A JSON array from Lua: an empty Lua table is encoded as `{}`. */
function list<T>(value: T[] | Record<string, never>): T[] {
  return Array.isArray(value) ? value : [];
}
