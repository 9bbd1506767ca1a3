/**
 * Reliability of unique jobs and middleware across real processes on one
 * SQLite file (RELIABILITY.md): R11 (8 processes dispatch the same unique job
 * at once), R13 (withoutOverlapping under SIGKILL, proven by a ledger), and
 * rateLimited across two `work` processes.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { Queue } from "../../mod.ts";
import { tempDir } from "../_helpers.ts";
import {
  OVERLAP_EXPIRE_MS,
  overlapping,
  RATE_MAX,
  RATE_PER_MS,
  rated,
} from "../fixtures/guards/jobs.ts";
import {
  count,
  JOBS_URL,
  startUniqueDispatcher,
  startWork,
  workerStarted,
} from "../fixtures/guards/harness.ts";
import { type ChildProcess, openReader, waitUntil } from "../fixtures/reliability/harness.ts";
import { type LedgerRow, readLedger } from "../fixtures/reliability/ledger.ts";

Deno.test("R11: 8 processes dispatching the same unique job at the same moment store exactly one row, and all get its id", async () => {
  await using tmp = await tempDir();
  await (await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL })).close(); // the schema, once
  const go = join(tmp.dir, "go");
  const children: ChildProcess[] = [];
  try {
    for (let i = 0; i < 8; i++) children.push(startUniqueDispatcher(tmp.dbPath, go, "same"));
    await Promise.all(children.map((child) => child.waitFor("ready", (l) => l.type === "ready")));
    await Deno.writeTextFile(go, "go");
    const done = await Promise.all(
      children.map((child) => child.waitFor("done", (l) => l.type === "done")),
    );
    const ids = done.map((line) => line.id as number);
    const at = done.map((line) => line.at as number);
    console.log(
      `R11: ids ${JSON.stringify(ids)}, dispatches within ${Math.max(...at) - Math.min(...at)} ms`,
    );
    using db = openReader(tmp.dbPath);
    const rows = db.prepare("SELECT id FROM jobs").all() as { id: number }[];
    assert.equal(rows.length, 1, "exactly one row");
    assert.deepEqual(ids, Array(8).fill(rows[0]!.id), "every process got the holder's id");
    assert.equal(count(db, "job_keys"), 1);
    for (const child of children) assert.equal((await child.exit(10_000)).code, 0);
  } finally {
    for (const child of children) await child[Symbol.asyncDispose]();
  }
});

interface Run {
  jobId: number;
  pid: number;
  start: number;
  end: number;
  killed: boolean;
}

/** The highest number of runs in progress at once, and the pairs that overlapped. */
function concurrency(runs: readonly Run[]): { max: number; overlaps: [Run, Run][] } {
  const sorted = runs.toSorted((a, b) => a.start - b.start);
  const overlaps: [Run, Run][] = [];
  let max = sorted.length > 0 ? 1 : 0;
  for (const [i, run] of sorted.entries()) {
    const open = sorted.slice(0, i).filter((other) => other.end > run.start);
    for (const other of open) overlaps.push([other, run]);
    max = Math.max(max, open.length + 1);
  }
  return { max, overlaps };
}

