/**
 * Lost replies on Redis: a proxy between the queue and a private
 * `redis-server` forwards one script call, then cuts the connection before
 * its reply, so the server ran it and the client cannot tell. A dispatch
 * whose reply was lost is sent again with its token and stores its jobs
 * once; a claim whose reply was lost gives its jobs back (they run at
 * attempt 1, no crash counted); a settle whose reply was lost is kept and
 * sent again, and applies once (one chain step, one batch count).
 *
 * Skips, saying why, where `redis-server` is missing.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, Queue } from "../../mod.ts";
import { failedCount, unfinishedCount, waitUntil } from "../_helpers.ts";
import { privateRedisRefusal, startPrivateRedis } from "../fixtures/faults/private_redis.ts";
import { replyCuttingProxy } from "../fixtures/faults/reply_cutting_proxy.ts";

const refusal = await privateRedisRefusal();
if (refusal !== null) console.log(`Redis lost-reply tests skipped: ${refusal}`);

/** One run of `step`: its job, payload and attempt, and when it started (epoch ms). */
interface Run {
  readonly id: number;
  readonly n: number;
  readonly attempt: number;
  readonly at: number;
}

/** Every run of `step` in this process, in order. */
const runs: Run[] = [];
const step = defineJob({
  name: "lost.step",
  schema: z.object({ n: z.number().int() }),
  handle: ({ n }, ctx) => {
    runs.push({ id: ctx.id, n, attempt: ctx.attempt, at: Date.now() });
  },
});

/** The input of a store call (`FCALL function 1 meta input`), or null for any other request. */
function scriptInput(args: readonly string[]): Record<string, unknown> | null {
  if (args[0]?.toUpperCase() !== "FCALL" || args[4] === undefined) return null;
  try {
    return JSON.parse(args[4]);
  } catch {
    return null;
  }
}

/** Whether `args` is a settle whose settlements include job `id`. */
function settles(args: readonly string[], id: number | undefined): boolean {
  const settlements = scriptInput(args)?.settlements;
  return id !== undefined && Array.isArray(settlements) &&
    settlements.some((settlement: { id?: unknown }) => settlement.id === id);
}

/** The runs of `step` with payload `n`. */
function runsOf(n: number): Run[] {
  return runs.filter((run) => run.n === n);
}

Deno.test({
  name:
    "Redis: a dispatch whose reply was lost (the server stored the jobs) is sent again with its token and stores them once",
  ignore: refusal !== null,
  async fn() {
    await using redis = await startPrivateRedis({ aof: false });
    await using proxy = replyCuttingProxy(redis.url);
    await using queue = await Queue.open({ url: proxy.url, jobs: [step] });
    const cut = proxy.cutAfter((args) => Array.isArray(scriptInput(args)?.rows));
    const ids = await queue.dispatchMany(step, [{ n: 1 }, { n: 2 }, { n: 3 }]);
    const token = scriptInput(await cut)!.token;
    const stored = await unfinishedCount(queue);
    console.log(
      `Redis dispatch, reply lost: ${ids.length} ids given back, ${stored} jobs stored (token ${token})`,
    );
    assert.equal(new Set(ids).size, 3);
    assert.equal(stored, 3, "the jobs were stored twice");
    const listed = (await queue.jobs({ limit: 10 })).jobs.map((job) => job.id).sort((a, b) =>
      a - b
    );
    assert.deepEqual(listed, [...ids].sort((a, b) => a - b));
  },
});

Deno.test({
  name:
    "Redis: a claim whose reply was lost (the server leased the jobs) gives them back: they run once, at attempt 1, no crash counted",
  ignore: refusal !== null,
  async fn() {
    runs.length = 0;
    await using redis = await startPrivateRedis({ aof: false });
    await using proxy = replyCuttingProxy(redis.url);
    await using queue = await Queue.open({ url: proxy.url, jobs: [step] });
    const ids = await queue.dispatchMany(step, [{ n: 1 }, { n: 2 }, { n: 3 }]);
    const cut = proxy.cutAfter((args) => {
      const request = scriptInput(args)?.request as { limit?: number } | undefined;
      return request !== undefined;
    });
    // A lease far longer than the test: a claim not given back would leave its jobs stuck.
    const worker = queue.work({ executor: "isolate", concurrency: 4, leaseMs: 120_000 });
    try {
      await cut;
      const cutAt = Date.now();
      await waitUntil(() => runs.length >= ids.length, { what: "every job run" });
      await waitUntil(async () => await unfinishedCount(queue) === 0, {
        what: "every job settled",
      });
      const attempts = runs.map((run) => run.attempt);
      console.log(
        `Redis claim, reply lost: jobs given back, ${runs.length} runs of ${ids.length} jobs, ` +
          `attempts ${attempts.join(", ")}, first run ${
            Math.min(...runs.map((run) => run.at)) - cutAt
          } ms after the cut (lease 120000 ms)`,
      );
      assert.deepEqual(runs.map((run) => run.id).sort((a, b) => a - b), ids);
      assert.deepEqual(attempts, [1, 1, 1], "a crash was counted for a claim whose reply was lost");
      assert.equal(await failedCount(queue), 0);
    } finally {
      await worker.stop();
    }
  },
});

