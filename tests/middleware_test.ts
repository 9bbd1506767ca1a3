/**
 * Job middleware: `withoutOverlapping` (at most `limit` at once, held-back
 * jobs keep their attempts, the lock released however the attempt ends and
 * expiring when its worker was killed), `rateLimited` (aligned windows),
 * argument checks, and a `middleware()` that throws; on every store, but for
 * the test that kills a `work` process on a SQLite file.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { DatabaseSync } from "node:sqlite";
import { z } from "zod";
import {
  defineJob,
  JobTimeoutError,
  PermanentError,
  Queue,
  type QueueEventMap,
  rateLimited,
  withoutOverlapping,
} from "../mod.ts";
import { workUntilEmpty } from "../src/testing.ts";
import { ManualClock, nextEvent, tempDir, unfinishedCount, waitUntil } from "./_helpers.ts";
import { orQueueError, type StoreContext, storeTest } from "./_stores.ts";
import { DEAD_LOCK_EXPIRE_MS, holdsLock, holdsLockOnce } from "./fixtures/guards/jobs.ts";
import { count, JOBS_URL, startWork, workerStarted } from "./fixtures/guards/harness.ts";
import { openReader } from "./fixtures/reliability/harness.ts";
import { readLedger } from "./fixtures/reliability/ledger.ts";
import { record } from "./fixtures/runner/harness.ts";

type Detail<K extends keyof QueueEventMap> = QueueEventMap[K];

const payload = z.object({ n: z.number().int() });

/** What the overlap jobs saw: how many ran at once at most, and each run's attempt. */
const overlap = { running: 0, max: 0, attempts: [] as number[] };

function overlapJob(name: string, limit: number) {
  return defineJob({
    name,
    schema: payload,
    middleware: () => [withoutOverlapping(`lock:${name}`, { limit, releaseAfterMs: 20 })],
    async handle(_payload, ctx) {
      overlap.attempts.push(ctx.attempt);
      overlap.running++;
      overlap.max = Math.max(overlap.max, overlap.running);
      await new Promise((resolve) => setTimeout(resolve, 30));
      overlap.running--;
    },
  });
}

const limitOne = overlapJob("m.limit-1", 1);
const limitTwo = overlapJob("m.limit-2", 2);

/** Holds the lock "shared" and ends as its payload says. */
const locked = defineJob({
  name: "m.locked",
  schema: z.object({ mode: z.enum(["ok", "throw", "permanent", "timeout", "release"]) }),
  maxAttempts: 2,
  backoff: [60_000],
  jitter: 0,
  timeoutMs: 100,
  middleware: () => [withoutOverlapping("shared", { releaseAfterMs: 5_000 })],
  async handle({ mode }, ctx) {
    if (mode === "throw") throw new Error("thrown");
    if (mode === "permanent") throw new PermanentError("permanent");
    if (mode === "release") ctx.release(60_000);
    if (mode === "timeout") {
      await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
    }
  },
});

/** When each run of {@linkcode deaf} started and ended (performance.now). */
const deafRuns: { start: number; end: number }[] = [];

/**
 * A job `name` that holds the lock "deaf" and runs `ms` ignoring its signal
 * (awaiting timers, so an isolate's timers still fire): past its
 * `timeoutMs`, or a cancel, it still runs.
 */
