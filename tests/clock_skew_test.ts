/**
 * Clock skew on PostgreSQL: a dispatcher and a worker whose clocks run 30 s
 * ahead of the database's (injected). Delayed jobs are due by the
 * database's clock, and so are jobs retried from the failed jobs; overlap
 * locks expire and rate windows turn on it too, so hosts whose clocks
 * disagree still agree. Runs when
 * `QUEUE_TEST_POSTGRES_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, Queue, rateLimited, withoutOverlapping } from "../mod.ts";
import { openTestPostgresStore, postgresTestUrl } from "./_postgres.ts";
import { nextEvent } from "./_helpers.ts";

const url = postgresTestUrl();
if (url === null) console.log("clock skew tests skipped: QUEUE_TEST_POSTGRES_URL is not set");

const SKEW_MS = 30_000;
const ahead = { now: () => Date.now() + SKEW_MS };

const delayed = defineJob({ name: "skew.delayed", schema: z.null(), handle() {} });
const failing = defineJob({
  name: "skew.failing",
  schema: z.null(),
  maxAttempts: 1,
  handle() {
    throw new Error("fails on purpose");
  },
});
const guarded = defineJob({
  name: "skew.guarded",
  schema: z.null(),
  timeoutMs: 5_000,
  middleware: () => [withoutOverlapping("skew-lock"), rateLimited("skew-rate", 100, 7_000)],
  async handle(_payload, ctx) {
    await new Promise((resolve) => setTimeout(resolve, 300));
    void ctx;
  },
});

/** The database's clock, in ms. */
async function dbNow(queue: Queue): Promise<number> {
  const [row] = await queue.transaction((tx) =>
    tx.query<{ t: number }>("SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint AS t")
  );
  return Number(row!.t);
}

Deno.test({
  name:
    "PostgreSQL: a dispatcher whose clock is 30 s ahead delays its jobs by the database's clock",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({ store: test.store, jobs: [delayed], clock: ahead });
    const id = await queue.dispatch(delayed, null, { delayMs: 2_000 });
    const now = await dbNow(queue);
    const [row] = await queue.transaction((tx) =>
      tx.query<{ available_at: number; created_at: number }>(
        "SELECT available_at, created_at FROM jobs WHERE id = $1",
        [id],
      )
    );
    const dueInMs = Number(row!.available_at) - now;
    console.log(
      `clock skew: dispatcher ${SKEW_MS / 1000} s ahead, delay 2 s: due ${dueInMs} ms after ` +
        `the database's now (${Number(row!.available_at) - Number(row!.created_at)} ms after its ` +
        `creation)`,
    );
    assert.equal(Number(row!.available_at) - Number(row!.created_at), 2_000);
    assert.ok(dueInMs <= 2_000 && dueInMs > -5_000, `due ${dueInMs} ms from the database's now`);
  },
});

Deno.test({
  name:
    "PostgreSQL: an admin whose clock is 30 s ahead retries a failed job due by the database's clock",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({ store: test.store, jobs: [failing], clock: ahead });
    const failed = nextEvent(queue, "job:failed", () => true, 20_000);
    const worker = queue.work({ concurrency: 1, pollMs: 20 });
    const id = await queue.dispatch(failing, null);
    try {
      await failed;
    } finally {
      await worker.stop();
    }
    assert.equal(await queue.retry(id), true);
    const now = await dbNow(queue);
    const [row] = await queue.transaction((tx) =>
      tx.query<{ available_at: number }>("SELECT available_at FROM jobs WHERE id = $1", [id])
    );
    const dueInMs = Number(row!.available_at) - now;
    console.log(
      `clock skew: admin ${SKEW_MS / 1000} s ahead: the retried job is due ${dueInMs} ms after ` +
        `the database's now`,
    );
    // Due at once by the database's clock; the admin's would put it 30 s ahead.
    assert.ok(dueInMs <= 0 && dueInMs > -5_000, `due ${dueInMs} ms from the database's now`);
  },
});

Deno.test({
  name:
    "PostgreSQL: a worker whose clock is 30 s ahead takes overlap locks and rate windows on the database's clock",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({ store: test.store, jobs: [guarded], clock: ahead });
    const started = nextEvent(queue, "job:start", () => true, 20_000);
    const worker = queue.work({ concurrency: 1, pollMs: 20 });
    try {
      await queue.dispatch(guarded, null);
      await started;
      const now = await dbNow(queue);
      const [lock] = await queue.transaction((tx) =>
        tx.query<{ expires_at: number }>("SELECT expires_at FROM job_locks")
      );
      const [rate] = await queue.transaction((tx) =>
        tx.query<{ window_start: number }>("SELECT window_start FROM rate_windows")
      );
      const lockInMs = Number(lock!.expires_at) - now;
      console.log(
        `clock skew: worker ${SKEW_MS / 1000} s ahead: overlap lock expires ${lockInMs} ms after ` +
          `the database's now (timeout 5 s + grace); rate window starts ${
            now - Number(rate!.window_start)
          } ms before it`,
      );
      // timeoutMs 5 s + the default 10 s grace: never the worker's 30 s more.
      assert.ok(lockInMs <= 15_000 && lockInMs > 5_000, `lock expires in ${lockInMs} ms`);
      // A 7 s window: the worker's clock would put its start 23-30 s after the database's now.
      const sinceStart = now - Number(rate!.window_start);
      assert.equal(Number(rate!.window_start) % 7_000, 0);
      assert.ok(sinceStart >= 0 && sinceStart < 9_000, `window started ${sinceStart} ms ago`);
    } finally {
      await worker.stop();
    }
  },
});
