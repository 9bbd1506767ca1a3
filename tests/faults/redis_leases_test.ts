/**
 * Leases on Redis, on a private `redis-server`: a `work` process stopped
 * with SIGSTOP past its lease while another takes its jobs over, then
 * resumed (its late settles change nothing), and workers whose clocks are
 * 10 minutes ahead and behind, who agree on due times and leases because
 * both go by the server's `TIME`.
 *
 * Skips, saying why, where `redis-server` is missing.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { z } from "zod";
import { defineJob, Queue, type QueueWorker } from "../../mod.ts";
import { failedCount, tempDir, unfinishedCount, waitUntil } from "../_helpers.ts";
import { JOBS_URL, startWork } from "../fixtures/faults/drain.ts";
import { slow, tick } from "../fixtures/faults/jobs.ts";
import { privateRedisRefusal, startPrivateRedis } from "../fixtures/faults/private_redis.ts";
import { all, one, openReader } from "../fixtures/reliability/harness.ts";
import { cliEvents, workerStarted } from "../fixtures/reliability_postgres/harness.ts";

const refusal = await privateRedisRefusal();
if (refusal !== null) console.log(`Redis lease tests skipped: ${refusal}`);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test({
  name:
    "Redis: a work process stopped (SIGSTOP) past its lease while another takes its jobs over, then resumed: its late settles change nothing",
  ignore: refusal !== null,
  async fn() {
    await using redis = await startPrivateRedis({ aof: false });
    await using tmp = await tempDir();
    const ledger = join(tmp.dir, "ledger.db");
    using ledgerDb = openReader(ledger);
    await using queue = await Queue.open({ url: redis.url, jobs: JOBS_URL });
    const size = 8;
    const batchId = await queue.batch("fenced")
      .pushMany(slow, Array.from({ length: size }, (_, n) => ({ n, ms: 2_000 })))
      .then(tick, { n: -1 })
      .dispatch();
    const flags = ["--concurrency", String(size), "--sleep-ms", "200"];
    // Renewed every 3 s: its 2 s handlers end before its first renewal, so it settles them when resumed.
    const stalled = startWork(redis.url, ledger, [...flags, "--lease-ms", "9000"]);
    const runsOf = (pid: number) =>
      one<{ n: number }>(ledgerDb, "SELECT COUNT(*) AS n FROM ledger WHERE pid = ?", pid).n;
    let taker: ReturnType<typeof startWork> | null = null;
    try {
      await workerStarted(stalled);
      await waitUntil(() => runsOf(stalled.pid) >= size, {
        what: "the first process ran them all",
      });
      stalled.kill("SIGSTOP");
      taker = startWork(redis.url, ledger, [...flags, "--lease-ms", "1500"]);
      const takerPid = taker.pid;
      await waitUntil(() => runsOf(takerPid) >= size, {
        what: "the other process took every job over",
      });
      // Resumed while the other runs them: its handlers end at once (their time passed), and it
      // settles them with its old tokens.
      stalled.kill("SIGCONT");
      await waitUntil(async () => (await queue.batchStatus(batchId))?.pending === 0, {
        what: "the batch finished",
      });
      await waitUntil(async () => await unfinishedCount(queue) === 0, {
        what: "the batch's then job settled",
      });
      stalled.kill("SIGTERM");
      await stalled.exit(20_000);
      const runs = all<{ job_id: number; pid: number; attempt: number }>(
        ledgerDb,
        "SELECT job_id, pid, attempt FROM ledger ORDER BY job_id, attempt",
      );
      const lateCompletions = cliEvents(stalled, "job:complete").length;
      const completions = cliEvents(taker, "job:complete").length;
      const batch = (await queue.batchStatus(batchId))!;
      console.log(
        `Redis stalled process: ${runsOf(stalled.pid)} jobs started before SIGSTOP, ` +
          `${runsOf(taker.pid)} runs by the other (attempts ${[
            ...new Set(runs.filter((run) => run.pid === takerPid).map((run) => run.attempt)),
          ]}); completions reported after SIGCONT ${lateCompletions}, by the other ${completions}; ` +
          `batch succeeded ${batch.succeeded} of ${batch.total}, pending ${batch.pending}, failed ${batch.failed}`,
      );
      assert.equal(lateCompletions, 0, "a late settle was applied");
      assert.equal(completions, size + 1);
      assert.deepEqual(
        {
          total: batch.total,
          succeeded: batch.succeeded,
          pending: batch.pending,
          failed: batch.failed,
        },
        { total: size, succeeded: size, pending: 0, failed: 0 },
      );
      assert.equal(runsOf(taker.pid), size + 1, "the then job ran more than once, or not at all");
      assert.equal(await unfinishedCount(queue), 0);
      assert.equal(await failedCount(queue), 0);
    } finally {
      stalled.kill("SIGCONT");
      await stalled[Symbol.asyncDispose]();
      if (taker !== null) {
        taker.kill("SIGTERM");
        await taker.exit(20_000).catch(() => {});
        await taker[Symbol.asyncDispose]();
      }
    }
  },
});

/** How far the two workers' clocks are off the server's, each way. */
const SKEW_MS = 10 * 60_000;

