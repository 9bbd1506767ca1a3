/**
 * Chains: links run one after another, each queued in the transaction that
 * settles the success of the one before; a catch fires once; retry resumes
 * and forget drops. Jobs are read through the queue (`queue.jobs()`,
 * `queue.unfinishedJob()`, `queue.failed()`), and the jobs waiting for their
 * chain through `db.waitingJobs()`. Every test runs on every store.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import {
  defineJob,
  PermanentError,
  previousOutput,
  type Queue,
  type QueueEventMap,
} from "../mod.ts";
import { workUntilEmpty } from "../src/testing.ts";
import { ManualClock, nextEvent, storedCounts } from "./_helpers.ts";
import { type StoreContext, storeTest, type WaitingJobRow } from "./_stores.ts";

/** An unfinished job, as {@linkcode stored} reads it. */
interface JobRow {
  id: number;
  queue: string;
  name: string;
  payload: string;
}

/** The jobs of one test, recording what ran in `log`. */
function chainJobs() {
  const log: string[] = [];
  const failing = new Set<number>();
  /** Awaited at the start of every `step` run, to look at the tables from inside a link. */
  let onStep: (n: number) => Promise<void> = () => Promise.resolve();
  const step = defineJob({
    name: "step",
    schema: z.object({ n: z.number().int() }),
    async handle({ n }) {
      await onStep(n);
      log.push(`step ${n}`);
    },
  });
  /** Fails for good while its `n` is in `failing`. */
  const fragile = defineJob({
    name: "fragile",
    schema: z.object({ n: z.number().int() }),
    handle({ n }) {
      if (failing.has(n)) {
        log.push(`fragile ${n} failed`);
        throw new PermanentError(`fragile ${n}`);
      }
      log.push(`fragile ${n}`);
    },
  });
  /** Awaited at the start of every `flaky` run. */
  let onFlaky: (attempt: number) => Promise<void> = () => Promise.resolve();
  /** Fails its first attempt, succeeds on its second, straight away. */
  const flaky = defineJob({
    name: "flaky",
    schema: z.object({ n: z.number().int() }),
    maxAttempts: 2,
    backoff: [0],
    jitter: 0,
    async handle({ n }, ctx) {
      await onFlaky(ctx.attempt);
      log.push(`flaky ${n} attempt ${ctx.attempt}`);
      if (ctx.attempt === 1) throw new Error("first attempt fails");
    },
  });
  const cleanUp = defineJob({
    name: "clean-up",
    schema: z.object({ tag: z.string() }),
    handle({ tag }) {
      log.push(`catch ${tag}`);
    },
  });
  return {
    log,
    failing,
    step,
    fragile,
    flaky,
    cleanUp,
    jobs: [step, fragile, flaky, cleanUp],
    setOnStep(fn: (n: number) => Promise<void>) {
      onStep = fn;
    },
    setOnFlaky(fn: (attempt: number) => Promise<void>) {
      onFlaky = fn;
    },
  };
}

/** The unfinished jobs, in dispatch order, with their payloads as stored. */
async function jobRows(queue: Queue): Promise<JobRow[]> {
  const { jobs } = await queue.jobs({ limit: 1000 });
  return await Promise.all(jobs.map(async ({ id, queue: name, name: job }) => {
    const unfinished = await queue.unfinishedJob(id);
    assert.ok(unfinished, `job ${id} is unfinished`);
    return { id, queue: name, name: job, payload: unfinished.payload };
  }));
}

/** What the store holds: the unfinished jobs, the jobs waiting for their chain, and the failed jobs' ids. */
async function stored(
  db: StoreContext,
  queue: Queue,
): Promise<{ jobs: JobRow[]; held: WaitingJobRow[]; failed: number[] }> {
  return {
    jobs: await jobRows(queue),
    held: await db.waitingJobs(),
    failed: (await queue.failed({ limit: 1000 })).map((job) => job.id).sort((a, b) => a - b),
  };
}

