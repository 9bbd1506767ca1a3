/**
 * Flows on Redis: inserting them, reading them back (one, or a page newest
 * first), cancelling and pruning them;
 * their nodes move on in the tick's scripts through the flow hooks (see
 * `flow_hooks.ts` for the keys).
 *
 * @internal
 * @module
 */
import type {
  CancelFlowRequest,
  CancelledFlow,
  FlowNodeRow,
  FlowRow,
  InsertedFlow,
  NewFlowRow,
  Page,
  StoredFlowNodeState,
} from "../store.ts";
import { toWaiting } from "../../dispatch/job_rows.ts";
import type { RedisConnection } from "./connection.ts";
import { AREA_HOOKS } from "./hooks.ts";
import { dispatch, dispatchScript } from "./dispatch_script.ts";
import { luaScript } from "./lua.ts";
import { list } from "./script_replies.ts";

/** What a node's stored JSON holds (`P:flow:<id>:n`, field `<position>`). */
interface NodeMeta {
  readonly key: string;
  readonly name: string;
  /** `[position, continueOnFailure 0|1]` per parent. */
  readonly parents: readonly (readonly [number, 0 | 1])[];
  readonly children: readonly number[];
}

/**
 * Input: `flow` (name, createdAt, the roots' NewJobRows, onFailure), `metas`
 * and `held` (per node: its JSON, and its waiting job's JSON or null for a
 * root), `token`. Reply: `{id, jobIds}`.
 */
const INSERT_FLOW = dispatchScript(
  "insertFlow",
  String.raw`
local flow = INPUT.flow
local id = redis.call('INCR', P .. ':seq:flow')
local key = Flows.key(id)
redis.call('HSET', key, 'id', id, 'name', flow.name, 'created_at', at(flow.createdAt),
  'nodes', #INPUT.metas)
if STAGE ~= nil then
  redis.call('HSET', key, 'staged', STAGE)
  staged('flow:' .. id)
else
  redis.call('ZADD', P .. ':flows', id, id)
end
local nodes = Flows.nodes(id)
local jobIds = {}
local root = 0
for i, meta in ipairs(INPUT.metas) do
  local pos = i - 1
  redis.call('HSET', nodes, pos, meta)
  local held = INPUT.held[i]
  if held == NULL then
    root = root + 1
    local jobId = insertJob(flow.roots[root], {flow_id = id})
    table.insert(jobIds, jobId)
    redis.call('HSET', nodes, pos .. ':s', 'pending', pos .. ':w', 0, pos .. ':j', jobId)
    redis.call('HSET', Flows.jobs(id), jobId, pos)
  else
    redis.call('HSET', nodes, pos .. ':s', 'waiting', pos .. ':w', INPUT.waits[i], pos .. ':h', held)
  end
end
Links.hold(Flows.catchKey(id), flow.onFailure)
reply = cjson.encode({id = id, jobIds = jobIds})
`,
);

/** Input: `id`. Reply: the flow with each node's JSON, state, job and error, or null. */
const FLOW = luaScript(
  "flow",
  "no-writes",
  AREA_HOOKS,
  String.raw`
local flat = redis.call('HGETALL', Flows.key(INPUT.id))
if #flat == 0 then return cjson.encode(NULL) end
local flow = hashTable(flat)
if flow.staged then return cjson.encode(NULL) end
local nodes = Flows.nodes(INPUT.id)
local rows = {}
for pos = 0, tonumber(flow.nodes) - 1 do
  local f = redis.call('HMGET', nodes, pos, pos .. ':s', pos .. ':j', pos .. ':e')
  local state = f[2]
  if state == 'pending' and f[3] then
    local job = redis.call('HMGET', jobKey(f[3]), 'token', 'claimed_ahead')
    if job[1] and job[2] ~= '1' then state = 'running' end
  end
  table.insert(rows, {meta = f[1], state = state, jobId = tonumber(f[3]) or NULL, error = f[4] or NULL})
end
return cjson.encode({id = tonumber(flow.id), name = flow.name,
  createdAt = stored(tonumber(flow.created_at)), cancelledAt = stored(tonumber(flow.cancelled_at)),
  nodes = rows})
`,
);

/** Input: `limit`, `offset`. Reply: the ids of committed flows, newest first. */
const FLOW_IDS = luaScript(
  "flowIds",
  "no-writes",
  String.raw`
local last = INPUT.offset + INPUT.limit - 1
return cjson.encode(redis.call('ZREVRANGE', P .. ':flows', INPUT.offset, last))
`,
);

/** Most flows one call of the prune script looks at; `pruneFlows` calls it again until done. */
const PRUNE_CHUNK = 500;

