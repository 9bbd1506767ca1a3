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
import { waitUntil, within } from "../../_helpers.ts";
import { evalScript, openTestRedisStore, redisTestUrl } from "../../_redis.ts";

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

Deno.test({
  name:
    "RedisStore: of two transactions that each dispatch a key the other holds, the one begun later gives up at once (a deadlock) and the other commits once it rolled back, whichever of them asks first",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const other = await RedisStore.open(url!, { prefix, clock: "caller" });
    /** Resolves once a dispatch of the transaction begun `which` waits for a key. */
    const waits = (which: "earlier" | "later", stages: string[]) =>
      waitUntil(
        async () =>
          await evalScript(
            url!,
            "return redis.call('HEXISTS', ARGV[1], ARGV[2])",
            [`{${prefix}}:stages:waiting`, stages[which === "earlier" ? 0 : 1]!],
          ) === 1,
        { what: `the ${which} transaction waits` },
      );
    const openStages = async () =>
      await evalScript(url!, "return redis.call('ZRANGE', ARGV[1], 0, -1)", [
        `{${prefix}}:stages`,
      ]) as string[];
    try {
      for (const laterAsksFirst of [false, true]) {
        const [a, b] = [`a-${laterAsksFirst}`, `b-${laterAsksFirst}`];
        let stages: string[] = [];
        let earlierHolds!: () => void;
        const earlierHeld = new Promise<void>((resolve) => earlierHolds = resolve);
        let laterHolds!: () => void;
        const laterHeld = new Promise<void>((resolve) => laterHolds = resolve);
        const earlier = store.transaction(async (tx) => {
          const [first] = await tx.insertKeyed([uniqueRow(a)]);
          earlierHolds();
          await laterHeld;
          if (laterAsksFirst) await waits("later", stages);
          const [second] = await tx.insertKeyed([uniqueRow(b)]);
          return [first?.outcome, second?.outcome];
        });
        await earlierHeld;
        // Begun on a later millisecond of the server's clock: the order, not the ids, decides.
        await new Promise((resolve) => setTimeout(resolve, 5));
        const later = other.transaction(async (tx) => {
          await tx.insertKeyed([uniqueRow(b)]);
          stages = await openStages(); // by start time: the earlier one first
          laterHolds();
          if (!laterAsksFirst) await waits("earlier", stages);
          return await tx.insertKeyed([uniqueRow(a)]);
        });
        await assert.rejects(
          within(later, 60_000, "the later transaction's end"),
          new RegExp(
            `^Error: Cannot dispatch "job": an open transaction holds its unique key "${a}" and waits for a key this transaction holds \\(a deadlock\\); this transaction, begun later, gives up`,
          ),
        );
        assert.deepEqual(await earlier, ["stored", "stored"], "the earlier one committed both");
      }
      assert.deepEqual(
        (await store.counts(T0)).map(({ pending }) => pending),
        [4],
        "the earlier transactions' jobs alone",
      );
      assert.deepEqual(
        await evalScript(url!, "return redis.call('KEYS', ARGV[1] .. ':stage*')", [`{${prefix}}`]),
        [],
        "no transaction waits or stays open",
      );
    } finally {
      await other.close();
    }
  },
});

Deno.test({
  name:
    "RedisStore: a write queued in a transaction behind its dispatch that gave up to a deadlock rejects saying the transaction was aborted by it",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const other = await RedisStore.open(url!, { prefix, clock: "caller" });
    try {
      const earlierHeld = Promise.withResolvers<void>();
      const laterHeld = Promise.withResolvers<void>();
      const earlier = store.transaction(async (tx) => {
        await tx.insertKeyed([uniqueRow("a")]);
        earlierHeld.resolve();
        await laterHeld.promise;
        return (await tx.insertKeyed([uniqueRow("b")]))[0]?.outcome;
      });
      await earlierHeld.promise;
      // Begun on a later millisecond of the server's clock: this one gives up.
      await new Promise((resolve) => setTimeout(resolve, 5));
      let settled: PromiseSettledResult<unknown>[] = [];
      const later = other.transaction(async (tx) => {
        await tx.insertKeyed([uniqueRow("b")]);
        const [earlierStage] = await evalScript(
          url!,
          "return redis.call('ZRANGE', ARGV[1], 0, -1)",
          [
            `{${prefix}}:stages`,
          ],
        ) as string[];
        laterHeld.resolve();
        await waitUntil(
          async () =>
            await evalScript(url!, "return redis.call('HEXISTS', ARGV[1], ARGV[2])", [
              `{${prefix}}:stages:waiting`,
              earlierStage!,
            ]) === 1,
          { what: "the earlier transaction waits" },
        );
        // Sent together: the keyed dispatch gives up at once, and the plain one runs after it.
        settled = await Promise.allSettled([
          tx.insertKeyed([uniqueRow("a")]),
          tx.insertJobs([newJob()]),
        ]);
      });
      await assert.rejects(within(later, 60_000, "its end"), /aborted by a deadlock/);
      const [keyed, queued] = settled as PromiseRejectedResult[];
      assert.equal(keyed?.status, "rejected");
      assert.match(String(keyed.reason), /a deadlock/);
      assert.equal(queued?.status, "rejected", "the queued write stores nothing");
      assert.match(
        String(queued.reason),
        /^Error: This transaction was aborted by a deadlock and stored nothing/,
      );
      assert.equal(await earlier, "stored");
    } finally {
      await other.close();
    }
  },
});
