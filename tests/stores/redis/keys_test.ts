/**
 * What only the Redis store's keys have: a dispatch of a key that another
 * open transaction holds asks again until that transaction ends (SQL waits
 * on the row's lock), for `connectTimeoutMs` at most, then rejects naming
 * the key. Runs when `QUEUE_TEST_REDIS_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { RedisStore } from "../../../src/stores/redis/mod.ts";
import type { KeyedJobRow } from "../../../src/stores/store.ts";
import { newJob, T0 } from "../contract/fixtures.ts";
import { within } from "../../_helpers.ts";
import { openTestRedisStore, redisTestUrl } from "../../_redis.ts";

const url = redisTestUrl();

/** A row of job `name` under unique key `key`, held for a minute. */
function uniqueRow(key: string, name = "job"): KeyedJobRow {
  return {
    ...newJob({ name }),
    key: { kind: "unique", key, expiresAt: T0 + 60_000, releaseOnStart: false },
  };
}

Deno.test({
  name:
    "RedisStore: a dispatch of a key another open transaction holds rejects after connectTimeoutMs, naming the job and the key, and is a duplicate once that transaction committed",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const impatient = await RedisStore.open(url!, {
      prefix,
      clock: "caller",
      connectTimeoutMs: 100,
    });
    try {
      const [inside] = await store.transaction(async (tx) => {
        const stored = await tx.insertKeyed([uniqueRow("k")]);
        await assert.rejects(
          within(
            impatient.insertKeyed([uniqueRow("free"), uniqueRow("k", "send-mail")]),
            10_000,
            "the dispatch of the held key",
          ),
          (error: Error) => {
            assert.match(error.message, /^Cannot dispatch "send-mail": an open transaction holds/);
            assert.match(error.message, /unique key "k"/);
            assert.match(error.message, /did not end within 100 ms \(connectTimeoutMs\)/);
            return true;
          },
        );
        return stored;
      });
      const [free, again] = await impatient.insertKeyed([uniqueRow("free"), uniqueRow("k")]);
      assert.equal(free?.outcome, "stored", "the refused dispatch stored nothing");
      assert.deepEqual({ ...again }, { id: inside?.id, outcome: "duplicate" });
    } finally {
      await impatient.close();
    }
  },
});
