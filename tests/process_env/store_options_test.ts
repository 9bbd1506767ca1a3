/**
 * Choosing the store from what names the database: one rule for
 * `readConfig()`, `Queue.open` and the CLI. A `postgres://` value selects
 * PostgreSQL wherever it is given, a `redis://` value Redis (its `prefix`
 * parameter naming the store's prefix); a `path` that is a URL, or empty, is
 * refused rather than opening a wrong or temporary SQLite database. The
 * cases that open Redis run when `QUEUE_TEST_REDIS_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { z } from "zod";
import { defineJob, Queue, readConfig, SqliteStore } from "../../mod.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { PostgresStore } from "../../src/stores/postgres/mod.ts";
import { tempDir } from "../_helpers.ts";
import { freshSchema, openTestPostgresStore, postgresTestUrl } from "../_postgres.ts";
import {
  deletePrefix,
  freshPrefix,
  openTestRedisStore,
  prefixKeys,
  redisTestUrl,
} from "../_redis.ts";

const noop = defineJob({ name: "store-options.noop", schema: z.null(), handle() {} });

Deno.test("readConfig() turns a postgres:// QUEUE_DB into the url option, a file into the path option", () => {
  const url = "postgres://app:secret@db.internal:5432/app";
  assert.deepEqual(readConfig({ QUEUE_DB: url }).database, { url });
  assert.deepEqual(readConfig({ QUEUE_DB: "postgresql://db/app" }).database, {
    url: "postgresql://db/app",
  });
  assert.deepEqual(readConfig({ QUEUE_DB: "jobs.db" }).database, { path: "jobs.db" });
});

Deno.test("Queue.open() refuses a path that is a URL, says to pass url, and creates no file", async () => {
  await using tmp = await tempDir();
  const before = [...Deno.readDirSync(Deno.cwd())].map((entry) => entry.name).sort();
  for (
    const path of [
      "postgres://app:secret@127.0.0.1:1/app",
      "redis://cache:6379",
      " postgres://app:secret@127.0.0.1:1/app",
      "Postgres://app:secret@127.0.0.1:1/app",
      "\tREDIS://cache:6379",
    ]
  ) {
    await assert.rejects(Queue.open({ path, jobs: [noop] }), (error: unknown) => {
      assert.ok(error instanceof TypeError, String(error));
      assert.match(error.message, /^Queue\.open: path is a URL, not a SQLite file/);
      assert.match(error.message, /pass a database URL as url/);
      assert.doesNotMatch(error.message, /secret/, "the password is not shown");
      return true;
    });
  }
  const after = [...Deno.readDirSync(Deno.cwd())].map((entry) => entry.name).sort();
  assert.deepEqual(after, before, "no SQLite file named after the URL");
  // A SQLite URI filename is still a file.
  await using queue = await Queue.open({ path: `file:${join(tmp.dir, "uri.db")}`, jobs: [noop] });
  assert.equal(typeof await queue.dispatch(noop, null), "number");
});

Deno.test("Queue.open() refuses a path that is a URL no store opens, without advice to pass it as url", async () => {
  const before = [...Deno.readDirSync(Deno.cwd())].map((entry) => entry.name).sort();
  for (const path of ["mysql://app:secret@127.0.0.1:1/app", " HTTPS://example.com/jobs.db"]) {
    await assert.rejects(Queue.open({ path, jobs: [noop] }), (error: unknown) => {
      assert.ok(error instanceof TypeError, String(error));
      assert.match(error.message, /^Queue\.open: path is a URL, not a SQLite file/);
      assert.match(error.message, /a postgres:\/\/ or redis:\/\/ URL given as url/);
      assert.doesNotMatch(error.message, /readConfig|secret/);
      return true;
    });
  }
  const after = [...Deno.readDirSync(Deno.cwd())].map((entry) => entry.name).sort();
  assert.deepEqual(after, before, "no SQLite file named after the URL");
});

Deno.test("Queue.open() refuses an empty path instead of opening a temporary database", async () => {
  for (const path of ["", "   "]) {
    await assert.rejects(Queue.open({ path, jobs: [noop] }), {
      name: "TypeError",
      message: `Queue.open: path must name a SQLite file (or ":memory:"): got ${
        JSON.stringify(path)
      }`,
    });
  }
});

Deno.test("Queue.open() refuses two of path, url and store, and a SQLite option beside url or store, before it opens anything", async () => {
  await using tmp = await tempDir();
  await using store = await SqliteStore.open(":memory:");
  // Nothing listens on port 1: a refusal that came after connecting would name the connection.
  const url = "postgres://nobody@127.0.0.1:1/app";
  const cases: [options: Record<string, unknown>, message: string][] = [
    [{ path: tmp.dbPath, url }, "Queue.open: give one of path, url and store: got path and url"],
    [
      { path: tmp.dbPath, store },
      "Queue.open: give one of path, url and store: got path and store",
    ],
    [{ url, store }, "Queue.open: give one of path, url and store: got url and store"],
    [
      { url, durability: "full" },
      "Queue.open: durability is an option of the SQLite file (path), so it takes no url",
    ],
    [
      { store, busyTimeoutMs: 1_000 },
      "Queue.open: busyTimeoutMs is an option of the SQLite file (path), so it takes no store",
    ],
  ];
  for (const [options, message] of cases) {
    await assert.rejects(Queue.open({ ...options, jobs: [noop] }), { name: "TypeError", message });
  }
  await assert.rejects(Deno.stat(tmp.dbPath), Deno.errors.NotFound, "no file was created");
});

Deno.test("readConfig() turns a redis:// or rediss:// QUEUE_DB into the url option", () => {
  for (const url of ["redis://:secret@cache.internal:6379/0?prefix=app", "rediss://cache/1"]) {
    assert.deepEqual(readConfig({ QUEUE_DB: url }).database, { url });
  }
});

Deno.test("Queue.open() refuses a url of another kind, naming it without its password", async () => {
  for (const url of ["mysql://app:secret@db.internal/app", "jobs.db", ""]) {
    await assert.rejects(Queue.open({ url, jobs: [noop] }), (error: unknown) => {
      assert.ok(error instanceof TypeError, String(error));
      assert.match(
        error.message,
        /^Queue\.open: url must start with postgres:\/\/, postgresql:\/\/, redis:\/\/ or rediss:\/\/: got "/,
      );
      assert.doesNotMatch(error.message, /secret/, "the password is not shown");
      return true;
    });
  }
});

Deno.test("Queue.open() refuses a redis:// URL it cannot parse, naming it without its password", async () => {
  await assert.rejects(
    Queue.open({ url: "redis://app:secret@cache.internal:port/0", jobs: [noop] }),
    {
      name: "TypeError",
      message: 'url is not a valid URL: got "redis://app:***@cache.internal:port/0"',
    },
  );
});

Deno.test("Queue.open() refuses a redis:// URL with a parameter other than prefix, or prefix twice, before it connects, naming it without its password", async () => {
  for (
    const url of [
      "redis://app:secret@127.0.0.1:1/0?prefx=app",
      "redis://app:secret@127.0.0.1:1/0?prefix=app&schema=jobs",
      "redis://app:secret@127.0.0.1:1/0?prefix=app&prefix=other",
    ]
  ) {
    await assert.rejects(Queue.open({ url, jobs: [noop] }), (error: unknown) => {
      assert.ok(error instanceof TypeError, String(error));
      assert.match(
        error.message,
        /^url takes one parameter, prefix, once: got "redis:\/\/app:\*\*\*@/,
      );
      assert.doesNotMatch(error.message, /secret/, "the password is not shown");
      return true;
    });
  }
});

Deno.test("Queue.open() refuses a redis:// URL whose path is not a database number, before it connects, naming it without its password", async () => {
  for (
    const [url, path] of [
      ["redis://app:secret@127.0.0.1:1/abc", "/abc"],
      ["redis://app:secret@127.0.0.1:1/0/1", "/0/1"],
      ["redis://app:secret@127.0.0.1:1/-1?prefix=app", "/-1"],
    ]
  ) {
    await assert.rejects(Queue.open({ url: url!, jobs: [noop] }), (error: unknown) => {
      assert.ok(error instanceof TypeError, String(error));
      assert.equal(
        error.message,
        `url's path is a database number or nothing (redis://host:6379/0): got "${path}" in "${
          url!.replace("app:secret@", "app:***@")
        }"`,
      );
      return true;
    });
  }
});

Deno.test("Queue.open() refuses a postgres:// URL with the schema parameter twice, naming it without its password", async () => {
  await assert.rejects(
    Queue.open({ url: "postgres://app:secret@127.0.0.1:1/app?schema=a&schema=b", jobs: [noop] }),
    {
      name: "TypeError",
      message:
        'url takes the schema parameter once: got "postgres://app:***@127.0.0.1:1/app?schema=a&schema=b"',
    },
  );
});

Deno.test("Queue.open() refuses a postgres:// URL that sets search_path, which would put the queue's tables in another schema, before it connects", async () => {
  for (
    const query of [
      "schema=a&search_path=b",
      "search_path=public",
      "options=-c%20search_path%3Dapp",
    ]
  ) {
    await assert.rejects(
      Queue.open({
        url: `postgres://app:secret@127.0.0.1:1/app?${query}&password=hidden`,
        jobs: [noop],
      }),
      (error: unknown) => {
        assert.ok(error instanceof TypeError, String(error));
        assert.match(
          error.message,
          /^url sets search_path, which the store sets itself to the queue's schema: give the schema parameter/,
        );
        assert.ok(
          !error.message.includes("secret") && !error.message.includes("hidden"),
          error.message,
        );
        assert.match(error.message, /app:\*\*\*@.*&password=\*\*\*"$/);
        return true;
      },
    );
  }
});

Deno.test("RedisStore.open() gives up on a server that does not answer after connectTimeoutMs, naming it without its password", async () => {
  const { RedisStore } = await import("../../src/stores/redis/mod.ts");
  const started = Date.now();
  await assert.rejects(
    RedisStore.open("redis://app:secret@127.0.0.1:1/0", { connectTimeoutMs: 300 }),
    (error: unknown) => {
      assert.ok(error instanceof Error, String(error));
      assert.match(
        error.message,
        /^could not connect to Redis at redis:\/\/app:\*\*\*@127\.0\.0\.1:1\/0: no connection within 300 ms: /,
      );
      assert.doesNotMatch(error.message, /secret/, "the password is not shown");
      return true;
    },
  );
  assert.ok(Date.now() - started < 5_000, "it gave up in time");
});

Deno.test("Queue.open() and a PostgreSQL store's first call on a server that refuses connections name it without its password", async () => {
  const { PostgresStore } = await import("../../src/stores/postgres/mod.ts");
  const down = "postgres://app:secret@127.0.0.1:1/app?schema=jobs";
  await assert.rejects(Queue.open({ url: down, jobs: [noop] }), (error: unknown) => {
    assert.ok(error instanceof Error, String(error));
    assert.match(
      error.message,
      /^could not connect to PostgreSQL at postgres:\/\/app:\*\*\*@127\.0\.0\.1:1\/app\?schema=jobs: .*ECONNREFUSED/,
    );
    assert.equal((error.cause as { code?: unknown })?.code, "ECONNREFUSED");
    return true;
  });
  // Not migrated at open: the first call is the first to connect, as the CLI's admin commands do.
  await using store = await PostgresStore.open(down, { migrate: false });
  await assert.rejects(store.migrationPlan(), (error: unknown) => {
    assert.ok(error instanceof Error, String(error));
    assert.match(
      error.message,
      /^Cannot reach the PostgreSQL database at postgres:\/\/app:\*\*\*@127\.0\.0\.1:1\/app\?schema=jobs: .*ECONNREFUSED/,
    );
    assert.doesNotMatch(error.message, /secret/, "the password is not shown");
    return true;
  });
});

const redisUrl = redisTestUrl();
if (redisUrl === null) {
  console.log("Redis cases of the store options skipped: QUEUE_TEST_REDIS_URL is not set");
}

Deno.test({
  name:
    'Queue.open({ url: "redis://…?prefix=…" }) keeps the jobs in Redis, under the URL\'s prefix',
  ignore: redisUrl === null,
  async fn() {
    const prefix = freshPrefix();
    const url = new URL(redisUrl!);
    url.searchParams.set("prefix", prefix);
    try {
      const id = await (async () => {
        await using queue = await Queue.open({ url: url.href, jobs: [noop] });
        return await queue.dispatch(noop, null);
      })();
      const keys = await prefixKeys(redisUrl!, prefix);
      assert.ok(keys.includes(`{${prefix}}:meta`), `the store's keys: ${keys.join(", ")}`);
      // The job is the prefix's: a store under it claims the job, a store under another does not.
      await using other = await openTestRedisStore(redisUrl!);
      const claim = { queues: ["default"], limit: 10, now: Date.now(), leaseMs: 60_000, token: 1 };
      assert.deepEqual(await other.store.claim(claim), []);
      await using mine = await openTestRedisStore(redisUrl!, { prefix });
      assert.deepEqual((await mine.store.claim(claim)).map((job) => job.id), [id]);
    } finally {
      await deletePrefix(redisUrl!, prefix);
    }
  },
});

Deno.test({
  name: "readConfig() with a redis:// QUEUE_DB opens the queue on Redis",
  ignore: redisUrl === null,
  async fn() {
    const prefix = freshPrefix();
    try {
      const config = readConfig({
        QUEUE_DB: `${redisUrl}${redisUrl!.includes("?") ? "&" : "?"}prefix=${prefix}`,
      });
      await (await Queue.open({ ...config.database, jobs: [] })).close();
      assert.ok((await prefixKeys(redisUrl!, prefix)).includes(`{${prefix}}:meta`));
    } finally {
      await deletePrefix(redisUrl!, prefix);
    }
  },
});

const postgresUrl = postgresTestUrl();
for (const kind of ["PostgreSQL", "Redis"] as const) {
  const serverUrl = kind === "PostgreSQL" ? postgresUrl : redisUrl;
  Deno.test({
    name:
      `Queue.open({ url, clock }) on ${kind}: due times follow the database's clock, not the injected one; a store opened with clock: "caller" follows it (QueueOptions.clock, docs/stores.md)`,
    ignore: serverUrl === null,
    async fn() {
      let now = Date.now();
      const clock = { now: () => now };
      /** Whether a job delayed by a minute runs once the clock is moved past it. */
      const runsWhenMoved = async (queue: Queue) => {
        await queue.dispatch(noop, null, { delayMs: 60_000 });
        assert.equal((await workUntilEmpty(queue)).completed, 0, "not due yet");
        now += 61_000;
        return (await workUntilEmpty(queue)).completed === 1;
      };
      if (kind === "PostgreSQL") {
        const schema = freshSchema();
        const url = new URL(serverUrl!);
        url.searchParams.set("schema", schema);
        try {
          await using byUrl = await Queue.open({ url: url.href, clock, jobs: [noop] });
          assert.equal(await runsWhenMoved(byUrl), false, "url: the database's clock");
        } finally {
          await using dropper = await PostgresStore.open(serverUrl!, { migrate: false });
          await dropper.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
        }
        await using caller = await openTestPostgresStore(serverUrl!, { clock: "caller" });
        await using byStore = await Queue.open({ store: caller.store, clock, jobs: [noop] });
        assert.equal(await runsWhenMoved(byStore), true, 'store with clock: "caller"');
      } else {
        const prefix = freshPrefix();
        const url = new URL(serverUrl!);
        url.searchParams.set("prefix", prefix);
        try {
          await using byUrl = await Queue.open({ url: url.href, clock, jobs: [noop] });
          assert.equal(await runsWhenMoved(byUrl), false, "url: the server's clock");
        } finally {
          await deletePrefix(serverUrl!, prefix);
        }
        const caller = await openTestRedisStore(serverUrl!, { clock: "caller" });
        try {
          await using byStore = await Queue.open({ store: caller.store, clock, jobs: [noop] });
          assert.equal(await runsWhenMoved(byStore), true, 'store with clock: "caller"');
        } finally {
          await deletePrefix(serverUrl!, caller.prefix);
        }
      }
    },
  });
}

