/**
 * The flow hooks of the Redis store's scripts, in a module of their own
 * (as `chain_batch_hooks.ts`): `hooks.ts` joins them after the chain and
 * batch hooks, whose `Links` helpers they use.
 *
 * Keys (`P` is the prefix):
 * - `P:seq:flow` STRING: the last flow id.
 * - `P:flow:<id>` HASH: `id`, `name`, `created_at`, `nodes` (how many),
 *   `cancelled_at` once cancelled, `ended_at` once no node is left waiting,
 *   queued or running (cancelled or not; `pruneFlows` counts the flow's age
 *   from it: older code wrote none, and the prune gives such a flow its
 *   own now), `open_from` the first position whose node may still be open
 *   (every node before it has ended; none: 0), `staged` while the
 *   transaction that inserted it is open.
 * - `P:flow:<id>:n` HASH, per node at position `<p>` (parents before
 *   children): `<p>` its JSON (`key`, `name`, `parents` as `[position,
 *   continueOnFailure 0|1]` pairs, `children` as positions), `<p>:s` its
 *   state, `<p>:w` how many parents it still waits for, `<p>:j` its job's
 *   id once queued, `<p>:o` its output, `<p>:e` its error, `<p>:h` its job
 *   (a JSON `WaitingJobRow`) while it waits; taking it out is what makes
 *   the node fire at most once.
 * - `P:flow:<id>:j` HASH: job id → node position.
 * - `P:flow:<id>:catch` LIST: the catch's jobs, held as a chain's are.
 * - `P:flows` ZSET: committed flows, score and member the id.
 *
 * Job fields: `flow_id`, and `flow_parents` (the JSON the node's handler
 * reads as `ctx.parents`), as the SQL columns.
 *
 * Hooks (`t` on the store's clock):
 * - `H.flowSettled(id, job, kind, output, err, t)`: `job`, a node, ended
 *   (`complete`, `fail`, `cancel`): on success its output is kept and each
 *   waiting child that waits for no other parent now is queued; otherwise
 *   the flow's catch is queued once and its descendants are skipped (see
 *   `Flows.settleGraph`); `clear` (deleted unrun by a clear) cancels it
 *   and skips its descendants without the catch. Returns how many jobs it
 *   queued.
 * - `H.flowsCancelled(jobs, err, t)`: the nodes of `jobs` (`{id, job}`),
 *   cancelled before they started, end as `H.flowSettled` ends each with
 *   `cancel`, each flow moved once after all its nodes ended. Returns how
 *   many jobs it queued.
 * - `H.flowRetried(id, failed, t)`: the failed node `failed` was moved
 *   back by a retry: it is pending again and its skipped descendants wait
 *   again. Returns how many jobs it queued.
 * - `H.commit_flow(id)`, `H.undo_flow(id)`: the transaction that inserted
 *   flow `id` committed or threw.
 *
 * @internal
 * @module
 */
