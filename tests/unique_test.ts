/**
 * Unique jobs (`uniqueForMs`, `uniqueId`, `uniqueUntil`) and debounced jobs
 * (`debounceMs`, `debounceMaxWaitMs`): what dispatch returns and stores, when
 * a key is held and released; and R12 (no key or lock left behind after any
 * outcome, a rolled-back dispatch or a kill -9), counted with the store's
 * own keys (`db.jobKeys()`, `db.jobLocks()`). On every store, but for the
 * kill -9 of a `work` process on a SQLite file.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import {
  defineJob,
  JobTimeoutError,
  PermanentError,
  Queue,
  type QueueEventMap,
  withoutOverlapping,
} from "../mod.ts";
import { workUntilEmpty } from "../src/testing.ts";
import { failedCount, ManualClock, nextEvent, tempDir, unfinishedCount } from "./_helpers.ts";
import { orQueueError, type StoreContext, storeTest } from "./_stores.ts";
import { crashOnce } from "./fixtures/guards/jobs.ts";
import { count, JOBS_URL, startWork, workerStarted } from "./fixtures/guards/harness.ts";
import { openReader, waitUntil } from "./fixtures/reliability/harness.ts";
import { readLedger } from "./fixtures/reliability/ledger.ts";
import { gate, record } from "./fixtures/runner/harness.ts";

type Detail<K extends keyof QueueEventMap> = QueueEventMap[K];

const byUser = z.object({ user: z.string(), n: z.number().int() });

const seen: { user: string; n: number; attempt: number }[] = [];

/** One job per user for a minute. */
const unique = defineJob({
  name: "u.unique",
  schema: byUser,
  uniqueForMs: 60_000,
  uniqueId: ({ user }) => user,
  handle({ user, n }, ctx) {
    seen.push({ user, n, attempt: ctx.attempt });
  },
});

/** Unique, and fails for good. */
const uniqueFails = defineJob({
  name: "u.fails",
  schema: byUser,
  uniqueForMs: 60_000,
  uniqueId: ({ user }) => user,
  handle() {
    throw new PermanentError("no");
  },
});

/** Unique for 5 s (key expiry). */
const shortUnique = defineJob({
  name: "u.short",
  schema: byUser,
  uniqueForMs: 5_000,
  uniqueId: ({ user }) => user,
  handle() {},
});

/** Attempt 1 throws (backoff 1 s), attempt 2 releases itself for 500 ms, attempt 3 succeeds. */
const uniqueRetries = defineJob({
  name: "u.retries",
  schema: byUser,
  uniqueForMs: 60_000,
  uniqueId: ({ user }) => user,
  maxAttempts: 3,
  backoff: [1_000],
  jitter: 0,
  handle(_payload, ctx) {
    if (ctx.attempt === 1) throw new Error("first attempt fails");
    if (ctx.attempt === 2) ctx.release(500);
  },
});

const hold = { gate: gate() };

/** Lets the next one in as soon as it starts; its handler waits for `hold.gate`. */
const uniqueProcessing = defineJob({
  name: "u.processing",
  schema: byUser,
  uniqueForMs: 60_000,
  uniqueId: ({ user }) => user,
  uniqueUntil: "processing",
  async handle() {
    await hold.gate.promise;
  },
});

/** Default "completed"; its handler waits for `hold.gate`. */
const uniqueGated = defineJob({
  name: "u.gated",
  schema: byUser,
  uniqueForMs: 60_000,
  uniqueId: ({ user }) => user,
  async handle() {
    await hold.gate.promise;
  },
});

/** uniqueId returns a number. */
const badId = defineJob({
  name: "u.bad-id",
  schema: byUser,
  uniqueForMs: 60_000,
  uniqueId: ({ n }) => n as unknown as string,
  handle() {},
});

/** uniqueId returns 256 characters for n = 256. */
const longId = defineJob({
  name: "u.long-id",
  schema: byUser,
  uniqueForMs: 60_000,
  uniqueId: ({ n }) => "x".repeat(n),
  handle() {},
});

const debounced: { user: string; n: number }[] = [];

/** Debounced by 1 s per user, at most 2.5 s after the first dispatch. */
const debounce = defineJob({
  name: "u.debounce",
  schema: byUser,
  debounceMs: 1_000,
  debounceMaxWaitMs: 2_500,
  uniqueId: ({ user }) => user,
  handle({ user, n }) {
    debounced.push({ user, n });
  },
});

