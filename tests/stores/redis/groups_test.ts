/**
 * Groups on Redis beyond the contract: the settles' walk through the group
 * holds (src/stores/redis/groups.ts) sends nothing to the server between
 * two walks, as SQL's reads nothing; a group listed beside the equal turn
 * scores older code wrote goes after them. Runs when `QUEUE_TEST_REDIS_URL`
 * is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { openTestRedisStore, redisCommand, redisTestUrl } from "../../_redis.ts";
import { claim, LEASE_MS, newJob, T0 } from "../contract/fixtures.ts";
import { watchCommands } from "./_monitor.ts";

const url = redisTestUrl();

Deno.test({
  name:
    "RedisStore: a settle between two walks through the group holds sends no command on them; a minute later it walks again",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    await store.pauseGroup("contract-job", "held", T0, T0 + 1_000);
    await using watch = await watchCommands(url!, prefix);
    /** The commands on the group holds' keys that a settle (and claim) at `at` sent. */
    const holdCommands = async (at: number) => {
      const lines = await watch.during(() =>
        store.settle([], { queues: ["default"], limit: 1, now: at, leaseMs: LEASE_MS, token: 1 })
      );
      return lines.filter((line) => line.includes(":gpauses")).length;
    };
    const AT = T0 + 120_000;
    assert.ok((await holdCommands(AT)) > 0, "the first settle walks the holds");
    assert.deepEqual(
      (await store.pausedGroups(T0, { limit: 10, offset: 0 })).map((group) => group.key),
      [],
      "the passed hold is deleted",
    );
    // Held again, long passed by the next walk.
    await store.pauseGroup("contract-job", "held", T0, T0 + 2_000);
    const heldAtT0 = async () =>
      (await store.pausedGroups(T0, { limit: 10, offset: 0 })).map((group) => group.key);
    assert.deepEqual(await heldAtT0(), ["held"]);
    assert.equal(await holdCommands(AT + 30_000), 0, "a settle between walks sends none");
    assert.equal(await holdCommands(AT + 59_999), 0, "nor one just before the minute is up");
    assert.ok((await holdCommands(AT + 60_000)) > 0, "a minute after the last walk, another");
    assert.deepEqual(await heldAtT0(), [], "and it deleted the hold that passed meanwhile");
  },
});

Deno.test({
  name:
    "RedisStore: a group listed where older code left every group at one turn score goes after all of them",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!);
    const { store, prefix } = opened;
    const group = (key: string) => newJob({ group: { key, limit: null, ordered: false } });
    const [b, a] = [
      ...await store.insertJobs([group("b")]),
      ...await store.insertJobs([group("a")]),
    ];
    // What code before this listed: each new group at the last group's score, so all at 0.
    const groups = `{${prefix}}:q:default:groups`;
    for (const key of ["b", "a"]) {
      await redisCommand(url!, ["ZADD", groups, "0", `12:contract-job:${key}`]);
    }
    const [late] = await store.insertJobs([group("0")]);
    const taken: number[] = [];
    for (let token = 1; token <= 3; token++) {
      taken.push(...(await claim(store, { limit: 1, token })).map((job) => job.id));
    }
    // Equal scores go by the member's text (a, then b); the group listed since goes last, though
    // its member's text comes first.
    assert.deepEqual(taken, [a, b, late]);
  },
});