function deafJob(name: string, timeoutMs: number) {
  return defineJob({
    name,
    schema: z.object({ ms: z.number() }),
    maxAttempts: 1,
    timeoutMs,
    middleware: () => [withoutOverlapping("deaf", { releaseAfterMs: 20 })],
    async handle({ ms }) {
      const run = { start: performance.now(), end: Infinity };
      deafRuns.push(run);
      const until = performance.now() + ms;
      while (performance.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
      run.end = performance.now();
    },
  });
}

/** Times out after 100 ms. */
const deaf = deafJob("m.deaf", 100);
/** Times out only after a minute: for a cancel. */
const deafToCancel = deafJob("m.deaf-to-cancel", 60_000);

/** Another job type naming the same lock "shared": it only completes if the lock is free. */
const probe = defineJob({
  name: "m.probe",
  schema: payload,
  middleware: () => [withoutOverlapping("shared", { releaseAfterMs: 5_000 })],
  handle() {},
});

const rateRuns: number[] = [];

/** At most 3 starts per aligned 1 s window. */
const rated = defineJob({
  name: "m.rated",
  schema: payload,
  middleware: () => [rateLimited("rate", 3, 1_000)],
  handle({ n }) {
    rateRuns.push(n);
  },
});

let middlewareCalls = 0;
let badHandlerRuns = 0;

/** A middleware that throws. */
const throwingMiddleware = defineJob({
  name: "m.throwing-middleware",
  schema: payload,
  maxAttempts: 2,
  backoff: [0],
  jitter: 0,
  middleware: () => {
    middlewareCalls++;
    throw new Error("middleware broke");
  },
  handle() {
    badHandlerRuns++;
  },
});

/** A middleware that returns something other than an array of rules. */
const notRules = defineJob({
  name: "m.not-rules",
  schema: payload,
  maxAttempts: 1,
  middleware: () => "withoutOverlapping" as never,
  handle() {
    badHandlerRuns++;
  },
});

const ALL = [
  deaf,
  deafToCancel,
  limitOne,
  limitTwo,
  locked,
  probe,
  rated,
  throwingMiddleware,
  notRules,
];

for (const [job, limit] of [[limitOne, 1], [limitTwo, 2]] as const) {
  storeTest(
    `withoutOverlapping limit ${limit}: never more than ${limit} run at once with concurrency 8; held-back jobs keep their attempts and send no job:retry`,
    async (db) => {
      await using queue = await db.open({ jobs: ALL });
      Object.assign(overlap, { running: 0, max: 0, attempts: [] });
      const retries = record<Detail<"job:retry">>(queue, "job:retry");
      const starts = record<Detail<"job:start">>(queue, "job:start");
      await queue.dispatchMany(job, Array.from({ length: 12 }, (_, n) => ({ n })));

      const worker = queue.work({ executor: "isolate", concurrency: 8, pollMs: 10 });
      // While the first runs, the others were put back without using an attempt.
      const held = await orQueueError(
        queue,
        waitUntil(async () => {
          const held = (await queue.jobs({ limit: 1000 })).jobs.filter((listed) =>
            listed.state !== "running" && listed.lastError !== null
          );
          return held.length > 0 ? held : undefined;
        }, { what: "jobs held back", timeoutMs: 5_000, everyMs: 2 }),
      );
      for (const listed of held) {
        assert.equal(listed.attempts, 0);
        assert.equal(listed.lastError, `held back by withoutOverlapping(lock:${job.name})`);
      }
      await orQueueError(
        queue,
        waitUntil(async () => await unfinishedCount(queue) === 0, {
          what: "all 12 completed",
          timeoutMs: 10_000,
        }),
      );
      await worker.stop();

      assert.equal(overlap.max, limit, `at most ${limit} at once, and that many did run together`);
      assert.equal(worker.stats.completed, 12);
      assert.deepEqual(overlap.attempts, Array(12).fill(1), "every run was attempt 1");
      assert.equal(starts.length, 12, "job:start only for runs that started");
      assert.deepEqual(retries, []);
      assert.equal(await db.jobLocks(), 0);
    },
  );
}

/** Runs one `locked` job to its outcome, then checks the lock is gone and another job can take it. */
async function lockReleasedAfter(
  db: StoreContext,
  mode: "ok" | "throw" | "permanent" | "timeout" | "release",
  expected: { completed: number; failed: number; retried: number },
) {
  await using queue = await db.open({ jobs: ALL });
  const failed = record<Detail<"job:failed">>(queue, "job:failed");
  await queue.dispatch(locked, { mode });
  assert.deepEqual(await orQueueError(queue, workUntilEmpty(queue)), expected);
  assert.equal(await db.jobLocks(), 0, `lock left after "${mode}"`);
  // Held back, the probe would wait 5 s and drain would stop with nothing completed.
  await queue.dispatch(probe, { n: 1 });
  assert.deepEqual(await orQueueError(queue, workUntilEmpty(queue)), {
    completed: 1,
    failed: 0,
    retried: 0,
  });
  return failed;
}

storeTest("withoutOverlapping: the lock is released when the job succeeds", async (db) => {
  await lockReleasedAfter(db, "ok", { completed: 1, failed: 0, retried: 0 });
});

storeTest(
  "withoutOverlapping: the lock is released when the attempt throws and the job is retried",
  async (db) => {
    await lockReleasedAfter(db, "throw", { completed: 0, failed: 0, retried: 1 });
  },
);

storeTest(
  "withoutOverlapping: the lock is released when the job releases itself",
  async (db) => {
    await lockReleasedAfter(db, "release", { completed: 0, failed: 0, retried: 1 });
  },
);

storeTest(
  "withoutOverlapping: the lock is released when the job fails for good",
  async (db) => {
    const failed = await lockReleasedAfter(db, "permanent", {
      completed: 0,
      failed: 1,
      retried: 0,
    });
    assert.equal(failed[0]?.error.name, "PermanentError");
  },
);

storeTest("withoutOverlapping: the lock is released when the attempt times out", async (db) => {
  // maxAttempts 2: the first timeout is retried 60 s later, so drain sees one retry.
  await using queue = await db.open({ jobs: ALL });
  const retries = record<Detail<"job:retry">>(queue, "job:retry");
  await queue.dispatch(locked, { mode: "timeout" });
  assert.deepEqual(await orQueueError(queue, workUntilEmpty(queue)), {
    completed: 0,
    failed: 0,
    retried: 1,
  });
  assert.ok(retries[0]?.error instanceof JobTimeoutError);
  assert.equal(await db.jobLocks(), 0);
  await queue.dispatch(probe, { n: 1 });
  assert.deepEqual(await orQueueError(queue, workUntilEmpty(queue)), {
    completed: 1,
    failed: 0,
    retried: 0,
  });
});

storeTest(
  "withoutOverlapping: a job that timed out or was cancelled keeps its lock until its handler, deaf to its signal, stopped: the next job of the key starts after it",
  async (db) => {
    await using queue = await db.open({ jobs: ALL });
    for (const end of ["timeout", "cancel"] as const) {
      deafRuns.length = 0;
      const job = end === "timeout" ? deaf : deafToCancel;
      const first = await queue.dispatch(job, { ms: 600 });
      await queue.dispatch(job, { ms: 10 });
      const worker = queue.work({
        executor: "isolate",
        concurrency: 2,
        pollMs: 20,
        graceMs: 5_000,
      });
      try {
        if (end === "cancel") {
          await waitUntil(() => Promise.resolve(deafRuns.length === 1), { what: "the first run" });
          assert.equal(await queue.cancel(first), "cancelling");
        }
        await waitUntil(
          () => Promise.resolve(deafRuns.length === 2 && deafRuns[1]!.end < Infinity),
          {
            what: "the second run to end",
          },
        );
      } finally {
        await worker.stop();
      }
      const [a, b] = deafRuns;
      assert.ok(
        b!.start >= a!.end,
        `${end}: the second started ${a!.end - b!.start} ms before the first ended`,
      );
      assert.equal((await queue.result(first))?.state, end === "timeout" ? "failed" : "cancelled");
    }
  },
);

storeTest(
  "withoutOverlapping: a lock's default expiry outlasts the hold of a timed-out attempt whose handler stops late, within graceMs plus 1 s",
  async (db) => {
    await using queue = await db.open({ jobs: ALL });
    deafRuns.length = 0;
    // Its handler stops 900 ms after its start: after timeoutMs (100) + graceMs (600), where the
    // lock expired before, and well inside the hold's cap (the abort + 600 + 1,000 ms).
    await queue.dispatch(deaf, { ms: 900 });
    await queue.dispatch(deaf, { ms: 10 });
    const worker = queue.work({ executor: "isolate", concurrency: 2, pollMs: 20, graceMs: 600 });
    try {
      await waitUntil(
        () => Promise.resolve(deafRuns.length === 2 && deafRuns[1]!.end < Infinity),
        { what: "the second run to end" },
      );
    } finally {
      await worker.stop();
    }
    const [a, b] = deafRuns;
    assert.ok(
      b!.start >= a!.end,
      `the second started ${a!.end - b!.start} ms before the first ended`,
    );
  },
);

/**
 * Runs a `work` process (lease 500 ms) on the SQLite file `path` until job
 * `id` ran its handler, then kills it with SIGKILL.
 */
async function killedInAttempt(path: string, db: DatabaseSync, id: number): Promise<void> {
  await using child = startWork(path, ["--lease-ms", "500", "--sleep-ms", "50"]);
  await workerStarted(child);
  await waitUntil(() => readLedger(db, "job_id = ?", id).length > 0, {
    what: `job ${id}'s attempt started`,
  });
  // A death is charged once the handler's begin is recorded (written just after it starts; a job
  // not yet claimed has begun = 1 too, hence the ledger first): the kill waits for it.
  await waitUntil(() => count(db, "jobs", `id = ${id} AND begun = 1`) === 1, {
    what: `job ${id}'s begin recorded`,
  });
  child.kill("SIGKILL");
  assert.equal((await child.exit(10_000)).signal, "SIGKILL");
}

// SQLite only: the `work` child process and its ledger are on the test's SQLite file.
Deno.test("withoutOverlapping: the lock of a `work` process killed with SIGKILL lasts until expireAfterMs, then others run", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
  using db = openReader(tmp.dbPath);
  const hung = await queue.dispatch(holdsLock, { n: 1, hang: true });

  const beforeWork = Date.now();
  await killedInAttempt(tmp.dbPath, db, hung);
  const [lock] = db.prepare("SELECT job_id, expires_at FROM job_locks").all() as {
    job_id: number;
    expires_at: number;
  }[];
  assert.equal(lock?.job_id, hung);
  const [started] = readLedger(db, "job_id = ?", hung);
  assert.ok(
    // Taken after the worker was started and before the handler ran (how long before is load).
    lock!.expires_at <= started!.start + DEAD_LOCK_EXPIRE_MS &&
      lock!.expires_at >= beforeWork + DEAD_LOCK_EXPIRE_MS,
    `the lock expires expireAfterMs after it was taken: ${lock!.expires_at - started!.start} ms`,
  );

  const other = await queue.dispatch(holdsLock, { n: 2, hang: false });
  const starts: { id: number; at: number }[] = [];
  queue.addEventListener(
    "job:start",
    ({ detail }) => starts.push({ id: detail.id, at: Date.now() }),
  );
  const worker = queue.work({ executor: "isolate", concurrency: 2, pollMs: 20, leaseMs: 500 });
  await waitUntil(() => count(db, "jobs") === 0, {
    what: "both jobs completed",
    timeoutMs: 10_000,
  });
  await worker.stop();

  const early = starts.filter(({ at }) => at < lock!.expires_at);
  assert.deepEqual(
    early.map(({ id, at }) => ({ id, msBeforeExpiry: lock!.expires_at - at })),
    [],
    "a job naming the lock started before the killed holder's lock expired",
  );
  assert.deepEqual(starts.map(({ id }) => id).sort(), [hung, other].sort());
  assert.equal(count(db, "job_locks"), 0);
});

