/**
 * The ceilings of the Redis rows, with no queue in the way: a minimal queue
 * in the functions of a small library of its own (a job is an id from a
 * counter, a hash of its payload and due time, and a member of one sorted
 * set by due time, the Redis counterpart of SQLite's minimal queue table),
 * called through the store's client (node-redis) on a connection of its own.
 *
 * - the insert: one job per awaited call, as a one-at-a-time dispatch;
 * - the take: one awaited call per job that deletes the job before it and
 *   pops the next, as a drain at concurrency 1 that makes one call per job
 *   (ours and BullMQ's both do);
 * - the batched take: the same for 50 jobs per call, the ceiling of a drain
 *   that claims and settles in batches.
 *
 * Each also once keeping the rules our store keeps on every such call: the
 * server's clock and the epoch check; for the insert, the reply kept under
 * the dispatch's token and the wake-up; for the take, a lease with its
 * token and the attempt counted at the claim, and a settle fenced by that
 * token that keeps the finished job. Our dispatch and drains do at least
 * what the kept variant does, so each bounds the row of ours beside it
 * (another design could leave out some of it: a wake-up only when a worker
 * idles, say); beside BullMQ's figure of the same run, it says how far a
 * target set as a multiple of BullMQ's is from what this design can reach
 * on the machine of the run.
 *
 * @module
 */
// deno-lint-ignore no-import-prefix
import { createClient } from "npm:@redis/client@^6.4";
import { measureRate } from "./measurement.ts";
import { withTempPrefix } from "./redis_queue.ts";

/** The epoch the ceilings that keep the rules check on every call. */
const EPOCH = "ceiling-epoch";

/**
 * The ceilings' library, its name and its functions' ending with `suffix`:
 * a function's name is the server's to all its libraries, and two benches
 * on one server (two test suites side by side) each load and delete their own.
 */
function libraryCode(suffix: string): string {
  return String.raw`#!lua name=renox_bench_ceilings_${suffix}
-- Keys: {prefix}:seq, the counter of ids; jobs at <prefix>:job:<id> and in <prefix>:due.
local function prefix(keys) return string.sub(keys[1], 1, -5) end

-- Input: payload, due (ms). Stores one job; its id.
redis.register_function('renox_ceiling_insert_${suffix}', function(keys, args)
  local p = prefix(keys)
  local id = redis.call('INCR', keys[1])
  redis.call('HSET', p .. ':job:' .. id, 'payload', args[1], 'due', args[2])
  redis.call('ZADD', p .. ':due', args[2], id)
  return id
end)

-- Input: the ids taken before (deleted now), then how many to take. The jobs taken, as a flat
-- list of id and payload; empty when none is left.
redis.register_function('renox_ceiling_take_${suffix}', function(keys, args)
  local p = prefix(keys)
  local count = tonumber(args[#args])
  for i = 1, #args - 1 do redis.call('DEL', p .. ':job:' .. args[i]) end
  local popped = redis.call('ZPOPMIN', p .. ':due', count)
  local taken = {}
  for i = 1, #popped, 2 do
    taken[#taken + 1] = popped[i]
    taken[#taken + 1] = redis.call('HGET', p .. ':job:' .. popped[i], 'payload')
  end
  return taken
end)

-- What every call of a queue that keeps the issue's rules starts with: the server's clock (TIME)
-- and the check of the epoch that migrate wrote (a server that restarted empty fails the call).
local function enter(keys, args)
  local time = redis.call('TIME')
  if redis.call('HGET', prefix(keys) .. ':meta', 'epoch') ~= args[#args] then
    return nil, redis.error_reply('the epoch is gone')
  end
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- The insert, keeping the rules every dispatch must (input: payload, delay in ms, the dispatch's
-- token, the epoch): due on the server's clock, the reply kept under the token for a call sent
-- again after its reply was lost, idle workers woken.
redis.register_function('renox_ceiling_insert_kept_${suffix}', function(keys, args)
  local p = prefix(keys)
  local now, refused = enter(keys, args)
  if refused then return refused end
  local due = now + tonumber(args[2])
  local id = redis.call('INCR', keys[1])
  redis.call('HSET', p .. ':job:' .. id, 'payload', args[1], 'due', due, 'attempts', 0)
  redis.call('ZADD', p .. ':due', due, id)
  redis.call('SET', p .. ':dispatch:' .. args[3], id, 'EX', 60)
  redis.call('PUBLISH', p .. ':wake', '')
  return id
end)

-- The take, keeping the rules every claim and settle must (input: the id and lease token of each
-- job taken before, how many to take, the epoch): a settle fenced by the claim's token that keeps
-- the finished job (renamed, stamped, listed by finish time); a claim of jobs due by the server's
-- clock that counts the attempt and leases each (a token and a lease end, listed by lease end for
-- the reclaim of abandoned ones).
-- The jobs taken, as a flat list of id, token and payload.
redis.register_function('renox_ceiling_take_kept_${suffix}', function(keys, args)
  local p = prefix(keys)
  local now, refused = enter(keys, args)
  if refused then return refused end
  for i = 1, #args - 2, 2 do
    local key = p .. ':job:' .. args[i]
    if redis.call('HGET', key, 'token') == args[i + 1] then
      redis.call('ZREM', p .. ':leased', args[i])
      redis.call('RENAME', key, p .. ':done:' .. args[i])
      redis.call('HSET', p .. ':done:' .. args[i], 'finished_at', now)
      redis.call('ZADD', p .. ':done', now, args[i])
    end
  end
  local count = tonumber(args[#args - 1])
  local due = redis.call('ZRANGEBYSCORE', p .. ':due', '-inf', now, 'LIMIT', 0, count)
  if #due > 0 then redis.call('ZREM', p .. ':due', unpack(due)) end
  local taken = {}
  for _, id in ipairs(due) do
    local key = p .. ':job:' .. id
    local token = tostring(redis.call('INCR', p .. ':tokens'))
    redis.call('HINCRBY', key, 'attempts', 1)
    redis.call('HSET', key, 'token', token, 'lease_until', now + 30000)
    redis.call('ZADD', p .. ':leased', now + 30000, id)
    taken[#taken + 1] = id
    taken[#taken + 1] = token
    taken[#taken + 1] = redis.call('HGET', key, 'payload')
  end
  return taken
end)
`;
}

