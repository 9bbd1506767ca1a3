/**
 * Unique and debounced jobs, `withoutOverlapping` and `rateLimited` on Redis:
 * keys written with the job they name, overlap locks and rate windows
 * checked for a tick's claimed jobs in one script, and all of it released by
 * the script that settles, claims or deletes the job. The job row says what
 * it holds, as on SQL: `keyed` (0 none, 1 until it settles, 2 until it
 * starts) with the key's name in `job_key`, and `locked` (1 when its attempt
 * took overlap locks) with the locks' names in `lock_keys` (a JSON array),
 * so a plain job's settle touches none of these keys.
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
import type { KeyedInsert, KeyedJobRow, MiddlewareRequest } from "../store.ts";
import type { RedisConnection } from "./connection.ts";
import { dispatch, dispatchScript } from "./dispatch_script.ts";
import { AREA_HOOKS } from "./hooks.ts";
import { luaScript } from "./lua.ts";
import { STAGE_ENDS } from "./stages.ts";

/**
 * Input: `rows` (KeyedJobRow[]), `token` (the dispatch's), `waitsMs` (how
 * much longer the dispatch waits for a key another open transaction
 * holds). Reply: a KeyedInsert per row, or `{held}`, having written
 * nothing, when another open transaction holds the key of row `held` (1
 * for the first), with `deadlock` true when this dispatch's transaction
 * must give up instead of waiting (see `deadlockLoser`).
 *
 * A dispatch inside a transaction that waits records what it waits for in
 * `P:stages:waiting`, until it stops waiting (it stores, gives up, or its
 * transaction ends): two transactions that each wait for a key the other
 * holds, directly or through others, wait in a cycle that none of them
 * ends on its own. The one of the cycle begun last (the later start in
 * `P:stages`, then the greater id) gives up, as the one its next ask
 * finds it is: that script rolls it back (aborts it, as PostgreSQL does the
 * transaction it picks), so the keys it held come free at once and the
 * others go on.
 */
const INSERT_KEYED = dispatchScript(
  "insertKeyed",
  String.raw`
${STAGE_ENDS}
local waiting = P .. ':stages:waiting'

-- The transaction that gives up in the cycle of waits from this call's transaction through holder
-- (the open transaction holding the key this call waits for), or nil when holder's waits lead to
-- no wait for this one.
local function deadlockLoser(holder)
  local now = serverMs()
  local loser, loserBegan = STAGE, tonumber(redis.call('ZSCORE', P .. ':stages', STAGE))
  local seen = {}
  local at = holder
  while at ~= STAGE do
    if seen[at] then return nil end
    seen[at] = true
    local began = redis.call('ZSCORE', P .. ':stages', at)
    local wait = redis.call('HGET', waiting, at)
    if not began or not wait then return nil end
    began = tonumber(began)
    if began > loserBegan or (began == loserBegan and at > loser) then loser, loserBegan = at, began end
    local untilMs, next = string.match(wait, '^(%d+) (.*)$')
    if tonumber(untilMs) <= now then return nil end
    at = next
  end
  return loser
end

for i, row in ipairs(INPUT.rows) do
  local holder = H.openHolder(row.key)
  if holder ~= nil then
    storedNothing = true
    if STAGE ~= nil and deadlockLoser(holder) == STAGE then
      endStage(STAGE, false)
      reply = cjson.encode({held = i, deadlock = true})
    else
      if STAGE ~= nil then redis.call('HSET', waiting, STAGE, (serverMs() + INPUT.waitsMs) .. ' ' .. holder) end
      reply = cjson.encode({held = i})
    end
    break
  end
end
if reply == nil then
  if STAGE ~= nil then redis.call('HDEL', waiting, STAGE) end
  local pushed = {}
  for i, row in ipairs(INPUT.rows) do
    local id, outcome = H.insertKeyed(row)
    pushed[i] = {id = id, outcome = outcome}
  end
  reply = cjson.encode(pushed)
end
`,
);

/** The longest a dispatch waits before it asks again for a key an open transaction holds, in ms. */
const HELD_KEY_RETRY_MS = 100;

/** The reply of {@linkcode INSERT_KEYED} when an open transaction holds the key of row `held` (1-based). */
interface HeldKey {
  readonly held: number;
  /** Present when the dispatch's own transaction gives up: the holder waits for it. */
  readonly deadlock?: true;
}

/**
 * Input: `requests` (MiddlewareRequest[], tokens as strings). Reply: per
 * request, null when it took its locks and counted its starts, or when to
 * try again (caller's clock).
 */
