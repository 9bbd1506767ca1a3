/**
 * Rolling upgrades on Redis, where the key layout stands for the schema:
 * `P:meta` records the newest layout and the newest contract layout, so
 * code older than the store keeps working past newer expand layouts and
 * learns of a newer contract one, from its heartbeat and when it opens.
 *
 * @module
 */
import assert from "node:assert/strict";
import { OutdatedCodeError } from "../../../src/errors.ts";
import { LAYOUT_VERSION } from "../../../src/stores/redis/migrate.ts";
import { RedisStore } from "../../../src/stores/redis/mod.ts";
import { hashField, openTestRedisStore, redisTestUrl, setHashField } from "../../_redis.ts";

const url = redisTestUrl();

/** A heartbeat of a live worker, now. */
function worker(id: string) {
  const now = Date.now();
  return {
    id,
    host: "old-box",
    pid: 4242,
    queues: ["default"],
    concurrency: 1,
    startedAt: now,
    lastSeenAt: now,
    running: 0,
    names: [],
  };
}

Deno.test({
  name:
    "RedisStore: a newer expand layout lets this code open the store and keep working, and is kept as it is; a newer contract layout is told by the heartbeat and refused at open",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!);
    const { store, prefix } = opened;
    const meta = `{${prefix}}:meta`;
    assert.equal(await hashField(url!, meta, "layout"), String(LAYOUT_VERSION));

    // A newer release laid out an expand layout: this code still opens it, and leaves it as it is.
    assert.ok(await setHashField(url!, meta, "layout", String(LAYOUT_VERSION + 1)));
    assert.deepEqual(await store.heartbeat(worker("w"), 0), {
      codeStep: LAYOUT_VERSION,
      databaseStep: LAYOUT_VERSION + 1,
      contractStep: null,
    });
    {
      await using again = await RedisStore.open(url!, { prefix });
      assert.deepEqual((await again.migrationPlan()).steps, []);
    }
    assert.equal(await hashField(url!, meta, "layout"), String(LAYOUT_VERSION + 1));

    // Then a contract layout: the running worker's heartbeat tells it, and opening refuses.
    assert.ok(await setHashField(url!, meta, "contract_layout", String(LAYOUT_VERSION + 1)));
    assert.deepEqual(await store.heartbeat(worker("w"), 0), {
      codeStep: LAYOUT_VERSION,
      databaseStep: LAYOUT_VERSION + 1,
      contractStep: LAYOUT_VERSION + 1,
    });
    await assert.rejects(RedisStore.open(url!, { prefix }), OutdatedCodeError);
  },
});