/** Debounced by 1 s, but started at the latest 200 ms after its first dispatch. */
const debounceShortCap = defineJob({
  name: "u.debounce-short-cap",
  schema: byUser,
  debounceMs: 1_000,
  debounceMaxWaitMs: 200,
  uniqueId: ({ user }) => user,
  handle() {},
});

/** Debounced by 1 s, no cap; its handler waits for `hold.gate`. */
const debounceGated = defineJob({
  name: "u.debounce-gated",
  schema: byUser,
  debounceMs: 1_000,
  uniqueId: ({ user }) => user,
  async handle({ user, n }) {
    debounced.push({ user, n });
    await hold.gate.promise;
  },
});

// R12: unique jobs that also hold an overlap lock, one per outcome.
const r12Rules = (name: string) => () => [withoutOverlapping(name, { releaseAfterMs: 20 })];

const r12Ok = defineJob({
  name: "r12.ok",
  schema: byUser,
  uniqueForMs: 60_000,
  middleware: r12Rules("r12.ok"),
  handle() {},
});

const r12Permanent = defineJob({
  name: "r12.permanent",
  schema: byUser,
  uniqueForMs: 60_000,
  middleware: r12Rules("r12.permanent"),
  handle() {
    throw new PermanentError("never");
  },
});

const r12Timeout = defineJob({
  name: "r12.timeout",
  schema: byUser,
  uniqueForMs: 60_000,
  timeoutMs: 50,
  maxAttempts: 1,
  middleware: r12Rules("r12.timeout"),
  async handle(_payload, ctx) {
    // Returns once aborted, so nothing keeps running after the test.
    await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
  },
});

const r12Retry = defineJob({
  name: "r12.retry",
  schema: byUser,
  uniqueForMs: 60_000,
  maxAttempts: 3,
  backoff: [0],
  jitter: 0,
  middleware: r12Rules("r12.retry"),
  handle(_payload, ctx) {
    if (ctx.attempt < 3) throw new Error(`attempt ${ctx.attempt} fails`);
  },
});

const ALL = [
  unique,
  uniqueFails,
  shortUnique,
  uniqueRetries,
  uniqueProcessing,
  uniqueGated,
  badId,
  longId,
  debounce,
  debounceGated,
  debounceShortCap,
  r12Ok,
  r12Permanent,
  r12Timeout,
  r12Retry,
];

async function open(db: StoreContext, clock = new ManualClock()) {
  const queue = await db.open({ jobs: ALL, clock });
  return { queue, clock };
}

/** The payload job `id` waits with, parsed. */
async function payloadOf(queue: Queue, id: number): Promise<{ user: string; n: number }> {
  const job = await queue.unfinishedJob(id);
  assert.ok(job, `job ${id} is unfinished`);
  return JSON.parse(job.payload);
}

/** When job `id` is due, in ms. */
async function dueAt(queue: Queue, id: number): Promise<number> {
  const job = (await queue.jobs({ limit: 1000 })).jobs.find((job) => job.id === id);
  assert.ok(job, `job ${id} is unfinished`);
  return job.availableAt.getTime();
}

/** How many unique and debounce keys the store keeps. */
async function keyCount(db: StoreContext): Promise<number> {
  return (await db.jobKeys()).length;
}

storeTest(
  "a unique dispatch while the holder waits returns the holder's id, stores nothing and sends no job:queued",
  async (db) => {
    const { queue, clock } = await open(db);
    await using _ = queue;
    const queued = record<Detail<"job:queued">>(queue, "job:queued");

    const first = await queue.dispatch(unique, { user: "ann", n: 1 });
    const again = await queue.dispatch(unique, { user: "ann", n: 2 });
    assert.equal(again, first);
    assert.equal(await unfinishedCount(queue), 1);
    assert.deepEqual(queued.map((event) => event.id), [first]);
    assert.equal(
      (await payloadOf(queue, first)).n,
      1,
      "the holder keeps its payload",
    );
    assert.deepEqual(await db.jobKeys(), [{
      key: JSON.stringify(["u.unique", "ann"]),
      kind: "unique",
      jobId: first,
      expiresAt: clock.now() + 60_000,
    }]);

    const other = await queue.dispatch(unique, { user: "bob", n: 3 });
    assert.notEqual(other, first);
    assert.equal(await unfinishedCount(queue), 2);
    assert.equal(await keyCount(db), 2);
    assert.deepEqual(queued.map((event) => event.id), [first, other]);
  },
);

