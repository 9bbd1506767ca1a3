/**
 * Hardening: names without NUL or lone surrogates, delays and priorities
 * every store keeps exactly, error text every store accepts, middleware
 * rules checked field by field, a runner that lets timers run during a busy
 * drain, builders that dispatch once, and PostgreSQL's guards (schema names,
 * unsafe bigints, the queue used inside its own transaction).
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, type JobContext } from "../src/job.ts";
import { rateLimited, withoutOverlapping } from "../src/middleware.ts";
import { Queue } from "../src/queue.ts";
import { PostgresStore } from "../src/stores/postgres.ts";
import { ManualClock, waitUntil } from "./_helpers.ts";
import { openTestPostgresStore, postgresTestUrl } from "./_postgres.ts";
import { orQueueError, storeTest } from "./_stores.ts";

/** The longest delay accepted anywhere: 100 years in ms. */
const MAX_DELAY = 3153600000000;

const noop = defineJob({ name: "noop", schema: z.number(), handle() {} });

/** Works `queue` in this isolate until nothing is due, failing on any `queue:error`. */
async function drainOnce(queue: Queue, concurrency = 8): Promise<void> {
  await orQueueError(
    queue,
    queue.work({ executor: "isolate", concurrency, stopWhenEmpty: true, pollMs: 5 }).done,
  );
}

// 1. Names

Deno.test("defineJob(), queue.batch(), withoutOverlapping() and rateLimited() refuse a name with NUL or a lone surrogate", async () => {
  for (const name of ["a\u0000b", "\uD800x", "x\uDC00"]) {
    assert.throws(
      () => defineJob({ name, schema: z.null(), handle() {} }),
      (error: Error) =>
        error instanceof TypeError &&
        /^defineJob: name .* without NUL or lone surrogates/.test(error.message),
      JSON.stringify(name),
    );
  }
  await using queue = await Queue.open({ path: ":memory:", jobs: [noop] });
  assert.throws(
    () => queue.batch("a\u0000b"),
    (error: Error) =>
      error instanceof TypeError &&
      /batch: name .* without NUL or lone surrogates/.test(error.message),
  );
  assert.throws(() => queue.batch("\uD800"), TypeError);
  assert.throws(
    () => withoutOverlapping("a\u0000b"),
    (error: Error) =>
      error instanceof TypeError && /withoutOverlapping: key .* without NUL/.test(error.message),
  );
  assert.throws(
    () => rateLimited("r\u0000", 5, 1000),
    (error: Error) =>
      error instanceof TypeError && /rateLimited: key .* without NUL/.test(error.message),
  );
  assert.equal((await queue.batches()).length, 0, "no batch stored");
  assert.equal((await queue.jobs()).total, 0, "no job stored");
});

// 2. Limits

storeTest(
  "Queue.dispatch() refuses a delayMs past 100 years and a priority past 32 bits, storing nothing",
  async (db) => {
    await using queue = await db.open({ jobs: [noop] });
    for (const delayMs of [1e300, 2 ** 63, MAX_DELAY + 1]) {
      await assert.rejects(
        queue.dispatch(noop, 1, { delayMs }),
        (error: Error) =>
          error instanceof RangeError && error.message.includes("delayMs") &&
          error.message.includes(String(MAX_DELAY)),
        `delayMs ${delayMs}`,
      );
    }
    for (const priority of [3_000_000_000, -3_000_000_000]) {
      await assert.rejects(
        queue.dispatch(noop, 1, { priority }),
        (error: Error) => error instanceof RangeError && /priority/.test(error.message),
        `priority ${priority}`,
      );
    }
    assert.equal(await db.count("jobs"), 0, "nothing stored");
    // The limits themselves are kept exactly.
    await queue.dispatch(noop, 1, { delayMs: MAX_DELAY, priority: 2_147_483_647 });
    const [row] = await db.query<{ priority: number }>("SELECT priority FROM jobs");
    assert.equal(Number(row!.priority), 2_147_483_647);
  },
);

