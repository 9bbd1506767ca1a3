/**
 * Reliability with real worker processes on one SQLite file (RELIABILITY.md):
 * a graceful stop on SIGTERM (R02), and two processes draining 20,000 jobs
 * while a third dispatches half of them (R03).
 *
 * @module
 */
import assert from "node:assert/strict";
import { Queue } from "../../mod.ts";
import { exists, tempDir } from "../_helpers.ts";
import { sleeper, tick } from "../fixtures/reliability/jobs.ts";
import { readLedger } from "../fixtures/reliability/ledger.ts";
import {
  all,
  type ChildLine,
  holdsSharedLock,
  type JobRow,
  JOBS_URL,
  one,
  openReader,
  startDispatcher,
  startWorker,
  waitUntil,
} from "../fixtures/reliability/harness.ts";

Deno.test("R02: SIGTERM with short and long jobs running: nothing is claimed after it, short jobs finish, long ones are released, the process exits within grace + 1 s", async () => {
  await using tmp = await tempDir();
  const graceMs = 1_000;
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
  using db = openReader(tmp.dbPath);
  const longIds = await queue.dispatchMany(sleeper, [{ ms: 10_000 }, { ms: 10_000 }], {
    priority: 10,
  });
  const shortIds = await queue.dispatchMany(sleeper, Array(60).fill({ ms: 100 }));

  await using worker = startWorker(
    tmp.dbPath,
    { concurrency: 4, workers: 2, graceMs, pollMs: 50 },
    { events: true },
  );
  const started = (id: number) => (line: ChildLine) => line.type === "job:start" && line.id === id;
  for (const id of longIds) await worker.waitFor(`job:start of ${id}`, started(id));
  await waitUntil("four short jobs done", () => worker.linesOf("job:complete").length >= 4);
  const sentAt = Date.now();
  worker.kill("SIGTERM");
  const status = await worker.exit(graceMs + 10_000);
  const exitMs = worker.exitedAt! - sentAt;
  assert.equal(status.code, 0, worker.stderr);

  const signalAt = worker.lines.findIndex((line) => line.type === "signal");
  assert.ok(signalAt > 0, "the worker never saw the signal");
  const before = worker.lines.slice(0, signalAt);
  const after = worker.lines.slice(signalAt + 1);
  const signalTime = worker.lines[signalAt]!.t;
  const claimsAfter = after.filter((line) => line.type === "job:start");
  const startedBefore = new Set(before.filter((l) => l.type === "job:start").map((l) => l.id));
  // A handler may write its start row just after the signal, for a claim made before it.
  const lateStarts = readLedger(db, "outcome = 'start' AND start > ?", signalTime)
    .filter((row) => !startedBefore.has(row.job_id));
  const settledBefore = new Set(
    before.filter((l) => l.type === "job:complete" || l.type === "job:retry").map((l) => l.id),
  );
  const running = [...startedBefore].filter((id) => !settledBefore.has(id)) as number[];
  const shortRunning = running.filter((id) => !longIds.includes(id));
  console.log(
    `R02: graceMs ${graceMs}: exit ${exitMs} ms after SIGTERM; claims after signal ${claimsAfter.length}` +
      ` (ledger starts ${lateStarts.length}); at the signal ${shortRunning.length} short and ` +
      `${running.length - shortRunning.length} long jobs were running`,
  );
  assert.deepEqual(claimsAfter, []);
  assert.deepEqual(lateStarts, []);
  assert.deepEqual(running.filter((id) => longIds.includes(id)).sort(), longIds);

  // Short jobs running at the signal finished: a success each, gone from the table.
  const completedAfter = new Set(after.filter((l) => l.type === "job:complete").map((l) => l.id));
  for (const id of shortRunning) {
    assert.ok(completedAfter.has(id), `short job ${id} did not finish within grace`);
    assert.equal(readLedger(db, "job_id = ? AND outcome = 'success'", id).length, 1);
  }
  // Long jobs were released: due now, unleased, their attempt given back.
  for (const id of longIds) {
    const row = one<JobRow>(db, "SELECT * FROM jobs WHERE id = ?", id);
    assert.equal(row.token, null);
    assert.equal(row.attempts, 0);
    assert.equal(row.crashes, 0);
    assert.ok(row.available_at <= Date.now());
    assert.equal(row.last_error, "worker stopped during the attempt");
    assert.equal(readLedger(db, "job_id = ? AND outcome = 'success'", id).length, 0);
  }
  assert.equal(worker.linesOf("stopped")[0]?.reason, "requested");
  assert.equal(all(db, "SELECT id FROM failed_jobs").length, 0);
  // Every job is either done once or still waiting untouched.
  const done = readLedger(db, "outcome = 'success'").map((row) => row.job_id);
  assert.equal(new Set(done).size, done.length, "a job succeeded twice");
  const waiting = all<JobRow>(db, "SELECT * FROM jobs WHERE id NOT IN (?, ?)", ...longIds);
  assert.ok(waiting.every((row) => row.attempts === 0 && row.token === null));
  assert.deepEqual(
    [...done, ...waiting.map((row) => row.id)].sort((a, b) => a - b),
    shortIds,
  );
});