// SQLite only, as the case above.
Deno.test("withoutOverlapping: a job whose only attempt's worker was killed with SIGKILL fails saying so at its next claim, not held back by its own dead attempt's lock", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
  using db = openReader(tmp.dbPath);
  const id = await queue.dispatch(holdsLockOnce, { n: 1 });
  await killedInAttempt(tmp.dbPath, db, id);
  const worker = queue.work({ executor: "isolate", pollMs: 20, leaseMs: 500 });
  const failed = await waitUntil(() => queue.failedJob(id), {
    what: "the job failed",
    timeoutMs: 30_000,
  });
  await worker.stop();
  // Held back by its own dead attempt's lock, it was put back as released, lost the mark of its
  // worker's death, and failed as "released 1 times" once the lock expired.
  assert.match(failed.error, /attempts spent: worker died during its last attempt/);
  assert.equal(readLedger(db, "job_id = ?", id).length, 1, "its handler started once");
});

storeTest(
  "rateLimited: at most max starts per window aligned to multiples of perMs",
  async (db) => {
    // 100 ms before a window boundary (the default start is a multiple of 1 s).
    const clock = new ManualClock(Date.UTC(2026, 0, 1) - 100);
    await using queue = await db.open({ jobs: ALL, clock });
    const work = () => orQueueError(queue, workUntilEmpty(queue, { concurrency: 4 }));
    const retries = record<Detail<"job:retry">>(queue, "job:retry");
    rateRuns.length = 0;
    await queue.dispatchMany(rated, Array.from({ length: 10 }, (_, n) => ({ n })));

    assert.deepEqual(await work(), { completed: 3, failed: 0, retried: 0 });
    const { total, jobs: held } = await queue.jobs({ limit: 1000 });
    assert.equal(total, 7);
    for (const listed of held) {
      assert.equal(listed.availableAt.getTime(), Date.UTC(2026, 0, 1), "back when the window ends");
      assert.equal(listed.attempts, 0);
      assert.equal(listed.lastError, "held back by rateLimited(rate, 3 per 1000 ms)");
    }
    clock.advance(99);
    assert.deepEqual(await work(), { completed: 0, failed: 0, retried: 0 });
    clock.advance(1); // a new window, only 100 ms after the first starts
    assert.deepEqual(await work(), { completed: 3, failed: 0, retried: 0 });
    clock.advance(999);
    assert.deepEqual(await work(), { completed: 0, failed: 0, retried: 0 });
    clock.advance(1);
    assert.deepEqual(await work(), { completed: 3, failed: 0, retried: 0 });
    clock.advance(1_000);
    assert.deepEqual(await work(), { completed: 1, failed: 0, retried: 0 });
    assert.deepEqual(rateRuns.toSorted((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.deepEqual(retries, []);
  },
);

storeTest(
  "a job whose cancel was asked is cancelled at its next claim, not held back by a lock another job holds",
  async (db) => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => release = resolve);
    let holderRuns = 0;
    const locked = defineJob({
      name: "cancel-asked.locked",
      schema: payload,
      middleware: () => [withoutOverlapping("shared-lock", { releaseAfterMs: 20 })],
      async handle({ n }) {
        if (n !== 0) return;
        holderRuns++;
        await held;
      },
    });
    await using queue = await db.open({ jobs: [locked] });
    await queue.dispatch(locked, { n: 0 });
    const worker = queue.work({ executor: "isolate", concurrency: 2, pollMs: 10 });
    try {
      await waitUntil(() => holderRuns === 1, { what: "the holder runs, holding the lock" });
      const asked = await queue.dispatch(locked, { n: 1 });
      // As a worker's hold-back leaves it when the cancel came while it held the job.
      await db.setStored("jobs", asked, "cancel_requested", "not wanted");
      await waitUntil(async () => (await queue.result(asked))?.state === "cancelled", {
        what: "the job cancelled while the lock is still held",
      });
      assert.equal(holderRuns, 1);
      assert.equal((await queue.result(asked))?.error, "not wanted");
    } finally {
      release();
      await worker.stop();
    }
  },
);

storeTest(
  "withoutOverlapping: a job claimed ahead takes its lock when it starts, not at its claim, so a lock it would have taken then cannot run out before its end while another job of the key runs",
  async (db) => {
    const runs: { n: number; from: number; to: number }[] = [];
    const span = (n: number, ms: number) => async (signal: AbortSignal) => {
      const from = performance.now();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
      });
      runs.push({ n, from, to: performance.now() });
    };
    let slowStarted = false;
    const slow = defineJob({
      name: "ahead.slow",
      schema: z.object({ ms: z.number() }),
      async handle({ ms }, ctx) {
        if (ms > 1) slowStarted = true;
        await span(0, ms)(ctx.signal);
      },
    });
    const keyed = defineJob({
      name: "ahead.keyed",
      schema: z.object({ n: z.number(), ms: z.number() }),
      // Its lock, taken at a check, runs out 1 s + graceMs after it.
      timeoutMs: 1_000,
      middleware: () => [withoutOverlapping("ahead-key")],
      async handle({ n, ms }, ctx) {
        await span(n, ms)(ctx.signal);
      },
    });
    await using queue = await db.open({ jobs: [slow, keyed] });
    // Quick jobs first, so that the worker (concurrency 1) claims ahead: then job 1 is held
    // ahead behind the slow job, as long as the slow job runs.
    await queue.dispatchMany(slow, Array.from({ length: 30 }, () => ({ ms: 1 })));
    await queue.dispatch(slow, { ms: 2_500 });
    await queue.dispatch(keyed, { n: 1, ms: 800 });
    const first = queue.work({ executor: "isolate", graceMs: 100, pollMs: 20 });
    const second = queue.work({ executor: "isolate", queues: ["other"], pollMs: 20 });
    try {
      await waitUntil(() => slowStarted, { what: "the slow job started" });
      // Past the 1.1 s a lock taken at the claim would last, while the slow job still runs.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await queue.dispatch(keyed, { n: 2, ms: 2_000 }, { queue: "other" });
      await waitUntil(() => runs.filter((run) => run.n > 0).length === 2, {
        what: "both jobs of the key ran",
        timeoutMs: 60_000,
      });
    } finally {
      await Promise.all([first.stop(), second.stop()]);
    }
    const [a, b] = runs.filter((run) => run.n > 0);
    assert.ok(
      a!.to <= b!.from,
      `job ${a!.n} ran ${a!.from.toFixed(0)}-${a!.to.toFixed(0)}, job ${b!.n} ${
        b!.from.toFixed(0)
      }-${b!.to.toFixed(0)}: at once`,
    );
  },
);

