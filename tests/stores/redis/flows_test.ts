/**
 * Flows on Redis beyond the contract: flows as older code left them (no
 * `ended_at` on a flow it ended, or one still there on a flow it opened
 * again by a retry) never let `pruneFlows` delete a flow before the
 * retention counted from when it ended, or ended again; and a prune reads
 * only what it needs: no node of a flow that ended within the retention,
 * and a bounded count of nodes per call. Runs when `QUEUE_TEST_REDIS_URL`
 * is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  evalScript,
  hashField,
  openTestRedisStore,
  prefixKeys,
  redisCommand,
  redisTestUrl,
} from "../../_redis.ts";
import { claim, fail, newJob, T0 } from "../contract/fixtures.ts";
import type { NewFlowRow } from "../../../src/stores/store.ts";
import { PRUNE_NODE_BUDGET } from "../../../src/stores/redis/flows.ts";
import { watchCommands } from "./_monitor.ts";

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

Deno.test({
  name:
    "RedisStore: pruneFlows() reads no node of a flow that ended within the retention, and deletes one that ended before it",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const ids: number[] = [];
    for (const name of ["a", "b", "c"]) {
      ids.push((await store.insertFlow(oneNode(name, "q"))).id);
      const [job] = await claim(store, { queues: ["q"], limit: 1 });
      const settled = await store.settle([{ kind: "complete", id: job!.id, token: 1, at: T0 }]);
      assert.deepEqual(settled.applied, [true]);
    }
    await using watch = await watchCommands(url!, prefix);
    let pruned = -1;
    const kept = await watch.during(async () => pruned = await store.pruneFlows(T0, T0));
    assert.equal(pruned, 0, "they ended at T0, not before");
    assert.deepEqual(kept.filter((line) => /:flow:\d+:n"/.test(line)), [], "no node read");
    assert.equal(await store.pruneFlows(T0 + 1, T0 + 1), 3);
    for (const id of ids) assert.equal(await store.flow(id), null);
    const left = (await prefixKeys(url!, prefix)).filter((key) => key.includes(":flow:"));
    assert.deepEqual(left, [], "every key of the pruned flows is gone");
  },
});

Deno.test({
  name:
    "RedisStore: a call of the prune script stops after the flow whose nodes reach its budget of node reads; the next call goes on",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    // Three flows of half the budget each: the second reaches it, so the third needs a call of
    // its own (then one call finds none left).
    const size = PRUNE_NODE_BUDGET / 2;
    const ids: number[] = [];
    for (let flow = 0; flow < 3; flow++) {
      const { id } = await store.insertFlow({
        name: "long",
        createdAt: T0,
        nodes: Array.from({ length: size }, (_, i) => ({
          key: `n${i}`,
          job: { ...newJob({ name: "node", queue: "long" }), delayMs: 0, retryForMs: null },
          parents: i === 0 ? [] : [i - 1],
          continueOnFailure: false,
        })),
        onFailure: [],
      });
      ids.push(id);
    }
    // Every node succeeded and the flows ended at T0, as their settles would leave them.
    await evalScript(
      url!,
      `for i = 2, #ARGV do
        local key = ARGV[1] .. ':flow:' .. ARGV[i]
        local count = tonumber(redis.call('HGET', key, 'nodes'))
        for pos = 0, count - 1 do redis.call('HSET', key .. ':n', pos .. ':s', 'succeeded') end
        redis.call('HSET', key, 'ended_at', ${T0}, 'open_from', count)
      end
      return 1`,
      [`{${prefix}}`, ...ids.map(String)],
    );
    await using watch = await watchCommands(url!, prefix);
    let pruned = -1;
    const lines = await watch.during(async () => pruned = await store.pruneFlows(T0 + 1, T0 + 1));
    assert.equal(pruned, 3);
    assert.equal(lines.filter((line) => line.includes('"FCALL"')).length, 3, "script calls");
  },
});