Deno.test("ctx.release() past 100 years throws a RangeError inside the handler", async () => {
  const caught: unknown[] = [];
  const releasing = defineJob({
    name: "releasing",
    schema: z.null(),
    handle(_payload, ctx) {
      for (const delay of [1e300, Infinity, -1]) {
        try {
          ctx.release(delay);
        } catch (error) {
          caught.push(error);
        }
      }
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [releasing] });
  await queue.dispatch(releasing, null);
  await drainOnce(queue);
  assert.equal(caught.length, 3);
  for (const error of caught) {
    assert.ok(error instanceof RangeError, String(error));
    assert.match(error.message, /^ctx\.release: delayMs .*3153600000000/);
  }
  assert.equal((await queue.jobs()).total, 0, "the handler returned, so the job completed");
});

storeTest("ctx.release(1500.5) puts the job back at a whole-ms time", async (db) => {
  const clock = new ManualClock();
  const start = clock.now();
  let runs = 0;
  const releasing = defineJob({
    name: "releasing",
    schema: z.null(),
    handle(_payload, ctx: JobContext) {
      runs++;
      ctx.release(1500.5);
    },
  });
  await using queue = await db.open({ jobs: [releasing, noop], clock });
  const id = await queue.dispatch(releasing, null);
  await queue.dispatchMany(noop, [1, 2, 3]);
  await drainOnce(queue);
  assert.equal(runs, 1);
  const rows = await db.query<{ id: number; available_at: number; token: unknown }>(
    "SELECT id, available_at, token FROM jobs",
  );
  assert.equal(rows.length, 1, "the other jobs of the tick completed");
  assert.equal(Number(rows[0]!.id), id);
  assert.equal(rows[0]!.token, null, "released");
  const availableAt = Number(rows[0]!.available_at);
  assert.ok(Number.isInteger(availableAt), `available_at ${availableAt} is an integer`);
  assert.equal(availableAt, start + 1501);
});

storeTest(
  "a backoff function returning 1e19 fails its job for good with a RangeError, and the other jobs of the tick complete",
  async (db) => {
    const wild = defineJob({
      name: "wild-backoff",
      schema: z.null(),
      maxAttempts: 3,
      backoff: () => 1e19,
      handle() {
        throw new Error("boom");
      },
    });
    await using queue = await db.open({ jobs: [wild, noop] });
    await queue.dispatchMany(noop, [1, 2, 3, 4, 5]);
    const badId = await queue.dispatch(wild, null);
    const worker = queue.work({
      executor: "isolate",
      concurrency: 8,
      stopWhenEmpty: true,
      pollMs: 5,
    });
    await orQueueError(queue, worker.done);
    assert.deepEqual(worker.stats, { completed: 5, failed: 1, retried: 0 });
    assert.equal(await db.count("jobs"), 0);
    const failed = await queue.failed();
    assert.deepEqual(failed.map((job) => job.id), [badId]);
    assert.match(
      failed[0]!.error,
      /^RangeError: Backoff for attempt 1 must be a delay from 0 to 3153600000000 ms/,
    );
    assert.equal(failed[0]!.attempts, 1);
  },
);

// 3. Poison text

storeTest(
  "an error message with NUL and a lone surrogate is stored with U+FFFD, and the other jobs of the tick complete",
  async (db) => {
    const poison = defineJob({
      name: "poison",
      schema: z.null(),
      maxAttempts: 1,
      handle() {
        throw new Error("bad\u0000byte \uD800");
      },
    });
    await using queue = await db.open({ jobs: [poison, noop] });
    await queue.dispatchMany(noop, [1, 2, 3, 4, 5]);
    const id = await queue.dispatch(poison, null);
    const worker = queue.work({
      executor: "isolate",
      concurrency: 8,
      stopWhenEmpty: true,
      pollMs: 5,
    });
    await orQueueError(queue, worker.done);
    assert.deepEqual(worker.stats, { completed: 5, failed: 1, retried: 0 });
    assert.equal(await db.count("jobs"), 0);
    const failed = await queue.failedJob(id);
    assert.equal(failed?.error, "Error: bad\uFFFDbyte \uFFFD");
    assert.ok(failed?.stack !== null && failed?.stack !== undefined);
    assert.ok(!failed.stack.includes("\u0000") && failed.stack.isWellFormed(), "the stack too");
  },
);

// 4. Middleware junk

Deno.test("a hand-made middleware rule with a bad field fails the attempt, and the worker's event loop keeps running", async () => {
  const junk = defineJob({
    name: "junk-rule",
    schema: z.null(),
    maxAttempts: 1,
    middleware: () => [{ kind: "rate-limited" } as never],
    handle() {},
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [junk] });
  const id = await queue.dispatch(junk, null);
  // maxTimeMs ends a worker whose loop starves the timers, so that this test fails, not hangs.
  const worker = queue.work({ executor: "isolate", pollMs: 5, maxTimeMs: 2_000 });
  let running = true;
  worker.done.finally(() => running = false);
  const firedWhileRunning = await new Promise<boolean>((resolve) =>
    setTimeout(() => resolve(running), 20)
  );
  assert.ok(firedWhileRunning, "a timer fired while the worker ran");
  const failed = await waitUntil(() => queue.failedJob(id), {
    what: "the junk job to fail",
    timeoutMs: 3_000,
  });
  assert.match(failed.error, /^TypeError: rateLimited: key must be/);
  await worker.stop();
  assert.equal(worker.stats.failed, 1);
});

// 5. Runner yields

Deno.test("a worker busy with a long drain lets timers run", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [noop] });
  const count = 20_000;
  await queue.dispatchMany(noop, Array.from({ length: count }, (_, n) => n));
  let ticks = 0;
  const interval = setInterval(() => ticks++, 5);
  let ticksAtEnd: number;
  const worker = queue.work({
    executor: "isolate",
    concurrency: 32,
    stopWhenEmpty: true,
    pollMs: 5,
  });
  try {
    await worker.done.then(() => {
      ticksAtEnd = ticks;
    });
  } finally {
    clearInterval(interval);
  }
  assert.equal(worker.stats.completed, count);
  assert.equal((await queue.jobs()).total, 0);
  assert.ok(ticksAtEnd! > 0, "the interval ran during the drain");
});