/** What a link's row looks like, for comparing lists of rows by their payloads. */
function payloads(rows: readonly { name: string; payload: string }[]): string[] {
  return rows.map((row) => `${row.name} ${row.payload}`);
}

storeTest(
  "Queue.chain() stores only the first link in jobs; the others and the catch wait in waiting_jobs",
  async (db) => {
    const t = chainJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const id = await queue.chain()
      .then(t.step, { n: 1 })
      .then(t.step, { n: 2 })
      .then(t.step, { n: 3 })
      .catch(t.cleanUp, { tag: "a" })
      .dispatch();

    const { jobs, held, failed } = await stored(db, queue);
    assert.deepEqual(jobs, [
      { id, queue: "default", name: "step", payload: '{"n":1}' },
    ]);
    assert.deepEqual(
      held.map(({ role, chainId, name, payload }) => ({ role, chainId, name, payload })),
      [
        { role: "link", chainId: id, name: "step", payload: '{"n":2}' },
        { role: "link", chainId: id, name: "step", payload: '{"n":3}' },
        { role: "chain-catch", chainId: id, name: "clean-up", payload: '{"tag":"a"}' },
      ],
    );
    assert.deepEqual(failed, []);
    assert.deepEqual(await queue.counts(), {
      default: { pending: 1, delayed: 0, reserved: 0, failed: 0, running: [] },
    });
  },
);

storeTest(
  "a chain runs its links in order, each in jobs right after the settle of the one before, and never queues its catch on success",
  async (db) => {
    const t = chainJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const jobsNow = async () => payloads(await jobRows(queue));
    // Link n + 1 waits until the read made when link n's settle was announced has
    // been answered, so that read cannot see what link n + 1 does.
    const announced = [1, 2, 3].map(() => Promise.withResolvers<void>());
    const seenFromLinks: Record<number, string[]> = {};
    t.setOnStep(async (n) => {
      if (n > 1) await announced[n - 2]!.promise;
      seenFromLinks[n] = await jobsNow();
    });
    const seenAtSettle: string[][] = [];
    queue.addEventListener("job:complete", () => {
      const index = seenAtSettle.length;
      seenAtSettle.push([]);
      void jobsNow().then((rows) => seenAtSettle[index] = rows)
        .finally(() => announced[index]!.resolve());
    });
    const id = await queue.chain()
      .then(t.step, { n: 1 })
      .then(t.step, { n: 2 })
      .then(t.step, { n: 3 })
      .catch(t.cleanUp, { tag: "a" })
      .dispatch();

    const stats = await workUntilEmpty(queue, { executor: "isolate", concurrency: 4 });

    assert.equal(stats.completed, 3);
    assert.deepEqual(t.log, ["step 1", "step 2", "step 3"]);
    // While a link runs, it is the only job: the next one is not queued yet.
    assert.deepEqual(seenFromLinks, {
      1: ['step {"n":1}'],
      2: ['step {"n":2}'],
      3: ['step {"n":3}'],
    });
    // Once a link's settle has committed, the next link is already in jobs, and only it.
    assert.deepEqual(seenAtSettle, [['step {"n":2}'], ['step {"n":3}'], []]);
    assert.deepEqual(await stored(db, queue), { jobs: [], held: [], failed: [] });
    assert.equal(await queue.failedJob(id), null);
    assert.deepEqual(await storedCounts(queue), {});
  },
);

storeTest(
  "a chain link being retried holds the next link back until it succeeds",
  async (db) => {
    const t = chainJobs();
    await using queue = await db.open({ jobs: t.jobs });
    // The second attempt waits until the read made at the retry has been answered.
    const read = Promise.withResolvers<void>();
    t.setOnFlaky((attempt) => attempt === 2 ? read.promise : Promise.resolve());
    const atRetry: Promise<string[]>[] = [];
    queue.addEventListener("job:retry", () => {
      atRetry.push(
        jobRows(queue).then((rows) => payloads(rows))
          .finally(() => read.resolve()),
      );
    });
    await queue.chain().then(t.flaky, { n: 1 }).then(t.step, { n: 2 }).dispatch();

    const stats = await workUntilEmpty(queue, { executor: "isolate", concurrency: 2 });

    assert.deepEqual(stats, { completed: 2, failed: 0, retried: 1 });
    assert.deepEqual(t.log, ["flaky 1 attempt 1", "flaky 1 attempt 2", "step 2"]);
    assert.deepEqual(await Promise.all(atRetry), [['flaky {"n":1}']]);
  },
);

