import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { defineJob, Queue } from "../../mod.ts";
import { z } from "zod";
import { tempDir, unfinishedCount, waitUntil, within } from "../_helpers.ts";
import { storeTest } from "../_stores.ts";
import { startCli } from "../fixtures/cli/cli_process.ts";
import { failsByRule, gate, item } from "../fixtures/backup/jobs.ts";

const JOBS = "tests/fixtures/backup/jobs.ts";
const JOBS_URL = import.meta.resolve("../fixtures/backup/jobs.ts");

const note = defineJob({
  name: "backup.note",
  schema: z.object({ n: z.number().int(), text: z.string() }),
  handle() {},
});

/** The ids in each of a SQLite file's job tables, read with a connection of the test's own. */
function idsByState(file: string): { unfinished: number[]; completed: number[]; failed: number[] } {
  const db = new DatabaseSync(file);
  try {
    const ids = (table: string) =>
      db.prepare(`SELECT id FROM ${table} ORDER BY id`).all().map((row) => Number(row.id));
    return {
      unfinished: ids("jobs"),
      completed: ids("completed_jobs"),
      failed: ids("failed_jobs"),
    };
  } finally {
    db.close();
  }
}

function integrityCheck(file: string): string {
  const db = new DatabaseSync(file);
  try {
    const rows = db.prepare("PRAGMA integrity_check").all();
    return rows.map((row) => String(row.integrity_check)).join("\n");
  } finally {
    db.close();
  }
}

Deno.test("Queue.backup() copies a SQLite database while a worker in another process drains it: the copy is whole, holds every job in exactly one state, and drains as a queue", async () => {
  await using tmp = await tempDir();
  const copy = join(tmp.dir, "copy.db");
  const marker = join(tmp.dir, "gates-open");
  const items = 6_000;
  const gates = 4;
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
  const itemIds = new Map<number, number>(); // id -> n
  for (let from = 0; from < items; from += 1_000) {
    const payloads = Array.from({ length: 1_000 }, (_, index) => ({ n: from + index }));
    const ids = await queue.dispatchMany(item, payloads);
    ids.forEach((id, index) => itemIds.set(id, payloads[index]!.n));
  }
  // Dispatched last, so claimed last: the drain cannot end before the gates open.
  const gateIds = await queue.dispatchMany(gate, Array.from({ length: gates }, () => ({ marker })));
  const total = items + gates;

  await using worker = startCli([
    "work",
    "--jobs",
    JOBS,
    "--db",
    tmp.dbPath,
    "--no-supervise",
    "--stop-when-empty",
    "--executor",
    "isolate",
    "--concurrency",
    String(gates),
  ]);
  await waitUntil(async () => await unfinishedCount(queue) <= total - 1_000, {
    what: "the worker finished 1,000 jobs",
  });
  const started = performance.now();
  const result = await queue.backup(copy);
  const ms = performance.now() - started;
  await Deno.writeTextFile(marker, "");
  assert.equal((await within(worker.child.status, 60_000, "the worker's exit")).code, 0);

  assert.equal(result.path, copy);
  assert.equal(result.bytes, (await Deno.stat(copy)).size);
  assert.equal(integrityCheck(copy), "ok");
  const { unfinished, completed, failed } = idsByState(copy);
  console.log(
    `backup during a drain: ${total} jobs (${unfinished.length} unfinished, ${completed.length} ` +
      `completed, ${failed.length} failed), ${(result.bytes / 1_048_576).toFixed(1)} MiB, ` +
      `${ms.toFixed(1)} ms`,
  );
  // Each job in exactly one state, and every job dispatched in one of them.
  const all = [...unfinished, ...completed, ...failed];
  assert.equal(new Set(all).size, all.length, "a job is in two states");
  assert.deepEqual(
    all.sort((a, b) => a - b),
    [...itemIds.keys(), ...gateIds].sort((a, b) => a - b),
  );
  // A moment of the drain: some done, the gates (at least) not; and each state the job's own.
  assert.ok(completed.length >= 1, "nothing completed in the copy");
  for (const id of gateIds) assert.ok(unfinished.includes(id), `gate ${id} ended in the copy`);
  for (const id of failed) assert.ok(failsByRule(itemIds.get(id)!), `job ${id} failed`);
  for (const id of completed) assert.ok(!failsByRule(itemIds.get(id)!), `job ${id} completed`);

  // The copy is a queue: what was unfinished in it runs there. Its clock is past the leases the
  // worker held at the moment of the copy, so the jobs it was running are due again.
  const ahead = { now: () => Date.now() + 3_600_000 };
  await using restored = await Queue.open({ path: copy, jobs: JOBS_URL, clock: ahead });
  const drained = restored.work({ executor: "isolate", concurrency: 4, stopWhenEmpty: true });
  await within(drained.done, 60_000, "the drain of the copy");
  const after = idsByState(copy);
  assert.deepEqual(after.unfinished, []);
  assert.equal(after.completed.length + after.failed.length, total);
  assert.deepEqual(
    after.failed,
    [...itemIds].filter(([, n]) => failsByRule(n)).map(([id]) => id).sort((a, b) => a - b),
  );
});

