/**
 * The store contracts against Redis, each case under a prefix of its own
 * whose keys it deletes afterwards. Runs when `QUEUE_TEST_REDIS_URL` is set
 * (`.ci/run` sets it); otherwise says why it skips.
 *
 * @module
 */
import { RedisStore } from "../../../src/stores/redis/mod.ts";
import { storeContract } from "../contract/mod.ts";
import { openTestRedisStore, redisTestUrl } from "../../_redis.ts";

const url = redisTestUrl();
if (url === null) {
  console.log("Redis store tests skipped: QUEUE_TEST_REDIS_URL is not set");
  Deno.test({
    name: "RedisStore: skipped, QUEUE_TEST_REDIS_URL is not set",
    ignore: true,
    fn() {},
  });
} else {
  storeContract("RedisStore", async () => {
    const opened = await openTestRedisStore(url, { clock: "caller" });
    const { prefix } = opened;
    return {
      store: opened.store,
      another: () => RedisStore.open(url, { prefix, clock: "caller" }),
      sql: false,
      [Symbol.asyncDispose]: () => opened[Symbol.asyncDispose](),
    };
  });
}
