/**
 * Job logs and attempt spans on Redis.
 *
 * @internal
 * @module
 */
import type { LogLineRow } from "../store.ts";
import type { RedisConnection } from "./connection.ts";
import { notYet } from "./not_yet.ts";

/**
 * The tick's log hooks:
 * - `H.logs(logs)`: the tick's log lines (`TickRecords.logs`), each job's
 *   lines kept under its byte cap.
 * - `H.span(id, span)`: the span of job `id`'s attempt whose release applied.
 */
export const LOG_HOOKS = String.raw`
function H.logs(logs) end
function H.span(id, span) end
`;

/** Not yet on Redis: see `Store`. */
export function logs(_redis: RedisConnection, _jobId: number): Promise<LogLineRow[]> {
  return notYet("logs");
}