Deno.test("R13: withoutOverlapping(k) over 2 `work` processes, one killed with SIGKILL mid-run and restarted: no two runs of k overlap, all jobs complete", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
  using db = openReader(tmp.dbPath);
  const jobs = 16;
  const ids = await queue.dispatchMany(
    overlapping,
    Array.from({ length: jobs }, (_, n) => ({ n, ms: 250 })),
  );
  const flags = ["--concurrency", "2", "--lease-ms", "1000", "--sleep-ms", "20", "--grace-ms", "0"];
  const began = Date.now();

  await using a = startWork(tmp.dbPath, flags);
  await using b = startWork(tmp.dbPath, flags);
  await Promise.all([workerStarted(a), workerStarted(b)]);
  await waitUntil("3 runs done", () => readLedger(db, "outcome = 'success'").length >= 3, 20_000);
  // A run of process a that began under 100 ms ago: it has at least 150 ms to go.
  const killedRun = await waitUntil(
    "a fresh run in process a",
    () => readLedger(db, "pid = ? AND end IS NULL AND start > ?", a.pid, Date.now() - 100)[0],
    20_000,
    5,
  );
  a.kill("SIGKILL");
  const killedAt = Date.now();
  assert.equal((await a.exit(10_000)).signal, "SIGKILL");
  const locks = db.prepare("SELECT job_id, expires_at FROM job_locks WHERE key = 'k'").all() as {
    job_id: number;
    expires_at: number;
  }[];
  assert.deepEqual(locks.map((lock) => lock.job_id), [killedRun.job_id], "the killed run's lock");
  const lockExpiry = locks[0]!.expires_at;
  // The lock is taken when the job passes its middleware check, before it starts (a job claimed
  // ahead waits for a free slot in between, which a loaded machine stretches).
  assert.ok(
    lockExpiry <= killedRun.start + OVERLAP_EXPIRE_MS &&
      lockExpiry > killedRun.start + OVERLAP_EXPIRE_MS - 2_000,
    `lock taken expireAfterMs before its expiry: ${lockExpiry - killedRun.start} ms after start`,
  );

  await using restarted = startWork(tmp.dbPath, flags);
  await workerStarted(restarted);
  await waitUntil("every job done", () => count(db, "jobs") === 0, 30_000);
  const ms = Date.now() - began;

  const ledger: LedgerRow[] = readLedger(db);
  const ends = ledger.filter((row) => row.outcome === "success");
  // A run is its start row and the success row with the same job, process and start time (not
  // attempt: a run killed before its begin was recorded runs again under the same attempt number).
  const opened = ledger.filter((row) =>
    row.outcome === "start" &&
    !ends.some((end) => end.job_id === row.job_id && end.pid === row.pid && end.start === row.start)
  );
  assert.deepEqual(
    opened.map((row) => [row.job_id, row.pid]),
    [[killedRun.job_id, a.pid]],
    "the only run without an end is the killed one",
  );
  const runs: Run[] = [
    ...ends.map((row) => ({
      jobId: row.job_id,
      pid: row.pid,
      start: row.start,
      end: row.end!,
      killed: false,
    })),
    // A killed run counts as running until its lock expired.
    { jobId: killedRun.job_id, pid: a.pid, start: killedRun.start, end: lockExpiry, killed: true },
  ];
  const { max, overlaps } = concurrency(runs);
  const pids = new Set(ends.map((row) => row.pid));
  console.log(
    `R13: ${runs.length} runs (${ends.length} completed, 1 killed) in ${ms} ms by ${pids.size} processes; ` +
      `killed job ${killedRun.job_id} at +${
        killedAt - killedRun.start
      } ms into its run, lock until ` +
      `+${lockExpiry - killedRun.start} ms; max runs of k at once ${max}`,
  );
  for (const [first, second] of overlaps) {
    console.log(
      `R13 overlap: job ${first.jobId} (pid ${first.pid}${first.killed ? ", killed" : ""}) ` +
        `${first.start}..${first.end} and job ${second.jobId} (pid ${second.pid}) started ` +
        `${first.end - second.start} ms before the first ended`,
    );
  }
  assert.equal(max, 1, "never two runs of k at once, per the ledger");
  assert.deepEqual(
    ends.map((row) => row.job_id).toSorted((x, y) => x - y),
    ids,
    "every job completed exactly once",
  );
  assert.equal(count(db, "failed_jobs"), 0);
  assert.equal(count(db, "job_locks"), 0);
  assert.ok(pids.size >= 2, "the runs were spread over the processes");
});

