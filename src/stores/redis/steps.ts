/**
 * Durable steps on Redis: reading a job's memos and mailbox, and sending it
 * a signal. The memos are written by the settle (`step` and `park`
 * settlements, tick.ts) with the helpers of step_hooks.ts; the keys are in
 * lua.ts's key layout.
 *
 * @internal
 * @module
 */
import type { JobStepsRow, SignalOutcome, SignalRequest, SignalRow, StepRow } from "../store.ts";
import type { RedisConnection } from "./connection.ts";
import { luaScript } from "./lua.ts";
import { list } from "./script_replies.ts";
import { STEPS } from "./step_hooks.ts";

/** Input: `id`. Reply: `{steps, signals}`: its memos by seq, its mailbox by id (store clock). */
const JOB_STEPS = luaScript(
  "jobSteps",
  "no-writes",
  String.raw`
local steps = {}
local flat = redis.call('HGETALL', stepsKey(INPUT.id))
for i = 1, #flat, 2 do
  local memo = cjson.decode(flat[i + 1])
  memo.seq = tonumber(flat[i])
  table.insert(steps, memo)
end
table.sort(steps, function(a, b) return a.seq < b.seq end)
local signals = {}
for _, member in ipairs(redis.call('ZRANGE', signalsKey(INPUT.id), 0, -1)) do
  table.insert(signals, cjson.decode(member))
end
return cjson.encode({steps = steps, signals = signals})
`,
);

/**
 * Input: `jobId`, `name`, `payload`. Reply: the SignalOutcome. A job (not
 * one of a transaction still open) keeps the signal in its mailbox; one not
 * leased with a wait still waiting for a signal of that name, which no
 * signal in the mailbox answers yet, is made due now (store clock) and idle
 * workers are woken.
 */
const SIGNAL = luaScript(
  "signal",
  "writes",
  STEPS,
  String.raw`
local id = INPUT.jobId
local job = readJob(id)
if job == nil or job.staged ~= nil then
  if redis.call('EXISTS', P .. ':failed:' .. id, P .. ':done:' .. id) > 0 then
    return cjson.encode('finished')
  end
  return cjson.encode('not-found')
end
-- Whether the mailbox holds a signal of this name: it already answers a wait for it (then due).
local function held(name)
  for _, member in ipairs(redis.call('ZRANGE', signalsKey(id), 0, -1)) do
    if cjson.decode(member).name == name then return true end
  end
  return false
end
-- Only a job not leased can be parked in a wait.
local deliver = job.token == nil and not held(INPUT.name) and Steps.waitsFor(id, INPUT.name)
local signalId = redis.call('INCR', P .. ':signals:seq')
redis.call('ZADD', signalsKey(id), signalId, cjson.encode({id = signalId, name = INPUT.name,
  payload = INPUT.payload, sentAt = NOW}))
if not deliver then return cjson.encode('buffered') end
local due = math.min(num(job, 'available_at'), NOW)
unplace(id, job.queue, job.priority, false)
redis.call('HSET', jobKey(id), 'available_at', due)
placeUnleased(id, job.queue, tonumber(job.priority), due)
wake()
return cjson.encode('delivered')
`,
);

/** Job `id`'s memos (by seq) and mailbox (oldest first), times on the store's clock. */
export async function jobSteps(redis: RedisConnection, id: number): Promise<JobStepsRow> {
  if (!Number.isSafeInteger(id)) return { steps: [], signals: [] };
  const reply = await redis.call<{
    steps: StepRow[] | Record<string, never>;
    signals: SignalRow[] | Record<string, never>;
  }>(JOB_STEPS, { now: Date.now(), id });
  return { steps: list(reply.steps), signals: list(reply.signals) };
}

/** Sends a signal to a job in one script: see {@linkcode SignalOutcome}. */
export function signal(redis: RedisConnection, request: SignalRequest): Promise<SignalOutcome> {
  if (!Number.isSafeInteger(request.jobId)) return Promise.resolve("not-found");
  return redis.call<SignalOutcome>(SIGNAL, {
    now: request.now,
    jobId: request.jobId,
    name: request.name,
    payload: request.payload,
  });
}