const ACQUIRE = luaScript(
  "acquire",
  "allow-oom",
  AREA_HOOKS,
  String.raw`
local verdicts = {}
for i, request in ipairs(INPUT.requests) do
  local retryAt = nil
  local function later(t) if retryAt == nil or t > retryAt then retryAt = t end end
  for _, lock in ipairs(request.locks) do
    local locks = P .. ':lock:' .. lock.key
    redis.call('ZREMRANGEBYSCORE', locks, '-inf', NOW)
    if redis.call('ZCARD', locks) >= lock.limit then later(lock.retryAt) end
  end
  local windows = {}
  for _, rate in ipairs(request.rates) do
    local window = P .. ':rate:' .. rate.key
    local start = math.floor(NOW / rate.perMs) * rate.perMs
    local row = redis.call('HMGET', window, 'window_start', 'starts')
    local used = 0
    local stored = tonumber(row[1])
    if stored == start then used = tonumber(row[2]) end
    -- When the window turns, on the caller's clock as every verdict is. A window newer than this
    -- request's is full for it: counting here would move the window back, to count again.
    if used >= rate.max or (stored ~= nil and stored > start) then later(back(start + rate.perMs)) end
    table.insert(windows, {window = window, start = start, starts = used + 1, perMs = rate.perMs})
  end
  if retryAt ~= nil then
    verdicts[i] = retryAt
  else
    verdicts[i] = NULL
    for _, lock in ipairs(request.locks) do
      redis.call('ZADD', P .. ':lock:' .. lock.key, at(lock.expiresAt), request.id .. ':' .. request.token)
    end
    local job = jobKey(request.id)
    if #request.locks > 0 and redis.call('HGET', job, 'token') == request.token then
      -- Its earlier attempts' locks too, until they are released or expire.
      local held = redis.call('HGET', job, 'lock_keys')
      local names = held and cjson.decode(held) or {}
      local seen = {}
      for _, name in ipairs(names) do seen[name] = true end
      for _, lock in ipairs(request.locks) do
        if not seen[lock.key] then seen[lock.key] = true; table.insert(names, lock.key) end
      end
      redis.call('HSET', job, 'locked', 1, 'lock_keys', cjson.encode(names))
    end
    -- The HASH goes a minute after its window ends, as a group's window does (groups.ts).
    for _, w in ipairs(windows) do
      redis.call('HSET', w.window, 'window_start', w.start, 'starts', w.starts, 'per_ms', w.perMs)
      redis.call('PEXPIRE', w.window, w.start + w.perMs - NOW + 60000)
    end
    -- Let through and started by its claim (not claimed ahead): it starts now.
    local row = redis.call('HMGET', job, 'token', 'claimed_ahead', 'keyed', 'job_key')
    if row[1] == request.token and row[2] ~= '1' then
      H.started(request.id, {keyed = row[3] or nil, job_key = row[4] or nil})
    end
  end
end
return cjson.encode(verdicts)
`,
);

/**
 * Inserts each row unless its key names a job that holds it, in one script;
 * see {@linkcode KeyedInsert}. Retried once, with its token, when its reply
 * was lost. With `stage`, inside that transaction. While another open
 * transaction holds the key of a row, waits for its end and asks again, for
 * `connectTimeoutMs` at most (then rejects naming the key); rejects at once
 * when that transaction waits for this one and this one began later (a
 * deadlock, see {@linkcode INSERT_KEYED}): its transaction was then rolled
 * back, and `transaction.abortedBy` is set to the error.
 */
export async function insertKeyed(
  redis: RedisConnection,
  rows: readonly KeyedJobRow[],
  stage?: string,
  transaction?: { abortedBy?: Error },
): Promise<KeyedInsert[]> {
  if (rows.length === 0) return [];
  // One outcome per row, and there are rows: never an empty Lua table (which encodes as {}).
  const deadline = Date.now() + redis.connectTimeoutMs;
  for (let waitMs = 5;; waitMs = Math.min(2 * waitMs, HELD_KEY_RETRY_MS)) {
    const waitsMs = Math.max(deadline - Date.now(), 0);
    const input = { now: rows[0]!.createdAt, rows, waitsMs };
    const reply = await dispatch<KeyedInsert[] | HeldKey>(redis, INSERT_KEYED, input, stage);
    if (Array.isArray(reply)) return reply;
    const row = rows[reply.held - 1]!;
    if (reply.deadlock === true) {
      const error = deadlocked(row);
      if (transaction !== undefined) transaction.abortedBy = error;
      throw error;
    }
    const left = deadline - Date.now();
    if (left <= 0) throw heldTooLong(row, redis.connectTimeoutMs);
    await new Promise((resolve) => setTimeout(resolve, Math.min(waitMs, left)));
  }
}

/** The error of a dispatch of `row` whose transaction gives up, and is aborted, to end a deadlock. */
function deadlocked(row: KeyedJobRow): Error {
  return new Error(
    `Cannot dispatch "${row.name}": an open transaction holds its ${row.key.kind} key "${row.key.key}" and waits for a key this transaction holds (a deadlock); this transaction, begun later, gives up: it is aborted, storing nothing and holding no key, so run it again; dispatch the same keys in the same order in overlapping transactions`,
  );
}

/** The error of a dispatch of `row` whose key an open transaction held for `waitedMs`. */
function heldTooLong(row: KeyedJobRow, waitedMs: number): Error {
  return new Error(
    `Cannot dispatch "${row.name}": an open transaction holds its ${row.key.kind} key "${row.key.key}" (it stored or debounced the key's job) and did not end within ${waitedMs} ms (connectTimeoutMs)`,
  );
}

/** Checks each claimed job's middleware in order, in one script; see `Store.acquire`. */
export async function acquire(
  redis: RedisConnection,
  requests: readonly MiddlewareRequest[],
  now: number,
): Promise<(number | null)[]> {
  if (requests.length === 0) return [];
  const input = {
    now,
    requests: requests.map((request) => ({ ...request, token: String(request.token) })),
  };
  // One verdict per request, and there are requests: never an empty Lua table ({}).
  return await redis.call<(number | null)[]>(ACQUIRE, input);
}
