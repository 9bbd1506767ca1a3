import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { z } from "zod";
import { defineJob, Queue, SqliteStore } from "../../../mod.ts";
import {
  CHECKPOINT_EVERY,
  CheckpointThread,
  THREAD_COMMIT_CHECKPOINT_PAGES,
} from "../../../src/stores/sqlite/checkpoint_thread.ts";
import { jobsInFile } from "../../fixtures/checkpoint/jobs_in_file.ts";
import { runToEnd } from "../../_child.ts";
import { tempDir, waitUntil, within } from "../../_helpers.ts";

const noop = defineJob({ name: "noop", schema: z.object({ n: z.number() }), handle() {} });

/** A connection to a fresh file in WAL mode with `rows` rows in its `jobs` table, all in the WAL. */
function walFile(path: string, rows: number): DatabaseSync {
  const db = new DatabaseSync(path);
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("CREATE TABLE jobs (n INTEGER)");
  for (let n = 0; n < rows; n++) db.prepare("INSERT INTO jobs (n) VALUES (?)").run(n);
  return db;
}

/** The connection's `wal_autocheckpoint`: how many pages a commit lets the WAL take. */
function commitCheckpointPages(db: DatabaseSync): number {
  return Number(db.prepare("PRAGMA wal_autocheckpoint").get()!.wal_autocheckpoint);
}

Deno.test("CheckpointThread: its first request starts the thread, which copies the WAL into the database file, and the connection's commits then checkpoint every 10,000 pages", async () => {
  await using dir = await tempDir();
  const db = walFile(dir.dbPath, CHECKPOINT_EVERY);
  const thread = new CheckpointThread(db, dir.dbPath, "normal");
  try {
    for (let n = 0; n < CHECKPOINT_EVERY - 1; n++) thread.countCall();
    assert.equal(jobsInFile(dir.dbPath, `${dir.dir}/copy.db`), 0, "the rows are in the WAL only");
    thread.countCall();
    // Nothing else checkpoints so few rows: the commits' own checkpoint waits for 1,000 pages.
    await waitUntil(() => jobsInFile(dir.dbPath, `${dir.dir}/copy.db`) === CHECKPOINT_EVERY, {
      what: "the thread to copy the rows into the database file",
    });
    assert.equal(commitCheckpointPages(db), THREAD_COMMIT_CHECKPOINT_PAGES);
  } finally {
    await thread.close();
    db.close();
  }
  assert.deepEqual(
    [...Deno.readDirSync(dir.dir)].map((entry) => entry.name),
    ["queue.db"],
    "the thread's connection was closed: the last one here removed the WAL",
  );
});

Deno.test("CheckpointThread: calls that wrote fewer rows than calls ask for nothing; once they wrote as many, the thread copies the WAL", async () => {
  await using dir = await tempDir();
  const db = walFile(dir.dbPath, 10);
  const thread = new CheckpointThread(db, dir.dbPath, "normal");
  try {
    for (let n = 0; n < CHECKPOINT_EVERY * 2; n++) thread.countCall();
    // Only a thread would copy the rows: give one the time it takes (a false pass at worst).
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.equal(jobsInFile(dir.dbPath, `${dir.dir}/copy.db`), 0, "a checkpoint ran");
    assert.equal(commitCheckpointPages(db), 1_000, "a thread started");
    for (let n = 0; n < CHECKPOINT_EVERY; n++) {
      db.prepare("INSERT INTO jobs (n) VALUES (?)").run(n);
      thread.countCall();
    }
    await waitUntil(() => jobsInFile(dir.dbPath, `${dir.dir}/copy.db`) > 0, {
      what: "the thread to copy the rows into the database file",
    });
  } finally {
    await thread.close();
    db.close();
  }
});