export const FLOW_HOOKS = String.raw`
local Flows = {}

function Flows.key(id) return P .. ':flow:' .. id end
function Flows.nodes(id) return P .. ':flow:' .. id .. ':n' end
function Flows.jobs(id) return P .. ':flow:' .. id .. ':j' end
function Flows.catchKey(id) return P .. ':flow:' .. id .. ':catch' end
function Flows.meta(id, pos) return cjson.decode(redis.call('HGET', Flows.nodes(id), pos)) end

-- The first node of flow id from position from on that is waiting, queued or running (open), or
-- nil when none is: the flow has ended.
function Flows.firstOpen(id, from)
  local nodes = Flows.nodes(id)
  for pos = from, tonumber(redis.call('HGET', Flows.key(id), 'nodes')) - 1 do
    local state = redis.call('HGET', nodes, pos .. ':s')
    if state == 'waiting' or state == 'pending' then return pos end
  end
  return nil
end

-- Flow id, one of whose nodes just moved, ended at t once no node is left open (the move ended it
-- then, even over an end older code left before its retry opened the flow again), and has not
-- ended while one is. The walk starts at open_from and keeps where it stopped, so the settles of
-- a flow read each node about once, not every node settled before; a retry lowers it
-- (Flows.reopened).
function Flows.markEnd(id, t)
  local key = Flows.key(id)
  local from = tonumber(redis.call('HGET', key, 'open_from')) or 0
  local open = Flows.firstOpen(id, from)
  local stop = open or tonumber(redis.call('HGET', key, 'nodes'))
  if stop ~= from then redis.call('HSET', key, 'open_from', stop) end
  if open then redis.call('HDEL', key, 'ended_at') else redis.call('HSET', key, 'ended_at', t) end
end

-- Node pos of flow id is open again: the walk of Flows.markEnd starts at it at the latest (its
-- descendants, which the walk of the graph may make wait again, come after it).
function Flows.reopened(id, pos)
  local from = tonumber(redis.call('HGET', Flows.key(id), 'open_from'))
  if from ~= nil and from > tonumber(pos) then redis.call('HSET', Flows.key(id), 'open_from', pos) end
end

-- Queues waiting node pos of flow id at t, carrying its parents' outputs and errors; how many (1).
function Flows.queueNode(id, pos, t)
  local nodes = Flows.nodes(id)
  local held = redis.call('HGET', nodes, pos .. ':h')
  if not held then return 0 end
  -- Each object's members written in the parents' order in the flow, as SQL's: a Lua table
  -- would give cjson its own order.
  local edges = Flows.meta(id, pos).parents
  table.sort(edges, function(a, b) return a[1] < b[1] end)
  local outputs, errors = {}, {}
  for _, edge in ipairs(edges) do
    local parent = Flows.meta(id, edge[1])
    local f = redis.call('HMGET', nodes, edge[1] .. ':s', edge[1] .. ':o', edge[1] .. ':e')
    local key = cjson.encode(parent.key) .. ':'
    if f[1] == 'succeeded' then
      table.insert(outputs, key .. cjson.encode({name = parent.name, output = f[2] or NULL}))
    else
      table.insert(errors, key .. cjson.encode(f[3] or f[1]))
    end
  end
  local parents = '{"outputs":{' .. table.concat(outputs, ',') .. '},"errors":{' ..
    table.concat(errors, ',') .. '}}'
  local jobId = Links.queue(held, t, nil, nil, nil, {flow_id = id, flow_parents = parents})
  redis.call('HDEL', nodes, pos .. ':h')
  redis.call('HSET', nodes, pos .. ':s', 'pending', pos .. ':j', jobId)
  redis.call('HSET', Flows.jobs(id), jobId, pos)
  return 1
end

-- Walks the nodes parents first after one failed, was cancelled or retried: a waiting or skipped
-- node with a parent that did not succeed (on an edge without continueOnFailure) is skipped, any
-- other waits for its parents not yet settled and is queued when none is left (never in a
-- cancelled flow). How many it queued.
function Flows.settleGraph(id, cancelled, t)
  local count = tonumber(redis.call('HGET', Flows.key(id), 'nodes'))
  local nodes = Flows.nodes(id)
  local states = {}
  for pos = 0, count - 1 do states[pos] = redis.call('HGET', nodes, pos .. ':s') end
  local queued = 0
  for pos = 0, count - 1 do
    local state = states[pos]
    if state == 'waiting' or state == 'skipped' then
      local blocked, waitingFor = false, 0
      for _, edge in ipairs(Flows.meta(id, pos).parents) do
        local parent, continues = states[edge[1]], edge[2] == 1
        local bad = parent == 'failed' or parent == 'cancelled' or parent == 'skipped'
        if bad and not continues then blocked = true end
        if not (parent == 'succeeded' or (continues and bad)) then waitingFor = waitingFor + 1 end
      end
      if blocked or not cancelled then
        state = blocked and 'skipped' or 'waiting'
        states[pos] = state
        redis.call('HSET', nodes, pos .. ':s', state, pos .. ':w', waitingFor)
        if state == 'waiting' and waitingFor == 0 then
          queued = queued + Flows.queueNode(id, pos, t)
          states[pos] = 'pending'
        end
      end
    end
  end
  return queued
end

-- Nodes at positions (each pending) of flow id ended without success: kind 'fail', 'cancel', or
-- 'clear' (deleted unrun by a clear of its queue: cancelled, no catch). The catch is queued once
-- (not in a cancelled flow) and the graph walked once after all of them ended, which gives what
-- walking it after each would. How many jobs it queued.
function Flows.ended(id, cancelled, positions, kind, err, t)
  local nodes = Flows.nodes(id)
  local state = kind == 'fail' and 'failed' or 'cancelled'
  local message = state
  if err ~= nil and err ~= NULL then message = err end
  for _, pos in ipairs(positions) do redis.call('HSET', nodes, pos .. ':s', state, pos .. ':e', message) end
  local queued = 0
  if not cancelled and kind ~= 'clear' then queued = Links.release(Flows.catchKey(id), t, nil) end
  queued = queued + Flows.settleGraph(id, cancelled, t)
  Flows.markEnd(id, t)
  return queued
end

-- The flow of a node's job and the node's position, or nil when it is none (or gone).
function Flows.nodeOf(jobId, job)
  local id = job.flow_id
  if id == nil then return nil end
  if redis.call('EXISTS', Flows.key(id)) == 0 then return nil end
  local pos = redis.call('HGET', Flows.jobs(id), jobId)
  if not pos then return nil end
  return id, pos
end

function H.flowSettled(jobId, job, kind, output, err, t)
  local id, pos = Flows.nodeOf(jobId, job)
  if id == nil then return 0 end
  local nodes = Flows.nodes(id)
  if redis.call('HGET', nodes, pos .. ':s') ~= 'pending' then return 0 end
  local cancelled = redis.call('HEXISTS', Flows.key(id), 'cancelled_at') == 1
  if kind == 'complete' then
    redis.call('HSET', nodes, pos .. ':s', 'succeeded')
    if output ~= nil and output ~= NULL then redis.call('HSET', nodes, pos .. ':o', output) end
    local queued = 0
    if not cancelled then
      for _, child in ipairs(Flows.meta(id, pos).children) do
        if redis.call('HGET', nodes, child .. ':s') == 'waiting'
          and redis.call('HINCRBY', nodes, child .. ':w', -1) == 0 then
          queued = queued + Flows.queueNode(id, child, t)
        end
      end
    end
    -- A child queued keeps the flow open: nothing to write (an end older code left on it is the
    -- prune's to clear, and the settle that ends the flow writes its own).
    if queued == 0 then Flows.markEnd(id, t) end
    return queued
  end
  return Flows.ended(id, cancelled, {pos}, kind, err, t)
end

function H.flowsCancelled(jobs, err, t)
  local positions, flows = {}, {}
  for _, entry in ipairs(jobs) do
    local id, pos = Flows.nodeOf(entry.id, entry.job)
    if id ~= nil and redis.call('HGET', Flows.nodes(id), pos .. ':s') == 'pending' then
      if positions[id] == nil then
        positions[id] = {}
        table.insert(flows, id)
      end
      table.insert(positions[id], pos)
    end
  end
  local queued = 0
  for _, id in ipairs(flows) do
    local cancelled = redis.call('HEXISTS', Flows.key(id), 'cancelled_at') == 1
    queued = queued + Flows.ended(id, cancelled, positions[id], 'cancel', err, t)
  end
  return queued
end

function H.flowRetried(jobId, failed, t)
  local id, pos = Flows.nodeOf(jobId, failed)
  if id == nil then return 0 end
  local nodes = Flows.nodes(id)
  local state = redis.call('HGET', nodes, pos .. ':s')
  if state ~= 'failed' and state ~= 'cancelled' then return 0 end
  redis.call('HSET', nodes, pos .. ':s', 'pending')
  redis.call('HDEL', nodes, pos .. ':e')
  Flows.reopened(id, pos)
  local queued = Flows.settleGraph(id, redis.call('HEXISTS', Flows.key(id), 'cancelled_at') == 1, t)
  Flows.markEnd(id, t)
  return queued
end

function H.commit_flow(id)
  redis.call('HDEL', Flows.key(id), 'staged')
  redis.call('ZADD', P .. ':flows', id, id)
end

function H.undo_flow(id)
  redis.call('DEL', Flows.key(id), Flows.nodes(id), Flows.jobs(id), Flows.catchKey(id))
end
`;
