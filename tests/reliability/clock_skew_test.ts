/**
 * Clock skew on PostgreSQL: a dispatcher, a worker or an admin whose clock
 * runs 30 s ahead of the database's (injected). Delayed jobs are due by the
 * database's clock, and so are retries after a backoff, jobs held back by
 * a rate limit, a chain's next link, a cancelled chain's catch and jobs
 * retried from the failed jobs; overlap locks expire, rate windows turn,
 * leases are renewed, pauses end and idle workers wake on it; heartbeats,
 * finished and failed jobs and log lines are stamped with it, and prunes,
 * counts, listings and cancel's "is it running" go by it too, so hosts
 * whose clocks disagree still agree; a job's expiry is judged by the
 * database's clock too. Runs when `QUEUE_TEST_POSTGRES_URL`
 * is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, defineSchedule, Queue, rateLimited, withoutOverlapping } from "../../mod.ts";
import { openTestPostgresStore, postgresTestUrl } from "../_postgres.ts";
import { nextEvent } from "../_helpers.ts";

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
      // timeoutMs 5 s + the default 10 s grace + 2 s (it outlasts an attempt held for its
      // handler): never the worker's 30 s more.
      assert.ok(lockInMs <= 17_000 && lockInMs > 5_000, `lock expires in ${lockInMs} ms`);
      // A 7 s window: the worker's clock would put its start 23-30 s after the database's now.
      const sinceStart = now - Number(rate!.window_start);
      assert.equal(Number(rate!.window_start) % 7_000, 0);
      assert.ok(sinceStart >= 0 && sinceStart < 9_000, `window started ${sinceStart} ms ago`);
    } finally {
      await worker.stop();
    }
  },
});

const slow = defineJob({
  name: "skew.slow",
  schema: z.null(),
  async handle(_payload, ctx) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 4_000);
      ctx.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        resolve();
      });
    });
  },
});
const logged = defineJob({
  name: "skew.logged",
  schema: z.null(),
  keepFinishedMs: 60_000,
  handle(_payload, ctx) {
    ctx.log("one line");
  },
});

/** One time column of one row, read by `sql`, as a number. */
async function timeOf(queue: Queue, sql: string, params: unknown[] = []): Promise<number> {
  const [row] = await queue.transaction((tx) => tx.query<{ t: number }>(sql, params));
  assert.ok(row !== undefined, `no row for ${sql}`);
  return Number(row.t);
}

/** A worker row seen at `lastSeenAt`. */
function workerRow(id: string, lastSeenAt: number) {
  return {
    id,
    host: "test",
    pid: 1,
    queues: ["default"],
    concurrency: 1,
    startedAt: lastSeenAt - 1_000,
    lastSeenAt,
    running: 0,
    names: [],
  };
}

Deno.test({
  name:
    "PostgreSQL: a host whose clock is 30 s ahead stamps its heartbeat with the database's clock, keeps live workers' rows, and sees them",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using onTime = await Queue.open({ store: test.store, jobs: [delayed] });
    await using queue = await Queue.open({ store: test.store, jobs: [delayed], clock: ahead });
    // A worker on time, seen 5 s ago; the host ahead drops rows not seen for 20 s.
    const now = await dbNow(queue);
    await test.store.heartbeat(workerRow("on-time", now - 5_000), 0);
    const aheadNow = ahead.now();
    await test.store.heartbeat(workerRow("ahead", aheadNow), aheadNow - 20_000);
    const seen = await queue.transaction((tx) =>
      tx.query<{ id: string; last_seen_at: number; started_at: number }>(
        "SELECT id, last_seen_at, started_at FROM workers ORDER BY id",
      )
    );
    const mine = seen.find((row) => row.id === "ahead");
    const sinceSeen = await dbNow(queue) - Number(mine?.last_seen_at);
    console.log(
      `clock skew: host ${SKEW_MS / 1000} s ahead: rows kept ${
        seen.map((row) => row.id).join(", ")
      }; its heartbeat ${sinceSeen} ms before the database's now`,
    );
    assert.deepEqual(seen.map((row) => row.id), ["ahead", "on-time"], "its prune kept on-time");
    assert.ok(sinceSeen >= 0 && sinceSeen < 5_000, `seen ${sinceSeen} ms ago`);
    assert.equal(Number(mine!.last_seen_at) - Number(mine!.started_at), 1_000);
    // Both read the same workers seen in the last 30 s.
    assert.deepEqual((await queue.workers()).map((row) => row.id).sort(), ["ahead", "on-time"]);
    assert.deepEqual((await onTime.workers()).map((row) => row.id).sort(), ["ahead", "on-time"]);
  },
});

