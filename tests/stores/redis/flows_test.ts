/**
 * Flows on Redis beyond the contract: flows as older code left them (no
 * `ended_at` on a flow it ended, or one still there on a flow it opened
 * again by a retry) never let `pruneFlows` delete a flow before the
 * retention counted from when it ended, or ended again. Runs when
 * `QUEUE_TEST_REDIS_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hashField, openTestRedisStore, redisCommand, redisTestUrl } from "../../_redis.ts";
import { claim, fail, newJob, T0 } from "../contract/fixtures.ts";
import type { NewFlowRow } from "../../../src/stores/store.ts";

const url = redisTestUrl();

/** A flow of one node, job `name` in queue `queue`. */
function oneNode(name: string, queue: string): NewFlowRow {
  return {
    name,
    createdAt: T0,
    nodes: [{
      key: name,
      job: { ...newJob({ name, queue }), delayMs: 0, retryForMs: null },
      parents: [],
      continueOnFailure: false,
    }],
    onFailure: [],
  };
}

Deno.test({
  name:
    "RedisStore: pruneFlows() gives a flow older code ended without an end its own now, keeps it for the retention from then, and clears the end of an open one",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const ended = await store.insertFlow(oneNode("a", "a"));
    const open = await store.insertFlow(oneNode("b", "b"));
    const [a] = await claim(store, { queues: ["a"], limit: 1 });
    const settled = await store.settle([{ kind: "complete", id: a!.id, token: 1, at: T0 }]);
    assert.deepEqual(settled.applied, [true]);
    const key = (id: number) => `{${prefix}}:flow:${id}`;
    assert.equal(await hashField(url!, key(ended.id), "ended_at"), String(T0));
    // As older code leaves them: an end never written, or one written before a retry.
    await redisCommand(url!, ["HDEL", key(ended.id), "ended_at"]);
    await redisCommand(url!, ["HSET", key(open.id), "ended_at", String(T0)]);

    const seen = T0 + 60_000;
    assert.equal(await store.pruneFlows(seen, seen), 0, "an end never written is not before");
    assert.equal(await hashField(url!, key(ended.id), "ended_at"), String(seen));
    assert.equal(await hashField(url!, key(open.id), "ended_at"), null, "a node still queued");
    assert.equal(await store.pruneFlows(seen + 1, seen + 1), 1);
    assert.equal(await store.flow(ended.id), null);
    assert.notEqual(await store.flow(open.id), null);
  },
});

Deno.test({
  name:
    "RedisStore: a flow older code opened again by a retry, keeping its end, counts its age from when it ends again",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const ran = 10_000; // how long the retried node ran
    const { id } = await store.insertFlow(oneNode("a", "a"));
    const [a] = await claim(store, { queues: ["a"], limit: 1 });
    assert.deepEqual((await store.settle([fail(a!.id, a!.token, T0)])).applied, [true]);
    assert.deepEqual(await store.retry([a!.id], T0), [a!.id]);
    // As a retry by older code leaves it: the end written before the retry kept.
    await redisCommand(url!, ["HSET", `{${prefix}}:flow:${id}`, "ended_at", String(T0)]);
    const [again] = await claim(store, { queues: ["a"], limit: 1, token: 2 });
    const settled = await store.settle([
      { kind: "complete", id: again!.id, token: 2, at: T0 + ran },
    ]);
    assert.deepEqual(settled.applied, [true]);

    assert.equal(await store.pruneFlows(T0 + ran, T0 + ran), 0, "it ended at T0 + ran");
    assert.notEqual(await store.flow(id), null);
    assert.equal(await store.pruneFlows(T0 + ran + 1, T0 + ran + 1), 1);
  },
});

Deno.test({
  name:
    "RedisStore: a flow's settles walk its nodes from open_from, the first that may still be open, which a retry lowers to the node it opens",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const root = (key: string) => ({
      key,
      job: { ...newJob({ name: key, queue: key }), delayMs: 0, retryForMs: null },
      parents: [],
      continueOnFailure: false,
    });
    const { id } = await store.insertFlow({
      name: "f",
      createdAt: T0,
      nodes: [root("a"), root("b"), root("c")],
      onFailure: [],
    });
    const key = `{${prefix}}:flow:${id}`;
    const field = (name: string) => hashField(url!, key, name);
    let token = 10;
    const run = async (queue: string, kind: "complete" | "fail") => {
      const [job] = await claim(store, { queues: [queue], limit: 1, token: ++token });
      const settle = kind === "fail"
        ? fail(job!.id, token, T0)
        : { kind, id: job!.id, token, at: T0 } as const;
      assert.deepEqual((await store.settle([settle])).applied, [true]);
      return job!;
    };
    assert.equal(await field("open_from"), null, "a flow starts with none (read as 0)");
    const a = await run("a", "fail");
    assert.equal(await field("open_from"), "1");
    await run("b", "complete");
    assert.equal(await field("open_from"), "2");
    assert.deepEqual(await store.retry([a.id], T0), [a.id]);
    assert.equal(await field("open_from"), "0", "the retried node is open again");
    await run("c", "complete");
    assert.equal(await field("ended_at"), null, "a is queued again");
    assert.equal(await field("open_from"), "0");
    await run("a", "complete");
    assert.equal(await field("ended_at"), String(T0));
    assert.equal(await field("open_from"), "3");
  },
});
