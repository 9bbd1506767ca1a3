/**
 * Batches on Redis beyond the contract: the list of ended batches as older
 * code wrote it (`P:batches:ended`, where a cancelled batch was listed by
 * its cancel while a job of it still ran) never lets `pruneBatches` delete
 * a batch that has not ended. Runs when `QUEUE_TEST_REDIS_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { openTestRedisStore, redisCommand, redisTestUrl } from "../../_redis.ts";
import { claim, newJob, T0 } from "../contract/fixtures.ts";

const url = redisTestUrl();

Deno.test({
  name:
    "RedisStore: pruneBatches() keeps a cancelled batch with a job running that older code listed as ended by its cancel, and prunes it once it ended",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const { id } = await store.insertBatch({
      name: "b",
      allowFailures: false,
      createdAt: T0,
      jobs: [newJob({ name: "b1" }), newJob({ name: "b2" })],
      then: [],
      catch: [],
      finally: [],
    });
    const [running] = await claim(store, { limit: 1 });
    assert.equal(await store.cancelBatch(id, T0 + 1), true);
    const ended = `{${prefix}}:batches:ended`;
    assert.equal(await redisCommand(url!, ["ZSCORE", ended, String(id)]), null);
    await redisCommand(url!, ["ZADD", ended, String(T0 + 1), String(id)]); // as older code did

    assert.equal(await store.pruneBatches(T0 + 2, T0 + 2), 0);
    assert.equal((await store.batch(id))?.pending, 1);
    assert.equal(await redisCommand(url!, ["ZSCORE", ended, String(id)]), null);

    const settled = await store.settle([
      { kind: "complete", id: running!.id, token: 1, at: T0 + 3 },
    ]);
    assert.deepEqual(settled.applied, [true]);
    assert.equal((await store.batch(id))?.finishedAt, T0 + 3);
    assert.equal(await store.pruneBatches(T0 + 3, T0 + 3), 0);
    assert.equal(await store.pruneBatches(T0 + 4, T0 + 4), 1);
    assert.equal(await store.batch(id), null);
  },
});
