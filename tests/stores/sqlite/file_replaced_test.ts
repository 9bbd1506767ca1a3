/**
 * A SQLite file deleted or replaced under an open queue: within a second
 * every call of that queue fails naming the file, rather than writing into
 * a file no other process reads. Real files, a real worker.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { z } from "zod";
import { defineJob, Queue } from "../../../mod.ts";
import { tempDir } from "../../_helpers.ts";

const note = defineJob({ name: "replaced.note", schema: z.object({ n: z.number() }), handle() {} });

/** Dispatches until one rejects (the check looks at most once a second), within a deadline. */
async function firstRefusal(queue: Queue): Promise<Error> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    try {
      await queue.dispatch(note, { n: 0 });
    } catch (error) {
      return error as Error;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("no dispatch was refused within 20 s");
}

Deno.test("a SQLite file deleted under an open queue fails its calls, naming the file", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [note] });
  await queue.dispatch(note, { n: 1 });
  for (const suffix of ["", "-wal", "-shm"]) await Deno.remove(tmp.dbPath + suffix).catch(() => {});
  const error = await firstRefusal(queue);
  assert.ok(error.message.includes("was deleted while this queue had it open"), error.message);
  await assert.rejects(() => queue.counts(), /was deleted/, "every later call fails the same way");
});

Deno.test("a SQLite file replaced under a running worker: the worker reports it and the file at the path keeps its own jobs", async () => {
  await using tmp = await tempDir();
  const other = join(tmp.dir, "other.db");
  {
    await using second = await Queue.open({ path: other, jobs: [note] });
    await second.dispatch(note, { n: 2 });
  }
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [note] });
  const errors: Error[] = [];
  queue.addEventListener("queue:error", (event) => {
    errors.push((event as CustomEvent<{ error: Error }>).detail.error);
  });
  const worker = queue.work({ executor: "isolate", pollMs: 50 });
  for (const suffix of ["-wal", "-shm"]) await Deno.remove(tmp.dbPath + suffix).catch(() => {});
  await Deno.rename(other, tmp.dbPath);
  const error = await firstRefusal(queue);
  assert.ok(error.message.includes(`${tmp.dbPath} was replaced by another file`), error.message);
  const deadline = Date.now() + 20_000;
  while (!errors.some((e) => e.message.includes("was replaced")) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.ok(errors.some((e) => e.message.includes("was replaced")), "the worker said so");
  await worker.stop();
  await queue.close();
  await using reopened = await Queue.open({ path: tmp.dbPath, jobs: [note] });
  assert.equal(
    (await reopened.counts()).default?.pending,
    1,
    "the file at the path keeps its own job",
  );
});
