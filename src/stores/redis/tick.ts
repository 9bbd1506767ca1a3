/**
 * One worker tick on Redis: the claim, and the settle that records how the
 * tick's attempts ended and claims the next jobs in the same script, the
 * start confirmations of jobs claimed ahead, lease renewal, and the next due
 * time an idle worker sleeps until.
 *
 * Claim order is the SQL stores': queues in the order given, then priority
 * (highest first), then due time, then id. A lease is the job's due time in
 * the queue's leased set: a lease that ran out makes the job claimable again
 * at the lease's end, and the claim that takes it over counts a crash.
 *
 * @internal
 * @module
 */
import {
  type ClaimedJob,
  type ClaimRequest,
  type Lease,
  METRICS_RETENTION_MS,
  type Settlement,
  type SettleResult,
  type StartRequest,
  type TickRecords,
} from "../store.ts";
import { PruneSchedule } from "../sql/upkeep.ts";
import { type ClaimRow, toClaimedJobs } from "../sql/stored_rows.ts";
import { CLAIM_ROW, claimedRows, type ReplyRows } from "./claim_rows.ts";
import { isConnectionError, type RedisConnection } from "./connection.ts";
import { luaScript } from "./lua.ts";
import { list } from "./script_replies.ts";
import { AREA_HOOKS } from "./hooks.ts";
import { FAIR_CANDIDATES, GROUP_RATES, type HoldsWalk, holdsWalk, PRUNE_HOLDS } from "./groups.ts";
import { fireDue, withScheduled } from "./schedule_firing.ts";
import { STAGE_ENDS } from "./stages.ts";

/** Most leased jobs per queue that giving back a claim whose reply was lost looks at. */
const GIVE_BACK_SCAN_LIMIT = 10_000;

/** Most jobs of other names a claim with a name filter looks past, per priority level. */
const NAME_SCAN_LIMIT = 1000;

/**
 * `claimJobs(req)`: leases due jobs for a ClaimRequest of the input (token
 * as a string), first rolling back abandoned transactions' stages when
 * `req.endAbandoned` (stages.ts: what they hold comes back, in time to be
 * claimed); the claimed rows in claim order, each as `claimRow` makes
 * it (claim_rows.ts). It charges a dead worker's job as the SQL claim does
 * (`CLAIM_SETS`): by its `claimed_ahead`, `begun` (absent: begun) and
 * `suspect` fields. `confirmStarts(starts)`: confirms the starts of jobs
 * claimed ahead (again, for a job an earlier try of it confirmed); whether
 * it confirmed each lease, in order.
 */
