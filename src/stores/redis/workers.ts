/**
 * Workers' heartbeats on Redis.
 *
 * Layout: `P:workers` HASH, worker id to its row (JSON: the SQL `workers`
 * columns, `queues` and `names` as JSON text, times on the store's clock);
 * `P:workers:seen` ZSET, worker id by `last_seen_at`.
 *
 * @internal
 * @module
 */
import type { SchemaNews, WorkerHeartbeat, WorkerInfo } from "../store.ts";
import { type StoredWorker, toWorkerInfo } from "../sql/metrics_rollup.ts";
import type { RedisConnection } from "./connection.ts";
import { luaScript } from "./lua.ts";
import { list } from "./script_replies.ts";

/** Most stale rows one heartbeat deletes (workers that died without removing theirs are few). */
const STALE_DROP_LIMIT = 100;

/**
 * Input: `worker` (its row's columns, times on the caller's clock, `now`
 * being its `lastSeenAt`), `staleBefore`. Its start time is kept from the
 * row it replaces. Reply: the store's `layout` and `contract_layout`. A worker's write, small and fixed in size: it runs when
 * the server is out of memory, as the settles it goes with do.
 */
const HEARTBEAT = luaScript(
  "heartbeat",
  "allow-oom",
  String.raw`
local worker = INPUT.worker
local rows = P .. ':workers'
local seen = P .. ':workers:seen'
local started = at(worker.started_at)
local old = redis.call('HGET', rows, worker.id)
if old then started = cjson.decode(old).started_at end
worker.started_at = started
worker.last_seen_at = NOW
redis.call('HSET', rows, worker.id, cjson.encode(worker))
redis.call('ZADD', seen, NOW, worker.id)
local stale = redis.call('ZRANGEBYSCORE', seen, '-inf', '(' .. at(INPUT.staleBefore), 'LIMIT', 0, ${STALE_DROP_LIMIT})
for _, id in ipairs(stale) do
  redis.call('HDEL', rows, id)
  redis.call('ZREM', seen, id)
end
local meta = P .. ':meta'
return cjson.encode({tonumber(redis.call('HGET', meta, 'layout') or '0'),
  tonumber(redis.call('HGET', meta, 'contract_layout') or '0')})
`,
);

/** Input: `id`. Reply: whether the row was there. */
const REMOVE_WORKER = luaScript(
  "removeWorker",
  "allow-oom",
  String.raw`
redis.call('ZREM', P .. ':workers:seen', INPUT.id)
return cjson.encode(redis.call('HDEL', P .. ':workers', INPUT.id) == 1)
`,
);

/** Input: `seenSince`. Reply: the rows seen since, times on the caller's clock. */
const WORKERS = luaScript(
  "workers",
  "no-writes",
  String.raw`
local workers = {}
local ids = redis.call('ZRANGEBYSCORE', P .. ':workers:seen', at(INPUT.seenSince), '+inf')
if #ids > 0 then
  for _, row in ipairs(redis.call('HMGET', P .. ':workers', unpack(ids))) do
    if row then
      local worker = cjson.decode(row)
      worker.started_at = stored(worker.started_at)
      worker.last_seen_at = stored(worker.last_seen_at)
      table.insert(workers, worker)
    end
  end
end
return cjson.encode(workers)
`,
);

/**
 * Writes a worker's row, stamped with the store's now (its start time keeps
 * its distance from `lastSeenAt`, and is kept from the first row), its code
 * built for layout `codeStep`; drops the rows of workers last seen before
 * `staleBefore`; and reads the store's schema news.
 */
export async function heartbeat(
  redis: RedisConnection,
  worker: WorkerHeartbeat,
  codeStep: number,
  staleBefore: number,
): Promise<SchemaNews> {
  const row: Omit<StoredWorker, "last_seen_at"> = {
    id: worker.id,
    host: worker.host,
    pid: worker.pid,
    queues: JSON.stringify(worker.queues),
    names: JSON.stringify(worker.names),
    concurrency: worker.concurrency,
    started_at: worker.startedAt,
    running: worker.running,
    schema_step: codeStep,
  };
  const [layout, contract] = await redis.call<[number, number]>(HEARTBEAT, {
    now: worker.lastSeenAt,
    worker: row,
    staleBefore,
  });
  return { codeStep, databaseStep: layout, contractStep: contract > codeStep ? contract : null };
}

/** Deletes a worker's row; whether it was there. */
export async function removeWorker(redis: RedisConnection, id: string): Promise<boolean> {
  return await redis.call<boolean>(REMOVE_WORKER, { now: Date.now(), id });
}

/** Workers last seen at or after `seenSince`, `now` being the caller's now; earliest started first, then by id. */
export async function workers(
  redis: RedisConnection,
  seenSince: number,
  now: number,
): Promise<WorkerInfo[]> {
  const rows = list(await redis.call<StoredWorker[]>(WORKERS, { now, seenSince }));
  return rows.map(toWorkerInfo).sort((a, b) =>
    a.startedAt.getTime() - b.startedAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  );
}
