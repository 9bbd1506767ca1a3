/**
 * The Lua of job control that other areas' scripts include: the kept
 * history's helpers (`History`) and the job-control hooks (`H.paused`,
 * `H.finished`). Apart from job_control.ts so that hooks.ts, which joins
 * every area's hooks, does not load the scripts that include them.
 *
 * Keys (`P` is the prefix):
 * - `P:done:<id>` HASH: a kept finished job, fields named as the SQL
 *   `completed_jobs` columns (id queue name state payload output error
 *   attempts created_at started_at finished_at duration_ms keep_until); a
 *   job kept by a settle or a cancel keeps its row's other fields too (its
 *   hash is renamed, not copied), which no reader names.
 * - `P:done:qn:<pair>` ZSET (layout 3): the kept jobs of one queue and job
 *   name, `<pair>` being `<queue's length>:<queue>:<name>`, by
 *   `finished_at`, member the padded id (the newest first, equal times by
 *   id, read in reverse); `P:done:pairs` SET: every pair with kept jobs.
 *   The listings of every job, of a queue and of a name are merged from
 *   the pairs' at read time (layout 2 also kept `P:done`, `P:done:q:<queue>`
 *   and `P:done:n:<name>`, written for every kept job; `migrate.ts`
 *   converts them).
 * - `P:done:keep` ZSET: the kept jobs by `keep_until`, for pruning (and
 *   counting). When a settle last pruned it is kept by each store's process
 *   (tick.ts); older code kept it for every process in `P:done:pruned`
 *   STRING, which this code neither reads nor writes.
 * - `P:pauses` HASH: queue → JSON `{at, until, reason}`, times on the
 *   store's clock as decimal strings (Lua's JSON numbers keep 14 digits).
 * - No channel of its own for awaited jobs: a settle that ends a job
 *   `markAwaited` marked (its row's `awaited` field; completed, failed or
 *   cancelled) publishes on the wake-up channel `P:wake` (lua.ts), as
 *   `cancel` does for every job it cancels and `clear` when it deleted an
 *   awaited job (failed_jobs.ts); awaiters watch that channel and
 *   also read their results once a second, since pub/sub may lose a message.
 *
 * @internal
 * @module
 */

/** Most kept jobs one script prunes. */
export const PRUNE_CHUNK = 1000;

/** Most members a merged page of the history reads from one listing at a time. */
export const PAGE_CHUNK = 1000;

/**
 * The kept history's helpers, a table `History`:
 * - `History.listing(queue, name)`: the ZSET listing the kept jobs of
 *   `queue` and `name`; `History.page(queue, name, offset, limit)` up to
 *   `limit` padded ids of kept jobs of `queue` and `name` (nil: any) after
 *   the first `offset`, newest first: one listing's range, or the pairs'
 *   listings merged, each read {@linkcode PAGE_CHUNK} at a time (the cost
 *   grows with `offset + limit` and the number of pairs, never with the
 *   history's length); `History.listings(queue, name)` the listings a
 *   page of them merges.
 * - `History.batch()`, `History.add(batch, id, job, fields)` and
 *   `History.keep(batch)`: keep the finished jobs of one call, written
 *   together: `History.add` takes job `id` (`job` its row as read, still
 *   stored) with `fields` giving `state`, `output`, `error`, `started_at`,
 *   `finished_at`, `duration_ms` and `keep_until` (times on the store's
 *   clock); `History.keep` renames each job's hash to its kept record
 *   (`P:done:<id>`, replacing an earlier record of `id`) and writes those
 *   fields and `id` over it, then adds every job to its listings, one
 *   `ZADD` per listing for the whole call. A job whose claim never started
 *   its handler (`fields.refund` true: it expired, a cancel asked during an
 *   earlier attempt was seen by this claim, or a cancel removed it held
 *   ahead) has the attempt its claim counted taken off. The kept record keeps the job's other fields (its
 *   lease, priority, crashes, …); every reader of `P:done:<id>` names the
 *   fields it reads.
 * - `History.record(id, job, fields)`: the same for one job.
 * - `History.list(id, queue, name, finishedAt, keepUntil)`: puts a kept job
 *   in every listing of it, by `finishedAt`, and in the prune's index by
 *   `keepUntil` (its record written apart: `History.record`, a move's import).
 * - `History.forget(id)`: deletes a kept job (and its memos and mailbox,
 *   `dropSteps`, when it is no job either); 1 if it was kept, else 0.
 * - `History.row(id)`: a kept job as a reply row (times given back), or nil.
 * - `History.pruneExpired()`: forgets up to {@linkcode PRUNE_CHUNK} kept
 *   jobs whose `keep_until` passed; whether it left some (a full chunk: the
 *   caller's next settle goes on).
 */
