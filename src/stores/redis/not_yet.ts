/**
 * A store method not yet written for Redis: rejects naming it.
 *
 * @internal
 * @module
 */

/** Rejects: `method` is not yet on the Redis store. */
export function notYet(method: string): Promise<never> {
  return Promise.reject(new Error(`RedisStore.${method}() is not written yet`));
}