storeTest("a unique job lets the next dispatch store once it has completed", async (db) => {
  const { queue } = await open(db);
  await using _ = queue;
  seen.length = 0;

  const first = await queue.dispatch(unique, { user: "ann", n: 1 });
  assert.equal(await queue.dispatch(unique, { user: "ann", n: 2 }), first);
  assert.deepEqual(await workUntilEmpty(queue), { completed: 1, failed: 0, retried: 0 });
  assert.deepEqual(seen, [{ user: "ann", n: 1, attempt: 1 }]);
  assert.equal(await keyCount(db), 0);

  const next = await queue.dispatch(unique, { user: "ann", n: 3 });
  assert.notEqual(next, first);
  assert.equal(await unfinishedCount(queue), 1);
  assert.equal((await db.jobKeys())[0]?.jobId, next);
});

storeTest(
  "a unique job lets the next dispatch store once it has failed for good",
  async (db) => {
    const { queue } = await open(db);
    await using _ = queue;

    const first = await queue.dispatch(uniqueFails, { user: "ann", n: 1 });
    assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 1, retried: 0 });
    assert.equal(await failedCount(queue), 1);
    assert.equal(await keyCount(db), 0);
    const next = await queue.dispatch(uniqueFails, { user: "ann", n: 2 });
    assert.notEqual(next, first);
    assert.equal(await unfinishedCount(queue), 1);
  },
);

storeTest(
  "a unique job retried from the failed jobs comes back without its key, as Laravel's queue:retry: a dispatch of its uniqueId stores a new job beside it",
  async (db) => {
    const { queue } = await open(db);
    await using _ = queue;

    const first = await queue.dispatch(uniqueFails, { user: "ann", n: 1 });
    assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 1, retried: 0 });
    assert.equal(await queue.retry(first), true);
    assert.equal(await keyCount(db), 0, "the retried job holds no key");
    const next = await queue.dispatch(uniqueFails, { user: "ann", n: 2 });
    assert.notEqual(next, first);
    assert.equal(await unfinishedCount(queue), 2);
    assert.equal(
      await queue.dispatch(uniqueFails, { user: "ann", n: 3 }),
      next,
      "the new one holds it",
    );
  },
);

storeTest(
  "a unique key expires uniqueForMs after its dispatch, and the old holder's end leaves the new key alone",
  async (db) => {
    const { queue, clock } = await open(db);
    await using _ = queue;

    const first = await queue.dispatch(shortUnique, { user: "ann", n: 1 });
    clock.advance(4_999);
    assert.equal(await queue.dispatch(shortUnique, { user: "ann", n: 2 }), first);
    assert.equal(await unfinishedCount(queue), 1);
    clock.advance(1);
    const second = await queue.dispatch(shortUnique, { user: "ann", n: 3 });
    assert.notEqual(second, first, "the key expired at dispatch + uniqueForMs");
    assert.equal(await unfinishedCount(queue), 2);
    assert.deepEqual((await db.jobKeys()).map((row) => [row.jobId, row.expiresAt]), [
      [second, clock.now() + 5_000],
    ]);

    // Both run; the first one's settle must not release the key the second holds.
    assert.deepEqual(await workUntilEmpty(queue, { concurrency: 1 }), {
      completed: 2,
      failed: 0,
      retried: 0,
    });
    assert.equal(await keyCount(db), 0);
    const third = await queue.dispatch(shortUnique, { user: "ann", n: 4 });
    assert.equal(await queue.dispatch(shortUnique, { user: "ann", n: 5 }), third);
  },
);

