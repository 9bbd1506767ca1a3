/**
 * The Redis server of `--store redis`, as the report shows it, and what the
 * report says about how the Redis rows were measured. Imports nothing, so
 * the other stores' reports never load the Redis client.
 *
 * @module
 */
/** The Redis server measured. */
export interface RedisServer {
  /** The URL, password hidden. */
  readonly url: string;
  /** `redis_version` of `INFO server`. */
  readonly version: string;
  /** `appendonly` and `appendfsync`: what a write waits for. */
  readonly persistence: string;
}

/** The server as one line of the report. */
export function formatRedisServer(server: RedisServer): string {
  return `Redis ${server.version} at ${server.url} (${server.persistence})`;
}

/** How the Redis rows were measured, for the report's footnote. */
export const REDIS_METHOD_NOTE =
  " Redis: each row of ours is compared with BullMQ's (its defaults: ioredis connections, " +
  "lockDuration 30 s, completed jobs kept as removeOnComplete is unset) on the same server in " +
  "the same round; a ratio above 1 is ours faster (pick-up: below 1). Pick-up: ms from just " +
  "before dispatch() (add()) to the first line of the handler, each job 2 ms after the previous " +
  "one completed (ours in another process) or started (BullMQ's, and ours in this process); " +
  "ours once in this process with the isolate executor on a connection of its own, timed as " +
  "BullMQ's in this process (performance.now()): the like-for-like row; and once in another " +
  "process with the Web Worker executor (wall clock), as the work command runs; p50 and p99 " +
  "per run, their median over the runs shown, max the slowest of all runs.";