/**
 * Most nodes one call of the prune script reads, besides one hash read per
 * flow: it stops after the flow that reaches it, so a call holds the
 * server for a bounded time whatever the flows it finds to delete (a flow
 * larger than this is read in one call, as its insert wrote it in one).
 */
export const PRUNE_NODE_BUDGET = 5_000;

/**
 * Input: `before`, `after` (an id), `limit`, `budget`. Deletes the flows
 * that ended before `before` among the `limit` oldest committed flows with
 * an id above `after`, reading each flow's hash, and the nodes of a flow
 * only where its end says it may go: a flow that ended later is kept
 * unread. A flow with no `ended_at` is open, or older code ended it (it
 * wrote none): the walk from its `open_from` tells, and one that ended gets
 * its end now, so it is kept for the retention from the first prune that
 * saw it ended. A flow to delete has every node read first: older code's
 * retries open a node again keeping the end and `open_from`, so one found
 * open has its end cleared and its `open_from` lowered to that node. The
 * call stops once it read `budget` nodes. A deleted flow's keys go by
 * `UNLINK`, which frees a large hash off the server's main thread. Reply:
 * `{pruned, last}` (the last id looked at, or null when none was left).
 */
const PRUNE_FLOWS = luaScript(
  "pruneFlows",
  "allow-oom",
  AREA_HOOKS,
  String.raw`
local ids = redis.call('ZRANGEBYSCORE', P .. ':flows', '(' .. INPUT.after, '+inf', 'LIMIT', 0, INPUT.limit)
local pruned, read, last = 0, 0, NULL
local cutoff = at(INPUT.before)
for _, id in ipairs(ids) do
  last = tonumber(id)
  local key = Flows.key(id)
  local f = redis.call('HMGET', key, 'ended_at', 'nodes', 'open_from')
  if f[2] then
    local ended = tonumber(f[1])
    if ended == nil then
      local from = tonumber(f[3]) or 0
      local open = Flows.firstOpen(id, from)
      read = read + (open or tonumber(f[2])) - from + 1
      if not open then redis.call('HSET', key, 'ended_at', NOW) end
    elseif ended < cutoff then
      local open = Flows.firstOpen(id, 0)
      read = read + (open or tonumber(f[2])) + 1
      if open then
        redis.call('HDEL', key, 'ended_at')
        Flows.reopened(id, open)
      else
        redis.call('UNLINK', key, Flows.nodes(id), Flows.jobs(id), Flows.catchKey(id))
        redis.call('ZREM', P .. ':flows', id)
        pruned = pruned + 1
      end
    end
  end
  if read >= INPUT.budget then break end
end
return cjson.encode({pruned = pruned, last = last})
`,
);

/**
 * Input: `id`, `reason`, `keepUntil`, `keepUntilByName` (see
 * `CancelFlowRequest`). Marks the flow and its waiting nodes cancelled,
 * drops its catch, and cancels the job of each queued or running node by
 * the rule of a single job's cancel (`H.cancel`): a job not started
 * (queued, or claimed ahead) is deleted and kept as cancelled, a running
 * one asked to stop. Reply: `{cancelled, cancelling}` (job ids), or null
 * when there is no flow or it has ended (no node waiting, queued or
 * running), which it reads before it writes anything.
 */
const CANCEL_FLOW = luaScript(
  "cancelFlow",
  "allow-oom",
  AREA_HOOKS,
  String.raw`
local key = Flows.key(INPUT.id)
local f = redis.call('HMGET', key, 'id', 'cancelled_at', 'staged', 'nodes')
if not f[1] or f[3] then return cjson.encode(NULL) end
local nodes = Flows.nodes(INPUT.id)
local waiting, queued = {}, {}
for pos = 0, tonumber(f[4]) - 1 do
  local node = redis.call('HMGET', nodes, pos .. ':s', pos .. ':j')
  if node[1] == 'waiting' then table.insert(waiting, pos)
  elseif node[1] == 'pending' then table.insert(queued, tonumber(node[2])) end
end
if #waiting == 0 and #queued == 0 then return cjson.encode(NULL) end
if not f[2] then redis.call('HSET', key, 'cancelled_at', NOW) end
for _, pos in ipairs(waiting) do redis.call('HSET', nodes, pos .. ':s', 'cancelled') end
redis.call('DEL', Flows.catchKey(INPUT.id))
-- Marked first: the jobs' cancel then moves the flow as a cancelled one's (no catch, no child).
local jobs = {}
for _, jobId in ipairs(queued) do
  local job = readJob(jobId)
  if job ~= nil and job.staged == nil then
    local keepUntil = INPUT.keepUntilByName[job.name] or INPUT.keepUntil
    table.insert(jobs, {id = jobId, job = job, keepUntil = keepUntil})
  end
end
local cancelled, cancelling = {}, {}
for i, outcome in ipairs(H.cancel(jobs, INPUT.reason)) do
  table.insert(outcome == 'cancelled' and cancelled or cancelling, jobs[i].id)
end
if #jobs > 0 then wake() end
return cjson.encode({cancelled = cancelled, cancelling = cancelling})
`,
);

