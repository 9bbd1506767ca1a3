/**
 * What only the Redis store's transactions have: a transaction's writes are
 * staged on the server, and a stage whose process died stays until it
 * counts as abandoned (SQL's database rolls such a transaction back when
 * the connection drops). Then a worker's claim rolls it back even when no
 * transaction ends again: a job it debounced, out of claim order while the
 * transaction was open, comes back as committed. Runs when
 * `QUEUE_TEST_REDIS_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Queue } from "../../../mod.ts";
import { RedisStore } from "../../../src/stores/redis/mod.ts";
import { ChildScript } from "../../_child.ts";
import {
  deletePrefix,
  evalScript,
  freshPrefix,
  openTestRedisStore,
  redisTestUrl,
} from "../../_redis.ts";
import { newJob, T0 } from "../contract/fixtures.ts";
import { debounced, debouncedRuns } from "../../fixtures/transactions/jobs.ts";

const url = redisTestUrl();
const CHILD = new URL("../../fixtures/transactions/open_transaction_child.ts", import.meta.url);

/** Makes every open transaction of `prefix` look begun at the epoch: abandoned, on any clock. */
const AGE_STAGES = `
local stages = ARGV[1]
local aged = 0
for _, stage in ipairs(redis.call('ZRANGE', stages, 0, -1)) do
  redis.call('ZADD', stages, 0, stage)
  aged = aged + 1
end
return aged
`;

Deno.test({
  name:
    "RedisStore: a job that a transaction debounced, its process killed with SIGKILL, comes back as committed once the transaction counts as abandoned, at the next worker's claim",
  ignore: url === null,
  async fn() {
    const prefix = freshPrefix();
    const target = new URL(url!);
    target.searchParams.set("prefix", prefix);
    try {
      const queue = await Queue.open({ url: target.href, jobs: [debounced] });
      try {
        await queue.dispatch(debounced, { key: "k", n: 1 });
        await using child = new ChildScript(CHILD, [target.href]);
        await child.line("inside", 60_000);
        child.kill("SIGKILL");
        assert.equal((await child.status).signal, "SIGKILL");
        const { pending = 0, delayed = 0 } = (await queue.counts()).default ?? {};
        assert.equal(pending + delayed, 0, "out of claim order while its transaction is open");
        assert.equal(await evalScript(url!, AGE_STAGES, [`{${prefix}}:stages`]), 1);
      } finally {
        await queue.close();
      }
      // Another process's queue, whose first claim is the first of its store.
      await using worker = await Queue.open({ url: target.href, jobs: [debounced] });
      const drained = await worker.drain({ maxTimeMs: 30_000 });
      assert.equal(drained.completed, 1, "the job came back and ran");
      assert.deepEqual(debouncedRuns, [{ key: "k", n: 1 }], "with its committed payload");
      assert.equal((await worker.counts()).default?.pending ?? 0, 0);
    } finally {
      await deletePrefix(url!, prefix);
    }
  },
});

/** The keys of `prefix`'s open transactions: the stage list and each stage's writes. */
const STAGE_KEYS = "return redis.call('KEYS', ARGV[1] .. ':stage*')";

Deno.test({
  name:
    "RedisStore: a transaction still open once it counts as abandoned stores nothing: its commit, and a write it makes then, fail saying it was rolled back as abandoned",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const other = await RedisStore.open(url!, { prefix, clock: "caller" });
    const age = async () =>
      assert.equal(await evalScript(url!, AGE_STAGES, [`{${prefix}}:stages`]), 1);
    try {
      await assert.rejects(
        store.transaction(async (tx) => {
          await tx.insertJobs([newJob()]);
          await age();
          // Another transaction's end rolls this one back before its own end.
          await other.transaction(async (tx) => await tx.insertJobs([newJob({ queue: "other" })]));
        }),
        /^Error: This transaction was rolled back as abandoned, storing nothing: it stayed open over 60 minutes/,
      );
      await assert.rejects(
        store.transaction(async (tx) => {
          await tx.insertJobs([newJob()]);
          await age();
          await assert.rejects(tx.insertJobs([newJob()]), /rolled back as abandoned/);
        }),
        /rolled back as abandoned/,
      );
      assert.deepEqual(
        (await store.counts(T0)).map(({ queue, pending }) => ({ queue, pending })),
        [{ queue: "other", pending: 1 }],
        "only the other transaction's job",
      );
      assert.deepEqual(await evalScript(url!, STAGE_KEYS, [`{${prefix}}`]), [], "nothing staged");
    } finally {
      await other.close();
    }
  },
});