storeTest(
  "a unique job holds its key across a retry and a release with backoff",
  async (db) => {
    const { queue, clock } = await open(db);
    await using _ = queue;
    const queued = record<Detail<"job:queued">>(queue, "job:queued");
    const retries = record<Detail<"job:retry">>(queue, "job:retry");

    const first = await queue.dispatch(uniqueRetries, { user: "ann", n: 1 });
    assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 0, retried: 1 });
    assert.equal(await keyCount(db), 1);
    assert.equal(await queue.dispatch(uniqueRetries, { user: "ann", n: 2 }), first);

    clock.advance(1_000);
    assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 0, retried: 1 });
    assert.equal(retries[1]?.delayMs, 500, "attempt 2 released itself for 500 ms");
    assert.equal(await keyCount(db), 1);
    assert.equal(await queue.dispatch(uniqueRetries, { user: "ann", n: 3 }), first);
    assert.equal(await unfinishedCount(queue), 1);

    clock.advance(500);
    assert.deepEqual(await workUntilEmpty(queue), { completed: 1, failed: 0, retried: 0 });
    assert.equal(await keyCount(db), 0);
    const next = await queue.dispatch(uniqueRetries, { user: "ann", n: 4 });
    assert.notEqual(next, first);
    assert.deepEqual(queued.map((event) => event.id), [first, next]);
  },
);

storeTest(
  'a unique job with uniqueUntil "completed" holds its key while it runs',
  async (db) => {
    const { queue } = await open(db);
    await using _ = queue;
    hold.gate = gate();

    const first = await queue.dispatch(uniqueGated, { user: "ann", n: 1 });
    const worker = queue.work({ pollMs: 10 });
    await nextEvent<Detail<"job:start">>(queue, "job:start", (event) => event.id === first);
    assert.equal(await keyCount(db), 1);
    assert.equal(await queue.dispatch(uniqueGated, { user: "ann", n: 2 }), first);
    assert.equal(await unfinishedCount(queue), 1);
    hold.gate.resolve();
    await nextEvent(queue, "job:complete");
    await worker.stop();
    assert.equal(await keyCount(db), 0);
  },
);

storeTest(
  'a unique job with uniqueUntil "processing" releases its key when it is claimed',
  async (db) => {
    const { queue } = await open(db);
    await using _ = queue;
    hold.gate = gate();

    const first = await queue.dispatch(uniqueProcessing, { user: "ann", n: 1 });
    assert.equal(await queue.dispatch(uniqueProcessing, { user: "ann", n: 2 }), first);
    const worker = queue.work({ pollMs: 10, concurrency: 1 });
    await nextEvent<Detail<"job:start">>(queue, "job:start", (event) => event.id === first);
    assert.equal(await keyCount(db), 0, "released in the claim");

    const second = await queue.dispatch(uniqueProcessing, { user: "ann", n: 3 });
    assert.notEqual(second, first);
    assert.equal(await queue.dispatch(uniqueProcessing, { user: "ann", n: 4 }), second);
    assert.equal(await unfinishedCount(queue), 2);
    assert.deepEqual((await db.jobKeys()).map((row) => row.jobId), [second]);

    hold.gate.resolve();
    await nextEvent<Detail<"job:complete">>(queue, "job:complete", (event) => event.id === second);
    await worker.stop();
    assert.equal(await keyCount(db), 0);
    assert.equal(await unfinishedCount(queue), 0);
  },
);

storeTest(
  "dispatchMany with the same uniqueId twice in one call stores it once and returns its id for both",
  async (db) => {
    const { queue } = await open(db);
    await using _ = queue;
    const queued = record<Detail<"job:queued">>(queue, "job:queued");

    const ids = await queue.dispatchMany(unique, [
      { user: "ann", n: 1 },
      { user: "bob", n: 2 },
      { user: "ann", n: 3 },
    ]);
    assert.equal(ids.length, 3);
    assert.equal(ids[2], ids[0]);
    assert.notEqual(ids[1], ids[0]);
    assert.equal(await unfinishedCount(queue), 2);
    assert.equal(await keyCount(db), 2);
    assert.deepEqual(queued.map((event) => event.id), [ids[0], ids[1]]);
    assert.equal((await payloadOf(queue, ids[0]!)).n, 1);
  },
);

