/**
 * What works, and what is said, with only some permissions: the SQLite
 * path with `--allow-read --allow-write --allow-env` (no ffi, net, run or
 * sys), the Deploy-style example on Redis with `--allow-net --allow-env`
 * narrowed to the server and the app's variables (when
 * `QUEUE_TEST_REDIS_URL` is set), PostgreSQL under `--allow-net` and the
 * grant `readConfig()` needs (when `QUEUE_TEST_POSTGRES_URL` is set), and the
 * SQLite default or a jobs module by URL without them.
 *
 * @module
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { tempDir } from "../_helpers.ts";
import { deletePrefix, freshPrefix, redisTestUrl } from "../_redis.ts";
import { freshSchema, postgresTestUrl } from "../_postgres.ts";
import { PostgresStore } from "../../src/stores/postgres/mod.ts";
import { ROOT, ServeProcess } from "../fixtures/deploy/serve_process.ts";

const FILE_FLAGS = ["--allow-read", "--allow-write", "--allow-env"];

/** Runs `script` with `flags` and prompts off, `env` added to this process's; its exit code and output. */
async function run(
  flags: readonly string[],
  script: string,
  args: readonly string[] = [],
  env: Record<string, string> = {},
) {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", "--quiet", ...flags, script, ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1", ...env },
    stdin: "null",
  }).output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code, stdout: decode(stdout), stderr: decode(stderr) };
}

Deno.test("SQLite with --allow-read --allow-write --allow-env only: dispatch, work, drain and the dashboard handler work, the host reads unknown", async () => {
  await using tmp = await tempDir();
  const { code, stdout, stderr } = await run(FILE_FLAGS, "tests/fixtures/deploy/sqlite_app.ts", [
    tmp.dbPath,
  ]);
  assert.equal(code, 0, stderr);
  assert.equal(stderr, "");
  const seen = JSON.parse(stdout.trim());
  assert.deepEqual(seen, {
    executor: "workers",
    work: { completed: 3, failed: 1, retried: 0 },
    drain: { completed: 1, failed: 0, retried: 0, stoppedBecause: "empty" },
    hosts: ["unknown"],
    pages: { "/": 200, "/failed": 200, "/api/overview": 200 },
    failedPageNamesRefuse: true,
    counts: { pending: 0, delayed: 0, reserved: 0, failed: 1, running: [] },
    errors: [],
  });
});

Deno.test("SQLite with --allow-read --allow-write --allow-env only: the CLI's admin commands work", async () => {
  await using tmp = await tempDir();
  const app = await run(FILE_FLAGS, "tests/fixtures/deploy/sqlite_app.ts", [tmp.dbPath]);
  assert.equal(app.code, 0, app.stderr);
  const cli = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));
  const admin = (...args: string[]) => run(FILE_FLAGS, cli, [...args, "--db", tmp.dbPath]);

  const migrate = await admin("migrate");
  assert.equal(migrate.code, 0, migrate.stderr);
  const failed = await admin("failed");
  assert.equal(failed.code, 0, failed.stderr);
  assert.match(failed.stdout, /refuse/);
  const stats = await admin("stats", "--json");
  assert.equal(stats.code, 0, stats.stderr);
  assert.equal(JSON.parse(stats.stdout).default.failed, 1);
  const retry = await admin("retry", "all");
  assert.equal(retry.code, 0, retry.stderr);
  const afterRetry = JSON.parse((await admin("stats", "--json")).stdout).default;
  assert.deepEqual([afterRetry.pending, afterRetry.failed], [1, 0]);
  const clear = await admin("clear");
  assert.equal(clear.code, 0, clear.stderr);
  const flush = await admin("flush");
  assert.equal(flush.code, 0, flush.stderr);
  const batches = await admin("batches");
  assert.equal(batches.code, 0, batches.stderr);
  assert.deepEqual(JSON.parse((await admin("stats", "--json")).stdout), {}, "jobs were left");
});

const redisUrl = redisTestUrl();
if (redisUrl === null) {
  console.log("Redis permissions test skipped: QUEUE_TEST_REDIS_URL is not set");
}

Deno.test({
  name:
    "Redis with --allow-net (the server and the app's port) and --allow-env (the app's variables) only: the deploy example under deno serve, with no Worker, runs each order once after its response and serves its counts and dashboard, with nothing on stderr",
  ignore: redisUrl === null,
  async fn() {
    const server = new URL(redisUrl!);
    const prefix = freshPrefix();
    const databaseUrl = new URL(redisUrl!);
    databaseUrl.searchParams.set("prefix", prefix);
    const password = "correct horse";
    try {
      await using app = await ServeProcess.start(
        "tests/fixtures/deploy/serve_without_worker.ts",
        (port) => [
          "--unstable-cron",
          `--allow-net=${server.hostname}:${server.port || "6379"},127.0.0.1:${port}`,
          // The app's own variables only: the store and its driver read none of their own.
          "--allow-env=DATABASE_URL,DASHBOARD_PASSWORD,DRAIN_AFTER_RESPONSE_MS",
        ],
        { DATABASE_URL: databaseUrl.href, DASHBOARD_PASSWORD: password },
      );
      const ids: string[] = [];
      for (let n = 1; n <= 5; n++) {
        const response = await fetch(`${app.origin}/orders`, {
          method: "POST",
          body: JSON.stringify({ sku: "mug", quantity: n }),
        });
        assert.equal(response.status, 202, await response.clone().text());
        ids.push((await response.json()).orderId);
      }
      const started = (lines: readonly string[]) =>
        lines.filter((line) => line.startsWith('{"fulfilling"'))
          .map((line) => JSON.parse(line).fulfilling as string);
      await app.until("the 5 orders to start", (lines) => started(lines).length >= 5, 60_000);
      const idle = { default: { pending: 0, delayed: 0, reserved: 0, failed: 0, running: [] } };
      let counts: unknown = null;
      for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
        counts = await (await fetch(`${app.origin}/`)).json();
        if (JSON.stringify(counts) === JSON.stringify(idle)) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.deepEqual(counts, idle);
      assert.deepEqual(started(app.lines).sort(), ids.sort(), "each order once");
      const page = await fetch(`${app.origin}/admin/queue`, {
        headers: { authorization: `Basic ${btoa(`admin:${password}`)}` },
      });
      assert.equal(page.status, 200);
      assert.match(await page.text(), /<html/i);
      // The store's one warning about a server without an append-only file is not an error.
      const stderr = app.stderr.replace(/^deno serve: Listening on .*$/m, "")
        .replace(/^@renox\/queue: the Redis server has no append-only file.*$/m, "").trim();
      assert.equal(stderr, "", `deno serve wrote to stderr:\n${app.stderr}`);
      assert.doesNotMatch(app.lines.join("\n"), /Requires|NotCapable|error/i);
    } finally {
      await deletePrefix(redisUrl!, prefix);
    }
  },
});