export const HISTORY = String.raw`
local History = {}

function History.pair(queue, name) return #queue .. ':' .. queue .. ':' .. name end

function History.listing(queue, name) return P .. ':done:qn:' .. History.pair(queue, name) end

function History.listings(queue, name)
  if queue ~= nil and name ~= nil then return {History.listing(queue, name)} end
  local listings = {}
  for _, pair in ipairs(redis.call('SMEMBERS', P .. ':done:pairs')) do
    local length, rest = string.match(pair, '^(%d+):(.*)$')
    local q = string.sub(rest, 1, tonumber(length))
    if (queue == nil or q == queue) and (name == nil or string.sub(rest, #q + 2) == name) then
      table.insert(listings, P .. ':done:qn:' .. pair)
    end
  end
  return listings
end

function History.page(queue, name, offset, limit)
  local listings = History.listings(queue, name)
  if limit <= 0 or #listings == 0 then return {} end
  if #listings == 1 then return redis.call('ZREVRANGE', listings[1], offset, offset + limit - 1) end
  -- Merged newest first: each listing read a chunk at a time, the newest of their heads taken
  -- (equal times by the padded id, the highest first, as ZREVRANGE orders one listing).
  local chunk = math.min(offset + limit, ${PAGE_CHUNK})
  local heads = {}
  for i, key in ipairs(listings) do heads[i] = {key = key, flat = {}, at = 1, read = 0, ended = false} end
  local function fill(h)
    if h.at <= #h.flat or h.ended then return end
    h.flat = redis.call('ZREVRANGE', h.key, h.read, h.read + chunk - 1, 'WITHSCORES')
    h.at = 1
    h.read = h.read + #h.flat / 2
    if #h.flat < chunk * 2 then h.ended = true end
  end
  local page, skipped = {}, 0
  while #page < limit do
    local best, bestScore = nil, nil
    for _, h in ipairs(heads) do
      fill(h)
      if h.at <= #h.flat then
        local score = tonumber(h.flat[h.at + 1])
        if best == nil or score > bestScore or (score == bestScore and h.flat[h.at] > best.flat[best.at]) then
          best, bestScore = h, score
        end
      end
    end
    if best == nil then break end
    if skipped < offset then skipped = skipped + 1 else table.insert(page, best.flat[best.at]) end
    best.at = best.at + 2
  end
  return page
end

function History.forget(id)
  local key = P .. ':done:' .. id
  local fields = redis.call('HMGET', key, 'queue', 'name')
  if not fields[1] then return 0 end
  local listing = History.listing(fields[1], fields[2])
  redis.call('ZREM', listing, pad(id))
  if redis.call('EXISTS', listing) == 0 then
    redis.call('SREM', P .. ':done:pairs', History.pair(fields[1], fields[2]))
  end
  redis.call('ZREM', P .. ':done:keep', pad(id))
  redis.call('DEL', key)
  dropSteps(id)
  return 1
end

function History.batch()
  return {ids = {}, texts = {}, rows = {}, listings = {}, pairs = {}, keep = {}, pairOf = {}}
end

function History.add(batch, id, job, fields)
  -- Each number formatted once (as redis.call formats one), for the record and its listings.
  local idText = tostring(id)
  local finishedAt = string.format('%.17g', fields.finished_at)
  local keepUntil = string.format('%.17g', fields.keep_until)
  table.insert(batch.ids, id)
  table.insert(batch.texts, idText)
  local row = {'id', idText, 'state', fields.state, 'finished_at', finishedAt, 'keep_until', keepUntil}
  if fields.refund then
    table.insert(row, 'attempts'); table.insert(row, num(job, 'attempts') - 1)
  end
  -- Field by field, not through a list made for each job.
  local n = #row
  if fields.output ~= nil then row[n + 1] = 'output'; row[n + 2] = fields.output; n = n + 2 end
  if fields.error ~= nil then row[n + 1] = 'error'; row[n + 2] = fields.error; n = n + 2 end
  if fields.started_at ~= nil then row[n + 1] = 'started_at'; row[n + 2] = fields.started_at; n = n + 2 end
  if fields.duration_ms ~= nil then row[n + 1] = 'duration_ms'; row[n + 2] = fields.duration_ms end
  batch.rows[id] = row
  local member = pad(id)
  local pair = madeOnce(batch.pairOf, job.queue, job.name, History.pair)
  local members = batch.listings[pair]
  if members == nil then
    members = {}
    batch.listings[pair] = members
    table.insert(batch.pairs, pair)
  end
  table.insert(members, finishedAt); table.insert(members, member)
  table.insert(batch.keep, keepUntil); table.insert(batch.keep, member)
end

function History.keep(batch)
  if #batch.ids == 0 then return end
  local kept = {}
  for i, idText in ipairs(batch.texts) do kept[i] = P .. ':done:' .. idText end
  -- An earlier record of an id (rare): forgotten first, out of its listings.
  if callInChunks('EXISTS', nil, kept) > 0 then
    for _, id in ipairs(batch.ids) do History.forget(id) end
  end
  for i, id in ipairs(batch.ids) do
    redis.call('RENAME', jobKey(batch.texts[i]), kept[i])
    redis.call('HSET', kept[i], unpack(batch.rows[id]))
  end
  for pair, members in pairs(batch.listings) do callInChunks('ZADD', P .. ':done:qn:' .. pair, members) end
  callInChunks('SADD', P .. ':done:pairs', batch.pairs)
  callInChunks('ZADD', P .. ':done:keep', batch.keep)
end

function History.record(id, job, fields)
  local batch = History.batch()
  History.add(batch, id, job, fields)
  History.keep(batch)
end

function History.list(id, queue, name, finishedAt, keepUntil)
  local member = pad(id)
  redis.call('ZADD', History.listing(queue, name), finishedAt, member)
  redis.call('SADD', P .. ':done:pairs', History.pair(queue, name))
  redis.call('ZADD', P .. ':done:keep', keepUntil, member)
end

function History.row(id)
  local flat = redis.call('HGETALL', P .. ':done:' .. id)
  if #flat == 0 then return nil end
  local kept = hashTable(flat)
  return {id = tonumber(kept.id), queue = kept.queue, name = kept.name, state = kept.state,
    payload = kept.payload, output = kept.output or NULL, error = kept.error or NULL,
    attempts = tonumber(kept.attempts), created_at = stored(tonumber(kept.created_at)),
    started_at = stored(tonumber(kept.started_at)), finished_at = stored(tonumber(kept.finished_at)),
    duration_ms = tonumber(kept.duration_ms) or NULL}
end

function History.pruneExpired()
  local expired = redis.call('ZRANGEBYSCORE', P .. ':done:keep', '-inf', NOW, 'LIMIT', 0, ${PRUNE_CHUNK})
  for _, member in ipairs(expired) do History.forget(tonumber(member)) end
  return #expired == ${PRUNE_CHUNK}
end
`;

