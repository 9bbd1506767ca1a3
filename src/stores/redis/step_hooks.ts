/**
 * The Lua of durable steps that other scripts include: a job's memos (one
 * per `ctx.step`, `ctx.sleep` and `ctx.waitFor` call position) and its
 * mailbox of signals. The keys (`P:steps:<id>`, `P:signals:<id>`,
 * `P:signals:seq`) are in lua.ts's key layout; `dropSteps` (the prelude)
 * deletes them once the job left for good. Apart from steps.ts so that
 * hooks.ts, which joins every area's hooks, does not load its scripts.
 *
 * A wait's memo is keyed by its name, numbered from the second use of one
 * name in a run (`survey`, `survey#2`): the signal it waits for is the
 * name without the number.
 *
 * @internal
 * @module
 */

/**
 * The memo and mailbox helpers, a table `Steps`:
 * - `Steps.signalName(key)`: the signal name a wait keyed `key` takes.
 * - `Steps.hasSignal(id, name)`: whether job `id`'s mailbox holds a signal
 *   named `name`.
 * - `Steps.waitsFor(id, name)`: whether job `id` has a wait still waiting
 *   for a signal named `name`.
 * - `Steps.write(id, step, t)`: writes the memo of a StepWrite of the input
 *   (its `until` on the caller's clock) as written at `t` (store clock),
 *   replacing the memo of the same `seq`, and deletes the signal it takes.
 */
export const STEPS = String.raw`
local Steps = {}

function Steps.signalName(key)
  local name = string.gsub(key, '#%d+$', '')
  return name
end

function Steps.hasSignal(id, name)
  for _, member in ipairs(redis.call('ZRANGE', signalsKey(id), 0, -1)) do
    if cjson.decode(member).name == name then return true end
  end
  return false
end

function Steps.waitsFor(id, name)
  for _, value in ipairs(redis.call('HVALS', stepsKey(id))) do
    local memo = cjson.decode(value)
    if memo.kind == 'wait' and memo.done == false and Steps.signalName(memo.key) == name then
      return true
    end
  end
  return false
end

function Steps.write(id, step, t)
  local memo = cjson.encode({key = step.key, kind = step.kind, output = step.output,
    ['until'] = at(opt(step['until'])) or NULL, done = step.done, attempt = step.attempt,
    -- Rounded as Math.round: the SQL stores keep whole milliseconds.
    durationMs = math.floor(step.durationMs + 0.5), at = t})
  redis.call('HSET', stepsKey(id), string.format('%d', step.seq), memo)
  local takes = opt(step.takesSignal)
  if takes ~= nil then redis.call('ZREMRANGEBYSCORE', signalsKey(id), takes, takes) end
end
`;

/**
 * The tick's step hooks (with {@linkcode STEPS} before them), for the
 * settle's `step` and `park` settlements, `s` of the input and `job` the
 * row as read:
 * - `H.stepWritten(s)`: writes the memo `s.step` as of `s.at`.
 * - `H.parkedDue(s)`: when a park makes the job due, on the store's clock:
 *   `s.availableAt`, or `s.at` for a wait whose signal is already in the
 *   mailbox (sent while the attempt ran: no wake-up lost).
 */
export const STEP_HOOKS: string = STEPS + String.raw`
function H.stepWritten(s) Steps.write(s.id, s.step, at(s.at)) end

function H.parkedDue(s)
  local step = s.step
  if step.kind == 'wait' and not step.done and Steps.hasSignal(s.id, Steps.signalName(step.key)) then
    return at(s.at)
  end
  return at(s.availableAt)
end
`;