const CLAIM = String.raw`
local function isSpent(attempts, crashes, limit)
  return crashes >= limit.crashes or attempts - 1 >= limit.attempts
end

-- Up to need candidates of a queue in claim order: {id, due, priority}; a job of a level also
-- has its member, and with a name filter its row as read (row, at key, id as idText), as the
-- filter had to read it: the claim does not read it again.
local function candidates(queue, T, need, names)
  local expired = {}
  local levels = {}
  local seen = {}
  local leased = redis.call('ZRANGEBYSCORE', leasedKey(queue), '-inf', T, 'WITHSCORES', 'LIMIT', 0, need)
  for i = 1, #leased, 2 do
    local id = tonumber(leased[i])
    local fields = redis.call('HMGET', jobKey(id), 'priority', 'group_key')
    local priority = tonumber(fields[1])
    -- A grouped job's lease that ran out is its group's to give (fairCandidates).
    if priority ~= nil and not fields[2] then
      if expired[priority] == nil then expired[priority] = {} end
      table.insert(expired[priority], {id = id, due = tonumber(leased[i + 1])})
      if not seen[priority] then seen[priority] = true; table.insert(levels, priority) end
    end
  end
  for _, level in ipairs(redis.call('ZRANGE', queueKey(queue) .. ':lv', 0, -1)) do
    local priority = tonumber(level)
    if not seen[priority] then seen[priority] = true; table.insert(levels, priority) end
  end
  table.sort(levels, function(a, b) return a > b end)
  local out = {}
  for _, priority in ipairs(levels) do
    local want = need - #out
    if want <= 0 then break end
    local list = {}
    local level = levelKey(queue, priority)
    local offset = 0
    local page = want
    if names ~= nil then page = math.min(100, want * 2) end
    while #list < want and offset < want + ${NAME_SCAN_LIMIT} do
      local due = redis.call('ZRANGEBYSCORE', level, '-inf', T, 'WITHSCORES', 'LIMIT', offset, page)
      if #due == 0 then break end
      for i = 1, #due, 2 do
        local id = tonumber(due[i])
        local idText, key, row = nil, nil, nil
        if names ~= nil then
          idText = tostring(id)
          key = jobKey(idText)
          row = readJob(id, key)
        end
        if names == nil or (row ~= nil and names[row.name]) then
          table.insert(list, {id = id, due = tonumber(due[i + 1]), priority = priority, member = due[i],
            idText = idText, key = key, row = row})
          if #list >= want then break end
        end
      end
      offset = offset + #due / 2
      if #due / 2 < page then break end
    end
    for _, job in ipairs(expired[priority] or {}) do
      if names == nil or names[redis.call('HGET', jobKey(job.id), 'name')] then
        table.insert(list, {id = job.id, due = job.due, priority = priority})
      end
    end
    if expired[priority] ~= nil then
      table.sort(list, function(a, b) return a.due < b.due or (a.due == b.due and a.id < b.id) end)
    end
    for i = 1, math.min(want, #list) do table.insert(out, list[i]) end
  end
  return out
end

${GROUP_RATES}
${FAIR_CANDIDATES}
${CLAIM_ROW}
local function claimJobs(req)
  local claimed = {}
  if req.endAbandoned then endAbandonedStages() end
  if req.limit <= 0 then return claimed end
  local T = at(req.now)
  local leaseEnd = T + req.leaseMs
  -- Formatted once per call (as redis.call formats a number), not once per job.
  local leaseText = string.format('%.17g', leaseEnd)
  local names = nil
  if opt(req.names) ~= nil then
    names = {}
    for _, name in ipairs(req.names) do names[name] = true end
  end
  local limits = opt(req.spendLimits) or {}
  -- A job whose middleware the worker checks first starts when acquire lets it: it keeps its key.
  local checked = {}
  for _, name in ipairs(opt(req.checkedNames) or {}) do checked[name] = true end
  local rates = opt(req.groupRates)
  local aheadFrom = opt(req.aheadFrom)
  local looked = 0
  local cut = false
  for _, queue in ipairs(req.queues) do
    if looked >= req.limit then break end
    if not H.paused(queue) then
      -- Written once per queue: the claimed members of each level, and the leases.
      local fromLevels = {}
      local leases = {}
      local need = req.limit - looked
      -- Jobs without a group are one more turn beside the groups (groups.ts).
      local list = fairCandidates(queue, T, need, names, rates)
      for _, c in ipairs(list) do
        looked = looked + 1
        local idText = c.idText or tostring(c.id)
        local key = c.key or jobKey(idText)
        local job = c.row or readJob(c.id, key)
        local hadToken = job.token ~= nil
        local wasAhead = job.claimed_ahead == '1'
        -- A dead worker's job whose handler began is charged (a suspect one twice); one it
        -- started without recording that its handler began is not, and becomes suspect.
        local began = job.begun ~= '0'
        local suspect = job.suspect == '1'
        local unsure = hadToken and not wasAhead and not began
        local attempts = num(job, 'attempts')
        local crashes = num(job, 'crashes')
        local recovered = hadToken and not wasAhead and began
        if not (hadToken and (wasAhead or not began)) then attempts = attempts + 1 end
        if recovered then crashes = crashes + 1 + (suspect and 1 or 0) end
        if unsure then suspect = true elseif recovered then suspect = false end
        local expireAt = job.expire_at
        if unsure then expireAt = nil end
        local index = #claimed
        local ahead = aheadFrom ~= nil and index >= aheadFrom
        local take = true
        if ahead then
          local limit = limits[job.name]
          local refused = limit ~= nil and isSpent(attempts, crashes, limit)
          if cut then
            take = refused
          elseif job.batch_id ~= nil and not refused then
            -- A batch job waits unleased until a slot can start it, so a cancel of its batch can skip it.
            cut = true
            take = false
          end
        end
        if take then
          local lastError = job.last_error
          if recovered then lastError = 'worker died during attempt ' .. num(job, 'attempts') end
          local member = c.member or pad(c.id)
          if c.gid ~= nil then
            if not hadToken then redis.call('ZREM', groupKey(queue, c.gid), member) end
            redis.call('SADD', groupLeasedKey(queue, c.gid), member)
            if c.window ~= nil then countGroupClaim(c.window, T) end
          elseif not hadToken then
            local from = fromLevels[job.priority]
            if from == nil then
              from = {}
              fromLevels[job.priority] = from
            end
            table.insert(from, member)
          end
          table.insert(leases, leaseText)
          table.insert(leases, member)
          local waited = T - c.due
          -- A suspect job's start counts as begun before its handler runs.
          local fields = {'token', req.token, 'available_at', leaseText, 'attempts', attempts,
            'crashes', crashes, 'recovered', recovered and '1' or '0', 'waited_ms', waited,
            'begun', suspect and '1' or '0'}
          if suspect then table.insert(fields, 'suspect'); table.insert(fields, '1') end
          if recovered then table.insert(fields, 'last_error'); table.insert(fields, lastError) end
          if ahead then table.insert(fields, 'claimed_ahead'); table.insert(fields, '1') end
          redis.call('HSET', key, unpack(fields))
          -- Fields the claim makes stale, deleted in one write (a table made only when some are).
          local stale = nil
          if job.progress ~= nil then stale = {'progress'} end
          if job.locked ~= nil then stale = stale or {}; table.insert(stale, 'locked') end
          if job.claimed_ahead == '1' and not ahead then stale = stale or {}; table.insert(stale, 'claimed_ahead') end
          if job.suspect ~= nil and not suspect then stale = stale or {}; table.insert(stale, 'suspect') end
          if job.expire_at ~= nil and expireAt == nil then stale = stale or {}; table.insert(stale, 'expire_at') end
          if stale ~= nil then redis.call('HDEL', key, unpack(stale)) end
          if not ahead and not checked[job.name] then H.started(c.id, job) end
          table.insert(claimed,
            claimRow(idText, job, attempts, crashes, lastError, recovered, waited, ahead, expireAt))
        end
      end
      for priority, members in pairs(fromLevels) do
        local level = levelKey(queue, priority)
        redis.call('ZREM', level, unpack(members))
        if redis.call('ZCARD', level) == 0 then redis.call('ZREM', queueKey(queue) .. ':lv', priority) end
      end
      if #leases > 0 then redis.call('ZADD', leasedKey(queue), unpack(leases)) end
    end
  end
  return claimed
end

-- When a job its claim still holds ahead was due before that claim of leaseMs: the claim set
-- available_at to its now + leaseMs and waited_ms to its now less the old due time, and nothing
-- changes them while the job is held ahead.
local function dueBeforeClaim(job, leaseMs)
  return tonumber(job.available_at) - leaseMs - num(job, 'waited_ms')
end

-- Puts a job claimed ahead back as it was before its claim.
local function unclaim(id, job, leaseMs)
  local due = dueBeforeClaim(job, leaseMs)
  unplace(id, job.queue, job.priority)
  local key = jobKey(id)
  redis.call('HDEL', key, 'token', 'claimed_ahead')
  redis.call('HSET', key, 'available_at', due, 'attempts', num(job, 'attempts') - 1)
  placeUnleased(id, job.queue, job.priority, due)
end

-- A refused start confirmation's unclaim and key hooks read these fields of the job too.
local UNCLAIM_FIELDS = {'priority', 'available_at', 'waited_ms', 'attempts', 'locked', 'lock_keys'}

-- Adds fields of the job row at key to the table job (absent fields stay absent).
local function readFields(key, job, fields)
  local values = redis.call('HMGET', key, unpack(fields))
  for i, field in ipairs(fields) do if values[i] then job[field] = values[i] end end
end

local function confirmStarts(starts)
  -- Whether each lease's start was confirmed, in order (booleans: no id formatted for the reply).
  local started = {}
  local T = at(starts.now)
  -- Whether each queue is paused, read once per call; the leases of each queue, written once.
  local paused = {}
  local leases = {}
  -- The lease's end, formatted once per call (as redis.call formats a number).
  local leaseText = string.format('%.17g', T + starts.leaseMs)
  for i, lease in ipairs(starts.leases) do
    started[i] = false
    local key = jobKey(lease.id)
    -- What a confirmation reads of a job (its lease, its queue and group, and what H.started
    -- uses), read into a table made whole: an absent field (false) stays absent (nil).
    local v = redis.call('HMGET', key, 'token', 'claimed_ahead', 'queue', 'name', 'group_key',
      'keyed', 'job_key')
    local job = nil
    if v[3] then
      job = {token = v[1] or nil, claimed_ahead = v[2] or nil, queue = v[3], name = v[4] or nil,
        group_key = v[5] or nil, keyed = v[6] or nil, job_key = v[7] or nil}
    end
    if job ~= nil and job.token == lease.token then
      -- A job no longer held ahead started under this lease: an earlier try of this confirmation,
      -- whose reply was lost, confirmed it. It is confirmed again, whatever pause came since.
      local refused = false
      if job.claimed_ahead == '1' then
        if paused[job.queue] == nil then paused[job.queue] = H.paused(job.queue) end
        refused = paused[job.queue] or
          (job.group_key ~= nil and groupPaused(groupId(job.name, job.group_key), T))
      end
      if refused then
        -- Refused while still held: its queue or its group is paused. Give it back, with its claim's locks.
        readFields(key, job, UNCLAIM_FIELDS)
        unclaim(lease.id, job, starts.leaseMs)
        H.keysSettled(lease.id, job, 'release', lease.token)
      else
        -- claimed_ahead 0 reads as absent (every reader asks for '1'): one write instead of two.
        redis.call('HSET', key, 'claimed_ahead', '0', 'available_at', leaseText)
        local members = leases[job.queue]
        if members == nil then
          members = {}
          leases[job.queue] = members
        end
        table.insert(members, leaseText); table.insert(members, pad(lease.id))
        H.started(lease.id, job)
        started[i] = true
      end
    end
  end
  for queue, members in pairs(leases) do callInChunks('ZADD', leasedKey(queue), members) end
  return started
end

-- Handlers that began (leases, or nil for none): a worker death from now on charges their jobs a
-- crash.
local function markBegun(begun)
  for _, lease in ipairs(begun or {}) do
    local key = jobKey(lease.id)
    local held = redis.call('HMGET', key, 'token', 'claimed_ahead')
    if held[1] == lease.token and held[2] ~= '1' then redis.call('HSET', key, 'begun', 1) end
  end
end
`;

