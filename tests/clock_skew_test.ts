/**
 * Clock skew on PostgreSQL: a dispatcher and a worker whose clocks run 30 s
 * ahead of the database's (injected). Delayed jobs are due by the
 * database's clock, and so are retries after a backoff, jobs held back by
 * a rate limit, a chain's next link and jobs retried from the failed jobs; overlap locks expire
 * and rate windows turn on it too, so hosts whose clocks disagree still
 * agree. Runs when
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
const flaky = defineJob({
  name: "skew.flaky",
  schema: z.null(),
  maxAttempts: 2,
  backoff: [1_000],
  jitter: 0,
  handle(_payload, ctx) {
    if (ctx.attempt === 1) throw new Error("fails its first attempt on purpose");
  },
});
const limited = defineJob({
  name: "skew.limited",
  schema: z.null(),
  middleware: () => [rateLimited("skew-held", 1, 60_000)],
  handle() {},
});
const link = defineJob({ name: "skew.link", schema: z.null(), handle() {} });
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

/** The job's due time once it was put back (released or held back), read until `deadlineMs`. */
async function releasedDueAt(queue: Queue, id: number, deadlineMs = 20_000): Promise<number> {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    const [row] = await queue.transaction((tx) =>
      tx.query<{ available_at: number; token: number | null; last_error: string | null }>(
        "SELECT available_at, token, last_error FROM jobs WHERE id = $1",
        [id],
      )
    );
    if (row !== undefined && row.token === null && row.last_error !== null) {
      return Number(row.available_at);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`job ${id} was not put back within ${deadlineMs} ms`);
}

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
    "PostgreSQL: a worker whose clock is 30 s ahead puts a failed attempt back due after its backoff by the database's clock",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({ store: test.store, jobs: [flaky], clock: ahead });
    const retried = nextEvent(queue, "job:retry", () => true, 20_000);
    const worker = queue.work({ concurrency: 1, pollMs: 20 });
    try {
      const id = await queue.dispatch(flaky, null);
      await retried;
      const dueAt = await releasedDueAt(queue, id);
      const dueInMs = dueAt - await dbNow(queue);
      console.log(
        `clock skew: worker ${
          SKEW_MS / 1000
        } s ahead, backoff 1 s: the retry is due ${dueInMs} ms ` +
          `after the database's now`,
      );
      // The worker's clock would put it 31 s ahead.
      assert.ok(dueInMs <= 1_000 && dueInMs > -5_000, `due ${dueInMs} ms from the database's now`);
    } finally {
      await worker.stop();
    }
  },
});

Deno.test({
  name:
    "PostgreSQL: a worker whose clock is 30 s ahead holds a rate-limited job back until the window turns on the database's clock",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({ store: test.store, jobs: [limited], clock: ahead });
    const completed = nextEvent(queue, "job:complete", () => true, 20_000);
    const [, second] = await queue.dispatchMany(limited, [null, null]);
    const worker = queue.work({ concurrency: 1, pollMs: 20 });
    try {
      await completed;
      const dueAt = await releasedDueAt(queue, second!);
      const [rate] = await queue.transaction((tx) =>
        tx.query<{ window_start: number }>("SELECT window_start FROM rate_windows")
      );
      const turnsAt = Number(rate!.window_start) + 60_000;
      console.log(
        `clock skew: worker ${SKEW_MS / 1000} s ahead: the held-back job is due ${
          dueAt - turnsAt
        } ms after its rate window turns on the database's clock`,
      );
      // Off by the skew either way if a clock were mixed up.
      assert.ok(Math.abs(dueAt - turnsAt) < 5_000, `due ${dueAt - turnsAt} ms after the turn`);
    } finally {
      await worker.stop();
    }
  },
});

Deno.test({
  name:
    "PostgreSQL: a worker whose clock is 30 s ahead queues a chain's next link due by the database's clock",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({ store: test.store, jobs: [link], clock: ahead });
    const completed = nextEvent(queue, "job:complete", () => true, 20_000);
    // The next link waits on a queue no worker works, to be read where it was queued.
    await queue.chain().then(link, null).then(link, null, { queue: "skew-later" }).dispatch();
    const worker = queue.work({ concurrency: 1, pollMs: 20 });
    try {
      await completed;
    } finally {
      await worker.stop();
    }
    const [row] = await queue.transaction((tx) =>
      tx.query<{ available_at: number }>(
        "SELECT available_at FROM jobs WHERE queue = 'skew-later'",
      )
    );
    const dueInMs = Number(row!.available_at) - await dbNow(queue);
    console.log(
      `clock skew: worker ${SKEW_MS / 1000} s ahead: the chain's next link is due ${dueInMs} ms ` +
        `after the database's now`,
    );
    // The worker's clock would put it 30 s ahead.
    assert.ok(dueInMs <= 0 && dueInMs > -5_000, `due ${dueInMs} ms from the database's now`);
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