/**
 * The tick's job-control hooks (with {@linkcode HISTORY} before them):
 * - `H.paused(queue)`: whether claims (and start confirmations) skip
 *   `queue` at `NOW`: it has a pause whose `until` is absent or later.
 * - `H.finished(id, job, s, kept)`: a `complete` or `cancel` settlement
 *   applied to `job`, its row still stored: adds it to `kept` (a
 *   `History.batch()`, whose `History.keep` then moves the row into the
 *   history) when `s.keepUntil` is after `s.at` (with its output or reason,
 *   attempts and times); whether it did. A
 *   settle its process finds a prune due in prunes expired kept jobs once
 *   after its settlements (`History.pruneExpired`, tick.ts).
 * - `H.running(job)`: whether `job` (a stored row) runs: leased, its lease
 *   not run out, and started (a job held ahead has not).
 * - `H.cancel(jobs, reason)`: the rule of a cancel, for each of `jobs`
 *   (`{id, job, keepUntil}`, `job` the stored row, committed): one running
 *   (leased, its lease not run out, and started: a job claimed ahead has
 *   not) gets its cancel asked, `'cancelling'`; any other is kept as
 *   cancelled until `keepUntil` (the caller's clock; nothing kept at or
 *   before `INPUT.now`) and deleted, its chain and batch moved on and its
 *   keys released, `'cancelled'`, and then the flows of those that are
 *   nodes moved on, each once (`H.flowsCancelled`). Returns each one's
 *   outcome, in order. The caller wakes the workers (`wake()`) after it.
 */
