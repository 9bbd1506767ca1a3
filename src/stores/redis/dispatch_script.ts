/**
 * Scripts that store jobs under a dispatch token: a call retried after its
 * reply was lost gives back the reply of the first instead of storing the
 * jobs twice (`RedisConnection.callIdempotent` sends it again).
 *
 * @internal
 * @module
 */
import type { CallContext, RedisConnection } from "./connection.ts";
import { AREA_HOOKS } from "./hooks.ts";
import { type LuaScript, luaScript } from "./lua.ts";

/**
 * A script named `name` whose `body` stores jobs and sets the local
 * `reply` (a JSON string); input `token`, the dispatch's, `keepS`, and
 * `resent` on a call sent again (all added by {@linkcode dispatch}). The
 * reply is kept under the token for `keepS` seconds (as long as a retry may
 * come: `RedisConnection.callIdempotent` sets it from how long it waits for
 * the connection), and idle workers are woken unless the call writes inside
 * a transaction (its commit wakes them) or the body set `storedNothing`
 * (it waits for a transaction's end). A call inside a transaction that
 * counts as abandoned (see stages.ts) writes nothing and fails saying so.
 * Only a call sent again looks for
 * the record: a first send's token is new, so the look would find nothing.
 */
export function dispatchScript(name: string, body: string): LuaScript {
  return luaScript(
    name,
    "writes",
    AREA_HOOKS,
    String.raw`
local record = P .. ':dispatch:' .. INPUT.token
-- Only a call sent again can find its token's record (a token is new to each first send).
if INPUT.resent then
  local done = redis.call('GET', record)
  if done then return done end
end
-- A transaction that counts as abandoned is rolled back whole: it writes nothing more.
if STAGE ~= nil and not stageOpen(STAGE) then return abandonedStage() end
local reply
local storedNothing = false
${body}
redis.call('SET', record, reply, 'EX', INPUT.keepS)
if STAGE == nil and not storedNothing then wake() end
return reply
`,
  );
}

/**
 * Runs `script` (one of {@linkcode dispatchScript}'s) with `input`, inside
 * transaction `stage` when given, sent once more if its reply was lost
 * (`RedisConnection.callIdempotent`, which gives it its token).
 */
export function dispatch<T>(
  redis: RedisConnection,
  script: LuaScript,
  input: CallContext & Record<string, unknown>,
  stage?: string,
): Promise<T> {
  return redis.callIdempotent<T>(script, stage === undefined ? input : { ...input, stage });
}