storeTest(
  "a link that fails for good stops the chain and queues every catch job once, with the link's failure naming the chain",
  async (db) => {
    const t = chainJobs();
    await using queue = await db.open({ jobs: t.jobs });
    t.failing.add(2);
    const id = await queue.chain()
      .then(t.step, { n: 1 })
      .then(t.fragile, { n: 2 })
      .then(t.step, { n: 3 })
      .catch(t.cleanUp, { tag: "a" })
      .catch(t.cleanUp, { tag: "b" })
      .dispatch();

    const stats = await workUntilEmpty(queue, { executor: "isolate", concurrency: 1 });

    assert.deepEqual(stats, { completed: 3, failed: 1, retried: 0 });
    assert.deepEqual(t.log, ["step 1", "fragile 2 failed", "catch a", "catch b"]);
    const [failed, ...others] = await queue.failed();
    assert.deepEqual(others, []);
    assert.equal(failed!.name, "fragile");
    assert.equal(failed!.chainId, id);
    assert.equal(failed!.batchId, null);
    assert.equal(failed!.error, "PermanentError: fragile 2");
    assert.equal((await queue.failedJob(failed!.id))!.chainId, id);
    const { jobs, held } = await stored(db, queue);
    assert.deepEqual(jobs, []);
    assert.deepEqual(payloads(held), ['step {"n":3}']);
    assert.equal(held[0]!.role, "link");
  },
);

storeTest(
  "Queue.retry() of the failed link resumes the chain where it stopped; a later failure does not fire the catch again",
  async (db) => {
    const t = chainJobs();
    await using queue = await db.open({ jobs: t.jobs });
    t.failing.add(2).add(4);
    const id = await queue.chain()
      .then(t.step, { n: 1 })
      .then(t.fragile, { n: 2 })
      .then(t.step, { n: 3 })
      .then(t.fragile, { n: 4 })
      .then(t.step, { n: 5 })
      .catch(t.cleanUp, { tag: "a" })
      .dispatch();
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(t.log, ["step 1", "fragile 2 failed", "catch a"]);
    const [second] = await queue.failed();

    t.failing.delete(2);
    assert.equal(await queue.retry(second!.id), true);
    assert.deepEqual((await stored(db, queue)).jobs.map((row) => row.id), [second!.id]);
    await workUntilEmpty(queue, { executor: "isolate" });

    assert.deepEqual(t.log.slice(3), ["fragile 2", "step 3", "fragile 4 failed"]);
    const [fourth, ...rest] = await queue.failed();
    assert.deepEqual(rest, []);
    assert.equal(fourth!.chainId, id);
    assert.equal(fourth!.payload, '{"n":4}');
    assert.deepEqual(payloads((await stored(db, queue)).held), ['step {"n":5}']);

    t.failing.delete(4);
    assert.equal(await queue.retry(fourth!.id), true);
    await workUntilEmpty(queue, { executor: "isolate" });

    assert.deepEqual(t.log.slice(6), ["fragile 4", "step 5"]);
    assert.equal(t.log.filter((line) => line.startsWith("catch")).length, 1);
    assert.deepEqual(await stored(db, queue), { jobs: [], held: [], failed: [] });
  },
);

