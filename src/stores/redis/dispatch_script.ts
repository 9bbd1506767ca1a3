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
 * `reply` (a JSON string; a refusal is a reply too: the body never returns
 * itself, so every answer carries the shift below); input `token`, the dispatch's, `keepS`,
 * `resent` on a call sent again, and `shiftHint`, the clock shift the
 * store's last dispatch used (all added by {@linkcode dispatch}). The
 * call answers `[shift, reply]`, the shift it used beside the reply. The
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
-- The reply with the clock shift the call used, which the store sends with its next dispatch.
local function withShift(kept) return '[' .. string.format('%.17g', SHIFT) .. ',' .. kept .. ']' end
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
-- Kept with the shift its jobs were stored with: a call sent again answers the same.
reply = withShift(reply)
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
export async function dispatch<T>(
  redis: RedisConnection,
  script: LuaScript,
  input: CallContext & Record<string, unknown>,
  stage?: string,
): Promise<T> {
  const { dispatchShift } = redis;
  const [shift, reply] = await redis.callIdempotent<[number, T]>(script, {
    ...input,
    ...(stage !== undefined && { stage }),
    ...(dispatchShift.hint !== null && { shiftHint: dispatchShift.hint }),
  });
  if (redis.databaseClock) dispatchShift.learn(shift);
  return reply;
}
