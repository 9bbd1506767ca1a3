/**
 * The chain and batch hooks of the Redis store's scripts, in a module of
 * their own: `hooks.ts` joins them while `chains_batches.ts`, which joins
 * `hooks.ts` into its scripts, may still be loading.
 *
 * @internal
 * @module
 */
import { FROM_PREVIOUS_OUTPUT } from "../rows/dispatch.ts";

/**
 * The chain and batch hooks (`t` is a time on the store's clock; `job` and
 * `failed` are rows as tables, fields as the SQL columns):
 * - `H.linksSettled(id, job, kind, output, t)`: `job` ended (`complete`,
 *   `fail` or `cancel`) at `t`: queue its chain's next link (`output` in
 *   place of a payload of `<previous output>`), or on a fail or cancel its
 *   chain's catch (a cancel also drops the links left); count it in its
 *   batch, queue the batch's catch at a failure (cancelling the batch
 *   unless it allows failures) and its then and finally once nothing is
 *   pending. Returns how many jobs it queued.
 * - `H.linksPutBack(id, job, t)`: `job` was released to run again: when it
 *   is a member of a cancelled batch it is removed instead and counted as
 *   skipped. Returns how many jobs it queued and whether it was removed.
 * - `H.linksRetried(id, failed, t)`: the failed job `failed` was moved back
 *   to its queue by a retry: its batch counts it pending again and is no
 *   longer finished. Returns nothing.
 * - `H.linksForgotten(id, failed)`: the failed job `failed` was deleted
 *   (forget, flush, prune): its chain drops the links it still holds.
 *   Returns nothing.
 * - `H.linksRemoved(id, job, t, why)`: `job`, not running, was deleted at
 *   `t`. `why` = `'clear'`: its batch counts it as skipped (finishing when
 *   nothing is pending) and its chain drops its links; `'cancel'`: as a
 *   settled cancel (its chain's catch is queued). Returns how many jobs it
 *   queued.
 * - `H.commit_batch(id)`, `H.undo_batch(id)`, `H.undo_chain(id)`: the
 *   transaction that inserted batch or chain `id` committed (the batch is
 *   listed) or threw (what the insert held is deleted; its jobs are the
 *   store's).
 */