Deno.test("withoutOverlapping and rateLimited refuse bad arguments naming the rule and field", () => {
  const cases: [() => unknown, ErrorConstructor, RegExp][] = [
    [() => withoutOverlapping(""), TypeError, /^withoutOverlapping: key /],
    [() => withoutOverlapping("x".repeat(256)), TypeError, /^withoutOverlapping: key /],
    [() => withoutOverlapping(7 as never), TypeError, /^withoutOverlapping: key /],
    [() => withoutOverlapping("k", { limit: 0 }), RangeError, /^withoutOverlapping: limit .*0/],
    [
      () => withoutOverlapping("k", { relaseAfterMs: 60_000 } as never),
      TypeError,
      /^withoutOverlapping: unknown option "relaseAfterMs" \(it takes "limit", "releaseAfterMs", "expireAfterMs"\)$/,
    ],
    [
      () => withoutOverlapping("k", 5 as never),
      TypeError,
      /^withoutOverlapping: options must be an object: got 5$/,
    ],
    [() => withoutOverlapping("k", { limit: 1.5 }), RangeError, /^withoutOverlapping: limit /],
    [
      () => withoutOverlapping("k", { releaseAfterMs: -1 }),
      RangeError,
      /^withoutOverlapping: releaseAfterMs /,
    ],
    [
      () => withoutOverlapping("k", { expireAfterMs: 0 }),
      RangeError,
      /^withoutOverlapping: expireAfterMs /,
    ],
    [
      () => withoutOverlapping("k", { expireAfterMs: Infinity }),
      RangeError,
      /^withoutOverlapping: expireAfterMs /,
    ],
    [() => rateLimited("", 1, 1_000), TypeError, /^rateLimited: key /],
    [() => rateLimited("r", 0, 1_000), RangeError, /^rateLimited: max .*0/],
    [() => rateLimited("r", NaN, 1_000), RangeError, /^rateLimited: max /],
    [() => rateLimited("r", 5, 0), RangeError, /^rateLimited: perMs .*0/],
    [() => rateLimited("r", 5, -1_000), RangeError, /^rateLimited: perMs /],
    [
      () => defineJob({ name: "m.bad", schema: payload, middleware: [] as never, handle() {} }),
      TypeError,
      /"m\.bad".*middleware must be a function/,
    ],
  ];
  for (const [call, type, message] of cases) {
    assert.throws(call, (error: Error) => {
      assert.ok(error instanceof type, `${error} is a ${type.name}`);
      assert.match(error.message, message);
      return true;
    });
  }
  assert.deepEqual(withoutOverlapping("k"), {
    kind: "without-overlapping",
    key: "k",
    limit: 1,
    releaseAfterMs: 1_000,
    expireAfterMs: undefined,
  });
});

