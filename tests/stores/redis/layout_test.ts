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
import type { NewJobRow } from "../../../src/stores/store.ts";
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

/** When the layout-4 conversion's tests dispatch and claim (their stores take the caller's clock). */
const T0 = Date.UTC(2026, 0, 1);

/** A job row due at `T0`, of the queue and name `overrides` give. */
function jobRow(overrides: Partial<NewJobRow> & Pick<NewJobRow, "queue" | "name">): NewJobRow {
  return {
    payload: "{}",
    priority: 0,
    availableAt: T0,
    retryUntil: null,
    createdAt: T0,
    ...overrides,
  };
}

/** Groups with a job each in the layout-4 conversion's test: more than one chunk of groups. */
const LAYOUT_3_GROUPS = 300;

/**
 * Lays the keys of queue `queue` (in `keys`, the prefix's keys) out as
 * layout 3 did, with the name as it is, and marks the store layout 3.
 */
function writeLayout3QueueKeys(prefix: string, queue: string, keys: string[]): Promise<unknown> {
  const base = `{${prefix}}:q:${queue.replaceAll(":", "|")}:`;
  const ours = keys.filter((key) => key.startsWith(base));
  return evalScript(
    url!,
    String.raw`
local P, base, old = ARGV[1], ARGV[2], ARGV[3]
redis.call('HSET', P .. ':meta', 'layout', 3, 'contract_layout', 3)
for i = 4, #ARGV do redis.call('RENAME', ARGV[i], old .. string.sub(ARGV[i], #base + 1)) end
return 1
`,
    [`{${prefix}}`, base, `{${prefix}}:q:${queue}:`, ...ours],
  );
}

Deno.test({
  name:
    "RedisStore: opening a store of layout 3 renames the keys of a queue whose name holds ':' to layout 4: its jobs, levels, groups and leases read and run as before",
  ignore: url === null,
  async fn() {
    const prefix = freshPrefix();
    const queue = "mail:high";
    const job = (overrides: Partial<NewJobRow> = {}) =>
      jobRow({ queue, name: "send", ...overrides });
    try {
      let leased: number;
      let countsBefore: unknown;
      {
        // Opened without the test's disposal, which would delete the prefix.
        await using store = await RedisStore.open(url!, { prefix, clock: "caller" });
        leased = (await store.insertJobs([job({ priority: 9 })]))[0]!;
        assert.equal(
          (await store.claim({ queues: [queue], limit: 1, now: T0, leaseMs: 60_000, token: 1 }))
            .length,
          1,
        );
        await store.insertJobs([
          job(),
          job({ priority: 5 }),
          job({ availableAt: T0 + 3_600_000 }),
          ...Array.from(
            { length: LAYOUT_3_GROUPS },
            (_, n) => job({ group: { key: `g:${n}`, limit: null, ordered: n % 2 === 0 } }),
          ),
        ]);
        await store.insertJobs([job({ queue: "mail" })]);
        countsBefore = await store.counts(T0);
        await writeLayout3QueueKeys(prefix, queue, await prefixKeys(url!, prefix));
      }
      const keysAt3 = await prefixKeys(url!, prefix);
      assert.ok(keysAt3.includes(`{${prefix}}:q:mail:high:leased`), "laid out as layout 3");
      await using opened = await openTestRedisStore(url!, { prefix, clock: "caller" });
      const { store } = opened;
      assert.equal(await hashField(url!, `{${prefix}}:meta`, "layout"), String(LAYOUT_VERSION));
      const keys = await prefixKeys(url!, prefix);
      assert.deepEqual(keys.filter((key) => key.includes(":q:mail:high:")), []);
      assert.equal(keys.length, keysAt3.length, "every key renamed, none lost");
      assert.deepEqual(await store.counts(T0), countsBefore);
      const claimed = await store.claim({
        queues: [queue],
        limit: 1_000,
        now: T0,
        leaseMs: 60_000,
        token: 2,
      });
      assert.equal(claimed.length, 2 + LAYOUT_3_GROUPS);
      await store.settle([{ kind: "complete", id: leased, token: 1, at: T0 }]);
      assert.deepEqual(
        (await store.counts(T0)).find((row) => row.queue === queue),
        { queue, pending: 0, delayed: 1, reserved: 2 + LAYOUT_3_GROUPS, failed: 0 },
      );
    } finally {
      await deletePrefix(url!, prefix);
    }
  },
});