/**
 * Input: `request` (a ClaimRequest, token as a string). Reply: `{claimed,
 * shift}`, the claimed rows as claim_rows.ts reads them.
 */
const CLAIM_SCRIPT = luaScript(
  "claim",
  "allow-oom",
  AREA_HOOKS,
  STAGE_ENDS,
  CLAIM,
  "return cjson.encode({shift = string.format('%.17g', SHIFT), claimed = claimJobs(INPUT.request)})",
);

/**
 * Input: `settlements` (tokens as strings), `records`, `then` (a
 * ClaimRequest or null), `holds` (the cursor of the walk through the group
 * holds, or null when no walk is due), `pruneKept` (whether the kept
 * finished jobs' prune is due), `metricsBefore` (the time before which the
 * metrics rollup's minutes are pruned, or null when no prune is due),
 * `pruneLogs` (whether the log lines' prune is due).
 * Reply: `{applied, claimed, started, shift, holds, keptLeft, logsLeft}` (`claimed`
 * and `shift` as the claim's; `holds` the cursor the walk goes on from,
 * `"0"` at its end, null without a walk; `keptLeft` whether the kept jobs'
 * prune left some past their time for the next settle; `logsLeft` whether
 * the log prune looked at a whole chunk, so that more may be left).
 *
 * A `step` writes its memo and leaves the job leased, as a `progress`
 * does. A `park` is a `release` with the attempt given back and nothing
 * else counted (no error, crashes and last error kept, no metrics, no
 * span), its memo written: its chain, batch, keys and locks go as a
 * release's. A settle given `holds` goes on with the prune of passed group
 * holds (`pruneHolds`, groups.ts). No prune reads a stamp on the server:
 * the store's process decides which are due ({@linkcode SettleUpkeep}).
 */