/** When each run of the skew jobs started (epoch ms), by payload. */
const started = new Map<number, number[]>();
const record = (n: number) => started.set(n, [...started.get(n) ?? [], Date.now()]);
const quick = defineJob({
  name: "skew.quick",
  schema: z.object({ n: z.number().int() }),
  handle: ({ n }) => record(n),
});
const held = defineJob({
  name: "skew.held",
  schema: z.object({ n: z.number().int() }),
  handle: async ({ n }) => {
    record(n);
    await sleep(2_500);
  },
});

Deno.test({
  name:
    "Redis: workers whose clocks are 10 minutes ahead and behind agree on due times and leases (the server's TIME)",
  ignore: refusal !== null,
  async fn() {
    await using redis = await startPrivateRedis({ aof: false });
    const open = (skewMs: number) =>
      Queue.open({
        url: redis.url,
        jobs: [quick, held],
        clock: { now: () => Date.now() + skewMs },
      });
    await using ahead = await open(SKEW_MS);
    await using behind = await open(-SKEW_MS);
    const work = (queue: Queue) =>
      queue.work({ executor: "isolate", concurrency: 2, leaseMs: 1_000, pollMs: 200 });
    const behindWorker = work(behind);
    let aheadWorker: QueueWorker | null = null;
    try {
      // Dispatched 10 minutes ahead, run 10 minutes behind: due in 2 s, not in 20 minutes.
      const sentAt = Date.now();
      await ahead.dispatch(quick, { n: 1 }, { delayMs: 2_000 });
      const [late] = await waitUntil(() => started.get(1), { what: "the delayed job run" });
      // A lease of 1 s held (renewed) 10 minutes behind, seen from 10 minutes ahead: not expired.
      await behind.dispatch(held, { n: 2 });
      await waitUntil(() => started.get(2), { what: "the held job started" });
      aheadWorker = work(ahead);
      await waitUntil(async () => await unfinishedCount(behind) === 0, {
        what: "the held job settled",
      });
      await behindWorker.stop();
      // Dispatched 10 minutes behind, run 10 minutes ahead: due in 2 s, not at once.
      const sentAgainAt = Date.now();
      await behind.dispatch(quick, { n: 3 }, { delayMs: 2_000 });
      const [early] = await waitUntil(() => started.get(3), { what: "the second delayed job run" });
      const heldRuns = started.get(2)!.length;
      console.log(
        `Redis clocks ±10 min: a 2 s delay dispatched ahead ran ${
          late! - sentAt - 2_000
        } ms after due behind, dispatched behind ran ${
          early! - sentAgainAt - 2_000
        } ms after due ahead; a job held past 2 leases ran ${heldRuns} time(s)`,
      );
      assert.ok(late! >= sentAt + 2_000 - 5, "the job ran before it was due");
      assert.ok(early! >= sentAgainAt + 2_000 - 5, "the job ran before it was due");
      assert.equal(heldRuns, 1, "a worker ahead took over a lease that was still held");
      assert.equal(await failedCount(ahead), 0);
    } finally {
      await behindWorker.stop();
      await aheadWorker?.stop();
    }
  },
});