storeTest(
  "a unique tx.dispatch rolled back leaves no job and no key; committed, it holds the key",
  async (db) => {
    const { queue } = await open(db);
    await using _ = queue;

    let inside: [number, number] | undefined;
    await assert.rejects(
      queue.transaction(async (tx) => {
        const a = await tx.dispatch(unique, { user: "ann", n: 1 });
        const b = await tx.dispatch(unique, { user: "ann", n: 2 });
        inside = [a, b];
        throw new Error("roll back");
      }),
      /roll back/,
    );
    assert.equal(inside?.[1], inside?.[0], "held within the transaction");
    assert.equal(await unfinishedCount(queue), 0);
    assert.equal(await keyCount(db), 0);

    const committed = await queue.transaction((tx) => tx.dispatch(unique, { user: "ann", n: 3 }));
    assert.equal(await keyCount(db), 1);
    assert.equal(await queue.dispatch(unique, { user: "ann", n: 4 }), committed);
  },
);

storeTest("queue.clear() releases the unique keys of the jobs it deletes", async (db) => {
  const { queue } = await open(db);
  await using _ = queue;

  const first = await queue.dispatch(unique, { user: "ann", n: 1 });
  assert.equal(await queue.clear(), 1);
  assert.equal(await keyCount(db), 0);
  const next = await queue.dispatch(unique, { user: "ann", n: 2 });
  assert.notEqual(next, first);
  assert.equal(await unfinishedCount(queue), 1);
});

storeTest(
  "a uniqueId that returns a non-string or more than 255 characters is a TypeError, and nothing is stored",
  async (db) => {
    const { queue } = await open(db);
    await using _ = queue;

    await assert.rejects(
      queue.dispatch(badId, { user: "ann", n: 7 }),
      (error: Error) =>
        error instanceof TypeError &&
        /"u\.bad-id".*uniqueId must return a string/.test(error.message),
    );
    await assert.rejects(
      queue.dispatchMany(longId, [{ user: "ann", n: 255 }, { user: "bob", n: 256 }]),
      (error: Error) =>
        error instanceof TypeError && /uniqueId .*at most 255 characters.*256/.test(error.message),
    );
    assert.equal(await unfinishedCount(queue), 0);
    assert.equal(await keyCount(db), 0);
    // 255 characters is fine.
    await queue.dispatch(longId, { user: "ann", n: 255 });
    assert.equal(await keyCount(db), 1);
  },
);

Deno.test("defineJob refuses unique with debounce, debounceMaxWaitMs without debounceMs, and a bad uniqueUntil or duration", () => {
  const base = { schema: byUser, handle() {} };
  assert.throws(
    () => defineJob({ ...base, name: "x1", uniqueForMs: 1_000, debounceMs: 1_000 }),
    (error: Error) =>
      error instanceof TypeError && /"x1".*unique \(uniqueForMs\) or debounced/.test(error.message),
  );
  assert.throws(
    () => defineJob({ ...base, name: "x2", debounceMaxWaitMs: 1_000 }),
    (error: Error) =>
      error instanceof TypeError && /"x2".*debounceMaxWaitMs needs debounceMs/.test(error.message),
  );
  assert.throws(
    () =>
      defineJob({
        ...base,
        name: "x3",
        uniqueForMs: 1_000,
        uniqueUntil: "started" as "completed",
      }),
    (error: Error) => error instanceof TypeError && /"x3".*uniqueUntil must be/.test(error.message),
  );
  assert.throws(
    () => defineJob({ ...base, name: "x4", uniqueForMs: 0 }),
    (error: Error) => error instanceof RangeError && /"x4".*uniqueForMs/.test(error.message),
  );
  assert.throws(
    () => defineJob({ ...base, name: "x5", debounceMs: -5 }),
    (error: Error) => error instanceof RangeError && /"x5".*debounceMs/.test(error.message),
  );
  assert.throws(
    () => defineJob({ ...base, name: "x6", uniqueForMs: 1_000, uniqueId: "user" as never }),
    (error: Error) =>
      error instanceof TypeError && /"x6".*uniqueId must be a function/.test(error.message),
  );
});

