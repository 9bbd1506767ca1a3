/**
 * Job logs and attempt spans on Redis: what a settle writes and prunes
 * (the hooks), read back by `job_logs.ts`.
 *
 * Layout: `P:log:<id>` LIST, job `id`'s lines oldest first, each a JSON
 * object (`id`, `attempt`, `at` on the store's clock, `level`, `message`,
 * `fields`, `encrypted`, `bytes`); `P:logs` ZSET, the jobs holding lines,
 * score their lines' byte tally (what the cap counts); `P:log:seq` the last
 * line id; `P:log:pruned` HASH, where the next prune goes on from (`rank`
 * in `P:logs`) and when one last ran (`at`, store clock: read by older
 * code only, which decided on the server when a prune was due).
 *
 * Pruning rule (the SQL stores'): a job's lines go with its history, once
 * the job is in none of the jobs (`P:job:<id>`), the failed jobs
 * (`P:failed:<id>`) and the kept finished jobs (`P:done:<id>`). A settle
 * that its process finds a prune due for (at most once a minute, as on SQL:
 * tick.ts) looks at {@linkcode PRUNE_CHUNK} jobs holding lines, going on
 * from where the last look stopped and around again; one that looked at a
 * whole chunk says so, and the next settle goes on.
 *
 * @internal
 * @module
 */
/** Room kept under the cap for the line that says how many lines it dropped (as on SQL). */
const CAP_LINE_ROOM = 128;

/** Jobs holding lines one prune looks at. */
const PRUNE_CHUNK = 1_000;

/**
 * The tick's log hooks:
 * - `H.logs(logs)`: the tick's log lines (`TickRecords.logs`), each job's
 *   lines kept under its byte cap (its oldest dropped, one `cap` line
 *   saying how many).
 * - `H.span(id, span)`: the span of job `id`'s attempt whose release
 *   applied, kept on the job as `last_span` for the next attempt to link to.
 * - `H.pruneLogs()`: deletes the lines of the next chunk of jobs that no
 *   longer exist; true when the chunk was whole (more may be left).
 */
export const LOG_HOOKS = String.raw`
local LOGS = {}

-- Drops job jobId's oldest lines until the rest fit under max bytes with room for the cap line,
-- which takes the place of the newest line dropped and counts every line dropped so far.
function LOGS.keepUnderCap(jobId, max)
  local key = P .. ':log:' .. jobId
  local entries = redis.call('LRANGE', key, 0, -1)
  local kept, dropped = 0, 0
  local cutIndex, cutId = nil, nil
  for i = #entries, 1, -1 do
    local line = cjson.decode(entries[i])
    if line.level == 'cap' then
      local ok, fields = pcall(cjson.decode, line.fields)
      if ok and type(fields) == 'table' and type(fields.dropped) == 'number' then
        dropped = dropped + fields.dropped
      end
      if cutId == nil then cutIndex, cutId = i, line.id end
    elseif cutId == nil and kept + line.bytes <= max - ${CAP_LINE_ROOM} then
      kept = kept + line.bytes
    else
      if cutId == nil then cutIndex, cutId = i, line.id end
      dropped = dropped + 1
    end
  end
  if cutId == nil then return end
  local plural = 's'
  if dropped == 1 then plural = '' end
  local message = 'log capped at ' .. max .. ' bytes per job: ' .. dropped .. ' older line' .. plural .. ' dropped'
  local fields = cjson.encode({dropped = dropped})
  local bytes = #message + #fields
  redis.call('LTRIM', key, cutIndex, -1)
  redis.call('LPUSH', key, cjson.encode({id = cutId, attempt = 0, at = NOW, level = 'cap',
    message = message, fields = fields, encrypted = false, bytes = bytes}))
  redis.call('ZADD', P .. ':logs', kept + bytes, jobId)
end

function H.logs(logs)
  local lines = logs.lines
  if #lines > 0 then
    local id = redis.call('INCRBY', P .. ':log:seq', #lines) - #lines
    local jobs = {}
    for _, line in ipairs(lines) do
      id = id + 1
      redis.call('RPUSH', P .. ':log:' .. line.jobId, cjson.encode({id = id, attempt = line.attempt,
        at = at(line.at), level = line.level, message = line.message, fields = line.fields,
        encrypted = line.encrypted, bytes = line.bytes}))
      local tally = tonumber(redis.call('ZINCRBY', P .. ':logs', line.bytes, line.jobId))
      jobs[line.jobId] = tally
    end
    for jobId, tally in pairs(jobs) do
      if tally > logs.maxBytesPerJob then LOGS.keepUnderCap(jobId, logs.maxBytesPerJob) end
    end
  end
end

function H.span(id, span)
  if redis.call('EXISTS', jobKey(id)) == 1 then redis.call('HSET', jobKey(id), 'last_span', span.traceparent) end
end

function H.pruneLogs()
  local state = P .. ':log:pruned'
  local rank = tonumber(redis.call('HGET', state, 'rank') or 0)
  local jobs = redis.call('ZRANGE', P .. ':logs', rank, rank + ${PRUNE_CHUNK} - 1)
  local gone = 0
  for _, id in ipairs(jobs) do
    if redis.call('EXISTS', jobKey(id), P .. ':failed:' .. id, P .. ':done:' .. id) == 0 then
      redis.call('DEL', P .. ':log:' .. id)
      redis.call('ZREM', P .. ':logs', id)
      gone = gone + 1
    end
  end
  local nextRank = rank + #jobs - gone
  if #jobs < ${PRUNE_CHUNK} then nextRank = 0 end
  redis.call('HSET', state, 'at', string.format('%d', NOW), 'rank', nextRank)
  return #jobs == ${PRUNE_CHUNK}
end
`;