Deno.test("rateLimited(r, 20, 1000) over 2 `work` processes: at most 20 starts granted per aligned second, and close to 20 while work remains", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
  using db = openReader(tmp.dbPath);
  const jobs = 200;
  await queue.dispatchMany(rated, Array.from({ length: jobs }, (_, n) => ({ n })));
  // The isolate executor starts a granted handler on the granting thread, so the time the handler
  // logs is the grant's up to a few event-loop turns (a Web Worker's start can lag by hundreds of
  // ms on a loaded machine, and the ledger would then put a start in the wrong window).
  const flags = ["--concurrency", "4", "--sleep-ms", "20", "--executor", "isolate"];

  await using a = startWork(tmp.dbPath, flags);
  await using b = startWork(tmp.dbPath, flags);
  await Promise.all([workerStarted(a), workerStarted(b)]);
  await waitUntil("every job ran", () => count(db, "ledger") >= jobs, 30_000, 50);
  await waitUntil("the jobs table empty", () => count(db, "jobs") === 0, 5_000);

  const ledger = readLedger(db);
  // The limiter counts a start when the runner grants it; the handler logs its start a little
  // later (a granted job may wait for a slot, and a loaded machine adds event-loop turns). A
  // start logged within START_LAG_MS of a window's beginning may have been granted in the window
  // before: assign it there when that window has room.
  const START_LAG_MS = 250;
  const late = new Map<number, number>();
  const early = new Map<number, number>();
  for (const row of ledger) {
    const window = Math.floor(row.start / RATE_PER_MS);
    const into = row.start % RATE_PER_MS < START_LAG_MS ? early : late;
    into.set(window, (into.get(window) ?? 0) + 1);
  }
  const windows = [...late.keys(), ...early.keys()].toSorted((x, y) => x - y);
  // From the window before the first start: the first starts may have been granted in it.
  const first = windows[0]! - 1;
  const last = windows.at(-1)!;
  const series: number[] = [];
  for (let w = first; w <= last; w++) {
    let mine = (late.get(w) ?? 0) + (early.get(w) ?? 0);
    if (series.length > 0) {
      const moved = Math.min(early.get(w) ?? 0, Math.max(0, RATE_MAX - series.at(-1)!));
      series[series.length - 1]! += moved;
      mine -= moved;
    }
    series.push(mine);
  }
  // The window before the first start, the first start's and the last are partial.
  const full = series.slice(2, -1);
  const byPid = Object.groupBy(ledger, (row) => String(row.pid));
  console.log(
    `rate: ${ledger.length} starts over ${series.length} windows of ${RATE_PER_MS} ms: ` +
      `${series.join(" ")}; full windows min ${Math.min(...full)} max ${Math.max(...full)} mean ${
        (full.reduce((s, n) => s + n, 0) / full.length).toFixed(1)
      }; per process ${Object.values(byPid).map((rows) => rows!.length).join("/")}`,
  );
  assert.equal(ledger.length, jobs, "each job ran once");
  assert.equal(new Set(ledger.map((row) => row.job_id)).size, jobs);
  // A start is logged at or after its grant, never before: however late a loaded machine logs
  // them, by each start at most RATE_MAX were granted per window from `first` to its own.
  const startTimes = ledger.map((row) => row.start).toSorted((x, y) => x - y);
  for (const [index, start] of startTimes.entries()) {
    const allowed = RATE_MAX * (Math.floor(start / RATE_PER_MS) - first + 1);
    assert.ok(index + 1 <= allowed, `${index + 1} starts by window ${start}, at most ${allowed}`);
  }
  assert.ok(full.length >= 8, `the run spanned ~10 windows: ${series.length}`);
  assert.ok(full.every((n) => n >= 15), `a full window had fewer than 15: ${series}`);
  assert.ok(Object.keys(byPid).length === 2, "both processes ran jobs");
  a.kill("SIGTERM");
  b.kill("SIGTERM");
  assert.equal((await a.exit(10_000)).code, 0);
  assert.equal((await b.exit(10_000)).code, 0);
});