const SETTLE_SCRIPT = luaScript(
  "settle",
  "allow-oom",
  AREA_HOOKS,
  STAGE_ENDS,
  CLAIM,
  PRUNE_HOLDS,
  String.raw`
local settlements = INPUT.settlements
local applied = {}
local settled = {}
local retried = {}
local released = 0
local queued = 0
-- An awaited job ended: its awaiters (who watch the wake-up channel too) look again.
local awaitedEnded = false
local groupFreed = false
-- The metrics of every settlement, written once after the loop.
local metrics = H.metricsBatch()
-- The jobs that finished leave together after the loop: the kept ones' rows become their kept
-- records (History.keep), the others' are deleted, the leases of each queue go in one write.
local kept = History.batch()
local gone = {}
local deleted = {}
local leaving = {}
local function leave(id, job)
  gone[id] = true
  if job.token == nil or job.group_key ~= nil then
    unplace(id, job.queue, job.priority, job.token ~= nil, job)
    return
  end
  local out = leaving[job.queue]
  if out == nil then
    out = {members = {}, ids = {}, jobs = {}}
    leaving[job.queue] = out
  end
  local n = #out.members + 1
  out.members[n] = pad(id)
  out.ids[n] = id
  out.jobs[n] = job
end

-- Job rows first.
for i, s in ipairs(settlements) do
  local job = nil
  local key = jobKey(s.id)
  if not gone[s.id] then job = readJob(s.id, key) end
  if job == nil or job.token ~= s.token then
    applied[i] = false
  else
    applied[i] = true
    if s.kind == 'progress' then
      redis.call('HSET', key, 'progress', s.percent)
    elseif s.kind == 'step' then
      H.stepWritten(s)
    elseif s.kind == 'complete' or s.kind == 'cancel' then
      if not H.finished(s.id, job, s, kept) then table.insert(deleted, s.id) end
      leave(s.id, job)
      settled[i] = job
    elseif s.kind == 'fail' then
      local failed = P .. ':failed:' .. s.id
      local row = {'id', s.id, 'queue', job.queue, 'name', job.name, 'payload', job.payload,
        'priority', job.priority, 'error', s.error.message, 'attempts', s.attempts,
        'crashes', num(job, 'crashes') + (s.crashed and 1 or 0), 'created_at', job.created_at,
        'failed_at', at(s.at), 'batch_member', num(job, 'batch_member')}
      for _, field in ipairs({'batch_id', 'chain_id', 'flow_id', 'flow_parents', 'trace',
        'group_key', 'group_limit', 'group_ordered'}) do
        if job[field] ~= nil then table.insert(row, field); table.insert(row, job[field]) end
      end
      if opt(s.error.stack) ~= nil then table.insert(row, 'stack'); table.insert(row, s.error.stack) end
      redis.call('DEL', failed)
      redis.call('HSET', failed, unpack(row))
      redis.call('ZADD', P .. ':failed', at(s.at), pad(s.id))
      deleteJob(s.id, job)
      settled[i] = job
    elseif s.kind == 'release' then
      unplace(s.id, job.queue, job.priority, true, job)
      local due = at(s.availableAt)
      -- Never started, still held ahead: due when its claim found it due.
      if (opt(s.unclaimedLeaseMs) or 0) > 0 and job.claimed_ahead == '1' then
        due = dueBeforeClaim(job, s.unclaimedLeaseMs)
      end
      local refund = s.refundAttempt and 1 or 0
      local crashed = s.crashed and 1 or 0
      redis.call('HDEL', key, 'token', 'claimed_ahead')
      -- Its handler started: it no longer expires, and it ended without killing its worker.
      if not s.refundAttempt or s.started then redis.call('HDEL', key, 'expire_at', 'suspect') end
      redis.call('HSET', key, 'available_at', due, 'attempts', num(job, 'attempts') - refund,
        'crashes', num(job, 'crashes') + crashed)
      if opt(s.error) == nil then redis.call('HDEL', key, 'last_error')
      else redis.call('HSET', key, 'last_error', s.error) end
      placeUnleased(s.id, job.queue, job.priority, due, false, job)
      -- The handler held its group back (ctx.rateLimitGroup): paused until the job is due.
      if s.holdsGroup and job.group_key ~= nil then
        pauseGroupUntil(groupId(job.name, job.group_key), due)
      end
      settled[i] = job
      retried[s.id] = true
    elseif s.kind == 'park' then
      -- A release that is no retry: the attempt given back, crashes and last error unchanged.
      local due = H.parkedDue(s)
      unplace(s.id, job.queue, job.priority, true, job)
      -- It has started, so it no longer expires; its handler ran to the park, so it is not suspect.
      redis.call('HDEL', key, 'token', 'claimed_ahead', 'expire_at', 'suspect')
      redis.call('HSET', key, 'available_at', due, 'attempts', num(job, 'attempts') - 1)
      placeUnleased(s.id, job.queue, job.priority, due, false, job)
      H.stepWritten(s)
      settled[i] = job
    end
    if settled[i] ~= nil then H.metrics(metrics, s, job) end
    -- A grouped job's settle frees a slot of its group: jobs its limit held back can go.
    if settled[i] ~= nil and job.group_key ~= nil then groupFreed = true end
    if job.awaited == '1' and (s.kind == 'complete' or s.kind == 'cancel' or s.kind == 'fail') then
      awaitedEnded = true
    end
  end
end

for queue, out in pairs(leaving) do
  -- Some job was not in the leased set (a script put it back in its level since): each as unplace does.
  if callInChunks('ZREM', leasedKey(queue), out.members) < #out.members then
    for n, id in ipairs(out.ids) do unplace(id, queue, out.jobs[n].priority, true, out.jobs[n]) end
  end
end
History.keep(kept)
if #deleted > 0 then
  local rows, memos = {}, {}
  for _, id in ipairs(deleted) do
    table.insert(rows, jobKey(id))
    table.insert(memos, stepsKey(id)); table.insert(memos, signalsKey(id))
  end
  callInChunks('DEL', nil, rows)
  if callInChunks('EXISTS', nil, memos) > 0 then
    for _, id in ipairs(deleted) do dropSteps(id) end
  end
end

-- The kept history's prune, before the log prune.
local keptLeft = false
if INPUT.pruneKept then keptLeft = History.pruneExpired() end
-- Holds whose end passed a minute ago, after this settle's own holds, when a walk is due.
local holds = NULL
if opt(INPUT.holds) ~= nil then holds = pruneHolds(INPUT.holds) end
H.flushMetrics(metrics)
if opt(INPUT.metricsBefore) ~= nil then H.pruneMetrics(INPUT.metricsBefore) end

local records = opt(INPUT.records) or {}
for _, span in ipairs(opt(records.spans) or {}) do
  if retried[span.id] then H.span(span.id, span) end
end
if opt(records.logs) ~= nil then H.logs(records.logs) end
-- After the kept history's prune: the lines of the jobs it forgot go too.
local logsLeft = false
if INPUT.pruneLogs then logsLeft = H.pruneLogs() end

-- Chains and batches second, in batch order (settlement order when no job is in a batch: the
-- order the moves are listed in, so no sort).
local moves = {}
local batched = false
for i, s in ipairs(settlements) do
  local job = settled[i]
  if job ~= nil then
    table.insert(moves, {i = i, s = s, job = job})
    if job.batch_id ~= nil then batched = true end
  end
end
if batched then
  table.sort(moves, function(a, b)
    local x, y = num(a.job, 'batch_id'), num(b.job, 'batch_id')
    return x < y or (x == y and a.i < b.i)
  end)
end
local removed = {}
for _, move in ipairs(moves) do
  local s = move.s
  if s.kind == 'release' or s.kind == 'park' then
    local n, skipped = H.linksPutBack(s.id, move.job, at(s.at))
    queued = queued + n
    if skipped then removed[s.id] = true else released = released + 1 end
  else
    local output = NULL
    if s.kind == 'complete' then output = opt(s.output) or NULL end
    queued = queued + H.linksSettled(s.id, move.job, s.kind, output, at(s.at))
  end
end

-- Flows third.
for _, move in ipairs(moves) do
  local s = move.s
  if move.job.flow_id ~= nil and (s.kind == 'complete' or s.kind == 'fail' or s.kind == 'cancel') then
    local output, err = NULL, NULL
    if s.kind == 'complete' then output = opt(s.output) or NULL end
    if s.kind == 'fail' then err = s.error.message end
    if s.kind == 'cancel' then err = s.reason end
    queued = queued + H.flowSettled(s.id, move.job, s.kind, output, err, at(s.at))
  end
end

-- Keys and locks last.
for _, move in ipairs(moves) do
  if removed[move.s.id] then H.keysRemoved(move.s.id, move.job)
  else
    local kind = move.s.kind
    if kind == 'park' then kind = 'release' end
    H.keysSettled(move.s.id, move.job, kind, move.s.token)
  end
end

local started = {}
if opt(records.starts) ~= nil then started = confirmStarts(records.starts) end
markBegun(opt(records.begun))
if released > 0 or queued > 0 or awaitedEnded or groupFreed then wake() end
local claimed = {}
if opt(INPUT['then']) ~= nil then claimed = claimJobs(INPUT['then']) end
return cjson.encode({applied = applied, claimed = claimed, started = started,
  shift = string.format('%.17g', SHIFT), holds = holds, keptLeft = keptLeft,
  logsLeft = logsLeft})
`,
);

