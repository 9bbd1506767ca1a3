/**
 * Job logs on Redis, read back: the lines a settle wrote (`log_hooks.ts`
 * holds the writing, its layout and its pruning rule).
 *
 * @internal
 * @module
 */
import type { LogLineRow } from "../store.ts";
import type { RedisConnection } from "./connection.ts";
import { luaScript } from "./lua.ts";
import { list } from "./script_replies.ts";

/**
 * Input: `jobId`. Reply: its lines, oldest first, times on the caller's
 * clock; none once the job is in none of the jobs, failed jobs and kept
 * finished jobs (as on SQL).
 */
const LOGS = luaScript(
  "logs",
  "no-writes",
  String.raw`
local id = INPUT.jobId
local lines = {}
if redis.call('EXISTS', jobKey(id), P .. ':failed:' .. id, P .. ':done:' .. id) == 0 then
  return cjson.encode(lines) -- removed for good: its lines wait for the prune, unread
end
for _, entry in ipairs(redis.call('LRANGE', P .. ':log:' .. id, 0, -1)) do
  local line = cjson.decode(entry)
  line.at = stored(line.at)
  line.bytes = nil
  table.insert(lines, line)
end
return cjson.encode(lines)
`,
);

/** One job's log, oldest line first. */
export async function logs(redis: RedisConnection, jobId: number): Promise<LogLineRow[]> {
  if (!Number.isSafeInteger(jobId)) return [];
  const lines = list(
    await redis.call<Omit<LogLineRow, "jobId">[]>(LOGS, { now: Date.now(), jobId }),
  );
  return lines.map((line) => ({ ...line, jobId }));
}