export const JOB_CONTROL_HOOKS: string = HISTORY + String.raw`
function H.paused(queue)
  local pause = redis.call('HGET', P .. ':pauses', queue)
  if not pause then return false end
  local untilAt = tonumber(cjson.decode(pause)['until'])
  return untilAt == nil or untilAt > NOW
end

function H.running(job)
  return job.token ~= nil and num(job, 'available_at') > NOW and job.claimed_ahead ~= '1'
end

function H.cancel(jobs, reason)
  local outcomes, removed = {}, {}
  for i, entry in ipairs(jobs) do
    local id, job = entry.id, entry.job
    if H.running(job) then
      redis.call('HSET', jobKey(id), 'cancel_requested', reason)
      outcomes[i] = 'cancelling'
    else
      if entry.keepUntil > INPUT.now then
        -- A job held ahead never started: the attempt its claim counted is not one.
        History.record(id, job, {state = 'cancelled', error = reason, finished_at = NOW,
          keep_until = at(entry.keepUntil), refund = startedAttempts(job) < num(job, 'attempts')})
      end
      deleteJob(id, job)
      H.linksRemoved(id, job, NOW, 'cancel')
      H.keysRemoved(id, job)
      table.insert(removed, entry)
      outcomes[i] = 'cancelled'
    end
  end
  H.flowsCancelled(removed, reason, NOW)
  return outcomes
end

function H.finished(id, job, s, kept)
  local keepUntil = opt(s.keepUntil)
  if keepUntil ~= nil and keepUntil > s.at then
    local state, output, err, durationMs, startedAt = nil, nil, nil, nil, nil
    if s.kind == 'complete' then
      state = 'completed'
      output = opt(s.output)
    else
      state = s.expired == true and 'expired' or 'cancelled'
      err = s.reason
    end
    local duration = opt(s.durationMs)
    if duration ~= nil then
      -- Rounded as Math.round, as the SQL stores record it.
      durationMs = math.floor(duration + 0.5)
      startedAt = at(s.at - durationMs)
    end
    -- One table made with all its fields (no growth as fields are added).
    local fields = {finished_at = at(s.at), keep_until = at(keepUntil), state = state, output = output,
      error = err, duration_ms = durationMs, started_at = startedAt, refund = s.refundAttempt == true}
    History.add(kept, id, job, fields)
    return true
  end
  return false
end
`;
