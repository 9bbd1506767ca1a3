/**
 * R16: a reader holds a read transaction open for 30 s while two worker
 * processes drain and the test dispatches (RELIABILITY.md). The WAL grows
 * while the reader pins it; once it lets go, the queue cuts it back under
 * its cap (`journal_size_limit`) and empties it when the writers go quiet
 * (`wal_checkpoint(TRUNCATE)`), and no dispatch waits on the reader.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Queue } from "../../mod.ts";
import { WAL_CAP_BYTES } from "../../src/stores/sqlite/wal_checkpoint.ts";
import { tempDir } from "../_helpers.ts";
import { tick } from "../fixtures/reliability/jobs.ts";
import {
  type ChildLine,
  JOBS_URL,
  one,
  openReader,
  startWorker,
  waitUntil,
} from "../fixtures/reliability/harness.ts";

const HOLD_MS = 30_000;

Deno.test("R16: a reader holding a read transaction for 30 s pins the WAL; once it lets go the WAL is cut back under its cap and emptied, and dispatch never waits", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
  using db = openReader(tmp.dbPath);
  using pin = openReader(tmp.dbPath);
  const walBytes = () => {
    try {
      return Deno.statSync(`${tmp.dbPath}-wal`).size;
    } catch {
      return 0;
    }
  };
  const options = { concurrency: 8, pollMs: 50 };
  await using workerA = startWorker(tmp.dbPath, options);
  await using workerB = startWorker(tmp.dbPath, options);
  const ready = (line: ChildLine) => line.type === "ready";
  await Promise.all([workerA, workerB].map((child) => child.waitFor("ready", ready)));

  // The reader's snapshot: nothing written after it can be checkpointed while it is open.
  pin.exec("BEGIN");
  one(pin, "SELECT COUNT(*) AS n FROM jobs");
  let maxWal = 0;
  let maxDispatchMs = 0;
  let dispatched = 0;
  const until = Date.now() + HOLD_MS;
  while (Date.now() < until) {
    const started = performance.now();
    await queue.dispatchMany(tick, Array.from({ length: 300 }, (_, n) => ({ n })));
    maxDispatchMs = Math.max(maxDispatchMs, performance.now() - started);
    dispatched += 300;
    maxWal = Math.max(maxWal, walBytes());
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  pin.exec("COMMIT");
  const releasedAt = Date.now();
  await waitUntil(
    "every job settled",
    () => one<{ n: number }>(db, "SELECT COUNT(*) AS n FROM jobs").n === 0,
    60_000,
    100,
  );
  const wait = releasedAt + 5_000 - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  const after = walBytes();
  // A quiet queue empties its WAL: wait on that, with a generous deadline.
  const emptied = await waitUntil("the WAL emptied", () => walBytes() === 0 || null, 30_000, 100)
    .then(() => true, () => false);
  workerA.kill("SIGTERM");
  workerB.kill("SIGTERM");
  await workerA.exit(20_000);
  await workerB.exit(20_000);
  console.log(
    `R16: reader held ${HOLD_MS / 1000} s while ${dispatched} jobs were dispatched and drained: ` +
      `max WAL ${(maxWal / 1024 / 1024).toFixed(1)} MiB, 5 s after the release ` +
      `${(after / 1024 / 1024).toFixed(2)} MiB (cap ${WAL_CAP_BYTES / 1024 / 1024} MiB), ` +
      `emptied when quiet: ${emptied}; slowest dispatchMany(300) ${Math.round(maxDispatchMs)} ms`,
  );
  assert.ok(maxWal > WAL_CAP_BYTES, "the reader did not pin the WAL: the test proves nothing");
  assert.ok(after <= WAL_CAP_BYTES, `the WAL was ${after} bytes 5 s after the reader let go`);
  assert.ok(emptied, "the WAL was not emptied once the queue went quiet");
  assert.equal(
    one<{ integrity_check: string }>(db, "PRAGMA integrity_check").integrity_check,
    "ok",
  );
  for (const child of [workerA, workerB]) assert.deepEqual(child.linesOf("queue:error"), []);
});
