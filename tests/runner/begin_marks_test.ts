/**
 * Begin marks: a worker records that a job's handler began with its next
 * tick, or with a tick of its own once a mark waited
 * `BEGIN_MARK_WAIT_MS`; a job whose attempt ended meanwhile needs none. In
 * Web Workers too: the handler's begin crosses back with the Web Worker's
 * next message. A worker death before the mark charges the job nothing.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { Queue } from "../../src/queue.ts";
import { BEGIN_MARK_WAIT_MS, BeginMarks } from "../../src/runner/begin_marks.ts";
import type { ClaimedJob } from "../../src/stores/store.ts";
import { tempDir, waitUntil } from "../_helpers.ts";
import { gated } from "../fixtures/claimed_ahead/gated_jobs.ts";

/** A claimed job with only what begin marks read. */
function claimed(id: number): ClaimedJob {
  return {
    id,
    queue: "default",
    name: "job",
    payload: "{}",
    priority: 0,
    attempts: 1,
    crashes: 0,
    recovered: false,
    retryUntil: null,
    lastError: null,
    createdAt: 0,
    batchId: null,
    token: 7,
  };
}

Deno.test("BeginMarks asks for a tick once a mark waited, and hands over only the jobs still running", async () => {
  let wakes = 0;
  const marks = new BeginMarks(() => wakes++);
  const [running, ended] = [claimed(1), claimed(2)];
  marks.add(running);
  marks.add(ended);
  assert.equal(marks.due, false, "due before its wait");
  await waitUntil(() => marks.due, { what: "the marks to be due", everyMs: BEGIN_MARK_WAIT_MS });
  assert.equal(wakes, 1);
  assert.deepEqual(marks.take((job) => job === running), [running]);
  assert.equal(marks.due, false, "taken");
  marks.restore([running]);
  assert.deepEqual(marks.take(() => true), [running], "a failed tick's marks come back");
  marks.close();
});

Deno.test("a handler running in a Web Worker is marked begun while it runs, after its first line", async () => {
  await using dir = await tempDir();
  const ledger = join(dir.dir, "ledger.txt");
  const gate = join(dir.dir, "gate");
  await Deno.writeTextFile(ledger, "");
  await using queue = await Queue.open({
    path: dir.dbPath,
    jobs: new URL("../fixtures/claimed_ahead/gated_jobs.ts", import.meta.url).href,
  });
  await queue.dispatch(gated, { n: 0, ledger, waitMs: 0, gate });
  const worker = queue.work({ concurrency: 1, executor: "workers", workers: 1 });
  const db = new DatabaseSync(dir.dbPath);
  try {
    const marked = await waitUntil(() => {
      const row = db.prepare("SELECT begun FROM jobs WHERE token IS NOT NULL").get() as
        | { begun: number }
        | undefined;
      return row?.begun === 1 ? row : null;
    }, { what: "the running job's begin mark" });
    assert.equal(marked.begun, 1);
    assert.equal(
      (await Deno.readTextFile(ledger)).trim().split("\n").length,
      1,
      "marked after its handler began",
    );
  } finally {
    db.close();
    await Deno.writeTextFile(gate, "");
    await worker.stop();
  }
});
