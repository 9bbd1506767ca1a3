/**
 * The CLI on Redis: `--db redis://…` (and `QUEUE_DB`) reaches the Redis
 * store for every command, under the URL's `prefix`, and what the CLI
 * prints names the URL without its password. The cases that need a server
 * run when `QUEUE_TEST_REDIS_URL` is set; each uses a prefix of its own,
 * deleted afterwards.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Queue } from "../../mod.ts";
import { RedisStore } from "../../src/stores/redis/mod.ts";
import { redactPassword } from "../../src/stores/database_url.ts";
import { deletePrefix, freshPrefix, prefixKeys, redisTestUrl } from "../_redis.ts";
import { waitUntil } from "../_helpers.ts";
import { checkSpacedCapitalUrl } from "../fixtures/cli/spaced_url.ts";
import { checkRefusesMissingQueue } from "../fixtures/cli/missing_queue.ts";
import { runCli, startCli } from "../fixtures/cli/cli_process.ts";
import { record } from "../fixtures/cli/jobs.ts";
import { checkSignalAndSteps } from "../fixtures/cli/signal_steps.ts";

const JOBS = "tests/fixtures/cli/jobs.ts";

const url = redisTestUrl();
if (url === null) console.log("CLI tests on Redis skipped: QUEUE_TEST_REDIS_URL is not set");

/** The test server's URL with `prefix` as its `prefix` parameter. */
function withPrefix(prefix: string): string {
  const target = new URL(url!);
  target.searchParams.set("prefix", prefix);
  return target.href;
}

/** Registers a test that needs the Redis server, with a fresh prefix deleted afterwards. */
function redisTest(name: string, fn: (db: string, prefix: string) => Promise<void>): void {
  Deno.test({
    name,
    ignore: url === null,
    async fn() {
      const prefix = freshPrefix();
      try {
        await fn(withPrefix(prefix), prefix);
      } finally {
        await deletePrefix(url!, prefix);
      }
    },
  });
}

Deno.test("CLI: a --db redis:// URL that does not parse is a usage error, named without its password", async () => {
  const result = await runCli(["stats", "--db", "redis://app:secret@cache.internal:port/0"]);
  assert.equal(result.code, 2, result.stderr);
  assert.match(
    result.stderr,
    /^queue stats: --db: url is not a valid URL: got "redis:\/\/app:\*\*\*@cache\.internal:port\/0"/,
  );
  assert.doesNotMatch(result.stderr + result.stdout, /secret/);
});

