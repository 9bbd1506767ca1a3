/**
 * Groups on Redis beyond the contract: the settles' walk through the group
 * holds (src/stores/redis/groups.ts) sends nothing to the server between
 * two walks, as SQL's reads nothing. Runs when `QUEUE_TEST_REDIS_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
// deno-lint-ignore no-import-prefix
import { createClient } from "npm:@redis/client@^6.4";
import { openTestRedisStore, redisTestUrl } from "../../_redis.ts";
import { LEASE_MS, T0 } from "../contract/fixtures.ts";

const url = redisTestUrl();

Deno.test({
  name:
    "RedisStore: a settle between two walks through the group holds sends no command on them; a minute later it walks again",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    await store.pauseGroup("contract-job", "held", T0, T0 + 1_000);
    // MONITOR lists every command the server runs, those of the store's functions too, in order.
    const monitor = createClient({ url: url! });
    const marker = createClient({ url: url! });
    for (const client of [monitor, marker]) {
      client.on("error", () => {});
      await client.connect();
    }
    try {
      const lines: string[] = [];
      await monitor.monitor((line) => {
        if (line.includes(`{${prefix}}:`)) lines.push(line);
      });
      /** The commands on the group holds' keys that a settle (and claim) at `at` sent. */
      const holdCommands = async (at: number) => {
        const from = lines.length;
        await store.settle([], {
          queues: ["default"],
          limit: 1,
          now: at,
          leaseMs: LEASE_MS,
          token: 1,
        });
        // The marker comes after every command of the settle in the monitor's stream.
        const end = `{${prefix}}:marker:${at}`;
        await marker.get(end);
        const deadline = Date.now() + 10_000;
        while (!lines.slice(from).some((line) => line.includes(end))) {
          assert.ok(Date.now() < deadline, "the monitor shows the marker");
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        return lines.slice(from).filter((line) => line.includes(":gpauses")).length;
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
    } finally {
      await Promise.allSettled([monitor.close(), marker.close()]);
    }
  },
});