/**
 * Input: `starts` (a StartRequest, tokens as strings, or null) and `begun`
 * (leases, or null). What the settle script does with the same records
 * when it has no settlement, logs or claim: a tick that only confirms
 * starts (at concurrency 1, one per job) or writes begin marks, without the
 * settle's setup. Reply: `{started}`, as the settle's.
 */
const CONFIRM_SCRIPT = luaScript(
  "confirmStarts",
  "allow-oom",
  AREA_HOOKS,
  CLAIM,
  String.raw`
local started = {}
if opt(INPUT.starts) ~= nil then started = confirmStarts(INPUT.starts) end
markBegun(opt(INPUT.begun))
return cjson.encode({started = started})
`,
);

/**
 * Input: `token`, `queues`, `leaseMs`. Gives back the jobs a claim of
 * `token` leased, as they were before it, charged nothing: for a claim
 * whose reply was lost, so no worker runs them. Reply: how many.
 */
const GIVE_BACK_SCRIPT = luaScript(
  "giveBackClaim",
  "allow-oom",
  AREA_HOOKS,
  CLAIM,
  String.raw`
local given = 0
for _, queue in ipairs(INPUT.queues) do
  for _, member in ipairs(redis.call('ZRANGE', leasedKey(queue), 0, ${GIVE_BACK_SCAN_LIMIT - 1})) do
    local id = tonumber(member)
    local job = readJob(id)
    if job ~= nil and job.token == INPUT.token then
      unclaim(id, job, INPUT.leaseMs)
      H.keysSettled(id, job, 'release', INPUT.token)
      given = given + 1
    end
  end
end
if given > 0 then wake() end
return cjson.encode(given)
`,
);

