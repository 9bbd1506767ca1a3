/**
 * Rolling upgrades on Redis, where the key layout stands for the schema:
 * `P:meta` records the newest layout and the newest contract layout, so
 * code older than the store keeps working past newer expand layouts and
 * learns of a newer contract one, from its heartbeat and when it opens.
 *
 * @module
 */
import assert from "node:assert/strict";
import { OutdatedCodeError } from "../../../src/errors.ts";
import { LAYOUT_VERSION } from "../../../src/stores/redis/migrate.ts";
import { RedisStore } from "../../../src/stores/redis/mod.ts";
import {
  deletePrefix,
  evalScript,
  freshPrefix,
  hashField,
  openTestRedisStore,
  prefixKeys,
  redisTestUrl,
  setHashField,
} from "../../_redis.ts";

const url = redisTestUrl();

/** A heartbeat of a live worker, now. */
function worker(id: string) {
  const now = Date.now();
  return {
    id,
    host: "old-box",
    pid: 4242,
    queues: ["default"],
    concurrency: 1,
    startedAt: now,
    lastSeenAt: now,
    running: 0,
    names: [],
  };
}

Deno.test({
  name:
    "RedisStore: a newer expand layout lets this code open the store and keep working, and is kept as it is; a newer contract layout is told by the heartbeat and refused at open",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!);
    const { store, prefix } = opened;
    const meta = `{${prefix}}:meta`;
    assert.equal(await hashField(url!, meta, "layout"), String(LAYOUT_VERSION));

    // A newer release laid out an expand layout: this code still opens it, and leaves it as it is.
    assert.ok(await setHashField(url!, meta, "layout", String(LAYOUT_VERSION + 1)));
    assert.deepEqual(await store.heartbeat(worker("w"), 0), {
      codeStep: LAYOUT_VERSION,
      databaseStep: LAYOUT_VERSION + 1,
      contractStep: null,
    });
    {
      await using again = await RedisStore.open(url!, { prefix });
      assert.deepEqual((await again.migrationPlan()).steps, []);
    }
    assert.equal(await hashField(url!, meta, "layout"), String(LAYOUT_VERSION + 1));

    // Then a contract layout: the running worker's heartbeat tells it, and opening refuses.
    assert.ok(await setHashField(url!, meta, "contract_layout", String(LAYOUT_VERSION + 1)));
    assert.deepEqual(await store.heartbeat(worker("w"), 0), {
      codeStep: LAYOUT_VERSION,
      databaseStep: LAYOUT_VERSION + 1,
      contractStep: LAYOUT_VERSION + 1,
    });
    await assert.rejects(RedisStore.open(url!, { prefix }), OutdatedCodeError);
  },
});

/** Kept jobs a store of layout 2 holds in the conversion's test: more than one chunk. */
const LAYOUT_2_KEPT = 1_201;

/**
 * Writes a store of layout 2 on `prefix`: its meta, and `LAYOUT_2_KEPT`
 * kept jobs (id n: queue `default` or `mail`, name `a` or `b`, finished at
 * 1000 × n, a second apart: a prune's clock shift of a few ms moves no
 * job) in every listing layout 2 kept: `P:done`, per queue, per name
 * and per both.
 */
function writeLayout2History(prefix: string): Promise<unknown> {
  return evalScript(
    url!,
    String.raw`
local P = ARGV[1]
redis.call('HSET', P .. ':meta', 'epoch', 'layout-2', 'layout', 2, 'contract_layout', 2)
for id = 1, tonumber(ARGV[2]) do
  local queue = (id % 2 == 0) and 'mail' or 'default'
  local name = (id % 3 == 0) and 'b' or 'a'
  local member = string.format('%016d', id)
  local finished = 1000 * id
  redis.call('HSET', P .. ':done:' .. id, 'id', id, 'queue', queue, 'name', name, 'state', 'completed',
    'payload', '{}', 'attempts', 1, 'created_at', 1000, 'finished_at', finished, 'keep_until', 9e15)
  for _, listing in ipairs({P .. ':done', P .. ':done:q:' .. queue, P .. ':done:n:' .. name,
      P .. ':done:qn:' .. #queue .. ':' .. queue .. ':' .. name}) do
    redis.call('ZADD', listing, finished, member)
  end
  redis.call('ZADD', P .. ':done:keep', 9e15, member)
end
return 1
`,
    [`{${prefix}}`, String(LAYOUT_2_KEPT)],
  );
}

Deno.test({
  name:
    "RedisStore: opening a store of layout 2 converts its kept history to layout 3: every listing reads as before, the old listings are deleted",
  ignore: url === null,
  async fn() {
    const prefix = freshPrefix();
    try {
      await writeLayout2History(prefix);
      await using opened = await openTestRedisStore(url!, { prefix });
      const { store } = opened;
      assert.equal(await hashField(url!, `{${prefix}}:meta`, "layout"), String(LAYOUT_VERSION));
      const keys = await prefixKeys(url!, prefix);
      for (const old of [":done", ":done:q:default", ":done:q:mail", ":done:n:a", ":done:n:b"]) {
        assert.ok(!keys.includes(`{${prefix}}${old}`), `${old} is deleted`);
      }
      const ids = (rows: { id: number }[]) => rows.map((row) => row.id);
      const newest = (keep: (id: number) => boolean, offset: number, limit: number) => {
        const all: number[] = [];
        for (let id = LAYOUT_2_KEPT; id >= 1; id--) if (keep(id)) all.push(id);
        return all.slice(offset, offset + limit);
      };
      const isMail = (id: number) => id % 2 === 0;
      const isB = (id: number) => id % 3 === 0;
      assert.deepEqual(
        ids(await store.finished({}, { limit: 5, offset: 0 })),
        newest(() => true, 0, 5),
      );
      assert.deepEqual(
        ids(await store.finished({}, { limit: 4, offset: 1_100 })),
        newest(() => true, 1_100, 4),
      );
      assert.deepEqual(
        ids(await store.finished({ queue: "mail" }, { limit: 6, offset: 3 })),
        newest(isMail, 3, 6),
      );
      assert.deepEqual(
        ids(await store.finished({ name: "b" }, { limit: 6, offset: 0 })),
        newest(isB, 0, 6),
      );
      assert.deepEqual(
        ids(await store.finished({ queue: "default", name: "b" }, { limit: 3, offset: 0 })),
        newest((id) => !isMail(id) && isB(id), 0, 3),
      );
      // The prune reads the converted listings too: the 100 that finished first.
      assert.equal(await store.pruneFinished(100_500, Date.now()), 100);
      assert.deepEqual(
        ids(await store.finished({}, { limit: 2, offset: LAYOUT_2_KEPT - 101 })),
        [101],
      );
    } finally {
      await deletePrefix(url!, prefix);
    }
  },
});
