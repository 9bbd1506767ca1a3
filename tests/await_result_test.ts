/**
 * Waiting for results: one registry per queue serves every waiter of the
 * process, whether the job runs here or in another process, on every store.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { Queue } from "../mod.ts";
import { ResultWaiters } from "../src/admin/await_result.ts";
import { QueueEventTarget } from "../src/events.ts";
import { ChildScript } from "./_child.ts";
import { tempDir, waitUntil, within } from "./_helpers.ts";
import { openTestPostgresStore, postgresTestUrl } from "./_postgres.ts";
import { openTestRedisStore, redisTestUrl } from "./_redis.ts";
import { storeTest } from "./_stores.ts";
import { add } from "./fixtures/job_control/jobs.ts";

storeTest("ResultWaiters reads the results of many waits in one statement", async (db) => {
  const queue = await db.open({ jobs: [add] });
  const count = 500;
  const ids = await queue.dispatchMany(
    add,
    Array.from({ length: count }, (_, n) => ({ a: n, b: 1 })),
  );
  await queue.drain({ concurrency: 8 });
  const store = await db.store();
  const reads: number[] = [];
  const waiters = new ResultWaiters({
    store: {
      results(ids, now) {
        reads.push(ids.length);
        return store.results(ids, now);
      },
      watch: (listener) => store.watch(listener),
    },
    clock: { now: () => Date.now() },
    events: new QueueEventTarget(),
  });
  const rows = await within(
    Promise.all(ids.map((id) => waiters.wait(id, undefined, undefined))),
    60_000,
    "the results",
  );
  assert.deepEqual(
    rows.map((row) => [row.state, JSON.parse(row.output!).sum]),
    ids.map((_, n) => ["completed", n + 1]),
  );
  assert.deepEqual(reads, [count]);
});

storeTest(
  "dispatchAndWait() in a process that only dispatches resolves when this process works the jobs",
  async (db) => {
    const queue = await db.open({ jobs: [add] });
    const worker = queue.work({ executor: "isolate", concurrency: 4 });
    const count = 300;
    await using child = new ChildScript(
      new URL("./fixtures/job_control/waiter_child.ts", import.meta.url),
      [String(count), ...await db.childArgs()],
    );
    await child.line("ready", 60_000);
    const line = await child.line("resolved ", 120_000);
    // Outputs n + 1 for n in 0..count-1.
    assert.equal(line, `resolved ${count} ${count * (count + 1) / 2}`);
    assert.equal((await child.status).code, 0);
    await worker.stop();
  },
);

storeTest(
  "dispatchAndWait() rejects once its queue closes (a closed store never answers again), not at its timeout",
  async (db) => {
    const queue = await db.open({ jobs: [add] });
    const waiting = queue.dispatchAndWait(add, { a: 1, b: 2 }, { timeoutMs: 120_000 });
    const settled = waiting.then(() => null, (error: Error) => error);
    await queue.close();
    const error = await within(settled, 30_000, "the wait's end after close");
    assert.ok(error instanceof Error, "the wait resolved with no worker running");
    assert.match(error.message, /closed/);
  },
);

storeTest(
  "A wait on a job that completed but whose kept history was pruned rejects saying it may have completed",
  async (db) => {
    const queue = await db.open({ jobs: [add] });
    const id = await queue.dispatch(add, { a: 1, b: 2 });
    await queue.drain();
    assert.equal((await queue.result(id))?.state, "completed");
    assert.equal(await queue.pruneFinished({ olderThanMs: 0 }), 1);
    const store = await db.store();
    const waiters = new ResultWaiters({
      store,
      clock: { now: () => Date.now() },
      events: new QueueEventTarget(),
    });
    const error = await within(
      waiters.wait(id, undefined, undefined).then(() => null, (error: Error) => error),
      60_000,
      "the wait's end",
    );
    assert.ok(error instanceof Error, "the wait resolved on a job no longer stored");
    assert.match(error.message, new RegExp(`^Job ${id} is no longer stored`));
    assert.match(error.message, /may have completed/);
    assert.match(error.message, /pruneFinished/);
  },
);

storeTest(
  "ResultWaiters: a sweep held up for seconds (a stalled server, a lock) keeps the waits blind for at most a second after it, not nine times as long as it took",
  async (db) => {
    const queue = await db.open({ jobs: [add] });
    const id = await queue.dispatch(add, { a: 2, b: 3 });
    const store = await db.store();
    let stallNext = false;
    const waiters = new ResultWaiters({
      store: {
        async results(ids, now) {
          const rows = await store.results(ids, now);
          if (stallNext) {
            // This read saw the job pending, and answers 5 s later: a read held up on its way.
            stallNext = false;
            await new Promise((resolve) => setTimeout(resolve, 5_000));
          }
          return rows;
        },
        watch: (listener) => store.watch(listener),
      },
      clock: { now: () => Date.now() },
      events: new QueueEventTarget(),
    });
    const waiting = waiters.wait(id, 30_000, undefined).then(
      (row) => row,
      (error: Error) => error,
    );
    // The first read (of the new wait) is done; the next, the once-a-second sweep, is held up.
    await new Promise((resolve) => setTimeout(resolve, 300));
    stallNext = true;
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await queue.drain();
    assert.equal((await queue.result(id))?.state, "completed");
    const row = await within(waiting, 60_000, "the wait's end");
    assert.ok(!(row instanceof Error), `the wait ended with ${row}, though its job completed`);
    assert.deepEqual([row.state, JSON.parse(row.output!).sum], ["completed", 5]);
  },
);

Deno.test("dispatchAndWait(): an abort while its dispatch is held up (the file locked by another connection) rejects at once, as fetch() does; the job is stored once the lock goes", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [add] });
  const other = new DatabaseSync(tmp.dbPath);
  other.exec("BEGIN IMMEDIATE");
  let locked = true;
  try {
    const controller = new AbortController();
    const waiting = queue.dispatchAndWait(add, { a: 1, b: 1 }, { signal: controller.signal })
      .then(() => null, (error: unknown) => ({ error, locked }));
    controller.abort(new Error("the caller gave up"));
    const ended = await within(waiting, 20_000, "the wait's end while the file is locked");
    assert.ok(ended !== null, "the wait resolved");
    assert.equal(ended.locked, true, "it ended while the dispatch was held up");
    assert.match(String(ended.error), /the caller gave up/);
  } finally {
    other.exec("COMMIT");
    locked = false;
    other.close();
  }
  await waitUntil(async () => (await queue.counts()).default?.pending === 1, {
    what: "the job dispatched before the abort stored",
  });
});

const postgresUrl = postgresTestUrl();
const redisUrl = redisTestUrl();

/**
 * A watch that starts listening (LISTEN, SUBSCRIBE) some ms after it is
 * asked for misses a wake-up sent meanwhile: a fresh queue's
 * `dispatchAndWait()` of a job another process ends at once read its end
 * only at the once-a-second sweep (8 of 20 tries on Redis). So the store
 * calls the listener once its listening takes hold, with no write at all.
 */
for (
  const [name, url, open] of [
    ["PostgreSQL", postgresUrl, (url: string) => openTestPostgresStore(url)],
    ["Redis", redisUrl, (url: string) => openTestRedisStore(url)],
  ] as const
) {
  Deno.test({
    name:
      `${name}: a new watch calls its listener once it listens, so a wake-up sent before then is not missed`,
    ignore: url === null,
    async fn() {
      await using opened = await open(url!);
      let calls = 0;
      using _watching = opened.store.watch(() => calls++);
      await waitUntil(() => calls > 0, {
        what: "the listener called once the watch listens",
        timeoutMs: 30_000,
      });
    },
  });
}
