/**
 * The key rules that other areas' scripts run (claims, settles, deletes,
 * transactions), as hooks of the `H` table; see keys.ts.
 *
 * Key layout (`P` is the prefix):
 * - `P:key:<key>` HASH: the job holding a unique or debounce key: `kind`
 *   (`unique` or `debounce`), `job_id`, `expires_at` (unique),
 *   `release_on_start` (1 or 0), `latest_at` (debounce, absent for no cap).
 *   A key whose job is gone, or past `expires_at`, holds nothing.
 * - `P:lock:<key>` ZSET: the overlap locks of a key, member
 *   `<job id>:<token>` (the attempt that took it), score when it expires.
 * - `P:rate:<key>` HASH: the current rate window: `window_start`, `starts`.
 *
 * Times are compared with the store's now (`NOW`); no key carries a TTL.
 *
 * @internal
 * @module
 */

/**
 * The key hooks, and the key rules other areas' scripts may call. A key
 * whose job an open transaction stored (`staged`) or debounced
 * (`debouncing` on the key) is that transaction's until it ends, as the
 * job's row lock is on SQL: a dispatch of the key from elsewhere waits
 * (`H.openHolder`), and a debounce inside a transaction changes nothing
 * others see before it commits (`H.debounce`):
 * - `H.started(id, job)`: `job` started (claimed to run, or its start
 *   confirmed): release the unique key it holds until it starts.
 * - `H.keysSettled(id, job, kind, token)`: a settlement of `kind` applied:
 *   release the middleware locks of the attempt (`job.locked`), and, unless
 *   `kind` is `release`, the key it holds until it settles.
 * - `H.keysRemoved(id, job)`: job `id` (its row `job` as it was) was
 *   deleted unrun (cleared, cancelled, or skipped by its batch's cancel):
 *   release every key and lock it holds, whatever attempt took them.
 * - `H.openHolder(key)`: the other open transaction (its stage) that
 *   holds `key` (a row's key), or nil: a dispatch of it then writes
 *   nothing and waits.
 * - `H.insertKeyed(row)`: inserts a KeyedJobRow of the input unless its
 *   key names a job that holds it; returns the id standing for the row and
 *   the outcome (`stored`, `duplicate` or `debounced`). Call it only for a
 *   row whose key no other open transaction holds (`H.openHolder`).
 * - `H.uniqueHolder(key, t)`: the id of the job holding unique key `key`
 *   at `t` (store clock), or nil.
 * - `H.holdKey(key, kind, id, expiresAt, releaseOnStart, latestAt)`: makes
 *   job `id` hold `key` (times on the store's clock, or nil); the caller
 *   sets the job's `keyed`.
 * - `H.releaseKey(key, id)`: releases `key` if job `id` holds it.
 * - `H.undo_key('<id>:<key>')`, `H.undo_debounced('<id>:<stage>')`,
 *   `H.commit_debounced(...)`: a transaction's key writes, at its end (a
 *   rolled back transaction releases the keys its jobs took; a committed one
 *   gives the jobs it debounced their new payload and due time; either way
 *   those jobs go back in claim order).
 *
 * A transaction's debounce of job `<id>` keeps what it wrote in
 * `P:stage:<stage>:debounced:<id>` (HASH: `payload`, `available_at`, `key`)
 * until the transaction ends; the job is out of claim order meanwhile.
 */
