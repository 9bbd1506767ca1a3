import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { defineJob, Queue, SqliteStore } from "../../../mod.ts";
import { CHECKPOINT_EVERY } from "../../../src/stores/sqlite/checkpoint_thread.ts";
import { WAL_CHECKPOINT_PAGES } from "../../../src/stores/sqlite/wal_checkpoint.ts";
import { jobsInFile } from "../../fixtures/checkpoint/jobs_in_file.ts";
import { tempDir, waitUntil, within } from "../../_helpers.ts";

const noop = defineJob({ name: "noop", schema: z.object({ n: z.number() }), handle() {} });

Deno.test("SQLite: while dispatches go on, the checkpoint thread copies the WAL into the database file long before a commit's own checkpoint would", async () => {
  await using dir = await tempDir();
  await using queue = await Queue.open({ path: dir.dbPath, jobs: [noop] });
  // A commit checkpoints at WAL_CHECKPOINT_PAGES pages, and a dispatch writes about two: the test
  // stays far below, and never lets the WAL rest the second the idle checkpoint waits for.
  const most = WAL_CHECKPOINT_PAGES / 4;
  let dispatched = 0;
  let copied = 0;
  while (copied === 0) {
    assert.ok(
      dispatched < most,
      `${dispatched} dispatches and the database file still holds no job: no checkpoint ran beside them`,
    );
    for (let n = 0; n < CHECKPOINT_EVERY + 1; n++) await queue.dispatch(noop, { n: dispatched++ });
    copied = await waitUntil(() => jobsInFile(dir.dbPath, `${dir.dir}/copy.db`) || null, {
      what: "the database file to hold jobs",
      timeoutMs: 300,
      everyMs: 50,
    }).catch(() => 0);
  }
  assert.ok(copied <= dispatched);
});

Deno.test("SQLite: a process with leave to read and write only its database's folder, whose checkpoint thread copied jobs into the file and that never closed its queue, exits with every job stored", async () => {
  await using dir = await tempDir();
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      `--allow-read=${dir.dir}`,
      `--allow-write=${dir.dir}`,
      fileURLToPath(new URL("../../fixtures/checkpoint/unclosed_writer.ts", import.meta.url)),
      dir.dbPath,
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const { code, stdout, stderr } = await within(child.output(), 120_000, "the process to exit");
  const decoder = new TextDecoder();
  assert.equal(code, 0, decoder.decode(stderr));
  assert.equal(decoder.decode(stderr), "", "nothing on stderr");
  const dispatched = Number(/^copied (\d+)$/m.exec(decoder.decode(stdout))?.[1]);
  await using queue = await Queue.open({ path: dir.dbPath, jobs: [noop] });
  assert.equal((await queue.counts()).default?.pending, dispatched, "every job is stored");
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

Deno.test("SQLite: a checkpoint thread started after the database file was deleted makes no new empty file at its path", async () => {
  await using dir = await tempDir();
  await using queue = await Queue.open({ path: dir.dbPath, jobs: [noop] });
  for (const suffix of ["", "-wal", "-shm"]) await Deno.remove(`${dir.dbPath}${suffix}`);
  // The calls go on until the store sees the file gone (it looks at most once a second), and
  // start the thread on the way.
  for (let n = 0; n < CHECKPOINT_EVERY * 2; n++) {
    if (!await queue.dispatch(noop, { n }).then(() => true, () => false)) break;
  }
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  assert.deepEqual([...Deno.readDirSync(dir.dir)].map((entry) => entry.name), []);
});