Deno.test({
  name:
    "RedisStore: opening a store of layout 3 beside live workers of older code refuses key layout 4 in the key layout's words, and says a worker from before rolling upgrades never learns of a forced one",
  ignore: url === null,
  async fn() {
    const prefix = freshPrefix();
    try {
      await evalScript(
        url!,
        String.raw`
local P = ARGV[1]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('HSET', P .. ':meta', 'epoch', 'layout-3', 'layout', 3, 'contract_layout', 3)
for pid, step in pairs({[4242] = 3, [4243] = false}) do
  local row = {id = 'w' .. pid, host = 'old-box', pid = pid, queues = '["default"]', names = '[]',
    concurrency = 1, started_at = now - 10 * (pid - 4000), last_seen_at = now, running = 0}
  if step then row.schema_step = step end
  redis.call('HSET', P .. ':workers', row.id, cjson.encode(row))
  redis.call('ZADD', P .. ':workers:seen', now, row.id)
end
return 1
`,
        [`{${prefix}}`],
      );
      await assert.rejects(
        RedisStore.open(url!, { prefix }),
        new RegExp(
          "^Error: Cannot apply key layout 4, a contract step: .* old-box pid 4243, code of key layout 1 from before rolling upgrades; old-box pid 4242, key layout 3\\. .*--force .*they stop at their next heartbeat, but for code of key layout 1 from before rolling upgrades, which never learns of it: stop that yourself$",
        ),
      );
      assert.equal(await hashField(url!, `{${prefix}}:meta`, "layout"), "3", "nothing applied");
    } finally {
      await deletePrefix(url!, prefix);
    }
  },
});

Deno.test({
  name:
    "RedisStore: the conversion to layout 4 leaves a key that is also a group's of a queue whose name the converted one's starts with: the group's jobs stay claimable",
  ignore: url === null,
  async fn() {
    const prefix = freshPrefix();
    const other = "default:g:12:contract-job";
    const job = (overrides: Partial<NewJobRow> = {}) =>
      jobRow({ queue: "default", name: "contract-job", ...overrides });
    try {
      let grouped: number;
      {
        await using store = await RedisStore.open(url!, { prefix, clock: "caller" });
        // The group lv of contract-job in default, whose keys layout 3 and 4 name alike.
        grouped = (await store.insertJobs([
          job({ group: { key: "lv", limit: null, ordered: false } }),
        ]))[0]!;
        // A queue used once, now empty, whose ':lv' key in layout 3 was that group's.
        const [done] = await store.insertJobs([job({ queue: other })]);
        await store.claim({ queues: [other], limit: 1, now: T0, leaseMs: 60_000, token: 1 });
        await store.settle([{ kind: "complete", id: done!, token: 1, at: T0 }]);
        await writeLayout3QueueKeys(prefix, other, await prefixKeys(url!, prefix));
      }
      await using store = await RedisStore.open(url!, { prefix, clock: "caller" });
      assert.equal(await hashField(url!, `{${prefix}}:meta`, "layout"), String(LAYOUT_VERSION));
      const claimed = await store.claim({
        queues: ["default"],
        limit: 10,
        now: T0,
        leaseMs: 60_000,
        token: 2,
      });
      assert.deepEqual(claimed.map((row) => row.id), [grouped]);
      assert.deepEqual(
        await store.claim({ queues: [other], limit: 10, now: T0, leaseMs: 60_000, token: 3 }),
        [],
      );
    } finally {
      await deletePrefix(url!, prefix);
    }
  },
});

Deno.test({
  name:
    "RedisStore: of three processes migrating a new store at once, each layout is reported applied by one only",
  ignore: url === null,
  async fn() {
    const prefix = freshPrefix();
    const stores = await Promise.all(
      [1, 2, 3].map(() => RedisStore.open(url!, { prefix, migrate: false })),
    );
    try {
      const plans = await Promise.all(stores.map((store) => store.migrate()));
      const reported = plans.flatMap((plan) => plan.steps.map((step) => step.version)).sort((
        a,
        b,
      ) => a - b);
      assert.deepEqual(reported, Array.from({ length: LAYOUT_VERSION }, (_, i) => i + 1));
      assert.equal(await hashField(url!, `{${prefix}}:meta`, "layout"), String(LAYOUT_VERSION));
    } finally {
      await Promise.all(stores.map((store) => store.close()));
      await deletePrefix(url!, prefix);
    }
  },
});
