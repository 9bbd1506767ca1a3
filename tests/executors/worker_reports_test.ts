/**
 * What a handler that holds its Web Worker's thread (CPU-bound work, no
 * await) reports while it runs reaches the store while it runs: its
 * `ctx.log()` lines and `ctx.progress()` are sent from inside those calls
 * when the last send is long enough ago, since a scheduled send cannot run
 * on a held thread; so they also survive its Web Worker being terminated.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { storeTest } from "../_stores.ts";
import { holdsThread, timesOutBusy, warmUp } from "../fixtures/web_workers/busy_report_jobs.ts";

const JOBS = import.meta.resolve("../fixtures/web_workers/busy_report_jobs.ts");

/** Resolves once `probe` resolves true; throws naming `what` past `timeoutMs`. */
async function eventually(what: string, probe: () => Promise<boolean>, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!await probe()) {
    if (Date.now() > deadline) throw new Error(`Not ${what} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

storeTest(
  "a handler holding its Web Worker's thread has its ctx.log() lines and ctx.progress() stored while it runs",
  async (db) => {
    const release = join(db.dir, "release");
    const queue = await db.open({ jobs: JOBS });
    const id = await queue.dispatch(holdsThread, { release, maxMs: 60_000 });
    const worker = queue.work({ executor: "workers", workers: 1, pollMs: 20 });
    try {
      await eventually("the line and the progress stored while the handler runs", async () => {
        const running = (await queue.counts()).default?.running.find((job) => job.id === id);
        const lines = await queue.logs(id);
        return running?.progress === 40 && lines.some((line) => line.message === "begun");
      });
    } finally {
      await Deno.writeTextFile(release, "");
      await worker.stop();
    }
    assert.equal((await queue.finishedJob(id))?.state, "completed");
  },
);

storeTest(
  "a handler holding its Web Worker's thread past its timeout keeps the lines it logged before its Web Worker is terminated",
  async (db) => {
    const queue = await db.open({ jobs: JOBS });
    const worker = queue.work({ executor: "workers", workers: 1, pollMs: 20, graceMs: 200 });
    let id = 0;
    try {
      // The job's timeout counts from its hand-off: a Web Worker still starting on a loaded
      // machine could use it all before the handler logs.
      await queue.dispatchAndWait(warmUp, {}, { timeoutMs: 120_000 });
      id = await queue.dispatch(timesOutBusy, { holdMs: 60_000 });
      await eventually("the job failed", async () => (await queue.failedJob(id)) !== null);
    } finally {
      await worker.stop();
    }
    assert.match((await queue.failedJob(id))!.error, /^JobTimeoutError: /);
    assert.deepEqual((await queue.logs(id)).map((line) => line.message), ["begun"]);
  },
);
