/**
 * Job control on Redis beyond the contract: the `{prefix}:done` channel
 * that tells awaiters an awaited job finished, and the settles' prune of
 * kept jobs whose time ran out. Runs when `QUEUE_TEST_REDIS_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
// deno-lint-ignore no-import-prefix
import { createClient } from "npm:@redis/client@^6.4";
import { openTestRedisStore, redisTestUrl } from "../../_redis.ts";
import { claim, newJob, T0 } from "../contract/fixtures.ts";

const url = redisTestUrl();

Deno.test({
  name:
    "RedisStore publishes the id of an awaited job that completes or is cancelled on {prefix}:done",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const subscriber = createClient({ url: url! });
    subscriber.on("error", () => {});
    await subscriber.connect();
    try {
      const published: string[] = [];
      let heard = Promise.withResolvers<void>();
      await subscriber.subscribe(`{${prefix}}:done`, (message) => {
        published.push(message);
        heard.resolve();
      });
      const [running, waiting, unawaited] = await store.insertJobs([newJob(), newJob(), newJob()]);
      await claim(store, { limit: 1, token: 1 });
      assert.equal(await store.markAwaited(running!), true);
      assert.equal(await store.markAwaited(waiting!), true);
      await store.settle([{ kind: "complete", id: running!, token: 1, at: T0 + 1 }]);
      await heard.promise;
      heard = Promise.withResolvers<void>();
      await store.cancel({ id: unawaited!, reason: "no", now: T0 + 2, keepUntil: T0 });
      await store.cancel({ id: waiting!, reason: "no", now: T0 + 3, keepUntil: T0 });
      await heard.promise;
      assert.deepEqual(published, [String(running), String(waiting)]);
    } finally {
      await subscriber.close();
    }
  },
});

Deno.test({
  name: "RedisStore settles prune kept jobs whose keepUntil passed, at most once a minute",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store } = opened;
    const completeAt = async (at: number, keepUntil: number) => {
      const [id] = await store.insertJobs([newJob({ createdAt: at, availableAt: at })]);
      await claim(store, { token: at, now: at });
      await store.settle([{ kind: "complete", id: id!, token: at, at, keepUntil }]);
      return id!;
    };
    const short = await completeAt(T0, T0 + 10);
    await completeAt(T0 + 30_000, T0 + 3_600_000);
    assert.notEqual(await store.finishedJob(short), null, "pruned less than a minute ago");
    await completeAt(T0 + 60_000, T0 + 3_600_000);
    assert.equal(await store.finishedJob(short), null, "a minute later, its time having run out");
    assert.equal((await store.finished({}, { limit: 10, offset: 0 })).length, 2);
  },
});