storeTest(
  "a debounced dispatch returns the waiting job's id, replaces its payload and moves its due time; the handler runs once with the last payload",
  async (db) => {
    const { queue, clock } = await open(db);
    await using _ = queue;
    const queued = record<Detail<"job:queued">>(queue, "job:queued");
    debounced.length = 0;

    const first = await queue.dispatch(debounce, { user: "ann", n: 1 });
    assert.equal(await dueAt(queue, first), clock.now() + 1_000);
    clock.advance(300);
    assert.equal(await queue.dispatch(debounce, { user: "ann", n: 2 }), first);
    clock.advance(300);
    assert.equal(await queue.dispatch(debounce, { user: "ann", n: 3 }), first);
    assert.equal(
      await dueAt(queue, first),
      clock.now() + 1_000,
      "due debounceMs after the last dispatch",
    );
    assert.deepEqual(await payloadOf(queue, first), { user: "ann", n: 3 });
    assert.equal(await unfinishedCount(queue), 1);
    assert.deepEqual(queued.map((event) => event.id), [first]);

    clock.advance(999);
    assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 0, retried: 0 });
    clock.advance(1);
    assert.deepEqual(await workUntilEmpty(queue), { completed: 1, failed: 0, retried: 0 });
    assert.deepEqual(debounced, [{ user: "ann", n: 3 }]);
    assert.equal(await keyCount(db), 0);
  },
);

storeTest(
  "a debounced job's due time is capped at debounceMaxWaitMs after its first dispatch",
  async (db) => {
    const { queue, clock } = await open(db);
    await using _ = queue;
    const t0 = clock.now();

    const id = await queue.dispatch(debounce, { user: "ann", n: 1 });
    clock.advance(800);
    await queue.dispatch(debounce, { user: "ann", n: 2 });
    assert.equal(await dueAt(queue, id), t0 + 1_800);
    clock.advance(800); // t0 + 1600: now + 1000 = 2600 > cap 2500
    assert.equal(await queue.dispatch(debounce, { user: "ann", n: 3 }), id);
    assert.equal(await dueAt(queue, id), t0 + 2_500);
    clock.advance(800); // t0 + 2400
    assert.equal(await queue.dispatch(debounce, { user: "ann", n: 4 }), id);
    assert.equal(await dueAt(queue, id), t0 + 2_500);
    assert.equal(await unfinishedCount(queue), 1);
    // Another user has its own key and its own due time.
    const other = await queue.dispatch(debounce, { user: "bob", n: 5 });
    assert.notEqual(other, id);
    assert.equal(await dueAt(queue, other), clock.now() + 1_000);
  },
);

storeTest(
  "a debounced job's first dispatch is capped at debounceMaxWaitMs too: alone it is due no later than with a second dispatch",
  async (db) => {
    const { queue, clock } = await open(db);
    await using _ = queue;
    const t0 = clock.now();
    // A max wait shorter than the debounce: the first dispatch alone is due at the cap.
    const shortCap = await queue.dispatch(debounceShortCap, { user: "ann", n: 1 });
    assert.equal(await dueAt(queue, shortCap), t0 + 200);
    // A delay past the max wait: the cap counts from the first dispatch, as for a second one.
    const delayed = await queue.dispatch(debounce, { user: "ann", n: 1 }, { delayMs: 3_000 });
    assert.equal(await dueAt(queue, delayed), t0 + 2_500);
    clock.advance(100);
    assert.equal(
      await queue.dispatch(debounce, { user: "ann", n: 2 }, { delayMs: 3_000 }),
      delayed,
    );
    assert.equal(await dueAt(queue, delayed), t0 + 2_500);
  },
);

storeTest("a dispatch after the debounced job started stores a new job", async (db) => {
  const { queue, clock } = await open(db);
  await using _ = queue;
  debounced.length = 0;
  hold.gate = gate();

  const first = await queue.dispatch(debounceGated, { user: "ann", n: 1 });
  clock.advance(1_000);
  const worker = queue.work({ pollMs: 10, concurrency: 1 });
  await nextEvent<Detail<"job:start">>(queue, "job:start", (event) => event.id === first);
  const second = await queue.dispatch(debounceGated, { user: "ann", n: 2 });
  assert.notEqual(second, first);
  assert.equal(await unfinishedCount(queue), 2);
  assert.equal(
    (await payloadOf(queue, first)).n,
    1,
    "the running job keeps its payload",
  );
  assert.equal(await queue.dispatch(debounceGated, { user: "ann", n: 3 }), second);

  hold.gate.resolve();
  await nextEvent<Detail<"job:complete">>(queue, "job:complete", (event) => event.id === first);
  clock.advance(1_000);
  await nextEvent<Detail<"job:complete">>(queue, "job:complete", (event) => event.id === second);
  await worker.stop();
  assert.deepEqual(debounced, [{ user: "ann", n: 1 }, { user: "ann", n: 3 }]);
  assert.equal(await keyCount(db), 0);
});