Deno.test({
  name:
    "Queue.open() on a postgres:// URL with a parameter the server refuses as a setting names that parameter and says the URL sent it",
  ignore: postgresUrl === null,
  async fn() {
    const schema = freshSchema();
    const url = new URL(postgresUrl!);
    url.searchParams.set("schema", schema);
    url.searchParams.set("shcema", "app");
    try {
      await assert.rejects(Queue.open({ url: url.href, jobs: [noop] }), (error: unknown) => {
        assert.ok(error instanceof TypeError, String(error));
        assert.match(
          error.message,
          /^url has a parameter the PostgreSQL server does not know, "shcema": .*unrecognized configuration parameter "shcema"/,
        );
        return true;
      });
      url.searchParams.delete("shcema");
      url.searchParams.set("application_name", "store-options-test");
      await using queue = await Queue.open({ url: url.href, jobs: [noop] });
      await queue.dispatch(noop, null);
      assert.equal(
        (await queue.counts()).default?.pending,
        1,
        "a setting the server knows is sent",
      );
    } finally {
      await using dropper = await PostgresStore.open(postgresUrl!, { migrate: false });
      await dropper.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
    }
  },
});

Deno.test({
  name:
    "Queue.open() without path on a postgres:// DATABASE_URL keeps the jobs in PostgreSQL and warns once that it ignores the SQLite file's durability and busyTimeoutMs, naming them",
  ignore: postgresUrl === null,
  async fn() {
    const schema = freshSchema();
    const url = new URL(postgresUrl!);
    url.searchParams.set("schema", schema);
    const variable = Deno.env.get("DATABASE_URL");
    const warn = console.warn;
    const warnings: string[] = [];
    console.warn = (...args: unknown[]) => warnings.push(args.map(String).join(" "));
    Deno.env.set("DATABASE_URL", url.href);
    try {
      for (const options of [{ durability: "full" as const, busyTimeoutMs: 1_000 }, {}]) {
        await using queue = await Queue.open({ jobs: [noop], ...options });
        await queue.dispatch(noop, null);
      }
      await using again = await Queue.open({ jobs: [noop], durability: "full", busyTimeoutMs: 1 });
      assert.equal((await again.counts()).default?.pending, 2, "both jobs are in PostgreSQL");
      assert.deepEqual(warnings, [
        "@renox/queue: Queue.open ignores durability and busyTimeoutMs: they are options of the " +
        "SQLite file, and the queue keeps its jobs in the PostgreSQL database DATABASE_URL names " +
        "(pass path to keep them in a SQLite file)",
      ]);
      await using _alone = await Queue.open({ jobs: [noop], busyTimeoutMs: 1_000 });
      assert.match(warnings[1] ?? "", /ignores busyTimeoutMs: it is an option of the SQLite file/);
    } finally {
      console.warn = warn;
      if (variable === undefined) Deno.env.delete("DATABASE_URL");
      else Deno.env.set("DATABASE_URL", variable);
      await using dropper = await PostgresStore.open(postgresUrl!, { migrate: false });
      await dropper.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
    }
  },
});