storeTest(
  "a middleware() that throws fails the attempt like a handler error; the handler never runs",
  async (db) => {
    await using queue = await db.open({ jobs: ALL });
    const retries = record<Detail<"job:retry">>(queue, "job:retry");
    middlewareCalls = 0;
    badHandlerRuns = 0;
    const id = await queue.dispatch(throwingMiddleware, { n: 1 });

    assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 1, retried: 1 });
    assert.equal(middlewareCalls, 2);
    assert.equal(badHandlerRuns, 0);
    assert.equal(retries[0]?.error?.message, "middleware broke");
    const failed = await queue.failedJob(id);
    assert.equal(failed?.attempts, 2);
    assert.match(failed!.error, /^Error: middleware broke/);
  },
);

storeTest(
  "a middleware() that returns no array of rules fails the attempt with a TypeError",
  async (db) => {
    await using queue = await db.open({ jobs: ALL });
    badHandlerRuns = 0;
    const id = await queue.dispatch(notRules, { n: 1 });
    assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 1, retried: 0 });
    assert.equal(badHandlerRuns, 0);
    assert.match(
      (await queue.failedJob(id))!.error,
      /^TypeError: Job "m\.not-rules": middleware\(payload\) must return an array/,
    );
  },
);

storeTest(
  "a job held back by its lock is due again releaseAfterMs later, then runs as attempt 1",
  async (db) => {
    const clock = new ManualClock();
    await using queue = await db.open({ jobs: ALL, clock });
    const holder = await queue.dispatch(locked, { mode: "timeout" });
    const worker = queue.work({ executor: "isolate", pollMs: 10, concurrency: 2 });
    await orQueueError(
      queue,
      nextEvent<Detail<"job:start">>(queue, "job:start", (event) => event.id === holder),
    );
    const heldAt = clock.now();
    // Listened for from here: the holder may time out while a loaded machine checks the probe.
    const holderRetried = nextEvent<Detail<"job:retry">>(
      queue,
      "job:retry",
      (event) => event.id === holder,
    );
    const id = await queue.dispatch(probe, { n: 2 });
    const row = await orQueueError(
      queue,
      waitUntil(async () => {
        const { jobs } = await queue.jobs({ name: probe.name });
        return jobs.find((listed) => listed.id === id && listed.lastError !== null);
      }, { what: "the probe held back" }),
    );
    // Delayed: due later and not leased (a leased job due later is running).
    assert.deepEqual(
      { availableAt: row.availableAt.getTime(), attempts: row.attempts, state: row.state },
      { availableAt: heldAt + 5_000, attempts: 0, state: "delayed" },
    );
    // The holder times out (retry in 60 s), which frees the lock; the probe still waits its 5 s.
    await holderRetried;
    clock.advance(5_000);
    const started = await nextEvent<Detail<"job:start">>(queue, "job:start", (e) => e.id === id);
    assert.equal(started.attempt, 1);
    await nextEvent<Detail<"job:complete">>(queue, "job:complete", (event) => event.id === id);
    await worker.stop();
  },
);

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
    what: "the junk job fails",
    timeoutMs: 30_000,
  });
  assert.match(failed.error, /^TypeError: rateLimited: key must be/);
  await worker.stop();
  assert.equal(worker.stats.failed, 1);
});