// 6. Builders

storeTest("a batch or chain dispatched twice at once is stored once", async (db) => {
  await using queue = await db.open({ jobs: [noop] });
  const batch = queue.batch("x").push(noop, 1);
  const batchResults = await Promise.allSettled([batch.dispatch(), batch.dispatch()]);
  assert.equal(batchResults.filter((result) => result.status === "fulfilled").length, 1);
  const batchRefusals = batchResults.filter((result) => result.status === "rejected");
  assert.equal(batchRefusals.length, 1);
  assert.match(String(batchRefusals[0]!.reason), /already dispatched/);
  assert.equal(await db.count("batches"), 1);
  assert.equal(await db.count("jobs"), 1);

  const chain = queue.chain().then(noop, 2).then(noop, 3);
  const chainResults = await Promise.allSettled([chain.dispatch(), chain.dispatch()]);
  assert.equal(chainResults.filter((result) => result.status === "fulfilled").length, 1);
  const chainRefusals = chainResults.filter((result) => result.status === "rejected");
  assert.equal(chainRefusals.length, 1);
  assert.match(String(chainRefusals[0]!.reason), /already dispatched/);
  assert.equal(await db.count("jobs"), 2, "the batch's job and the chain's first link");
});

// 7. PostgreSQL only

const url = postgresTestUrl();

Deno.test({
  name:
    "PostgresStore: a bigint beyond JavaScript's safe integers is refused, and the store still works",
  ignore: url === null,
  async fn() {
    await using pg = await openTestPostgresStore(url!);
    await assert.rejects(
      pg.store.transaction((tx) => tx.query("SELECT 9007199254740993::bigint AS x")),
      (error: Error) =>
        error instanceof RangeError && /beyond JavaScript's safe integers/.test(error.message),
    );
    const rows = await pg.store.transaction((tx) =>
      tx.query<{ x: number }>("SELECT 9007199254740991::bigint AS x")
    );
    assert.deepEqual(rows.map((row) => row.x), [9007199254740991]);
  },
});

Deno.test({
  name:
    "PostgresStore: the queue used inside its own transaction callback is refused, and nothing is stored",
  ignore: url === null,
  async fn() {
    await using pg = await openTestPostgresStore(url!);
    const store = await PostgresStore.open(url!, { schema: pg.schema });
    await using queue = await Queue.open({ store, jobs: [noop] });
    await assert.rejects(
      queue.transaction(async () => {
        await queue.dispatch(noop, 1);
      }),
      /Cannot use the queue inside its own transaction callback/,
    );
    const count = async () => {
      const [row] = await pg.store.transaction((tx) =>
        tx.query<{ n: number }>("SELECT COUNT(*) AS n FROM jobs")
      );
      return Number(row!.n);
    };
    assert.equal(await count(), 0);
    await queue.transaction((tx) => tx.dispatch(noop, 2));
    await queue.dispatch(noop, 3);
    assert.equal(await count(), 2, "the tx handle and the queue outside still work");
  },
});

if (url === null) {
  console.log("PostgreSQL hardening tests skipped: QUEUE_TEST_POSTGRES_URL is not set");
}