storeTest("forgetting or flushing the failed link drops the rest of its chain", async (db) => {
  const t = chainJobs();
  await using queue = await db.open({ jobs: t.jobs });
  t.failing.add(1).add(2);
  const forgotten = await queue.chain()
    .then(t.fragile, { n: 1 })
    .then(t.step, { n: 10 })
    .then(t.step, { n: 11 })
    .dispatch();
  const flushed = await queue.chain()
    .then(t.fragile, { n: 2 })
    .then(t.step, { n: 20 })
    .dispatch();
  await workUntilEmpty(queue, { executor: "isolate" });
  assert.deepEqual(
    (await stored(db, queue)).held.map((row) => [row.chainId, row.payload]),
    [[forgotten, '{"n":10}'], [forgotten, '{"n":11}'], [flushed, '{"n":20}']],
  );

  assert.equal(await queue.forget(forgotten), true);
  assert.deepEqual(
    (await stored(db, queue)).held.map((row) => [row.chainId, row.payload]),
    [[flushed, '{"n":20}']],
  );
  assert.equal(await queue.flushFailed(), 1);

  assert.deepEqual(await stored(db, queue), { jobs: [], held: [], failed: [] });
  t.failing.clear();
  assert.equal(await queue.retry(forgotten), false);
  assert.equal((await workUntilEmpty(queue, { executor: "isolate" })).completed, 0);
  assert.deepEqual(t.log, ["fragile 1 failed", "fragile 2 failed"]);
});

storeTest("pruning the failed link drops the rest of its chain", async (db) => {
  const clock = new ManualClock();
  const t = chainJobs();
  await using queue = await db.open({ jobs: t.jobs, clock });
  t.failing.add(1);
  await queue.chain().then(t.fragile, { n: 1 }).then(t.step, { n: 2 }).dispatch();
  await workUntilEmpty(queue, { executor: "isolate" });
  assert.equal((await stored(db, queue)).held.length, 1);

  assert.equal(await queue.pruneFailed({ olderThanMs: 1_000 }), 0);
  assert.equal((await stored(db, queue)).held.length, 1);
  clock.advance(1_001);
  assert.equal(await queue.pruneFailed({ olderThanMs: 1_000 }), 1);

  assert.deepEqual(await stored(db, queue), { jobs: [], held: [], failed: [] });
});

storeTest(
  "Queue.chain().dispatch() refuses an empty chain, even one with a catch, and stores nothing",
  async (db) => {
    const t = chainJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const message = "Cannot dispatch an empty chain: add a job with .then(job, payload)";

    await assert.rejects(queue.chain().dispatch(), { name: "TypeError", message });
    await assert.rejects(queue.chain().catch(t.cleanUp, { tag: "a" }).dispatch(), {
      name: "TypeError",
      message,
    });

    assert.deepEqual(await stored(db, queue), { jobs: [], held: [], failed: [] });
  },
);

storeTest(
  "Queue.chain().dispatch() refuses a bad payload in link 3 or in the catch, naming where it is, and stores nothing",
  async (db) => {
    const t = chainJobs();
    await using queue = await db.open({ jobs: t.jobs });

    await assert.rejects(
      queue.chain()
        .then(t.step, { n: 1 })
        .then(t.step, { n: 2 })
        .then(t.step, { n: "three" } as never)
        .dispatch(),
      {
        name: "ValidationError",
        message:
          'Cannot dispatch "step" as link 3 of a chain: payload.n: Invalid input: expected number, received string',
      },
    );
    await assert.rejects(
      queue.chain().then(t.step, { n: 1 }).catch(t.cleanUp, { tag: 5 } as never).dispatch(),
      {
        name: "ValidationError",
        message:
          'Cannot dispatch "clean-up" as the catch of a chain: payload.tag: Invalid input: expected string, received number',
      },
    );

    assert.deepEqual(await stored(db, queue), { jobs: [], held: [], failed: [] });
    assert.deepEqual(await storedCounts(queue), {});
  },
);