Deno.test({
  name:
    "Redis: a settle whose reply was lost (the server applied it) is sent again and applies once: one chain step, one batch count",
  ignore: refusal !== null,
  async fn() {
    runs.length = 0;
    await using redis = await startPrivateRedis({ aof: false });
    await using proxy = replyCuttingProxy(redis.url);
    await using queue = await Queue.open({ url: proxy.url, jobs: [step] });
    const idOf = (n: number) => runsOf(n)[0]?.id;
    const chainCut = proxy.cutAfter((args) => settles(args, idOf(1)));
    const batchCut = proxy.cutAfter((args) => settles(args, idOf(11)));
    await queue.chain().then(step, { n: 1 }).then(step, { n: 2 }).then(step, { n: 3 }).dispatch();
    const batchId = await queue.batch("lost replies")
      .pushMany(step, [{ n: 11 }, { n: 12 }, { n: 13 }])
      .then(step, { n: 99 })
      .dispatch();
    const worker = queue.work({ executor: "isolate", concurrency: 2 });
    try {
      await Promise.all([chainCut, batchCut]);
      await waitUntil(() => runsOf(3).length > 0 && runsOf(99).length > 0, {
        what: "the chain's last link and the batch's then run",
      });
      await waitUntil(async () => await unfinishedCount(queue) === 0, {
        what: "every job settled",
      });
    } finally {
      await worker.stop();
    }
    const perPayload = Object.fromEntries(
      [1, 2, 3, 11, 12, 13, 99].map((n) => [n, runsOf(n).length]),
    );
    const batch = (await queue.batchStatus(batchId))!;
    console.log(
      `Redis settle, reply lost (a chain link's and a batch job's): runs per payload ${
        JSON.stringify(perPayload)
      }; batch total ${batch.total}, succeeded ${batch.succeeded}, pending ${batch.pending}, failed ${batch.failed}`,
    );
    assert.deepEqual(perPayload, { 1: 1, 2: 1, 3: 1, 11: 1, 12: 1, 13: 1, 99: 1 });
    assert.deepEqual(
      {
        total: batch.total,
        succeeded: batch.succeeded,
        pending: batch.pending,
        failed: batch.failed,
      },
      { total: 3, succeeded: 3, pending: 0, failed: 0 },
    );
    assert.equal(await failedCount(queue), 0);
  },
});

Deno.test({
  name:
    "Redis: dispatchAndWait() whose mark of the job as awaited lost its reply (the job is stored) goes on waiting and resolves once the job ran, which runs once",
  ignore: refusal !== null,
  async fn() {
    runs.length = 0;
    await using redis = await startPrivateRedis({ aof: false });
    await using proxy = replyCuttingProxy(redis.url);
    await using queue = await Queue.open({ url: proxy.url, jobs: [step] });
    const reported: string[] = [];
    queue.addEventListener("queue:error", ({ detail }) => reported.push(detail.during));
    // The mark's input holds the job's id and nothing of its own besides: no worker runs yet,
    // so the only such call is the mark that follows the dispatch.
    const cut = proxy.cutAfter((args) => {
      const input = scriptInput(args);
      return typeof input?.id === "number" &&
        Object.keys(input).every((key) => ["id", "now", "db", "epoch"].includes(key));
    });
    const waiting = queue.dispatchAndWait(step, { n: 7 }, { timeoutMs: 60_000 });
    const settled = waiting.then(() => "resolved", (error: Error) => `rejected: ${error.message}`);
    await cut;
    const worker = queue.work({ executor: "isolate" });
    try {
      assert.equal(await settled, "resolved");
      assert.equal(runsOf(7).length, 1);
      assert.ok(reported.some((during) => /^marking job \d+ awaited$/.test(during)), `${reported}`);
    } finally {
      await worker.stop();
    }
  },
});