/** Releases the `m.gate` jobs that wait on it, and what the gated jobs saw. */
const gate = { open: null as (() => void) | null, ran: [] as string[], running: 0, max: 0 };

/** Holds the lock "gate" until `gate.open()`. */
const gateHolder = defineJob({
  name: "m.gate-holder",
  schema: payload,
  middleware: () => [withoutOverlapping("gate")],
  async handle() {
    await new Promise<void>((resolve) => gate.open = resolve);
  },
});

/** Unique until it starts, and held back while the gate is held. */
const uniqueBehindGate = defineJob({
  name: "m.unique-behind-gate",
  schema: payload,
  uniqueForMs: 600_000,
  uniqueUntil: "processing",
  middleware: () => [withoutOverlapping("gate", { releaseAfterMs: 50 })],
  handle({ n }) {
    gate.ran.push(`u${n}`);
  },
});

storeTest(
  'uniqueUntil "processing": a job its middleware holds back has not started and keeps its key: a second dispatch is a duplicate',
  async (db) => {
    gate.ran = [];
    const queue = await db.open({ jobs: [gateHolder, uniqueBehindGate] });
    await queue.dispatch(gateHolder, { n: 0 });
    const worker = queue.work({ concurrency: 4, pollMs: 20, executor: "isolate" });
    await waitUntil(() => gate.open !== null, { what: "the gate holder runs" });
    const first = await queue.dispatch(uniqueBehindGate, { n: 1 });
    await waitUntil(
      async () =>
        (await queue.jobs({ name: uniqueBehindGate.name })).jobs.find((job) => job.id === first)
          ?.lastError?.includes("held back by withoutOverlapping(gate)"),
      { what: "the unique job is held back" },
    );
    assert.equal(await queue.dispatch(uniqueBehindGate, { n: 2 }), first, "a duplicate");
    gate.open!();
    await waitUntil(async () => (await unfinishedCount(queue)) === 0, { what: "both ran" });
    await worker.stop();
    assert.deepEqual(gate.ran, ["u1"]);
  },
);