storeTest(
  "Queue.chain().dispatch() refuses previousOutput after a link whose job declares no output schema, naming both, and stores nothing",
  async (db) => {
    const t = chainJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const message =
      'Cannot dispatch "step" as link 3 of a chain: previousOutput takes the output of the link before, and its job "fragile" declares no output schema: give "fragile" an output schema or give this link a payload';

    await assert.rejects(
      queue.chain()
        .then(t.step, { n: 1 })
        .then(t.fragile, { n: 2 })
        .then(t.step, previousOutput)
        .dispatch(),
      { name: "TypeError", message },
    );
    await assert.rejects(
      queue.transaction((tx) =>
        tx.chain()
          .then(t.step, { n: 1 })
          .then(t.fragile, { n: 2 })
          .then(t.step, previousOutput)
          .dispatch()
      ),
      { name: "TypeError", message },
    );

    assert.deepEqual(await stored(db, queue), { jobs: [], held: [], failed: [] });
  },
);

storeTest(
  "a chain builder dispatched twice refuses the second time and stores the chain once",
  async (db) => {
    const t = chainJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const chain = queue.chain().then(t.step, { n: 1 }).then(t.step, { n: 2 });
    const id = await chain.dispatch();

    await assert.rejects(chain.dispatch(), {
      name: "Error",
      message: "This chain was already dispatched: build a new one with queue.chain()",
    });

    const { jobs, held } = await stored(db, queue);
    assert.deepEqual(jobs.map((row) => row.id), [id]);
    assert.equal(held.length, 1);
  },
);

storeTest(
  "chain({ queue }) puts every link and catch there unless its own options name a queue",
  async (db) => {
    const t = chainJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const starts: QueueEventMap["job:start"][] = [];
    queue.addEventListener("job:start", (event) => starts.push(event.detail));
    await queue.chain({ queue: "chains" })
      .then(t.step, { n: 1 })
      .then(t.step, { n: 2 }, { queue: "elsewhere" })
      .then(t.step, { n: 3 })
      .catch(t.cleanUp, { tag: "a" })
      .catch(t.cleanUp, { tag: "b" }, { queue: "elsewhere" })
      .dispatch();

    const { jobs, held } = await stored(db, queue);
    assert.deepEqual(jobs.map((row) => row.queue), ["chains"]);
    assert.deepEqual(held.map((row) => [row.payload, row.queue]), [
      ['{"n":2}', "elsewhere"],
      ['{"n":3}', "chains"],
      ['{"tag":"a"}', "chains"],
      ['{"tag":"b"}', "elsewhere"],
    ]);
    await workUntilEmpty(queue, { executor: "isolate", queues: ["chains", "elsewhere"] });
    assert.deepEqual(starts.map((start) => [start.name, start.queue]), [
      ["step", "chains"],
      ["step", "elsewhere"],
      ["step", "chains"],
    ]);
    assert.throws(() => queue.chain({ queue: "no way" }), {
      name: "TypeError",
      message: 'chain: queue name "no way" is invalid: use 1 to 64 of A-Z a-z 0-9 _ . : -',
    });
  },
);

storeTest(
  "a later link's delayMs counts from when it is queued, not from the chain's dispatch",
  async (db) => {
    const clock = new ManualClock();
    const t = chainJobs();
    await using queue = await db.open({ jobs: t.jobs, clock });
    await queue.chain()
      .then(t.step, { n: 1 })
      .then(t.step, { n: 2 }, { delayMs: 5_000 })
      .dispatch();
    assert.equal((await stored(db, queue)).held[0]!.delayMs, 5_000);

    clock.advance(60_000);
    await workUntilEmpty(queue, { executor: "isolate" });
    const queuedAt = clock.now();

    assert.deepEqual(t.log, ["step 1"]);
    const counts = (await queue.counts()).default!;
    assert.deepEqual([counts.pending, counts.delayed], [0, 1]);
    const [row] = (await queue.jobs()).jobs;
    assert.deepEqual(
      { availableAt: row?.availableAt.getTime(), createdAt: row?.createdAt.getTime() },
      { availableAt: queuedAt + 5_000, createdAt: queuedAt },
    );
    clock.advance(4_999);
    assert.equal((await queue.counts()).default!.delayed, 1);
    clock.advance(1);
    assert.equal((await queue.counts()).default!.pending, 1);
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(t.log, ["step 1", "step 2"]);
  },
);