/** Input: `leases` (tokens as strings), `until`. Reply: the ids whose lease was lost. */
const RENEW_SCRIPT = luaScript(
  "renew",
  "allow-oom",
  String.raw`
local lost = {}
local untilAt = at(INPUT['until'])
for _, lease in ipairs(INPUT.leases) do
  local key = jobKey(lease.id)
  local fields = redis.call('HMGET', key, 'token', 'queue')
  if fields[1] ~= lease.token then
    table.insert(lost, lease.id)
  else
    redis.call('HSET', key, 'available_at', untilAt)
    redis.call('ZADD', leasedKey(fields[2]), untilAt, pad(lease.id))
  end
end
return cjson.encode(lost)
`,
);

/**
 * Input: `queues`, `groupRates` (or null). Reply: the earliest due time
 * after now (caller's clock), or null. A group over its rate limit with a
 * job due now is due when its window turns; a held group, when its hold ends.
 */
const NEXT_DUE_SCRIPT = luaScript(
  "nextDueAt",
  "no-writes",
  String.raw`
${GROUP_RATES}
local rates = opt(INPUT.groupRates)
local next = nil
local function consider(reply)
  if #reply > 0 then
    local due = tonumber(reply[2])
    if next == nil or due < next then next = due end
  end
end
for _, queue in ipairs(INPUT.queues) do
  local levels = redis.call('ZRANGE', queueKey(queue) .. ':lv', 0, -1)
  for _, priority in ipairs(levels) do
    consider(redis.call('ZRANGEBYSCORE', levelKey(queue, priority), '(' .. NOW, '+inf', 'WITHSCORES', 'LIMIT', 0, 1))
  end
  consider(redis.call('ZRANGEBYSCORE', leasedKey(queue), '(' .. NOW, '+inf', 'WITHSCORES', 'LIMIT', 0, 1))
  -- Grouped jobs wait in their groups: one look per group, as the SQL stores do.
  for _, gid in ipairs(redis.call('ZRANGE', groupsKey(queue), 0, -1)) do
    consider(redis.call('ZRANGEBYSCORE', groupKey(queue, gid), '(' .. NOW, '+inf', 'WITHSCORES', 'LIMIT', 0, 1))
    local ends = tonumber(redis.call('HGET', P .. ':gpauses:until', gid))
    if ends ~= nil and ends > NOW and (next == nil or ends < next) and
        redis.call('SISMEMBER', P .. ':gpauses', gid) == 1 then
      next = ends
    end
    local rate = rates and rates[gidName(gid)]
    if rate ~= nil and #redis.call('ZRANGEBYSCORE', groupKey(queue, gid), '-inf', NOW, 'LIMIT', 0, 1) > 0 then
      local window = groupWindow(queue, gid, rate, NOW)
      if window.left == 0 and (next == nil or window.ends < next) then next = window.ends end
    end
  end
end
if next == nil then return cjson.encode(NULL) end
return cjson.encode(back(next))
`,
);