Deno.test("CheckpointThread: for a database file that was deleted, the thread makes no new empty file, and the commits keep SQLite's 1,000 pages", async () => {
  await using dir = await tempDir();
  const db = walFile(dir.dbPath, CHECKPOINT_EVERY);
  for (const suffix of ["", "-wal", "-shm"]) await Deno.remove(`${dir.dbPath}${suffix}`);
  const thread = new CheckpointThread(db, dir.dbPath, "normal");
  for (let n = 0; n < CHECKPOINT_EVERY; n++) thread.countCall();
  // close() waits for the thread's answer: it has tried to open the file by then.
  await thread.close();
  assert.deepEqual([...Deno.readDirSync(dir.dir)].map((entry) => entry.name), []);
  assert.equal(commitCheckpointPages(db), 1_000);
  db.close();
});

Deno.test("CheckpointThread: a process with leave to read and write only its database's folder, whose thread copied rows into the file and that closed neither, exits", async () => {
  await using dir = await tempDir();
  const end = await runToEnd(
    new URL("../../fixtures/checkpoint/unclosed_writer.ts", import.meta.url),
    [dir.dbPath],
    { permissions: [`--allow-read=${dir.dir}`, `--allow-write=${dir.dir}`], timeoutMs: 120_000 },
  );
  assert.deepEqual(end, { code: 0, stdout: "copied\n", stderr: "" });
});

Deno.test("SQLite: a queue on a file copies its jobs into the database file on its checkpoint thread, long before its commits' own checkpoint would", async () => {
  await using dir = await tempDir();
  await using queue = await Queue.open({ path: dir.dbPath, jobs: [noop] });
  let n = 0;
  while (n < CHECKPOINT_EVERY) await queue.dispatch(noop, { n: n++ });
  // A dispatch now and then keeps the WAL from resting the second after which the queue empties it
  // anyway; a dispatch writes about two pages, so its commits' own checkpoint (1,000 pages without
  // the thread) is far off.
  await waitUntil(async () => {
    await queue.dispatch(noop, { n: n++ });
    return jobsInFile(dir.dbPath, `${dir.dir}/copy.db`) > 0;
  }, { what: "the database file to hold jobs", everyMs: 200 });
});

Deno.test("SQLite: close() called twice at once resolves, both times, only once the checkpoint thread and the connection are closed and the WAL is gone", async () => {
  await using dir = await tempDir();
  const store = await SqliteStore.open(dir.dbPath);
  await using queue = await Queue.open({ store, jobs: [noop] });
  for (let n = 0; n < CHECKPOINT_EVERY * 2; n++) await queue.dispatch(noop, { n });
  const first = store.close();
  await store.close();
  const left = [...Deno.readDirSync(dir.dir)].map((entry) => entry.name).sort();
  assert.deepEqual(left, ["queue.db"], "the second close() resolved with the WAL still there");
  await first;
});

Deno.test({
  name:
    "SQLite: five queues on five files in one process share one checkpoint thread, which goes on serving the others when one closes and ends with the last",
  // The fixture counts the process's threads by their names in /proc (Linux).
  ignore: Deno.build.os !== "linux",
  async fn() {
    await using dir = await tempDir();
    const end = await runToEnd(
      new URL("../../fixtures/checkpoint/many_files.ts", import.meta.url),
      [dir.dir, "5"],
      { timeoutMs: 300_000 },
    );
    assert.equal(end.code, 0, end.stderr);
    assert.equal(end.stdout, "copied 1\nserved\nended 0\n");
  },
});

Deno.test("CheckpointThread: close() called twice at once resolves both times, once the thread closed its connection", async () => {
  await using dir = await tempDir();
  const db = walFile(dir.dbPath, CHECKPOINT_EVERY);
  const thread = new CheckpointThread(db, dir.dbPath, "normal");
  for (let n = 0; n < CHECKPOINT_EVERY; n++) thread.countCall();
  await waitUntil(() => commitCheckpointPages(db) === THREAD_COMMIT_CHECKPOINT_PAGES, {
    what: "the thread's connection to be open",
  });
  await within(Promise.all([thread.close(), thread.close()]), 60_000, "both closes");
  db.close();
  assert.deepEqual(
    [...Deno.readDirSync(dir.dir)].map((entry) => entry.name),
    ["queue.db"],
    "the thread's connection was closed: the last one here removed the WAL",
  );
});