Deno.test("R03: two processes × concurrency 4 drain 10,000 jobs while a third dispatches 10,000 more: none lost, none twice, no SQLITE_BUSY", async () => {
  await using tmp = await tempDir();
  const total = 20_000;
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
  using db = openReader(tmp.dbPath);
  const payloads = Array.from({ length: total / 2 }, (_, n) => ({ n }));
  const firstIds = await queue.dispatchMany(tick, payloads);

  // The default executor (2 Web Workers per process); a 10 s lease bounds how long a lost
  // claim can hold the test up.
  const options = { concurrency: 4, pollMs: 50, leaseMs: 10_000 };
  await using drainerA = startWorker(tmp.dbPath, options);
  await using drainerB = startWorker(tmp.dbPath, options);
  const ready = (line: ChildLine) => line.type === "ready";
  await Promise.all([drainerA, drainerB].map((child) => child.waitFor("ready", ready)));
  await using dispatcher = startDispatcher(tmp.dbPath, total / 2, 20, total / 2);
  const startedAt = Date.now();
  const done = await dispatcher.waitFor("done", (line) => line.type === "done", 30_000);
  const count = (sql: string) => one<{ n: number }>(db, sql).n;
  const drained = await waitUntil(
    "every job settled",
    () => count("SELECT COUNT(*) AS n FROM jobs") === 0,
    120_000, // ~15 s here on 2 busy cores, a minute under heavy load; a stalled drain still fails
    100,
  ).catch((error: Error) => error);
  const lastEnd = one<{ t: number }>(db, "SELECT MAX(end) AS t FROM ledger").t;
  drainerA.kill("SIGTERM");
  drainerB.kill("SIGTERM");
  const exits = [
    await drainerA.exit(10_000),
    await drainerB.exit(10_000),
    await dispatcher.exit(10_000),
  ];

  const dispatched = [...firstIds, ...(done.ids as number[])];
  const ids = new Set(dispatched);
  const runs = all<{ job_id: number; runs: number }>(
    db,
    "SELECT job_id, COUNT(*) AS runs FROM ledger GROUP BY job_id",
  );
  const ran = new Set(runs.map((row) => row.job_id));
  const lost = dispatched.filter((id) => !ran.has(id)).length;
  const duplicates = runs.reduce((sum, row) => sum + row.runs - 1, 0);
  const strangers = runs.filter((row) => !ids.has(row.job_id)).length;
  const byPid = all<{ pid: number; n: number }>(
    db,
    "SELECT pid, COUNT(*) AS n FROM ledger GROUP BY pid ORDER BY pid",
  );
  const seconds = (lastEnd - startedAt) / 1000;
  console.log(
    `R03 (Web Workers, 2 processes × concurrency 4): lost ${lost}, duplicates ${duplicates}; ` +
      `${total} jobs in ${seconds.toFixed(1)} s = ${Math.round(total / seconds)} jobs/s ` +
      `(per process ${byPid.map((row) => row.n).join(" + ")}); ` +
      `dispatcher stored ${total / 2} in ${Math.round(done.ms as number)} ms`,
  );
  assert.equal(ids.size, total);
  assert.equal(lost, 0, "jobs lost");
  assert.equal(duplicates, 0, "jobs run twice");
  assert.equal(strangers, 0);
  if (drained instanceof Error) throw drained;
  assert.equal(all(db, "SELECT id FROM failed_jobs").length, 0);
  assert.equal(byPid.length, 2, "both drainers took jobs");
  assert.deepEqual(exits.map((status) => status.code), [0, 0, 0]);
  for (const child of [drainerA, drainerB, dispatcher]) {
    assert.doesNotMatch(
      child.stderr,
      /SQLITE_BUSY|database is locked|stayed locked|held its lock/i,
    );
    assert.deepEqual(child.linesOf("queue:error"), []);
  }
});

Deno.test({
  name:
    "R03: a worker process keeps its lock on the database file while other processes open, write and close it",
  ignore: Deno.build.os !== "linux", // reads /proc/locks
  async fn() {
    await using tmp = await tempDir();
    {
      await using _schema = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
    }
    await using worker = startWorker(tmp.dbPath, { pollMs: 50 }, { events: true });
    await worker.waitFor("ready", (line) => line.type === "ready");
    const before = holdsSharedLock(worker.pid, tmp.dbPath);
    await using dispatcher = startDispatcher(tmp.dbPath, 1, 1, 0);
    const [id] = (await dispatcher.waitFor("done", (line) => line.type === "done")).ids as number[];
    await dispatcher.exit(10_000);
    await worker.waitFor(`job:complete of ${id}`, (l) => l.type === "job:complete" && l.id === id);
    const after = holdsSharedLock(worker.pid, tmp.dbPath);
    console.log(
      `R03: the worker process holds SQLite's SHARED lock on the database file: ${before} → ${after}`,
    );
    assert.ok(before, "the worker process held no SHARED lock on the database file to begin with");
    assert.ok(after, "the worker process lost its SHARED lock on the database file");
  },
});

Deno.test("R03: an idle worker process runs every job that short-lived processes dispatch, one after another", async () => {
  await using tmp = await tempDir();
  {
    // The test keeps no connection open: each dispatching process may close the last one.
    await using _schema = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
  }
  await using worker = startWorker(tmp.dbPath, { pollMs: 50 }, { events: true });
  await worker.waitFor("ready", (line) => line.type === "ready");
  const seen: number[] = [];
  try {
    for (let n = 0; n < 4; n++) {
      await using dispatcher = startDispatcher(tmp.dbPath, 1, 1, n);
      const [id] = (await dispatcher.waitFor("done", (line) => line.type === "done"))
        .ids as number[];
      assert.equal((await dispatcher.exit(10_000)).code, 0, dispatcher.stderr);
      await worker.waitFor(
        `job:complete of job ${id} (dispatched by process ${n + 1})`,
        (line) => line.type === "job:complete" && line.id === id,
        5_000,
      );
      seen.push(id!);
    }
  } finally {
    const files = ["", "-wal", "-shm"].filter((suffix) => exists(tmp.dbPath + suffix));
    console.log(
      `R03: jobs from short-lived dispatchers run by the idle worker: ${seen.length} of 4; ` +
        `files left: queue.db${files.join(", queue.db")}`,
    );
  }
});