/** A client on a server that has the ceilings' library, and the keys of a prefix no one uses. */
interface Ceilings {
  readonly client: { sendCommand(args: string[]): Promise<unknown> };
  /** The prefix's id counter: the key every call names. */
  readonly seq: string;
  /** The ceilings' library's ending of its functions' names. */
  readonly suffix: string;
}

/** Calls `fn` with {@linkcode Ceilings} on `url`, and deletes the library and the keys after it. */
function withCeilings<T>(url: string, fn: (ceilings: Ceilings) => Promise<T>): Promise<T> {
  return withTempPrefix(url, async (prefix) => {
    const client = createClient({ url });
    client.on("error", () => {});
    await client.connect();
    const suffix = crypto.randomUUID().replaceAll("-", "").slice(0, 12);
    try {
      await client.sendCommand(["FUNCTION", "LOAD", libraryCode(suffix)]);
      await client.sendCommand(["HSET", `{${prefix}}:meta`, "epoch", EPOCH]);
      return await fn({ client, seq: `{${prefix}}:seq`, suffix });
    } finally {
      await client.sendCommand(["FUNCTION", "DELETE", `renox_bench_ceilings_${suffix}`])
        .catch(() => {});
      await client.close();
    }
  });
}

/** Which ceiling: the bare minimal queue, or the one that keeps what our store keeps per call. */
export type CeilingRules = "bare" | "kept";

function insert(
  { client, seq, suffix }: Ceilings,
  n: number,
  rules: CeilingRules,
): Promise<unknown> {
  const payload = JSON.stringify({ n });
  return client.sendCommand(
    rules === "bare"
      ? ["FCALL", `renox_ceiling_insert_${suffix}`, "1", seq, payload, String(Date.now())]
      : [
        "FCALL",
        `renox_ceiling_insert_kept_${suffix}`,
        "1",
        seq,
        payload,
        "0",
        crypto.randomUUID(),
        EPOCH,
      ],
  );
}

/** What one take gave back: how many jobs, and what the next take settles them by. */
interface Taken {
  readonly count: number;
  /** Each job's id (and, keeping the rules, its lease token), as the next call takes them. */
  readonly settle: string[];
}

/** Settles the jobs of `before` and takes up to `count` more. */
async function take(
  { client, seq, suffix }: Ceilings,
  before: Taken,
  count: number,
  rules: CeilingRules,
): Promise<Taken> {
  const bare = rules === "bare";
  const reply = await client.sendCommand(
    bare ? ["FCALL", `renox_ceiling_take_${suffix}`, "1", seq, ...before.settle, String(count)] : [
      "FCALL",
      `renox_ceiling_take_kept_${suffix}`,
      "1",
      seq,
      ...before.settle,
      String(count),
      EPOCH,
    ],
  ) as string[];
  // Each job: its id, its lease token when the rules are kept, then its payload.
  const fields = bare ? 2 : 3;
  const settle: string[] = [];
  for (let i = 0; i < reply.length; i += fields) {
    JSON.parse(reply[i + fields - 1]!); // each payload decoded, as a worker hands it to a handler
    settle.push(...reply.slice(i, i + fields - 1));
  }
  return { count: reply.length / fields, settle };
}

/** Times `jobs` awaited inserts of the minimal queue, one at a time; per second. */
export function redisInsertCeilingRate(
  url: string,
  jobs: number,
  rules: CeilingRules,
): Promise<number> {
  return withCeilings(url, (ceilings) =>
    measureRate(jobs, async () => {
      for (let n = 0; n < jobs; n++) await insert(ceilings, n, rules);
    }));
}

/**
 * Inserts `jobs` jobs (pipelined), then times taking them all, `batch` per
 * awaited call, each call settling the jobs of the call before; per second.
 */
export function redisTakeCeilingRate(
  url: string,
  jobs: number,
  batch: number,
  rules: CeilingRules,
): Promise<number> {
  return withCeilings(url, async (ceilings) => {
    for (let first = 0; first < jobs; first += 1_000) {
      const calls = [];
      for (let n = first; n < Math.min(jobs, first + 1_000); n++) {
        calls.push(insert(ceilings, n, rules));
      }
      await Promise.all(calls);
    }
    let taken = 0;
    const rate = await measureRate(jobs, async () => {
      let before: Taken = { count: 0, settle: [] };
      for (;;) {
        before = await take(ceilings, before, batch, rules);
        if (before.count === 0) break;
        taken += before.count;
      }
    });
    if (taken !== jobs) throw new Error(`The ceiling's drain took ${taken} of ${jobs} jobs`);
    return rate;
  });
}
