/**
 * A move's source must hold a queue (`moveQueue`, `abortMove`, the `move`
 * command; docs/moving.md): a `from` that holds none (another app's
 * SQLite file or PostgreSQL database, a Redis prefix nothing uses) is
 * refused before anything is written there, naming it and what it lacks,
 * on every store; before, it was given the queue's schema and a fence, and
 * the move reported success.
 *
 * @module
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import postgres from "postgres";
import { abortMove, moveQueue, Queue } from "../../mod.ts";
import { tempDir } from "../_helpers.ts";
import { postgresTestUrl } from "../_postgres.ts";
import { deletePrefix, freshPrefix, prefixKeys, redisTestUrl } from "../_redis.ts";
import { runCli } from "../fixtures/cli/cli_process.ts";
import { freshDatabase } from "../fixtures/deploy/serve_process.ts";

const pgUrl = postgresTestUrl();
const redisUrl = redisTestUrl();

/** Checks that a move from `from`, and a `move --abort` of it, are refused naming `missing`. */
async function refusesSource(from: string, shown: string, missing: string, to: string) {
  const refusal = new RegExp(
    `from: no queue at ${RegExp.escape(shown)}: ${RegExp.escape(missing)}; a move copies`,
  );
  await assert.rejects(moveQueue(from, to), refusal);
  await assert.rejects(abortMove(from), refusal);
}

Deno.test("moveQueue() refuses a SQLite file that holds no queue (another app's), writing nothing to it; the move command exits 1 naming it", async () => {
  await using dir = await tempDir();
  const app = join(dir.dir, "app.db");
  const db = new DatabaseSync(app);
  db.exec(
    "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES (1, 'a')",
  );
  db.close();
  const to = join(dir.dir, "moved.db");
  await refusesSource(app, app, "no queue tables in this file", to);
  const result = await runCli(["move", "--from", app, "--to", to]);
  assert.equal(result.code, 1, result.stdout);
  assert.match(result.stderr, /^queue move: from: no queue at .*app\.db: no queue tables/);
  assert.equal(result.stderr.trim().split("\n").length, 1, result.stderr);

  const after = new DatabaseSync(app);
  try {
    const tables = after.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all();
    assert.deepEqual(tables.map((row) => row.name), ["users"], "no queue table made");
    assert.equal(after.prepare("PRAGMA journal_mode").get()?.journal_mode, "delete");
  } finally {
    after.close();
  }
  assert.equal(existsSync(to), false, "no destination made");

  // A queue the app opened but never used holds a queue: it moves.
  await (await Queue.open({ path: dir.dbPath, jobs: [] })).close();
  assert.deepEqual((await moveQueue(dir.dbPath, to)).mismatched, []);
});

Deno.test({
  name:
    "moveQueue() refuses a PostgreSQL database that holds no queue (another app's), creating no table there",
  ignore: pgUrl === null,
  async fn() {
    await using database = await freshDatabase(pgUrl!);
    await using dir = await tempDir();
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      await sql.unsafe("CREATE TABLE users (id serial PRIMARY KEY, name text)");
      await refusesSource(
        database.url,
        database.url,
        "no queue tables in this schema",
        dir.dbPath,
      );
      const tables = await sql<{ name: string }[]>`
        SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public'`;
      assert.deepEqual(tables.map((row) => row.name), ["users"], "no queue table made");
    } finally {
      await sql.end({ timeout: 5 });
    }
  },
});

Deno.test({
  name: "moveQueue() refuses a Redis prefix that holds no queue, writing no key of it",
  ignore: redisUrl === null,
  async fn() {
    await using dir = await tempDir();
    const prefix = freshPrefix();
    const from = `${redisUrl}/0?prefix=${prefix}`;
    try {
      await refusesSource(from, from, "no key of this prefix", dir.dbPath);
      assert.deepEqual(await prefixKeys(redisUrl!, prefix), [], "no key written");
    } finally {
      await deletePrefix(redisUrl!, prefix);
    }
  },
});