storeTest("a later link's retryUntil window counts from when it is queued", async (db) => {
  const clock = new ManualClock();
  const t = chainJobs();
  const bounded = defineJob({
    name: "bounded",
    schema: z.null(),
    retryUntil: (dispatchedAt) => new Date(dispatchedAt.getTime() + 30_000),
    handle() {},
  });
  await using queue = await db.open({ jobs: [...t.jobs, bounded], clock });
  await queue.chain().then(t.step, { n: 1 }).then(bounded, null).dispatch();
  clock.advance(60_000);
  const started = nextEvent<QueueEventMap["job:start"]>(
    queue,
    "job:start",
    (d) => d.name === "bounded",
  );
  const worker = queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 10 });
  await started;
  await worker.done;

  assert.equal(worker.stats.completed, 2, "the link ran, its window not already over");
  assert.deepEqual(await queue.failed(), []);
});

storeTest(
  "tx.chain() is stored with its transaction, and not at all when the transaction rolls back; job:queued waits for the commit",
  async (db) => {
    const t = chainJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const queued: number[] = [];
    queue.addEventListener("job:queued", (event) => queued.push(event.detail.id));

    await assert.rejects(
      queue.transaction(async (tx) => {
        await tx.chain().then(t.step, { n: 1 }).then(t.step, { n: 2 }).dispatch();
        throw new Error("roll back");
      }),
      { message: "roll back" },
    );
    assert.deepEqual(await stored(db, queue), { jobs: [], held: [], failed: [] });
    assert.deepEqual(queued, [], "no job:queued for a rolled-back chain");

    const id = await queue.transaction(async (tx) => {
      const id = await tx.chain().then(t.step, { n: 3 }).then(t.step, { n: 4 })
        .catch(t.cleanUp, { tag: "a" }).dispatch();
      assert.deepEqual(queued, [], "job:queued waits for the commit");
      return id;
    });
    assert.deepEqual(queued, [id]);
    const { jobs, held } = await stored(db, queue);
    assert.deepEqual(jobs.map((row) => [row.id, row.payload]), [[id, '{"n":3}']]);
    assert.deepEqual(held.map((row) => row.role), ["link", "chain-catch"]);
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(t.log, ["step 3", "step 4"]);
    assert.deepEqual(await stored(db, queue), { jobs: [], held: [], failed: [] });
  },
);

storeTest(
  "awaiting a chain builder instead of its dispatch() rejects with a TypeError saying a chain is not a promise",
  async (db) => {
    const t = chainJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const chain = queue.chain().then(t.step, { n: 1 });

    await assert.rejects(
      async () => {
        await (chain as unknown as Promise<unknown>);
      },
      {
        name: "TypeError",
        message:
          "chain.then(job, payload) takes a job definition, not a callback: a chain is not a promise, await chain.dispatch()",
      },
    );
    assert.throws(() => queue.chain().catch((() => {}) as never, null as never), {
      name: "TypeError",
      message:
        "chain.catch(job, payload) takes a job definition, not a callback: a chain is not a promise, await chain.dispatch()",
    });
    assert.deepEqual(await stored(db, queue), { jobs: [], held: [], failed: [] });
  },
);

storeTest("a chain's first link is announced with job:queued under the chain's id", async (db) => {
  const t = chainJobs();
  await using queue = await db.open({ jobs: t.jobs });
  const queued = nextEvent<QueueEventMap["job:queued"]>(queue, "job:queued");
  const id = await queue.chain().then(t.step, { n: 1 }).then(t.step, { n: 2 }).dispatch();
  const detail = await queued;
  assert.equal(detail.id, id);
  assert.equal(detail.name, "step");
});
