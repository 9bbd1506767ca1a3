/**
 * The end of a transaction's stage (see job_writes.ts): its commit
 * publishes what it wrote, its rollback removes it, each record handed to
 * its area's hook (`H.commit_<kind>`, `H.undo_<kind>`). A stage whose
 * process died never ends on its own: once it counts as abandoned (begun
 * over {@linkcode ABANDONED_STAGE_MS} ago, on the server's clock) it is
 * rolled back by the next transaction's end, and by a worker's claim once a
 * minute per store (`SettleUpkeep.stages`), so what it held (a debounced
 * job out of claim order, a key) comes back even when no transaction runs
 * again. A transaction of a live process open that long is rolled back
 * alike: its writes and its commit fail (`abandonedStage` in lua.ts).
 *
 * @internal
 * @module
 */
import { ABANDONED_STAGE_MS } from "./lua.ts";

/** Most abandoned stages one call rolls back: the next call goes on with the rest. */
const ABANDONED_PER_CALL = 10;

/**
 * Definitions, after the hooks (`H`):
 * - `endStage(stage, commit)`: ends `stage`, publishing its writes
 *   (`commit`) or removing them; how many jobs it published.
 * - `endAbandonedStages()`: rolls back up to {@linkcode ABANDONED_PER_CALL}
 *   abandoned stages.
 */
export const STAGE_ENDS = String.raw`
local function endStage(stage, commit)
  local published = 0
  for _, entry in ipairs(redis.call('LRANGE', P .. ':stage:' .. stage, 0, -1)) do
    local kind, id = string.match(entry, '^([^:]+):(.*)$')
    if kind == 'job' then
      local job = readJob(id)
      if job ~= nil and job.staged == stage then
        if commit then
          redis.call('HDEL', jobKey(id), 'staged')
          placeUnleased(tonumber(id), job.queue, job.priority, tonumber(job.available_at), true)
          published = published + 1
        else
          redis.call('DEL', jobKey(id))
        end
      end
    else
      local hook = H[(commit and 'commit_' or 'undo_') .. kind]
      if hook ~= nil then hook(id) end
    end
  end
  redis.call('DEL', P .. ':stage:' .. stage)
  redis.call('ZREM', P .. ':stages', stage)
  redis.call('HDEL', P .. ':stages:waiting', stage)
  return published
end

local function endAbandonedStages()
  local before = serverMs() - ${ABANDONED_STAGE_MS}
  for _, old in ipairs(redis.call('ZRANGEBYSCORE', P .. ':stages', '-inf', before, 'LIMIT', 0, ${ABANDONED_PER_CALL})) do
    endStage(old, false)
  end
end
`;
