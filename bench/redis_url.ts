/**
 * Which Redis server `deno task bench --store redis` measures: the
 * environment's `QUEUE_BENCH_REDIS_URL`, else the local server.
 *
 * @module
 */
import { isRedisUrl } from "../src/stores/database_url.ts";

/** The server used when the environment names none. */
export const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";

/**
 * The URL to measure: `QUEUE_BENCH_REDIS_URL` when set, else
 * {@linkcode DEFAULT_REDIS_URL}; throws when the variable is no `redis://`
 * or `rediss://` URL. `env` reads one variable.
 */
export function resolveRedisUrl(env: (name: string) => string | undefined): string {
  const url = env("QUEUE_BENCH_REDIS_URL");
  if (url === undefined || url === "") return DEFAULT_REDIS_URL;
  if (!isRedisUrl(url)) {
    throw new TypeError("QUEUE_BENCH_REDIS_URL must be a redis:// or rediss:// URL");
  }
  return url;
}