// R12: zero orphaned keys and locks.

async function r12(
  db: StoreContext,
  job: typeof r12Ok,
  expected: { completed: number; failed: number; retried: number },
  check: (queue: Queue) => Promise<void> = async () => {},
) {
  const queue = await db.open({ jobs: ALL });
  await using _ = queue;
  await queue.dispatch(job, { user: "ann", n: 1 });
  assert.equal(await keyCount(db), 1);
  assert.deepEqual(await orQueueError(queue, workUntilEmpty(queue)), expected);
  assert.equal(await keyCount(db), 0, "orphaned unique keys");
  assert.equal(await db.jobLocks(), 0, "orphaned overlap locks");
  await check(queue);
}

storeTest("R12: no unique key or overlap lock is left after a success", async (db) => {
  await r12(db, r12Ok, { completed: 1, failed: 0, retried: 0 });
});

storeTest("R12: no unique key or overlap lock is left after a permanent failure", async (db) => {
  await r12(db, r12Permanent, { completed: 0, failed: 1, retried: 0 }, async (queue) => {
    assert.match((await queue.failed())[0]!.error, /PermanentError: never/);
  });
});

storeTest("R12: no unique key or overlap lock is left after a final timeout", async (db) => {
  await r12(db, r12Timeout, { completed: 0, failed: 1, retried: 0 }, async (queue) => {
    const [failed] = await queue.failed();
    assert.match(failed!.error, new RegExp(JobTimeoutError.name));
  });
});

storeTest(
  "R12: no unique key or overlap lock is left after retries then success",
  async (db) => {
    await r12(db, r12Retry, { completed: 1, failed: 0, retried: 2 });
  },
);

storeTest("R12: no unique key is left by a rolled-back transaction", async (db) => {
  await using queue = await db.open({ jobs: ALL });
  await assert.rejects(
    queue.transaction(async (tx) => {
      await tx.dispatchMany(r12Ok, [{ user: "a", n: 1 }, { user: "b", n: 2 }]);
      await tx.dispatch(unique, { user: "c", n: 3 });
      throw new Error("roll back");
    }),
    /roll back/,
  );
  assert.equal(await keyCount(db), 0);
  assert.equal(await unfinishedCount(queue), 0);
});

// SQLite only: the `work` child process and its ledger are on the test's SQLite file.
Deno.test("R12: after a kill -9 of the `work` process running a unique locked job, recovery after the lease leaves no key or lock", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
  using db = openReader(tmp.dbPath);
  const id = await queue.dispatch(crashOnce, { key: "one" });
  assert.equal(await queue.dispatch(crashOnce, { key: "one" }), id);

  await using child = startWork(tmp.dbPath, ["--lease-ms", "500", "--sleep-ms", "50"]);
  await workerStarted(child);
  await waitUntil("attempt 1 started", () => readLedger(db, "job_id = ?", id).length === 1);
  // A death is charged once the handler's begin is recorded (written just after it starts): the
  // kill waits for it, so the next run is attempt 2.
  await waitUntil(
    "attempt 1's begin recorded",
    () => count(db, "jobs", `id = ${id} AND begun = 1`) === 1,
  );
  assert.equal(count(db, "job_locks"), 1, "the running attempt holds its lock");
  child.kill("SIGKILL");
  assert.equal((await child.exit(10_000)).signal, "SIGKILL");
  assert.equal(count(db, "job_keys"), 1, "the dead worker's job still holds its key");
  assert.equal(await queue.dispatch(crashOnce, { key: "one" }), id);

  const worker = queue.work({ executor: "isolate", pollMs: 20, leaseMs: 500 });
  const done = await nextEvent<Detail<"job:complete">>(
    queue,
    "job:complete",
    (event) => event.id === id,
    10_000,
  );
  await worker.stop();
  assert.equal(done.attempt, 2);
  assert.equal(count(db, "jobs"), 0);
  assert.equal(count(db, "job_keys"), 0, "orphaned unique keys");
  assert.equal(count(db, "job_locks"), 0, "orphaned overlap locks");
});