redisTest(
  "CLI migrate --db redis://…?prefix= checks the server, writes the store's layout under the prefix, and names the URL without its password",
  async (db, prefix) => {
    const result = await runCli(["migrate", "--db", db]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(
      result.stdout,
      "Applied key layout 1 (expand)\nApplied key layout 2 (contract)\n" +
        "Applied key layout 3 (contract)\nApplied key layout 4 (contract)\n" +
        `${redactPassword(db)} is at Redis key layout version 4\n`,
    );
    assert.ok((await prefixKeys(url!, prefix)).includes(`{${prefix}}:meta`));
  },
);

redisTest(
  "CLI migrate reads a QUEUE_DB or --db URL with a space before it and its scheme in capitals as Redis, making no file",
  async (db, prefix) => {
    await checkSpacedCapitalUrl(
      db,
      "redis",
      "REDIS",
      async () => (await prefixKeys(url!, prefix)).includes(`{${prefix}}:meta`),
    );
  },
);

redisTest(
  "CLI migrate --plan on a prefix with no key plans every layout from 0 and writes nothing",
  async (db, prefix) => {
    const plan = await runCli(["migrate", "--plan", "--db", db]);
    assert.equal(plan.code, 0, plan.stderr);
    assert.match(
      plan.stdout,
      /^.* is at key layout 0; this code knows 4\nWould apply key layout 1 \(/,
    );
    assert.deepEqual(await prefixKeys(url!, prefix), [], "no key written");
  },
);

redisTest("CLI migrate reads a redis:// URL from QUEUE_DB", async (db, prefix) => {
  const result = await runCli(["migrate"], { QUEUE_DB: db });
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, new RegExp(`is at Redis key layout version 4\n$`));
  assert.ok((await prefixKeys(url!, prefix)).includes(`{${prefix}}:meta`));
});

redisTest(
  "CLI work --db redis://… drains the jobs dispatched there, supervised or not, and its worker:start names the URL without its password",
  async (db) => {
    {
      await using queue = await Queue.open({ url: db, jobs: [record] });
      await queue.dispatchMany(record, [{ n: 1 }, { n: 2 }, { n: 3 }]);
    }
    const bare = await runCli([
      "work",
      "--no-supervise",
      "--stop-when-empty",
      "--jobs",
      JOBS,
      "--db",
      db,
    ]);
    assert.equal(bare.code, 0, bare.stderr);
    const lines = bare.stdout.trim().split("\n").map((line) => JSON.parse(line));
    assert.deepEqual(lines[0]!.event, "worker:start");
    assert.equal(lines[0]!.db, redactPassword(db));
    assert.equal(lines.filter((line) => line.event === "job:complete").length, 3);

    {
      await using queue = await Queue.open({ url: db, jobs: [record] });
      await queue.dispatch(record, { n: 4 });
    }
    const supervised = await runCli(["work", "--stop-when-empty", "--jobs", JOBS], {
      QUEUE_DB: db,
    });
    assert.equal(supervised.code, 0, supervised.stderr);
    assert.equal(
      supervised.stdout.split("\n").filter((line) => line.includes('"job:complete"')).length,
      1,
      supervised.stdout,
    );
  },
);

redisTest(
  "CLI work, supervised, warns about a Redis server without an append-only file once, as an unsupervised worker does: its child warns, the supervisor's check does not",
  async (db) => {
    const warnings = (stderr: string) =>
      stderr.split("\n").filter((line) => line.includes("has no append-only file")).length;
    const args = ["work", "--stop-when-empty", "--jobs", JOBS, "--db", db];
    const bare = await runCli([...args, "--no-supervise"]);
    assert.equal(bare.code, 0, bare.stderr);
    const supervised = await runCli(args);
    assert.equal(supervised.code, 0, supervised.stderr);
    // 1 on a server with appendonly no (the test server's), 0 on one with it.
    assert.ok(warnings(bare.stderr) <= 1, bare.stderr);
    assert.equal(warnings(supervised.stderr), warnings(bare.stderr), supervised.stderr);
  },
);

redisTest(
  "CLI admin commands refuse a prefix that holds no queue, naming the URL, and write no key",
  (db, prefix) =>
    checkRefusesMissingQueue(
      db,
      "no key of this prefix",
      async () => assert.deepEqual(await prefixKeys(url!, prefix), [], "no key written"),
    ),
);

redisTest(
  "CLI dashboard --db redis://… serves the store and names the URL without its password",
  async (db) => {
    assert.equal((await runCli(["migrate", "--db", db])).code, 0, "a queue there to show");
    await using cli = startCli(["dashboard", "--db", db, "--port", "0"]);
    const line = /^Dashboard of (.+?): (http:\/\/127\.0\.0\.1:\d+\/) \(Ctrl-C to stop\)$/;
    await waitUntil(() => Promise.resolve(cli.lines.some((l) => line.test(l))), {
      what: "the URL printed",
    });
    const [, shown] = line.exec(cli.lines.find((l) => line.test(l))!)!;
    assert.equal(shown, redactPassword(db));
    cli.kill("SIGTERM");
    assert.equal((await cli.child.status).code, 0);
  },
);

redisTest(
  "CLI signal and steps --db redis://… answer a job's wait there: delivered to its wait, buffered under another name, not-found exits 1; steps lists its memos",
  async (db) => {
    const store = await RedisStore.open(url!, { prefix: new URL(db).searchParams.get("prefix")! });
    await checkSignalAndSteps(store, db);
  },
);