export const CHAIN_BATCH_HOOKS = String.raw`
-- The area's own functions, out of the script's locals (Lua 5.1 allows 200).
local Links = {}

function Links.batchKey(id) return P .. ':batch:' .. id end
function Links.membersKey(id) return P .. ':batch:' .. id .. ':members' end
function Links.chainHeld(chain, role) return P .. ':held:c:' .. chain .. ':' .. role end
function Links.batchHeld(batch, role) return P .. ':held:b:' .. batch .. ':' .. role end

-- Holds waiting jobs (WaitingJobRow[] of the input) in a list, in order.
function Links.hold(key, rows)
  for _, row in ipairs(rows) do redis.call('RPUSH', key, cjson.encode(row)) end
end

-- Queues a held job (JSON) at t, with payload instead of its own when given, and the extra
-- fields given (a flow node's); its id.
function Links.queue(held, t, batchId, chainId, payload, extra)
  local row = cjson.decode(held)
  local queuedAt = back(t)
  local retryFor = opt(row.retryForMs)
  local expireIn = opt(row.expireInMs)
  return insertJob({
    queue = row.queue, name = row.name, payload = payload or row.payload, priority = row.priority,
    availableAt = queuedAt + row.delayMs, createdAt = queuedAt,
    retryUntil = retryFor == nil and NULL or queuedAt + retryFor, trace = row.trace or NULL,
    expireAt = expireIn == nil and NULL or queuedAt + expireIn,
  }, extra or {batch_id = batchId, chain_id = chainId})
end

-- Queues every job held in key, in order, and drops them: each fires at most once. How many.
function Links.release(key, t, batchId)
  local held = redis.call('LRANGE', key, 0, -1)
  for _, each in ipairs(held) do Links.queue(each, t, batchId, nil, nil) end
  redis.call('DEL', key)
  return #held
end

-- Drops what a chain still holds (its next links and its catch).
function Links.dropChain(chain)
  redis.call('DEL', Links.chainHeld(chain, 'next'), Links.chainHeld(chain, 'catch'))
end

-- Queues a chain's next link (taking output for a payload that asks for it), or, after its
-- last, drops the catch it no longer needs. How many it queued.
function Links.nextLink(chain, t, output)
  local held = redis.call('LPOP', Links.chainHeld(chain, 'next'))
  if not held then
    Links.dropChain(chain)
    return 0
  end
  local payload = nil
  if cjson.decode(held).payload == '${FROM_PREVIOUS_OUTPUT}' then
    payload = 'null'
    if output ~= nil and output ~= NULL then payload = output end
  end
  Links.queue(held, t, nil, chain, payload)
  return 1
end

-- Keeps a batch's place among the ended batches (by when nothing was left pending, cancelled or
-- not: a cancelled one with a member still running has yet to fire its finally) in step.
function Links.ended(batchId)
  local fields = redis.call('HMGET', Links.batchKey(batchId), 'finished_at', 'staged')
  if fields[2] then return end
  local finished = tonumber(fields[1])
  if finished == nil then redis.call('ZREM', P .. ':batches:ended', batchId)
  else redis.call('ZADD', P .. ':batches:ended', finished, batchId) end
end

-- Counts n members of a batch as skipped.
function Links.skip(batchId, n)
  local key = Links.batchKey(batchId)
  redis.call('HINCRBY', key, 'pending', -n)
  redis.call('HINCRBY', key, 'skipped', n)
end

-- Marks a batch finished once nothing is pending, and queues finally (and then, if every
-- member succeeded and it was not cancelled). How many it queued.
function Links.finishIfDone(batchId, t)
  local key = Links.batchKey(batchId)
  local fields = redis.call('HMGET', key, 'pending', 'finished_at', 'failed', 'skipped', 'cancelled_at')
  if fields[1] == false or tonumber(fields[1]) ~= 0 or fields[2] then return 0 end
  redis.call('HSET', key, 'finished_at', t)
  Links.ended(batchId)
  local queued = 0
  if tonumber(fields[3]) == 0 and tonumber(fields[4]) == 0 and not fields[5] then
    queued = Links.release(Links.batchHeld(batchId, 'then'), t, batchId)
  end
  return queued + Links.release(Links.batchHeld(batchId, 'finally'), t, batchId)
end

-- Cancels a batch: skips its members no worker holds and drops its then; nil if it was
-- cancelled or finished already (or is not there), else how many jobs it queued.
function Links.cancelBatch(batchId, t)
  local key = Links.batchKey(batchId)
  local fields = redis.call('HMGET', key, 'id', 'cancelled_at', 'finished_at', 'staged')
  if not fields[1] or fields[2] or fields[3] or fields[4] then return nil end
  redis.call('HSET', key, 'cancelled_at', t)
  Links.ended(batchId)
  redis.call('DEL', Links.batchHeld(batchId, 'then'))
  local skipped = 0
  for _, member in ipairs(redis.call('SMEMBERS', Links.membersKey(batchId))) do
    local job = readJob(member)
    if job == nil then
      redis.call('SREM', Links.membersKey(batchId), member)
    elseif job.token == nil then
      deleteJob(member, job)
      redis.call('SREM', Links.membersKey(batchId), member)
      skipped = skipped + 1
    end
  end
  if skipped > 0 then Links.skip(batchId, skipped) end
  return Links.finishIfDone(batchId, t)
end

-- Whether job is a counted member of a batch still stored; its batch id if so.
function Links.memberOf(id, job)
  local batchId = job.batch_id
  if batchId == nil or num(job, 'batch_member') ~= 1 then return nil end
  redis.call('SREM', Links.membersKey(batchId), id)
  if redis.call('EXISTS', Links.batchKey(batchId)) == 0 then return nil end
  return batchId
end

function H.linksSettled(id, job, kind, output, t)
  local queued = 0
  local chain = job.chain_id
  if chain ~= nil then
    if kind ~= 'complete' then
      queued = queued + Links.release(Links.chainHeld(chain, 'catch'), t, nil)
      if kind == 'cancel' then Links.dropChain(chain) end
    else
      queued = queued + Links.nextLink(chain, t, output)
    end
  end
  local batchId = Links.memberOf(id, job)
  if batchId == nil then return queued end
  local key = Links.batchKey(batchId)
  if kind == 'cancel' then
    Links.skip(batchId, 1)
  elseif kind == 'complete' then
    redis.call('HINCRBY', key, 'pending', -1)
  else
    redis.call('HINCRBY', key, 'pending', -1)
    redis.call('HINCRBY', key, 'failed', 1)
    queued = queued + Links.release(Links.batchHeld(batchId, 'catch'), t, batchId)
    if redis.call('HGET', key, 'allow_failures') == '0' then
      queued = queued + (Links.cancelBatch(batchId, t) or 0)
    end
  end
  return queued + Links.finishIfDone(batchId, t)
end

function H.linksPutBack(id, job, t)
  local batchId = job.batch_id
  if batchId == nil or num(job, 'batch_member') ~= 1 then return 0, false end
  if not redis.call('HGET', Links.batchKey(batchId), 'cancelled_at') then return 0, false end
  if redis.call('EXISTS', jobKey(id)) == 0 then return 0, false end
  deleteJob(id, job)
  redis.call('SREM', Links.membersKey(batchId), id)
  Links.skip(batchId, 1)
  return Links.finishIfDone(batchId, t), true
end

function H.linksRetried(id, failed, t)
  local batchId = failed.batch_id
  if batchId == nil or num(failed, 'batch_member') ~= 1 then return end
  local key = Links.batchKey(batchId)
  if redis.call('EXISTS', key) == 0 then return end
  redis.call('HINCRBY', key, 'pending', 1)
  redis.call('HINCRBY', key, 'failed', -1)
  redis.call('HDEL', key, 'finished_at')
  Links.ended(batchId)
  redis.call('SADD', Links.membersKey(batchId), id)
end

function H.linksForgotten(id, failed)
  if failed.chain_id ~= nil then Links.dropChain(failed.chain_id) end
end

function H.linksRemoved(id, job, t, why)
  if why == 'cancel' then return H.linksSettled(id, job, 'cancel', NULL, t) end
  if job.chain_id ~= nil then Links.dropChain(job.chain_id) end
  local batchId = Links.memberOf(id, job)
  if batchId == nil then return 0 end
  Links.skip(batchId, 1)
  return Links.finishIfDone(batchId, t)
end

function H.commit_batch(id)
  if redis.call('HDEL', Links.batchKey(id), 'staged') == 1 then
    redis.call('ZADD', P .. ':batches', id, id)
    Links.ended(id)
  end
end

function H.undo_batch(id)
  redis.call('DEL', Links.batchKey(id), Links.membersKey(id), Links.batchHeld(id, 'then'),
    Links.batchHeld(id, 'catch'), Links.batchHeld(id, 'finally'))
end

function H.undo_chain(id) Links.dropChain(id) end
`;