Deno.test({
  name:
    "PostgreSQL: a worker whose clock is 30 s ahead records finished and failed jobs and log lines at the database's clock, and its prunes cut by it",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({
      store: test.store,
      jobs: [logged, failing],
      clock: ahead,
    });
    const completed = nextEvent(queue, "job:complete", () => true, 20_000);
    const failed = nextEvent(queue, "job:failed", () => true, 20_000);
    const worker = queue.work({ concurrency: 2, pollMs: 20 });
    const done = await queue.dispatch(logged, null);
    const broken = await queue.dispatch(failing, null);
    try {
      await completed;
      await failed;
    } finally {
      await worker.stop();
    }
    const now = await dbNow(queue);
    const finishedAgo = now -
      await timeOf(queue, "SELECT finished_at AS t FROM completed_jobs WHERE id = $1", [done]);
    const keptFor =
      await timeOf(queue, "SELECT keep_until AS t FROM completed_jobs WHERE id = $1", [done]) -
      now;
    const failedAgo = now -
      await timeOf(queue, "SELECT failed_at AS t FROM failed_jobs WHERE id = $1", [broken]);
    const loggedAgo = now -
      await timeOf(queue, "SELECT at AS t FROM job_logs WHERE job_id = $1", [done]);
    console.log(
      `clock skew: worker ${SKEW_MS / 1000} s ahead: finished ${finishedAgo} ms, failed ` +
        `${failedAgo} ms, logged ${loggedAgo} ms before the database's now; kept ${keptFor} ms more`,
    );
    for (const [what, ago] of [["finished", finishedAgo], ["failed", failedAgo]] as const) {
      assert.ok(ago >= 0 && ago < 15_000, `${what} ${ago} ms before the database's now`);
    }
    assert.ok(loggedAgo >= 0 && loggedAgo < 15_000, `logged ${loggedAgo} ms ago`);
    assert.ok(keptFor > 45_000 && keptFor <= 60_000, `kept for ${keptFor} ms more`);
    // What failed or finished moments ago is not older than 20 s by the database's clock.
    assert.equal(await queue.pruneFailed({ olderThanMs: 20_000 }), 0);
    assert.equal(await queue.pruneFinished({ olderThanMs: 20_000 }), 0);
    assert.equal((await queue.failed()).length, 1);
  },
});

Deno.test({
  name:
    "PostgreSQL: a queue paused for 2 s by a host whose clock is 30 s ahead resumes by the database's clock",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({ store: test.store, jobs: [delayed], clock: ahead });
    await using onTime = await Queue.open({ store: test.store, jobs: [delayed] });
    await queue.pause("default", { forMs: 2_000 });
    const endsInMs = await timeOf(queue, "SELECT until AS t FROM queue_pauses") -
      await dbNow(queue);
    console.log(
      `clock skew: host ${SKEW_MS / 1000} s ahead paused for 2 s: ends ${endsInMs} ms after ` +
        `the database's now`,
    );
    assert.ok(endsInMs <= 2_000 && endsInMs > -5_000, `ends in ${endsInMs} ms`);
    // Whoever asks, the pause is there until it ends by the database's clock.
    assert.deepEqual((await queue.paused()).map((pause) => pause.queue), ["default"]);
    assert.deepEqual((await onTime.paused()).map((pause) => pause.queue), ["default"]);
  },
});