/**
 * A claim request as the scripts take it: its token as a string, and
 * whether it first rolls back abandoned stages (when `upkeep` finds that due).
 */
function claimInput(request: ClaimRequest, upkeep: SettleUpkeep) {
  const { schedules: _schedules, readsScheduled: _reads, ...rest } = request;
  return { ...rest, token: String(request.token), endAbandoned: upkeep.stages.due(request.now) };
}

/**
 * Claimed rows as jobs, in the order the script took them (its claim
 * order, grouped jobs round robin), those held ahead marked.
 */
function claimedJobs(rows: readonly (ClaimRow & { ahead: boolean })[], request: ClaimRequest) {
  return toClaimedJobs(rows, request.token)
    .map((job, index): ClaimedJob => rows[index]!.ahead ? { ...job, ahead: true } : job);
}

/**
 * Fires the schedules' due slots (when the request carries them), then
 * leases up to `request.limit` due jobs in one script, first rolling back
 * abandoned transactions' stages when `upkeep` finds that due (once a
 * minute of the claims' time, as a settle's claim does). When the reply is
 * lost, the jobs the claim leased are given back once the connection is
 * back (charged nothing), and the call rejects with the connection's error.
 */
export async function claim(
  redis: RedisConnection,
  upkeep: SettleUpkeep,
  request: ClaimRequest,
): Promise<ClaimedJob[]> {
  if (request.schedules !== undefined) await fireDue(redis, request.schedules, request.now);
  const reply = await givingBackOnLostReply(
    redis,
    request,
    redis.call<{ claimed: ReplyRows; shift: string }>(
      CLAIM_SCRIPT,
      { now: request.now, request: claimInput(request, upkeep) },
    ),
  );
  const jobs = claimedJobs(claimedRows(reply.claimed, reply.shift), request);
  return request.readsScheduled === true ? await withScheduled(redis, jobs) : jobs;
}

/**
 * `call`'s result; when it failed for the connection (it may have run), the
 * jobs `request`'s claim leased are given back before it rejects. When the
 * connection does not come back in time, their leases run out instead and
 * the next claim counts a crash.
 */
async function givingBackOnLostReply<T>(
  redis: RedisConnection,
  request: ClaimRequest,
  call: Promise<T>,
): Promise<T> {
  try {
    return await call;
  } catch (error) {
    if (!isConnectionError(error)) throw error;
    await redis.whenReconnected(error).then(() =>
      redis.call(GIVE_BACK_SCRIPT, {
        now: request.now,
        token: String(request.token),
        queues: request.queues,
        leaseMs: request.leaseMs,
      })
    ).catch(() => {});
    throw error;
  }
}

/**
 * What a store's settles keep between ticks in process memory, as SQL's
 * (src/stores/sql/upkeep.ts): when they last pruned the kept finished jobs,
 * the metrics rollup and the log lines, and where their walk through the
 * group holds stands, and when their claims (and the store's) last rolled
 * back abandoned transactions' stages. A settle between prunes sends no
 * command for them.
 */
export interface SettleUpkeep {
  /** The prune of kept finished jobs whose `keep_until` passed. */
  readonly finished: PruneSchedule;
  /** The prune of the metrics rollup's minutes past their retention. */
  readonly metrics: PruneSchedule;
  /** The prune of the log lines of jobs that no longer exist. */
  readonly logs: PruneSchedule;
  /** The walk through the group holds, for the prune of passed holds. */
  readonly holds: HoldsWalk;
  /** The rollback of abandoned transactions' stages, by a claim (stages.ts). */
  readonly stages: PruneSchedule;
}

/** A store's upkeep before its first settle: every prune due. */
export function settleUpkeep(): SettleUpkeep {
  return {
    finished: new PruneSchedule(),
    metrics: new PruneSchedule(),
    logs: new PruneSchedule(),
    holds: holdsWalk(),
    stages: new PruneSchedule(),
  };
}

/**
 * Applies settlements, records, start confirmations and the next claim in
 * one script. As SQL's settle, one with settlements also prunes the kept
 * finished jobs and the metrics rollup when `upkeep` finds each due (at
 * most once a minute of its latest settlement's time; a kept jobs' prune
 * that left some goes on at the next settle), one with settlements or log
 * lines prunes the lines of jobs gone when that is due (the same way), and
 * one that settles or claims reads the next chunk of the walk through the
 * group holds when one is due. A tick of start confirmations and begin
 * marks alone goes to the smaller script that writes only those.
 */
