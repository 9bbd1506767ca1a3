/**
 * How long the Redis store's `pruneFlows` takes over many flows, and how
 * long its longest script call holds the server: `deno run -A
 * bench/redis_flow_prune.ts [flows] [nodes]` (default 2,000 flows of 20
 * nodes) on a fresh prefix of `QUEUE_BENCH_REDIS_URL` (else the local
 * server), deleted afterwards. Every flow has ended at one time (its nodes
 * marked succeeded, as its settles would leave them); the script times a
 * prune whose retention keeps them all, several times, then one that
 * deletes them all. The longest call is read from the server's own
 * `INFO commandstats` (`fcall`'s `usec` per call, mean) and from the
 * client's round trips.
 *
 * @module
 */
// deno-lint-ignore no-import-prefix
import { createClient } from "npm:@redis/client@^6.4";
import { RedisStore } from "../src/stores/redis/mod.ts";
import type { NewFlowNodeRow } from "../src/stores/store.ts";
import { resolveRedisUrl } from "./redis_url.ts";
import { withTempPrefix } from "./redis_queue.ts";

const FLOWS = Number(Deno.args[0] ?? 2_000);
const NODES = Number(Deno.args[1] ?? 20);
/** When every flow ended, on the store's (the caller's) clock. */
const ENDED_AT = Date.UTC(2026, 0, 1);
const KEPT_ROUNDS = 5;

/** Marks every node of flows `ARGV[2..]` (prefix `ARGV[1]`) succeeded and the flow ended at `ARGV[2]`. */
const END_FLOWS = String.raw`
local prefix, at = ARGV[1], ARGV[2]
for i = 3, #ARGV do
  local key = prefix .. ':flow:' .. ARGV[i]
  local count = tonumber(redis.call('HGET', key, 'nodes'))
  for pos = 0, count - 1 do redis.call('HSET', key .. ':n', pos .. ':s', 'succeeded') end
  redis.call('HSET', key, 'ended_at', at, 'open_from', count)
end
return 1
`;

const url = resolveRedisUrl((name) => Deno.env.get(name));
await withTempPrefix(url, async (prefix) => {
  const store = await RedisStore.open(url, { prefix, clock: "caller" });
  const client = createClient({ url });
  client.on("error", () => {});
  await client.connect();
  try {
    const nodes: NewFlowNodeRow[] = Array.from({ length: NODES }, (_, i) => ({
      key: `n${i}`,
      job: {
        queue: "prune-bench",
        name: "node",
        payload: "{}",
        priority: 0,
        availableAt: ENDED_AT,
        retryUntil: null,
        createdAt: ENDED_AT,
        delayMs: 0,
        retryForMs: null,
      },
      parents: [],
      continueOnFailure: false,
    }));
    const ids: number[] = [];
    for (let made = 0; made < FLOWS; made += 100) {
      const inserted = await Promise.all(
        Array.from(
          { length: Math.min(100, FLOWS - made) },
          () => store.insertFlow({ name: "f", createdAt: ENDED_AT, nodes, onFailure: [] }),
        ),
      );
      ids.push(...inserted.map((flow) => flow.id));
    }
    for (let first = 0; first < ids.length; first += 200) {
      const slice = ids.slice(first, first + 200).map(String);
      await client.eval(END_FLOWS, { arguments: [`{${prefix}}`, String(ENDED_AT), ...slice] });
    }
    const fcallStats = async () => {
      const info = await client.info("commandstats");
      const line = info.split("\n").find((row) => row.startsWith("cmdstat_fcall:")) ?? "";
      return {
        calls: Number(line.match(/calls=(\d+)/)?.[1] ?? 0),
        usec: Number(line.match(/usec=(\d+)/)?.[1] ?? 0),
      };
    };
    const timed = async (before: number) => {
      const stats = await fcallStats();
      const start = performance.now();
      const pruned = await store.pruneFlows(before, before);
      const ms = performance.now() - start;
      const after = await fcallStats();
      // Other clients' calls share the server's figures: a busy server reads high.
      const calls = after.calls - stats.calls;
      return { pruned, ms, calls, serverMsPerCall: (after.usec - stats.usec) / calls / 1000 };
    };
    const kept = [];
    for (let round = 0; round < KEPT_ROUNDS; round++) kept.push(await timed(ENDED_AT));
    const all = await timed(ENDED_AT + 1);
    const msOf = (rows: { ms: number }[]) => rows.map((row) => row.ms.toFixed(0)).join(", ");
    console.log(`${FLOWS} flows x ${NODES} nodes, all ended`);
    console.log(
      `prune keeping them all (${KEPT_ROUNDS} runs): ${msOf(kept)} ms; ${
        kept[0]!.calls
      } script calls, ${kept[0]!.serverMsPerCall.toFixed(1)} ms each on the server (mean)`,
    );
    console.log(
      `prune deleting them all: ${all.ms.toFixed(0)} ms, ${all.pruned} pruned; ${all.calls} ` +
        `script calls, ${all.serverMsPerCall.toFixed(1)} ms each on the server (mean)`,
    );
  } finally {
    await client.close();
    await store.close();
  }
});
