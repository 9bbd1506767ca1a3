/**
 * R17: the database's file system fills up and is freed, then the database
 * file turns read-only and writable again, while a worker process drains
 * (RELIABILITY.md). Dispatch rejects naming the cause and stores nothing;
 * the worker claims nothing, keeps its finished settles in memory, retries
 * them and resumes soon after the fix; nothing is lost or run twice.
 *
 * The file system is a loop-mounted ext4 image (see
 * `fixtures/faults/loop_disk.ts`); it needs root, and says why it skips
 * elsewhere.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { Queue } from "../../mod.ts";
import { tempDir } from "../_helpers.ts";
import { sleeper } from "../fixtures/reliability/jobs.ts";
import { readLedger } from "../fixtures/reliability/ledger.ts";
import {
  all,
  type ChildLine,
  ChildProcess,
  JOBS_URL,
  one,
  openReader,
  waitUntil,
} from "../fixtures/reliability/harness.ts";
import { loopDisk } from "../fixtures/faults/loop_disk.ts";

const WORKER = new URL("../fixtures/reliability/worker.ts", import.meta.url).pathname;

const probe = await loopDisk(4);
const refusal = typeof probe === "string" ? probe : null;
if (typeof probe !== "string") await probe[Symbol.asyncDispose]();
if (refusal !== null) console.log(`R17 skipped: cannot mount a loop ext4 image: ${refusal}`);

Deno.test({
  name:
    "R17: a full disk, then a read-only database file, under a draining worker: dispatch rejects naming the cause, the worker keeps its settles and resumes after the fix, nothing lost or run twice",
  ignore: refusal !== null,
  async fn() {
    const disk = await loopDisk(16);
    if (typeof disk === "string") throw new Error(disk);
    await using _disk = disk;
    await using ledgerDir = await tempDir();
    const ledgerPath = join(ledgerDir.dir, "ledger.db");
    using ledger = openReader(ledgerPath);
    await using queue = await Queue.open({ path: disk.dbPath, jobs: JOBS_URL });
    using db = openReader(disk.dbPath);
    const ids: number[] = [];

    await using worker = new ChildProcess(
      WORKER,
      [disk.dbPath, JSON.stringify({ concurrency: 8, pollMs: 100, workers: 2 }), "events"],
      { RELIABILITY_DB: ledgerPath },
    );
    await worker.waitFor("ready", (line) => line.type === "ready");
    const successes = () => readLedger(ledger, "outcome = 'success'").length;
    const jobCount = () => one<{ n: number }>(db, "SELECT COUNT(*) AS n FROM jobs").n;

    /** Breaks the database, checks dispatch and claims while broken, fixes it; the figures. */
    const fault = async (
      name: string,
      cause: RegExp,
      breakIt: () => Promise<void>,
      fixIt: () => Promise<void>,
    ) => {
      const errorsBefore = worker.linesOf("queue:error").length;
      const ranBefore = successes();
      ids.push(...await queue.dispatchMany(sleeper, Array(400).fill({ ms: 40 })));
      await waitUntil(`${name}: jobs running`, () => successes() >= ranBefore + 40, 30_000);
      await breakIt();
      const error = await worker.waitFor(
        `${name}: the worker's queue:error`,
        (line) =>
          line.type === "queue:error" &&
          worker.linesOf("queue:error").indexOf(line) >= errorsBefore,
        20_000,
      );
      // Dispatch rejects, naming the cause, and stores nothing. A full ext4 disk may still
      // take a write or two into a spare block: such a dispatch stored its job, which must run
      // like the others, and the next one is tried.
      let rejected = "no dispatch was refused";
      for (let attempt = 0; attempt < 50; attempt++) {
        const before = jobCount();
        const outcome = await queue.dispatch(sleeper, { ms: 1 }).then(
          (id) => ({ id }),
          (error: Error) => ({ message: error.message }),
        );
        if ("id" in outcome) {
          ids.push(outcome.id);
          continue;
        }
        rejected = outcome.message;
        assert.equal(jobCount(), before, `${name}: a refused dispatch stored a row`);
        break;
      }
      assert.match(rejected, cause, `${name}: dispatch during the fault: ${rejected}`);
      assert.match(rejected, /Cannot write the queue database/);
      // Let the worker's running jobs finish into memory; nothing new starts.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      // A claim made just before the first error may start a moment later, on a busy machine.
      const quietFrom = error.t + 1_000;
      const fixedAt = Date.now();
      const startsWhileOut = worker.linesOf("job:start")
        .filter((line) => line.t > quietFrom && line.t < fixedAt).length;
      const finishedWhileOut = readLedger(
        ledger,
        "outcome = 'success' AND end > ? AND end < ?",
        error.t,
        fixedAt,
      ).map((row) => row.job_id);
      const finishedBefore = readLedger(ledger, "outcome = 'success' AND end < ?", fixedAt)
        .map((row) => row.job_id);
      await fixIt();
      const resumed = await worker.waitFor(
        `${name}: a job settled after the fix`,
        (line: ChildLine) => line.type === "job:complete" && line.t >= fixedAt,
        20_000,
      );
      const completedAfter = new Set(
        worker.lines.filter((line) => line.type === "job:complete" && line.t >= fixedAt)
          .map((line) => line.id),
      );
      // Some writes may still go through on a full disk (a WAL block reused): every finished
      // job's settle is written once, during the fault or after the fix.
      const completed = () => new Set(worker.linesOf("job:complete").map((line) => line.id));
      await waitUntil(
        `${name}: settles kept in memory written`,
        () => finishedWhileOut.every((id) => completed().has(id)) || null,
        20_000,
        50,
      ).catch(() => {});
      const kept = finishedWhileOut.filter((id) => completed().has(id)).length;
      const retried = finishedBefore.filter((id) => completedAfter.has(id)).length;
      return {
        startsWhileOut,
        kept,
        retried,
        finishedWhileOut: finishedWhileOut.length,
        resumeMs: resumed.t - fixedAt,
        error: String(error.error),
        rejected,
      };
    };

    using pin = openReader(disk.dbPath);
    const full = await fault("full disk", /disk is full/, async () => {
      // An emptied WAL must grow to take the next write, and cannot start over from its beginning
      // while a reader holds a snapshot: with no block left, every write fails.
      db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
      pin.exec("BEGIN");
      one(pin, "SELECT COUNT(*) AS n FROM jobs");
      await disk.fill();
    }, async () => {
      await disk.free();
      pin.exec("COMMIT");
    });
    const readOnly = await fault(
      "read-only file",
      /read-only/,
      () => disk.readOnly(true),
      () => disk.readOnly(false),
    );

    await waitUntil("every job settled", () => jobCount() === 0, 60_000, 100);
    worker.kill("SIGTERM");
    assert.equal((await worker.exit(20_000)).code, 0, worker.stderr);

    const runs = all<{ job_id: number; runs: number }>(
      ledger,
      "SELECT job_id, COUNT(*) AS runs FROM ledger WHERE outcome = 'success' GROUP BY job_id",
    );
    const ran = new Map(runs.map((row) => [row.job_id, row.runs]));
    const lost = ids.filter((id) => !ran.has(id)).length;
    const twice = runs.filter((row) => row.runs > 1).length;
    const integrity = one<{ integrity_check: string }>(db, "PRAGMA integrity_check")
      .integrity_check;
    for (const [name, figures] of [["full disk", full], ["read-only", readOnly]] as const) {
      console.log(
        `R17 ${name}: settles retried ${figures.retried} (${figures.finishedWhileOut} jobs finished ` +
          `while out); resumed ${figures.resumeMs} ms after the fix; claims while out ` +
          `${figures.startsWhileOut}; dispatch said: ${figures.rejected.slice(0, 120)}`,
      );
    }
    console.log(`R17: lost ${lost}, run twice ${twice}, integrity_check ${integrity}`);
    for (const figures of [full, readOnly]) {
      assert.equal(figures.startsWhileOut, 0, "the worker claimed while the database was out");
      assert.equal(figures.kept, figures.finishedWhileOut, "a kept settle was not written");
      assert.ok(figures.resumeMs < 10_000, `resumed ${figures.resumeMs} ms after the fix`);
    }
    assert.ok(full.retried + readOnly.retried > 0, "no settle was kept and retried");
    assert.equal(lost, 0, "jobs lost");
    assert.equal(twice, 0, "jobs run twice");
    assert.equal(integrity, "ok");
    assert.equal(all(db, "SELECT id FROM failed_jobs").length, 0);
  },
});