export const KEY_HOOKS = String.raw`
function H.uniqueHolder(key, t)
  local held = redis.call('HMGET', P .. ':key:' .. key, 'kind', 'job_id', 'expires_at')
  if held[1] ~= 'unique' or tonumber(held[3]) <= t then return nil end
  local job = redis.call('HMGET', jobKey(held[2]), 'queue', 'staged')
  -- A key whose job is gone is stale, and so is one whose job an abandoned transaction stored.
  if not job[1] or (job[2] and job[2] ~= STAGE) then return nil end
  return tonumber(held[2])
end

function H.openHolder(key)
  local held = redis.call('HMGET', P .. ':key:' .. key.key, 'job_id', 'debouncing')
  if not held[1] then return nil end
  if held[2] and held[2] ~= STAGE and stageOpen(held[2]) then return held[2] end
  local stage = redis.call('HGET', jobKey(held[1]), 'staged')
  if stage ~= false and stage ~= STAGE and stageOpen(stage) then return stage end
  return nil
end

function H.holdKey(key, kind, id, expiresAt, releaseOnStart, latestAt)
  local hash = P .. ':key:' .. key
  local fields = {'kind', kind, 'job_id', id, 'release_on_start', releaseOnStart and 1 or 0}
  if expiresAt ~= nil then table.insert(fields, 'expires_at'); table.insert(fields, expiresAt) end
  if latestAt ~= nil then table.insert(fields, 'latest_at'); table.insert(fields, latestAt) end
  redis.call('DEL', hash)
  redis.call('HSET', hash, unpack(fields))
  redis.call('HSET', jobKey(id), 'job_key', key)
  if STAGE ~= nil then staged('key:' .. id .. ':' .. key) end
end

function H.releaseKey(key, id)
  if key == nil then return end
  local hash = P .. ':key:' .. key
  if redis.call('HGET', hash, 'job_id') == tostring(id) then redis.call('DEL', hash) end
end

-- Gives waiting job id (its row job), which holds debounce key key, a debounced payload and due
-- time. Inside a transaction that did not store the job, only once it commits: until then the
-- job keeps what it has, out of claim order, and the key names the transaction (debouncing).
function H.debounce(id, job, key, payload, due)
  local hash = P .. ':key:' .. key
  if STAGE ~= nil and job.staged ~= STAGE then
    if redis.call('HGET', hash, 'debouncing') ~= STAGE then
      redis.call('HSET', hash, 'debouncing', STAGE)
      unplace(id, job.queue, job.priority, false, job)
      staged('debounced:' .. id .. ':' .. STAGE)
    end
    redis.call('HSET', P .. ':stage:' .. STAGE .. ':debounced:' .. id,
      'payload', payload, 'available_at', due, 'key', key)
    return
  end
  -- Taken from an abandoned transaction, if one still names the key.
  redis.call('HDEL', hash, 'debouncing')
  redis.call('HSET', jobKey(id), 'payload', payload, 'available_at', due)
  if job.staged == nil then placeUnleased(id, job.queue, job.priority, due) end
end

function H.insertKeyed(row)
  local key = row.key
  if key.kind == 'unique' then
    local holder = H.uniqueHolder(key.key, at(row.createdAt))
    -- A job that had a cancel asked ends cancelled: a dispatch taken for it would never run, so
    -- it holds the key for none (a schedule's overlap still waits for it to end).
    if holder ~= nil and redis.call('HEXISTS', jobKey(holder), 'cancel_requested') == 0 then
      return holder, 'duplicate'
    end
    local id = insertJob(row, {keyed = key.releaseOnStart and 2 or 1})
    H.holdKey(key.key, 'unique', id, at(key.expiresAt), key.releaseOnStart, nil)
    return id, 'stored'
  end
  local held = redis.call('HMGET', P .. ':key:' .. key.key, 'kind', 'job_id', 'latest_at')
  if held[1] == 'debounce' then
    local id = tonumber(held[2])
    local job = readJob(id)
    -- Not a job an abandoned transaction stored (it goes when that transaction's writes do), nor
    -- one that had a cancel asked (it ends cancelled), nor one whose durable steps recorded
    -- something (a sleep or a wait gave its attempt back, but it started, on its payload).
    if job ~= nil and job.token == nil and num(job, 'attempts') == 0
        and job.cancel_requested == nil and (job.staged == nil or job.staged == STAGE)
        and redis.call('EXISTS', stepsKey(id)) == 0 then
      local due = at(row.availableAt)
      local latest = tonumber(held[3])
      if latest ~= nil and latest < due then due = latest end
      H.debounce(id, job, key.key, row.payload, due)
      return id, 'debounced'
    end
  end
  local id = insertJob(row, {keyed = 1})
  H.holdKey(key.key, 'debounce', id, nil, false, at(key.latestAt))
  return id, 'stored'
end

-- The names of the overlap locks job took (its lock_keys).
function H.lockKeys(job)
  if job.lock_keys == nil then return {} end
  return cjson.decode(job.lock_keys)
end

function H.started(id, job)
  if job.keyed == '2' then H.releaseKey(job.job_key, id) end
end

function H.keysSettled(id, job, kind, token)
  if job.locked == '1' then
    for _, key in ipairs(H.lockKeys(job)) do
      redis.call('ZREM', P .. ':lock:' .. key, id .. ':' .. token)
    end
  end
  if kind ~= 'release' and job.keyed == '1' then H.releaseKey(job.job_key, id) end
end

function H.keysRemoved(id, job)
  if num(job, 'keyed') ~= 0 then H.releaseKey(job.job_key, id) end
  local mine = id .. ':'
  for _, key in ipairs(H.lockKeys(job)) do
    local locks = P .. ':lock:' .. key
    for _, member in ipairs(redis.call('ZRANGE', locks, 0, -1)) do
      if string.sub(member, 1, #mine) == mine then redis.call('ZREM', locks, member) end
    end
  end
end

function H.undo_key(entry)
  local id, key = string.match(entry, '^(%d+):(.*)$')
  H.releaseKey(key, id)
end

-- Ends a transaction's debounce of a job (entry '<id>:<stage>'): committed, the job takes what
-- it wrote. Either way a job still waiting goes back in claim order, unless another transaction
-- debounces it now (this one was abandoned, and the key taken over).
local function endDebounce(entry, commit)
  local id, stage = string.match(entry, '^(%d+):(.*)$')
  local written = P .. ':stage:' .. stage .. ':debounced:' .. id
  local new = redis.call('HMGET', written, 'payload', 'available_at', 'key')
  redis.call('DEL', written)
  local job = readJob(id)
  if not new[3] or job == nil or job.token ~= nil or job.staged ~= nil then return end
  local hash = P .. ':key:' .. new[3]
  local held = redis.call('HMGET', hash, 'job_id', 'debouncing')
  local mine = held[1] == id and held[2] == stage
  if held[1] == id and held[2] and not mine then return end
  local due = tonumber(job.available_at)
  if mine then
    redis.call('HDEL', hash, 'debouncing')
    if commit then
      due = tonumber(new[2])
      redis.call('HSET', jobKey(id), 'payload', new[1], 'available_at', due)
    end
  end
  placeUnleased(tonumber(id), job.queue, job.priority, due, false, job)
end

function H.undo_debounced(entry) endDebounce(entry, false) end

function H.commit_debounced(entry) endDebounce(entry, true) end
`;
