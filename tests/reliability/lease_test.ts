/**
 * Lease renewal with real worker processes on one SQLite file
 * (RELIABILITY.md R06): a job that runs three times its lease, and a
 * CPU-bound one that never yields, are never reclaimed by a second process
 * while their worker lives.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Queue } from "../../mod.ts";
import { tempDir } from "../_helpers.ts";
import { sleeper, spinner } from "../fixtures/reliability/jobs.ts";
import { readLedger } from "../fixtures/reliability/ledger.ts";
import {
  all,
  type ChildLine,
  JOBS_URL,
  openReader,
  startWorker,
  waitUntil,
} from "../fixtures/reliability/harness.ts";

interface LeaseRow {
  id: number;
  token: number | null;
  available_at: number;
}

/** What the test saw of one job's lease while polling. */
interface LeaseTrace {
  tokens: Set<number>;
  /** Each distinct lease end, in order. */
  ends: number[];
  /** The least time left on the lease at any look, in ms. */
  minLeftMs: number;
}

Deno.test("R06: with Web Workers, a job three times its lease and a CPU-bound one are never reclaimed by another process while their worker lives", async () => {
  await using tmp = await tempDir();
  const leaseMs = 1_000;
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
  using db = openReader(tmp.dbPath);
  const options = { concurrency: 2, workers: 2, leaseMs, pollMs: 50, graceMs: 1_000 };
  await using first = startWorker(tmp.dbPath, options, { events: true });
  await using second = startWorker(tmp.dbPath, options, { events: true });
  const ready = (line: ChildLine) => line.type === "ready";
  await Promise.all([first, second].map((child) => child.waitFor("ready", ready)));

  const asyncId = await queue.dispatch(sleeper, { ms: 3_000 });
  const cpuId = await queue.dispatch(spinner, { ms: 2_500 });
  const traces = new Map<number, LeaseTrace>(
    [asyncId, cpuId].map((id) => [id, { tokens: new Set(), ends: [], minLeftMs: Infinity }]),
  );
  const look = db.prepare("SELECT id, token, available_at FROM jobs WHERE id IN (?, ?)");
  await waitUntil(
    "both jobs done",
    () => {
      const now = Date.now();
      const rows = look.all(asyncId, cpuId) as unknown as LeaseRow[];
      for (const row of rows) {
        if (row.token === null) continue; // not claimed yet
        const trace = traces.get(row.id)!;
        trace.tokens.add(row.token);
        if (trace.ends.at(-1) !== row.available_at) trace.ends.push(row.available_at);
        trace.minLeftMs = Math.min(trace.minLeftMs, row.available_at - now);
      }
      return rows.length === 0;
    },
    20_000,
    10,
  );
  for (const child of [first, second]) child.kill("SIGTERM");
  for (const child of [first, second]) assert.equal((await child.exit(10_000)).code, 0);

  const figures: string[] = [];
  for (const [id, label] of [[asyncId, "3 s async job"], [cpuId, "2.5 s CPU-bound job"]] as const) {
    const runs = readLedger(db, "job_id = ?", id);
    assert.deepEqual(runs.map((row) => row.outcome), ["start", "success"], `job ${id}'s runs`);
    const starts = [first, second].flatMap((child) =>
      child.linesOf("job:start").filter((line) => line.id === id)
    );
    assert.equal(starts.length, 1, `job ${id} was claimed ${starts.length} times`);
    const trace = traces.get(id)!;
    assert.equal(trace.tokens.size, 1, `job ${id} changed hands`);
    // Each lease end is the renewer's clock plus leaseMs: the gaps between them are the renewal gaps.
    const gaps = trace.ends.slice(1).map((end, index) => end - trace.ends[index]!);
    const maxGapMs = Math.max(...gaps);
    figures.push(
      `${label}: ${gaps.length} renewals, max gap ${maxGapMs} ms, least lease left ${trace.minLeftMs} ms`,
    );
    assert.ok(gaps.length >= 2, `job ${id}'s lease was renewed ${gaps.length} times`);
    assert.ok(trace.minLeftMs > 0, `job ${id}'s lease ran out (${trace.minLeftMs} ms)`);
  }
  assert.equal(all(db, "SELECT id FROM failed_jobs").length, 0);
  console.log(`R06: leaseMs ${leaseMs}: ${figures.join("; ")}`);
});