/** Moves money between two accounts, each an overlap key of limit 2; from may be to. */
const transfer = defineJob({
  name: "m.transfer",
  schema: z.object({ from: z.string(), to: z.string() }),
  middleware: ({ from, to }) => [
    withoutOverlapping(`acct:${from}`, { limit: 2, releaseAfterMs: 20 }),
    withoutOverlapping(`acct:${to}`, { limit: 2, releaseAfterMs: 20 }),
  ],
  async handle() {
    gate.running++;
    gate.max = Math.max(gate.max, gate.running);
    // Two at once are let through: both wait here until the second arrives (or a deadline).
    await waitUntil(() => gate.max >= 2, {
      what: "a second transfer runs beside this one",
      timeoutMs: 10_000,
    }).catch(() => {});
    gate.running--;
  },
});

storeTest(
  "withoutOverlapping: rules of one job naming the same key hold it once, so limit 2 lets two such jobs run at once",
  async (db) => {
    gate.running = 0;
    gate.max = 0;
    const queue = await db.open({ jobs: [transfer] });
    await queue.dispatchMany(transfer, [{ from: "a", to: "a" }, { from: "a", to: "a" }]);
    await workUntilEmpty(queue, {
      concurrency: 2,
      executor: "isolate",
      pollMs: 20,
      maxTimeMs: 60_000,
    });
    assert.equal(gate.max, 2);
  },
);