/** Inserts a flow: its nodes without parents queued, the others and its catch held. */
export async function insertFlow(
  redis: RedisConnection,
  flow: NewFlowRow,
  stage?: string,
): Promise<InsertedFlow> {
  const children = flow.nodes.map((): number[] => []);
  flow.nodes.forEach((node, position) => {
    for (const parent of node.parents) children[parent]!.push(position);
  });
  const metas = flow.nodes.map((node, position) =>
    JSON.stringify(
      {
        key: node.key,
        name: node.job.name,
        parents: node.parents.map((parent) => [parent, node.continueOnFailure ? 1 : 0]),
        children: children[position]!,
      } satisfies NodeMeta,
    )
  );
  const inserted = await dispatch<{ id: number; jobIds: number[] }>(redis, INSERT_FLOW, {
    now: flow.createdAt,
    flow: {
      name: flow.name,
      createdAt: flow.createdAt,
      roots: flow.nodes.filter((node) => node.parents.length === 0).map((node) => node.job),
      onFailure: flow.onFailure,
    },
    metas,
    held: flow.nodes.map((node) =>
      node.parents.length === 0 ? null : JSON.stringify(toWaiting(node.job))
    ),
    waits: flow.nodes.map((node) => node.parents.length),
  }, stage);
  return { id: inserted.id, jobIds: list(inserted.jobIds) };
}

/** One flow with every node, or null. */
export async function flow(redis: RedisConnection, id: number): Promise<FlowRow | null> {
  const row = await redis.call<
    | {
      id: number;
      name: string;
      createdAt: number;
      cancelledAt: number | null;
      nodes: {
        meta: string;
        state: StoredFlowNodeState;
        jobId: number | null;
        error: string | null;
      }[] | Record<string, never>;
    }
    | null
  >(FLOW, { now: Date.now(), id });
  if (row === null) return null;
  const nodes = list(row.nodes).map((node) => ({
    ...node,
    meta: JSON.parse(node.meta) as NodeMeta,
  }));
  return {
    id: row.id,
    name: row.name,
    createdAt: row.createdAt,
    cancelledAt: row.cancelledAt,
    nodes: nodes.map((node): FlowNodeRow => ({
      key: node.meta.key,
      name: node.meta.name,
      state: node.state,
      jobId: node.jobId,
      parents: node.meta.parents.map(([parent]) => nodes[parent]!.meta.key),
      error: node.error,
    })),
  };
}

/** Flows with every node, newest first. */
export async function flows(redis: RedisConnection, page: Page): Promise<FlowRow[]> {
  if (page.limit <= 0) return [];
  const ids = list(
    await redis.call<string[] | Record<string, never>>(FLOW_IDS, {
      now: Date.now(),
      limit: page.limit,
      offset: page.offset,
    }),
  );
  const found: FlowRow[] = [];
  for (const id of ids) {
    const row = await flow(redis, Number(id));
    if (row !== null) found.push(row);
  }
  return found;
}

/**
 * Deletes the flows that ended before `before` (`now` being the caller's
 * now: on the store's clock, as long before its now), a chunk per call; how
 * many.
 */
export async function pruneFlows(
  redis: RedisConnection,
  before: number,
  now: number,
): Promise<number> {
  let pruned = 0;
  let after = 0;
  for (;;) {
    const reply = await redis.call<{ pruned: number; last: number | null }>(PRUNE_FLOWS, {
      now,
      before,
      after,
      limit: PRUNE_CHUNK,
      budget: PRUNE_NODE_BUDGET,
    });
    pruned += reply.pruned;
    if (reply.last === null) return pruned;
    after = reply.last;
  }
}

/** Cancels a flow, its waiting nodes and catch, and its queued and running nodes' jobs; or null. */
export async function cancelFlow(
  redis: RedisConnection,
  request: CancelFlowRequest,
): Promise<CancelledFlow | null> {
  const reply = await redis.call<
    {
      cancelled: number[] | Record<string, never>;
      cancelling: number[] | Record<string, never>;
    } | null
  >(CANCEL_FLOW, {
    now: request.now,
    id: request.id,
    reason: request.reason,
    keepUntil: request.keepUntil,
    keepUntilByName: request.keepUntilByName,
  });
  return reply === null
    ? null
    : { cancelled: list(reply.cancelled), cancelling: list(reply.cancelling) };
}
