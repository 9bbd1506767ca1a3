/**
 * Job control on Redis beyond the contract: the wake-up channel tells
 * awaiters when an awaited job ended (and only then), and the settles' prune of
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
    "RedisStore publishes on {prefix}:wake when an awaited job completes, fails, is cancelled or is deleted by a clear, and not for a job nobody awaits (no other channel)",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const ids = await store.insertJobs([newJob(), newJob(), newJob(), newJob()]);
    const [plain, completes, fails, waiting] = ids as [number, number, number, number];
    await claim(store, { limit: 3, token: 1 });
    for (const id of [completes, fails, waiting]) assert.equal(await store.markAwaited(id), true);
    const subscriber = createClient({ url: url! });
    subscriber.on("error", () => {});
    await subscriber.connect();
    try {
      let published = 0;
      await subscriber.subscribe(`{${prefix}}:wake`, () => published++);
      // The wake-up channel is the only one: no script publishes on a channel of awaited jobs.
      let onDone = 0;
      await subscriber.subscribe(`{${prefix}}:done`, () => onDone++);
      const heard = async (what: string, write: () => Promise<unknown>, expected: boolean) => {
        const before = published;
        await write();
        // A PING on the subscriber's connection returns after every message published before it.
        await subscriber.ping();
        assert.equal(published > before, expected, what);
      };
      await heard(
        "a job nobody awaits completes",
        () => store.settle([{ kind: "complete", id: plain, token: 1, at: T0 + 1 }]),
        false,
      );
      await heard(
        "an awaited job completes",
        () => store.settle([{ kind: "complete", id: completes, token: 1, at: T0 + 2 }]),
        true,
      );
      const error = { message: "Error: no", stack: null };
      await heard(
        "an awaited job fails",
        () => store.settle([{ kind: "fail", id: fails, token: 1, at: T0 + 3, error, attempts: 1 }]),
        true,
      );
      await heard(
        "an awaited job waiting is cancelled",
        () => store.cancel({ id: waiting, reason: "no", now: T0 + 4, keepUntil: T0 }),
        true,
      );
      const [unawaited] = await store.insertJobs([newJob()]);
      await heard(
        "a job nobody awaits is deleted by a clear",
        () => store.clear(undefined, T0 + 5),
        false,
      );
      assert.equal(await store.unfinishedJob(unawaited!), null);
      const [cleared] = await store.insertJobs([newJob()]);
      assert.equal(await store.markAwaited(cleared!), true);
      await heard(
        "an awaited job is deleted by a clear",
        () => store.clear(undefined, T0 + 6),
        true,
      );
      assert.equal(onDone, 0, "nothing published on {prefix}:done");
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