Deno.test({
  name:
    "PostgreSQL: an admin whose clock is 30 s ahead sees a running job's lease by the database's clock when it cancels, and a chain's catch is due by it",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({ store: test.store, jobs: [slow, link], clock: ahead });
    const started = nextEvent(queue, "job:start", () => true, 20_000);
    // A lease shorter than the skew: the admin's clock would have it run out long ago.
    const worker = queue.work({ concurrency: 1, pollMs: 20, leaseMs: 10_000 });
    try {
      const id = await queue.dispatch(slow, null);
      await started;
      const outcome = await queue.cancel(id);
      console.log(`clock skew: admin ${SKEW_MS / 1000} s ahead cancels a running job: ${outcome}`);
      assert.equal(outcome, "cancelling");
    } finally {
      await worker.stop();
    }
    // A chain whose first link has not started: cancelling it queues the chain's catch.
    const first = await queue.chain({ queue: "skew-idle" }).then(link, null)
      .catch(link, null, { queue: "skew-catch" }).dispatch();
    assert.equal(await queue.cancel(first), "cancelled");
    const dueInMs = await timeOf(queue, "SELECT available_at AS t FROM jobs WHERE queue = $1", [
      "skew-catch",
    ]) - await dbNow(queue);
    console.log(`clock skew: the cancelled chain's catch is due ${dueInMs} ms after the db's now`);
    assert.ok(dueInMs <= 0 && dueInMs > -5_000, `due ${dueInMs} ms from the database's now`);
  },
});

Deno.test({
  name:
    "PostgreSQL: an idle worker whose clock is 30 s ahead wakes for a delayed job when it is due, not at its next poll",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({ store: test.store, jobs: [delayed], clock: ahead });
    // A poll far longer than the deadline below: only the early wake-up can start the job in time.
    const worker = queue.work({ concurrency: 1, pollMs: 120_000 });
    try {
      // One job due now first: once it ran, the worker is up and listens for dispatches (a
      // dispatch before its LISTEN would leave it asleep until its poll, whatever its clock).
      const warm = nextEvent(queue, "job:complete", () => true, 30_000);
      await queue.dispatch(delayed, null);
      await warm;
      const started = nextEvent(queue, "job:start", () => true, 30_000);
      const id = await queue.dispatch(delayed, null, { delayMs: 2_000 });
      const dueAt = await timeOf(queue, "SELECT available_at AS t FROM jobs WHERE id = $1", [id]);
      await started;
      const late = await dbNow(queue) - dueAt;
      console.log(
        `clock skew: idle worker ${
          SKEW_MS / 1000
        } s ahead started a job ${late} ms after its due time`,
      );
      assert.ok(late >= 0, `started ${-late} ms before it was due`);
    } finally {
      await worker.stop();
    }
  },
});

Deno.test({
  name:
    "PostgreSQL: a worker whose clock is 30 s ahead renews its leases for leaseMs from the database's now",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({ store: test.store, jobs: [slow], clock: ahead });
    const started = nextEvent(queue, "job:start", () => true, 20_000);
    const worker = queue.work({ concurrency: 1, pollMs: 20, leaseMs: 3_000 });
    try {
      const id = await queue.dispatch(slow, null);
      await started;
      const read = () => timeOf(queue, "SELECT available_at AS t FROM jobs WHERE id = $1", [id]);
      const claimed = await read();
      // Renewed every third of the lease: wait for the first renewal to land.
      const deadline = Date.now() + 20_000;
      let renewed = claimed;
      while (renewed === claimed && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        renewed = await read();
      }
      assert.notEqual(renewed, claimed, "the lease was renewed");
      const leftMs = renewed - await dbNow(queue);
      console.log(
        `clock skew: worker ${SKEW_MS / 1000} s ahead, lease 3 s: renewed to ${leftMs} ms after ` +
          `the database's now`,
      );
      assert.ok(leftMs <= 3_000 && leftMs > 0, `lease runs ${leftMs} ms more`);
    } finally {
      await worker.stop();
    }
  },
});

Deno.test({
  name:
    "PostgreSQL: an admin whose clock is 30 s ahead counts and lists delayed and running jobs by the database's clock",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({
      store: test.store,
      jobs: [delayed, slow],
      clock: ahead,
    });
    await queue.dispatch(delayed, null, { delayMs: 10_000, queue: "skew-later" });
    const started = nextEvent(queue, "job:start", () => true, 20_000);
    const worker = queue.work({ concurrency: 1, pollMs: 20, leaseMs: 10_000 });
    try {
      await queue.dispatch(slow, null);
      await started;
      const counts = await queue.counts();
      console.log(`clock skew: admin ${SKEW_MS / 1000} s ahead counts ${JSON.stringify(counts)}`);
      assert.equal(counts["skew-later"]?.delayed, 1);
      assert.equal(counts["skew-later"]?.pending, 0);
      assert.equal(counts.default?.reserved, 1);
      assert.equal(counts.default?.pending, 0);
      assert.equal(counts.default?.running.length, 1, "its lease is live");
      const listed = await queue.jobs();
      assert.deepEqual(listed.jobs.map((job) => job.state).sort(), ["delayed", "running"]);
    } finally {
      await worker.stop();
    }
  },
});