const postgresUrl = postgresTestUrl();
if (postgresUrl === null) {
  console.log("PostgreSQL permissions test skipped: QUEUE_TEST_POSTGRES_URL is not set");
}

Deno.test({
  name:
    "PostgreSQL with --allow-net and --allow-env=QUEUE_DB,QUEUE_WORKERS only: Queue.open says its driver reads PG* variables and which --allow-env to add; with it, it opens",
  ignore: postgresUrl === null,
  async fn() {
    const schema = freshSchema();
    const url = new URL(postgresUrl!);
    url.searchParams.set("schema", schema);
    const env = { QUEUE_DB: url.href };
    try {
      const scoped = await run(
        ["--allow-net", "--allow-env=QUEUE_DB,QUEUE_WORKERS"],
        "tests/fixtures/deploy/open_config.ts",
        [],
        env,
      );
      assert.equal(scoped.code, 0, scoped.stderr);
      assert.match(
        scoped.stdout,
        /^NotCapable: Cannot open the PostgreSQL store at postgres:\/\/.*: its driver \(postgres\.js\) reads PostgreSQL's PG\* environment variables .*; run with --allow-env=PG\*.* \(e\.g\. --allow-env=QUEUE_DB,QUEUE_WORKERS,DATABASE_URL,PG\*.*\), or with --allow-env: Requires env access to "PG/,
      );
      // As the message says (the user's name too, should the test URL name no user).
      const granted = await run(
        ["--allow-net", "--allow-env=QUEUE_DB,QUEUE_WORKERS,PG*,USER,USERNAME,LOGNAME"],
        "tests/fixtures/deploy/open_config.ts",
        [],
        env,
      );
      assert.equal(granted.stdout.trim(), "opened", granted.stderr);
    } finally {
      await using dropper = await PostgresStore.open(postgresUrl!, { migrate: false });
      await dropper.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
    }
  },
});

Deno.test("the SQLite default without --allow-read/--allow-write says which flags to add and points to DATABASE_URL", async () => {
  const { code, stdout, stderr } = await run(
    ["--allow-env"],
    "tests/fixtures/deploy/open_default.ts",
  );
  assert.equal(code, 0, stderr);
  assert.match(stdout, /^NotCapable: Cannot open the SQLite file \.\/\.renox\/queue\.db/);
  assert.match(stdout, /--allow-read=\.\/\.renox --allow-write=\.\/\.renox/);
  assert.match(stdout, /DATABASE_URL/);
  const readOnly = await run(
    ["--allow-env", "--allow-read"],
    "tests/fixtures/deploy/open_default.ts",
  );
  assert.match(readOnly.stdout, /run with --allow-write=\.\/\.renox \(/);
});

Deno.test("a jobs module by URL the app does not import says how to load it without --allow-read", async () => {
  await using tmp = await tempDir();
  const jobs = `${tmp.dir}/jobs.ts`;
  await Deno.writeTextFile(jobs, "export const nothing = 1;\n");
  const { stdout } = await run(["--allow-env"], "tests/fixtures/deploy/open_default.ts", [
    "jobs-url",
    jobs,
  ]);
  assert.match(stdout, /Cannot import the jobs module file:\/\//);
  assert.match(stdout, /unless the app imports it too/);
  assert.match(stdout, /or grant --allow-read/);
});

Deno.test("serverless() with --unstable-cron registers its Deno.cron job, refuses a bad expression and a second job of the same name, and its signal unregisters it", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", "--quiet", "--unstable-cron", "tests/fixtures/deploy/cron_app.ts"],
    cwd: ROOT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // A job left registered keeps the process alive: give up after 30 s.
  const deadline = setTimeout(() => child.kill("SIGKILL"), 30_000);
  const { code, stdout, stderr } = await child.output();
  clearTimeout(deadline);
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  assert.equal(code, 0, decode(stderr));
  assert.deepEqual(decode(stdout).trim().split("\n"), [
    'refused: serverless: Deno.cron refused the job "bad-expression" on "every minute": Invalid cron schedule',
    "registered",
    'second: serverless: a cron job named "renox-queue drain" is registered already: each serverless() call registers one of its own, so give this one another name option',
    "unregistered",
  ]);
});
