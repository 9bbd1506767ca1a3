/**
 * What only the Redis store's failed-job admin has: bulk operations run in
 * chunks of at most 250 jobs per script, and loop until every job is done.
 * Runs when `QUEUE_TEST_REDIS_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
// deno-lint-ignore no-import-prefix
import { createClient } from "npm:@redis/client@^6.4";
import { z } from "zod";
import { defineJob, generateAppKey, Queue } from "../../../mod.ts";
import type { RedisStore } from "../../../src/stores/redis/mod.ts";
import { claim, fail, ids, newJob, sorted, T0 } from "../contract/fixtures.ts";
import { openTestRedisStore, redisTestUrl } from "../../_redis.ts";

const url = redisTestUrl();
/** More than two chunks. */
const MANY = 2_500;

/** Dispatches `count` jobs to `queue`, claims them and fails them at `at`; their ids. */
async function failMany(store: RedisStore, count: number, at: number, queue = "default") {
  const jobs = await store.insertJobs(Array.from({ length: count }, () => newJob({ queue })));
  const claimed = await claim(store, { queues: [queue], limit: count, token: 5 });
  assert.equal(claimed.length, count);
  const { applied } = await store.settle(jobs.map((id) => fail(id, 5, at)));
  assert.ok(applied.every(Boolean));
  return jobs;
}

Deno.test({
  name:
    'RedisStore retry("all"), pruneFailed() and flushFailed() go through more jobs than one chunk',
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store } = opened;
    const first = await failMany(store, MANY, T0);
    assert.deepEqual(await store.retry("all", T0 + 1), first);
    assert.deepEqual(await store.failed({ limit: 1, offset: 0 }), []);
    assert.equal((await claim(store, { limit: MANY + 1, now: T0 + 1, token: 6 })).length, MANY);
    await store.clear(undefined, T0 + 1);

    const old = await failMany(store, MANY, T0 + 2);
    const recent = await failMany(store, 10, T0 + 3);
    assert.equal(await store.pruneFailed(T0 + 3, T0 + 3), MANY);
    assert.equal(await store.failedJob(old[0]!), null);
    assert.deepEqual(sorted(ids(await store.failed({ limit: 20, offset: 0 }))), recent);
    await failMany(store, MANY, T0 + 4);
    assert.equal(await store.flushFailed(), MANY + 10);
    assert.deepEqual(await store.failed({ limit: 1, offset: 0 }), []);
  },
});

Deno.test({
  name:
    "RedisStore clear() goes through more jobs than one chunk, waiting and leased, in every queue, and past more running jobs than one chunk",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store } = opened;
    await store.insertJobs(Array.from({ length: MANY }, () => newJob({ queue: "a" })));
    await claim(store, { queues: ["a"], limit: 700, token: 9 });
    await store.insertJobs(Array.from({ length: 1_200 }, () => newJob({ queue: "b" })));
    await store.insertJobs([newJob({ queue: "c" })]);
    // Running jobs stay (more than a chunk of them: each chunk walks past them).
    assert.equal(await store.clear("a", T0), MANY - 700);
    assert.equal(await store.clear("a", T0 + 10 ** 9), 700, "their leases ran out");
    assert.deepEqual(await claim(store, { queues: ["a"], limit: 10, now: T0 + 10 ** 9 }), []);
    assert.equal(await store.clear(undefined, T0), 1_201);
    assert.deepEqual(await claim(store, { queues: ["a", "b", "c"], limit: 10 }), []);
  },
});

Deno.test({
  name: "RedisStore retry({ batchId }) scans every failed job, in chunks, for the batch's members",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const jobs = await failMany(store, MANY, T0);
    // Batch links written as the settle copies them, without the batch area's scripts.
    const members = jobs.filter((_, index) => index % 100 === 7);
    const client = createClient({ url: url! });
    await client.connect();
    try {
      for (const id of jobs) {
        const member = members.includes(id) ? "1" : "0";
        await client.hSet(`{${prefix}}:failed:${id}`, { batch_id: "42", batch_member: member });
      }
    } finally {
      await client.close();
    }
    assert.deepEqual(await store.retry({ batchId: 42 }, T0 + 1), members);
    assert.deepEqual(await store.retry({ batchId: 42 }, T0 + 1), []);
    assert.equal((await store.failed({ limit: MANY, offset: 0 })).length, MANY - members.length);
  },
});

Deno.test({
  name:
    "Redis: a job whose payload field is gone fails for good at its start, with PayloadIntegrityError, and its settle writes the failed job",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!);
    const { store, prefix } = opened;
    const secret = defineJob({
      name: "redis.hdel.secret",
      schema: z.object({ s: z.string() }),
      encrypted: true,
      maxAttempts: 3,
      backoff: () => 0,
      handle() {},
    });
    await using queue = await Queue.open({ store, jobs: [secret], appKey: generateAppKey() });
    const errors: unknown[] = [];
    queue.addEventListener("queue:error", (event) => errors.push(event.detail.error));
    const id = await queue.dispatch(secret, { s: "x" });
    const client = createClient({ url: url! });
    await client.connect();
    try {
      assert.equal(await client.hDel(`{${prefix}}:job:${id}`, "payload"), 1);
    } finally {
      await client.close();
    }
    const drained = await queue.drain({ maxTimeMs: 20_000 });
    assert.deepEqual(errors, []);
    assert.equal(drained.failed, 1);
    const [failed] = await queue.failed();
    assert.equal(failed?.id, id);
    assert.equal(failed?.attempts, 1);
    assert.match(
      failed?.error ?? "",
      /^PayloadIntegrityError: Stored payload of "redis.hdel.secret" cannot be used: expected an encrypted payload/,
    );
    // Retried, it fails the same way again: nothing is stuck.
    assert.equal(await queue.retry(id), true);
    assert.equal((await queue.drain({ maxTimeMs: 20_000 })).failed, 1);
    assert.deepEqual(errors, []);
  },
});