Deno.test({
  name:
    "PostgreSQL: a worker whose clock is 30 s ahead fires a schedule's slots by the database's clock",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    const every = defineSchedule({ name: "skew-every", everyMs: 2_000, job: link, payload: null });
    await using queue = await Queue.open({ store: test.store, jobs: [link, every], clock: ahead });
    const worker = queue.work({ concurrency: 1, pollMs: 20 });
    try {
      const deadline = Date.now() + 20_000;
      let fired: { slot: number; fired_at: number } | undefined;
      while (fired === undefined && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        [fired] = await queue.transaction((tx) =>
          tx.query<{ slot: number; fired_at: number }>(
            "SELECT slot, fired_at FROM schedule_runs ORDER BY slot LIMIT 1",
          )
        );
      }
      assert.ok(fired !== undefined, "a slot fired");
      const firedAfterSlot = Number(fired.fired_at) - Number(fired.slot);
      const firedAgo = await dbNow(queue) - Number(fired.fired_at);
      console.log(
        `clock skew: worker ${SKEW_MS / 1000} s ahead fired a slot ${firedAfterSlot} ms after it ` +
          `came, ${firedAgo} ms before the database's now`,
      );
      // The worker's clock would fire slots up to 30 s before the database's clock reaches them.
      assert.ok(firedAfterSlot >= 0 && firedAfterSlot < 10_000, `${firedAfterSlot} ms after`);
      assert.ok(firedAgo >= 0 && firedAgo < 10_000, `fired ${firedAgo} ms ago`);
    } finally {
      await worker.stop();
    }
  },
});

Deno.test({
  name:
    "PostgreSQL: an admin whose clock is 30 s ahead cancels a batch or clears its queue, and the batch's finally callback is due by the database's clock",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({ store: test.store, jobs: [link], clock: ahead });
    for (const end of ["cancelBatch", "clear"] as const) {
      // Members on a queue no worker works; the callback on its own, to be read where it waits.
      const id = await queue.batch(`skew-${end}`).push(link, null, { queue: `skew-${end}` })
        .finally(link, null, { queue: `skew-${end}-finally` }).dispatch();
      if (end === "cancelBatch") assert.equal(await queue.cancelBatch(id), true);
      else assert.equal(await queue.clear(`skew-${end}`), 1);
      const dueInMs = await timeOf(queue, "SELECT available_at AS t FROM jobs WHERE queue = $1", [
        `skew-${end}-finally`,
      ]) - await dbNow(queue);
      console.log(
        `clock skew: admin ${SKEW_MS / 1000} s ahead, ${end}(): the batch's finally is due ` +
          `${dueInMs} ms after the database's now`,
      );
      assert.ok(dueInMs <= 0 && dueInMs > -5_000, `due ${dueInMs} ms from the database's now`);
    }
  },
});

const expiring = defineJob({
  name: "skew.expiring",
  schema: z.null(),
  expireInMs: 10_000,
  handle() {},
});

Deno.test({
  name:
    "PostgreSQL: a worker whose clock is 30 s ahead runs a job within its expireInMs by the database's clock",
  ignore: url === null,
  async fn() {
    await using test = await openTestPostgresStore(url!);
    await using queue = await Queue.open({ store: test.store, jobs: [expiring], clock: ahead });
    const id = await queue.dispatch(expiring, null);
    const worker = queue.work({ concurrency: 1, pollMs: 20, stopWhenEmpty: true });
    await worker.done;
    // By the worker's clock the job expired 20 s before it was claimed; by the store's it had 10 s.
    assert.equal((await queue.result(id))?.state, "completed");
  },
});
