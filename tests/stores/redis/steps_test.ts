/**
 * What only the Redis store's durable steps have: a job's memos
 * (`P:steps:<id>`) and mailbox (`P:signals:<id>`) are deleted by the write
 * that makes the job leave for good (SQL prunes them with the log lines),
 * and kept while the job is failed or kept finished. Runs when
 * `QUEUE_TEST_REDIS_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { RedisStore } from "../../../src/stores/redis/mod.ts";
import { claim, complete, fail, newJob, T0 } from "../contract/fixtures.ts";
import { openTestRedisStore, prefixKeys, redisTestUrl } from "../../_redis.ts";

const url = redisTestUrl();

/** Stores a job, claims it with `token`, writes a memo and buffers a signal; its id. */
async function jobWithSteps(store: RedisStore, token: number, queue = "default") {
  const [id] = await store.insertJobs([newJob({ queue })]);
  const [claimed] = await claim(store, { queues: [queue], limit: 1, token });
  assert.equal(claimed?.id, id);
  const step = {
    seq: 1,
    key: "charge",
    kind: "step",
    output: '"ok"',
    until: null,
    done: true,
    attempt: 1,
    durationMs: 1,
  } as const;
  assert.deepEqual(
    (await store.settle([{ kind: "step", id: id!, token, at: T0, step }])).applied,
    [true],
  );
  assert.equal(
    await store.signal({ jobId: id!, name: "approved", payload: "true", now: T0 }),
    "buffered",
  );
  return id!;
}

/** Which of job `id`'s step keys the prefix holds: `steps`, `signals`. */
async function stepKeys(prefix: string, id: number): Promise<string[]> {
  const keys = await prefixKeys(url!, prefix);
  return ["steps", "signals"].filter((kind) => keys.includes(`{${prefix}}:${kind}:${id}`));
}

Deno.test({
  name:
    "RedisStore deletes a job's memos and mailbox when it completes or is cancelled unkept, and keeps them while it is kept finished",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;

    const unkept = await jobWithSteps(store, 1);
    assert.deepEqual(await stepKeys(prefix, unkept), ["steps", "signals"]);
    await store.settle([complete(unkept, 1, T0 + 1)]);
    assert.deepEqual(await stepKeys(prefix, unkept), []);

    const kept = await jobWithSteps(store, 2);
    await store.settle([{
      kind: "complete",
      id: kept,
      token: 2,
      at: T0 + 1,
      keepUntil: T0 + 60_000,
    }]);
    assert.deepEqual(await stepKeys(prefix, kept), ["steps", "signals"]);
    assert.equal((await store.jobSteps(kept)).steps.length, 1);
    assert.equal(await store.pruneFinished(T0 + 2, T0 + 2), 1);
    assert.deepEqual(await stepKeys(prefix, kept), []);

    const cancelledRunning = await jobWithSteps(store, 3);
    await store.settle([{
      kind: "cancel",
      id: cancelledRunning,
      token: 3,
      at: T0,
      reason: "no",
      keepUntil: T0,
    }]);
    assert.deepEqual(await stepKeys(prefix, cancelledRunning), []);

    const parked = await jobWithSteps(store, 4);
    await store.settle([{
      kind: "park",
      id: parked,
      token: 4,
      at: T0,
      availableAt: T0 + 60_000,
      step: {
        seq: 2,
        key: "nap",
        kind: "sleep",
        output: null,
        until: T0 + 60_000,
        done: true,
        attempt: 1,
        durationMs: 0,
      },
    }]);
    assert.equal(
      await store.cancel({ id: parked, reason: "no", keepUntil: T0 + 60_000, now: T0 + 1 }),
      "cancelled",
    );
    assert.deepEqual(await stepKeys(prefix, parked), ["steps", "signals"]);
    assert.equal(await store.pruneFinished(T0 + 2, T0 + 2), 1);
    assert.deepEqual(await stepKeys(prefix, parked), []);
  },
});

Deno.test({
  name:
    "RedisStore keeps a failed job's memos and mailbox through retry(), and forget(), pruneFailed() and flushFailed() delete them",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;

    const retried = await jobWithSteps(store, 1);
    await store.settle([fail(retried, 1, T0 + 1)]);
    assert.deepEqual(await stepKeys(prefix, retried), ["steps", "signals"]);
    assert.deepEqual(await store.retry([retried], T0 + 2), [retried]);
    assert.deepEqual(await stepKeys(prefix, retried), ["steps", "signals"]);
    await claim(store, { now: T0 + 2, token: 5 });
    await store.settle([fail(retried, 5, T0 + 3)]);
    assert.equal(await store.forget(retried), true);
    assert.deepEqual(await stepKeys(prefix, retried), []);

    const pruned = await jobWithSteps(store, 6);
    await store.settle([fail(pruned, 6, T0 + 1)]);
    const flushed = await jobWithSteps(store, 7);
    await store.settle([fail(flushed, 7, T0 + 5)]);
    assert.equal(await store.pruneFailed(T0 + 2, T0 + 2), 1);
    assert.deepEqual(await stepKeys(prefix, pruned), []);
    assert.deepEqual(await stepKeys(prefix, flushed), ["steps", "signals"]);
    assert.equal(await store.flushFailed(), 1);
    assert.deepEqual(await stepKeys(prefix, flushed), []);
  },
});

Deno.test({
  name: "RedisStore clear() deletes the memos and mailbox of the jobs it deletes",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const cleared = await jobWithSteps(store, 1, "a");
    const other = await jobWithSteps(store, 2, "b");
    // Past its lease: a running job is left to finish.
    assert.equal(await store.clear("a", T0 + 10 ** 9), 1);
    assert.deepEqual(await stepKeys(prefix, cleared), []);
    assert.deepEqual(await stepKeys(prefix, other), ["steps", "signals"]);
  },
});

Deno.test({
  name:
    "RedisStore: a park of a job whose batch was cancelled meanwhile skips it and deletes its memos and mailbox",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const batch = await store.insertBatch({
      name: "b",
      allowFailures: true,
      createdAt: T0,
      jobs: [newJob()],
      then: [],
      catch: [],
      finally: [],
    });
    const id = batch.jobIds[0]!;
    const [claimed] = await claim(store, { limit: 1, token: 3 });
    assert.equal(claimed?.id, id);
    const nap = {
      seq: 1,
      key: "nap",
      kind: "sleep",
      output: null,
      until: T0 + 60_000,
      done: true,
      attempt: 1,
      durationMs: 0,
    } as const;
    assert.equal(await store.cancelBatch(batch.id, T0), true);
    const park = {
      kind: "park",
      id,
      token: 3,
      at: T0,
      availableAt: T0 + 60_000,
      step: nap,
    } as const;
    assert.deepEqual((await store.settle([park])).applied, [true]);
    assert.equal((await store.batch(batch.id))?.skipped, 1);
    assert.deepEqual(await stepKeys(prefix, id), []);
    assert.deepEqual(await store.jobSteps(id), { steps: [], signals: [] });
  },
});
