/**
 * Choosing the store from what names the database: one rule for
 * `readConfig()`, `Queue.open` and the CLI. A `postgres://` value selects
 * PostgreSQL wherever it is given; a `path` that is a URL, or empty, is
 * refused rather than opening a wrong or temporary SQLite database.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { z } from "zod";
import { defineJob, Queue, readConfig } from "../mod.ts";
import { tempDir } from "./_helpers.ts";

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
  for (const path of ["postgres://app:secret@127.0.0.1:1/app", "redis://cache:6379"]) {
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
