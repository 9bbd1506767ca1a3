/**
 * The store contract against Redis, one part per test file (`AREA_PARTS`),
 * each case under a prefix of its own whose keys it deletes afterwards.
 *
 * @module
 */
import { RedisStore } from "../../../src/stores/redis/mod.ts";
import { storeContract } from "../contract/mod.ts";
import { openTestRedisStore, redisTestUrl } from "../../_redis.ts";

/**
 * Registers part `part` of the contract against Redis when
 * `QUEUE_TEST_REDIS_URL` is set; otherwise one ignored case that says why.
 */
export function redisContract(part: number): void {
  const url = redisTestUrl();
  if (url === null) {
    console.log("Redis store tests skipped: QUEUE_TEST_REDIS_URL is not set");
    Deno.test({
      name: "RedisStore: skipped, QUEUE_TEST_REDIS_URL is not set",
      ignore: true,
      fn() {},
    });
    return;
  }
  storeContract("RedisStore", async () => {
    const opened = await openTestRedisStore(url, { clock: "caller" });
    const { prefix } = opened;
    return {
      store: opened.store,
      another: () => RedisStore.open(url, { prefix, clock: "caller" }),
      sql: false,
      [Symbol.asyncDispose]: () => opened[Symbol.asyncDispose](),
    };
  }, part);
}