export async function settle(
  redis: RedisConnection,
  upkeep: SettleUpkeep,
  settlements: readonly Settlement[],
  then: ClaimRequest | undefined,
  records: TickRecords = {},
): Promise<SettleResult> {
  if (settlements.length === 0 && then === undefined && records.logs === undefined) {
    return await confirmOnly(redis, records);
  }
  // Loops, not spreads: a tick's settlements and lines may be more than a call takes arguments.
  let latestSettled = -Infinity;
  for (const { at } of settlements) latestSettled = Math.max(latestSettled, at);
  const latest = Math.max(latestSettled, then?.now ?? -Infinity, records.starts?.now ?? -Infinity);
  const now = Number.isFinite(latest) ? latest : Date.now();
  // Before the settles, not between them and the claim as on SQL (Lua cannot compute slots):
  // an overlap holder that settles in this call still holds the slots due now.
  if (then?.schedules !== undefined) await fireDue(redis, then.schedules, then.now);
  const { holds } = upkeep;
  const walkFrom = settlements.length > 0 || then !== undefined ? holds.next(now) : null;
  const settledAt = settlements.length === 0 ? null : latestSettled;
  const pruneKept = settledAt !== null && upkeep.finished.due(settledAt);
  const metricsBefore = settledAt !== null && upkeep.metrics.due(settledAt)
    ? settledAt - METRICS_RETENTION_MS
    : null;
  // As SQL's settle: at the latest time of its settlements and log lines.
  let loggedAt = settledAt ?? -Infinity;
  for (const line of records.logs?.lines ?? []) loggedAt = Math.max(loggedAt, line.at);
  const pruneLogs = Number.isFinite(loggedAt) && upkeep.logs.due(loggedAt);
  const call = redis.call<{
    applied: unknown;
    claimed: ReplyRows;
    started: unknown;
    shift: string;
    holds: string | null;
    keptLeft: boolean;
    logsLeft: boolean;
  }>(
    SETTLE_SCRIPT,
    {
      now,
      holds: walkFrom,
      pruneKept,
      metricsBefore,
      pruneLogs,
      settlements: settlements.map((s) => ({ ...s, token: String(s.token) })),
      records: {
        ...records,
        starts: records.starts && startsInput(records.starts),
        begun: records.begun?.map((l) => ({ id: l.id, token: String(l.token) })),
      },
      then: then === undefined ? null : claimInput(then, upkeep),
    },
  );
  const reply = then === undefined ? await call : await givingBackOnLostReply(redis, then, call);
  if (walkFrom !== null && typeof reply.holds === "string") {
    holds.walked(now, reply.holds === "0" ? null : reply.holds);
  }
  if (pruneKept && reply.keptLeft === true) upkeep.finished.cutShort();
  if (pruneLogs && reply.logsLeft === true) upkeep.logs.cutShort();
  return {
    applied: list(reply.applied as boolean[]),
    claimed: then === undefined
      ? []
      : await claimedWithScheduled(redis, claimedRows(reply.claimed, reply.shift), then),
    started: confirmedIds(records.starts, list(reply.started as boolean[])),
  };
}

/** A tick's start confirmations and begin marks, with nothing else to write. */
async function confirmOnly(redis: RedisConnection, records: TickRecords): Promise<SettleResult> {
  const { starts, begun } = records;
  const reply = await redis.call<{ started: unknown }>(CONFIRM_SCRIPT, {
    now: starts?.now ?? Date.now(),
    starts: starts === undefined ? null : startsInput(starts),
    begun: begun === undefined ? null : begun.map((l) => ({ id: l.id, token: String(l.token) })),
  });
  return {
    applied: [],
    claimed: [],
    started: confirmedIds(starts, list(reply.started as boolean[])),
  };
}

/** The jobs a settle claimed, with their `scheduled` when the request reads it. */
function claimedWithScheduled(
  redis: RedisConnection,
  rows: readonly (ClaimRow & { ahead: boolean })[],
  request: ClaimRequest,
) {
  const jobs = claimedJobs(rows, request);
  return request.readsScheduled === true ? withScheduled(redis, jobs) : Promise.resolve(jobs);
}

/** The ids of the leases of `starts` whose start was confirmed (`confirmed`, in their order). */
function confirmedIds(starts: StartRequest | undefined, confirmed: readonly boolean[]): number[] {
  return starts === undefined ? [] : starts.leases.filter((_, i) => confirmed[i]).map((l) => l.id);
}

function startsInput(starts: StartRequest) {
  return { ...starts, leases: starts.leases.map((l) => ({ id: l.id, token: String(l.token) })) };
}

/** Extends leases to `until`; the ids whose lease was lost. */
export async function renew(
  redis: RedisConnection,
  leases: readonly Lease[],
  until: number,
  now: number,
): Promise<number[]> {
  if (leases.length === 0) return [];
  const input = { now, until, leases: leases.map((l) => ({ id: l.id, token: String(l.token) })) };
  return list(await redis.call<number[]>(RENEW_SCRIPT, input));
}

/** The earliest time after `after` at which a job of `queues` becomes due, or null. */
export function nextDueAt(
  redis: RedisConnection,
  queues: readonly string[],
  after: number,
  groupRates?: ClaimRequest["groupRates"],
): Promise<number | null> {
  return redis.call<number | null>(NEXT_DUE_SCRIPT, {
    now: after,
    queues,
    groupRates: groupRates ?? null,
  });
}