Deno.test("Queue.backup() is the database as of one commit: another connection's open transaction is not in the copy", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [note] });
  await using writer = await Queue.open({ path: tmp.dbPath, jobs: [note] });
  await queue.dispatchMany(note, [{ n: 1, text: "a" }, { n: 2, text: "b" }]);
  const copy = join(tmp.dir, "copy.db");
  await writer.transaction(async (tx) => {
    await tx.dispatch(note, { n: 3, text: "uncommitted" });
    await queue.backup(copy);
  });
  assert.equal(await unfinishedCount(writer), 3);
  assert.equal(integrityCheck(copy), "ok");
  await using restored = await Queue.open({ path: copy, jobs: [note] });
  assert.equal(await unfinishedCount(restored), 2);
});

Deno.test("Queue.backup() refuses a file that exists, naming it, and leaves it untouched", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [note] });
  await queue.dispatch(note, { n: 1, text: "a" });
  const target = join(tmp.dir, "precious.db");
  await Deno.writeTextFile(target, "not a database, and not to be lost");
  await assert.rejects(
    queue.backup(target),
    (error: Error) =>
      error instanceof Deno.errors.AlreadyExists && error.message.includes(target) &&
      /never overwrites/.test(error.message),
  );
  assert.equal(await Deno.readTextFile(target), "not a database, and not to be lost");
  // The database itself is a file that exists too.
  await assert.rejects(queue.backup(tmp.dbPath), Deno.errors.AlreadyExists);
  const left = [...Deno.readDirSync(tmp.dir)].map((entry) => entry.name).sort();
  assert.deepEqual(left.filter((name) => name.includes(".partial-")), []);
  assert.equal(await unfinishedCount(queue), 1);
});

Deno.test("Queue.backup() refuses a queue in memory, a bad file, a missing folder and a closed queue, writing nothing", async () => {
  await using tmp = await tempDir();
  const target = join(tmp.dir, "copy.db");
  await using memory = await Queue.open({ path: ":memory:", jobs: [note] });
  await assert.rejects(memory.backup(target), /Cannot back up a database in memory \(":memory:"\)/);
  await using inline = await Queue.open({ mode: "inline", jobs: [note] });
  await assert.rejects(inline.backup(target), /Cannot back up a database in memory/);
  const queue = await Queue.open({ path: tmp.dbPath, jobs: [note] });
  for (const bad of ["", "  ", 42, undefined]) {
    await assert.rejects(
      queue.backup(bad as string),
      (error: Error) =>
        error instanceof TypeError && /give the path of a new file/.test(error.message),
    );
  }
  for (const bad of [":memory:", "file:copy.db", "postgres://host/db"]) {
    await assert.rejects(
      queue.backup(bad),
      (error: Error) => error instanceof TypeError && error.message.includes(JSON.stringify(bad)),
    );
  }
  await assert.rejects(
    queue.backup(join(tmp.dir, "no", "such", "folder", "copy.db")),
    (error: Error) => error.message.includes(join(tmp.dir, "no", "such", "folder")),
  );
  await queue.close();
  await assert.rejects(queue.backup(target), /queue is closed/);
  await assert.rejects(Deno.stat(target), Deno.errors.NotFound);
});

Deno.test("Queue.backup() copies a database of 100,000 jobs whole (prints the time it took)", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [note] });
  const jobs = 100_000;
  for (let from = 0; from < jobs; from += 5_000) {
    await queue.dispatchMany(
      note,
      Array.from({ length: 5_000 }, (_, index) => ({ n: from + index, text: "x".repeat(100) })),
    );
  }
  const copy = join(tmp.dir, "copy.db");
  const started = performance.now();
  const { bytes } = await queue.backup(copy);
  const ms = performance.now() - started;
  // The baseline: a plain copy of the same file (not a backup: it may catch a write halfway).
  const plainStarted = performance.now();
  await Deno.copyFile(tmp.dbPath, join(tmp.dir, "plain.db"));
  const plainMs = performance.now() - plainStarted;
  console.log(
    `backup of ${jobs} pending jobs: ${(bytes / 1_048_576).toFixed(1)} MiB in ${
      ms.toFixed(0)
    } ms ` +
      `(a plain copy of the file: ${plainMs.toFixed(0)} ms)`,
  );
  assert.equal(integrityCheck(copy), "ok");
  assert.equal(idsByState(copy).unfinished.length, jobs);
});

storeTest(
  "Queue.backup() copies the SQLite file, and on PostgreSQL and Redis refuses naming the server's own tools",
  async (db) => {
    await using queue = await db.open({ jobs: [note] });
    await queue.dispatchMany(note, [{ n: 1, text: "a" }, { n: 2, text: "b" }]);
    const target = join(db.dir, "copy.db");
    if (db.kind === "sqlite") {
      const { path, bytes } = await queue.backup(target);
      assert.equal(path, target);
      assert.ok(bytes > 0);
      await using restored = await Queue.open({ path: target, jobs: [note] });
      assert.equal(await unfinishedCount(restored), 2);
      return;
    }
    const tools = db.kind === "postgres"
      ? [/pg_dump --schema=\w+/, /pg_basebackup/]
      : [/BGSAVE/, /RDB file/, /AOF files/];
    await assert.rejects(queue.backup(target), (error: Error) => {
      for (const tool of [...tools, /docs\/backups\.md/]) assert.match(error.message, tool);
      return true;
    });
    await assert.rejects(Deno.stat(target), Deno.errors.NotFound);
    assert.equal(await unfinishedCount(queue), 2);
  },
);
