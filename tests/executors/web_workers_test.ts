/**
 * The Web Worker pool, in this process: through `Queue.open({ jobs: URL })`
 * and `queue.work({ executor: "workers" })`, with handlers that write what
 * they saw into a ledger in the queue's file.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type JobDefinition, type PayloadOf, Queue, ValidationError } from "../../mod.ts";
import type { QueueEventMap } from "../../src/events.ts";
import { storedCounts, tempDir, waitUntil as waitFor } from "../_helpers.ts";
import { currentThread, type LedgerRow, readLedger } from "../fixtures/reliability/ledger.ts";
import { openReader, waitUntil } from "../fixtures/reliability/harness.ts";
import {
  busy,
  busyLocked,
  child,
  cpu,
  hangs,
  hash,
  holdsGroup,
  holdsThenDies,
  holdsUntil,
  leavesRejection,
  meet,
  outOfRange,
  parent,
  permanent,
  quick,
  refused,
  sibling,
  teapot,
  timesOut,
  where,
} from "../fixtures/web_workers/jobs.ts";

const JOBS = new URL("../fixtures/web_workers/jobs.ts", import.meta.url).href;

/** Names of this process's threads now. */
function liveThreads(): Set<string> {
  const names = new Set<string>();
  for (const task of Deno.readDirSync("/proc/self/task")) {
    try {
      names.add(Deno.readTextFileSync(`/proc/self/task/${task.name}/comm`).trim());
    } catch {
      // the thread ended meanwhile
    }
  }
  return names;
}

function recordEvents<K extends keyof QueueEventMap>(
  target: EventTarget,
  type: K,
): QueueEventMap[K][] {
  const seen: QueueEventMap[K][] = [];
  target.addEventListener(type, (event) => seen.push((event as CustomEvent).detail));
  return seen;
}

Deno.test("Web Worker pool: handlers run in Web Workers, on threads other than the main one", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  await queue.dispatchMany(where, Array(4).fill({ db: tmp.dbPath }));
  const worker = queue.work({
    executor: "workers",
    workers: 2,
    concurrency: 2,
    stopWhenEmpty: true,
    pollMs: 20,
  });
  await worker.done;

  assert.equal(worker.options.executor, "workers");
  assert.equal(worker.stats.completed, 4);
  const starts = readLedger(db, "outcome = 'start'");
  assert.equal(starts.length, 4);
  for (const row of starts) {
    assert.deepEqual(JSON.parse(row.info!), { inWebWorker: true });
    assert.match(row.thread, /^worker-\d+$/);
    assert.equal(row.pid, Deno.pid);
  }
  const threads = new Set(starts.map((row) => row.thread));
  assert.ok(threads.size >= 1 && threads.size <= 2, `threads: ${[...threads].join(", ")}`);
  assert.ok(!threads.has(currentThread()));
});

Deno.test("Web Worker pool: ctx.queue.dispatch() in a Web Worker stores a job that runs; a bad payload rejects there with the ValidationError message", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  const bad = { db: tmp.dbPath, n: "seven" } as never;
  const refused = await queue.dispatch(child, bad).catch((error) => error);
  assert.ok(refused instanceof ValidationError);
  const parentId = await queue.dispatch(parent, { db: tmp.dbPath });
  const worker = queue.work({ executor: "workers", workers: 1, stopWhenEmpty: true, pollMs: 20 });
  await worker.done;

  const [parentRun] = readLedger(db, "job_id = ?", parentId);
  const { childId, refusal } = JSON.parse(parentRun!.info!);
  assert.deepEqual(refusal, { name: "ValidationError", message: refused.message });
  assert.match(refusal.message, /^Cannot dispatch "ww.child": payload\.n: /);
  const childRuns = readLedger(db, "job_id = ?", childId);
  assert.deepEqual(childRuns.map((row) => [row.outcome, JSON.parse(row.info!)]), [
    ["success", { n: 7 }],
  ]);
  assert.equal(worker.stats.completed, 2);
  assert.deepEqual(await storedCounts(queue), {});
});

Deno.test("Web Worker pool: errors keep their name across the boundary; PermanentError fails at once", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  const permanentId = await queue.dispatch(permanent, { db: tmp.dbPath });
  const teapotId = await queue.dispatch(teapot, { db: tmp.dbPath });
  const failures = recordEvents(queue, "job:failed");
  const worker = queue.work({ executor: "workers", workers: 1, stopWhenEmpty: true, pollMs: 20 });
  await worker.done;

  assert.deepEqual(
    failures.map(({ id, attempt, error }) => [id, attempt, error.name, error.message]),
    [
      [permanentId, 1, "PermanentError", "the card was declined: no retry can help"],
      [teapotId, 1, "TeapotError", "short and stout"],
    ],
  );
  const failedPermanent = await queue.failedJob(permanentId);
  assert.equal(failedPermanent?.error, "PermanentError: the card was declined: no retry can help");
  assert.equal(failedPermanent?.attempts, 1, "a PermanentError must not be retried");
  assert.equal((await queue.failedJob(teapotId))?.error, "TeapotError: short and stout");
  assert.equal(readLedger(db, "job_id = ?", permanentId).length, 1);
  assert.deepEqual(worker.stats, { completed: 0, failed: 2, retried: 0 });
});

Deno.test("Web Worker pool: the library's error classes and the built-in ones keep their class and fields across the boundary, both ways", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  const refusedId = await queue.dispatch(refused, { db: tmp.dbPath });
  const rangeId = await queue.dispatch(outOfRange, { db: tmp.dbPath });
  const failures = recordEvents(queue, "job:failed");
  const worker = queue.work({ executor: "workers", workers: 1, stopWhenEmpty: true, pollMs: 20 });
  await worker.done;

  const validation = failures.find(({ id }) => id === refusedId)!.error;
  assert.ok(validation instanceof ValidationError, "job:failed has the ValidationError thrown");
  assert.equal(validation.jobName, "ww.child");
  assert.deepEqual(validation.issues, [{ path: ["n"], message: "expected number" }]);
  assert.equal(validation.message, 'Cannot dispatch "ww.child": payload.n: expected number');
  const range = failures.find(({ id }) => id === rangeId)!.error;
  assert.ok(range instanceof RangeError, "job:failed has the RangeError thrown");
  assert.equal(range.message, "7 is out of range");
  // Each failed hook ran in a Web Worker, with the error as it came back from the main thread.
  const hooks = (id: number) =>
    readLedger(db, "job_id = ?", id).map((row) => JSON.parse(row.info!));
  assert.deepEqual(hooks(refusedId), [{
    isValidationError: true,
    isRangeError: false,
    name: "ValidationError",
    jobName: "ww.child",
    issues: [{ path: ["n"], message: "expected number" }],
  }]);
  assert.deepEqual(hooks(rangeId), [{
    isValidationError: false,
    isRangeError: true,
    name: "RangeError",
  }]);
});

/**
 * Dispatches one `job` per payload that `payloads` makes for the ledger's
 * database file, drains them at concurrency 2 on `workers` Web Workers, and
 * returns the ledger's rows of the runs that ended, checking that every job
 * completed and that they ran on `workers` threads.
 */
async function drainOnWebWorkers<J extends JobDefinition>(
  job: J,
  payloads: (db: string) => PayloadOf<J>[],
  workers: number,
): Promise<LedgerRow[]> {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  const dispatched = await queue.dispatchMany(job, payloads(tmp.dbPath));
  const worker = queue.work({
    executor: "workers",
    workers,
    concurrency: 2,
    stopWhenEmpty: true,
    pollMs: 20,
  });
  await worker.done;
  assert.equal(worker.stats.completed, dispatched.length);
  const ended = readLedger(db, "outcome = 'success'");
  assert.equal(new Set(ended.map((row) => row.thread)).size, workers, `ran on ${workers} threads`);
  return ended;
}

/**
 * Runs `jobs` CPU-bound jobs of `rounds` hashes at concurrency 2 on
 * `workers` Web Workers; returns the pairs of jobs whose runs overlapped in
 * time, each pair on two different threads.
 */
async function overlappingRuns(workers: number, jobs: number, rounds: number): Promise<number> {
  const rows = await drainOnWebWorkers(cpu, (db) => Array(jobs).fill({ db, rounds }), workers);
  let overlapping = 0;
  for (const [index, a] of rows.entries()) {
    for (const b of rows.slice(index + 1)) {
      if (a.start < b.end! && b.start < a.end!) {
        assert.notEqual(a.thread, b.thread, "one Web Worker ran two synchronous jobs at once");
        overlapping++;
      }
    }
  }
  return overlapping;
}

Deno.test("Web Worker pool: synchronous jobs run side by side on 2 Web Workers, one after another on 1", async () => {
  // About 200 ms of hashing per job, calibrated here.
  hash(5_000_000);
  let calibrationMs = Infinity;
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    hash(10_000_000);
    calibrationMs = Math.min(calibrationMs, performance.now() - started);
  }
  const rounds = Math.round(10_000_000 * 200 / calibrationMs);
  assert.equal(await overlappingRuns(1, 4, rounds), 0, "a Web Worker runs one job at a time");

  // On 2 Web Workers, each of two jobs blocks its thread until the other has started: they meet
  // only if both run at once. Timing alone cannot show it on a loaded machine, where the second
  // Web Worker may come up after the first has run every job.
  const ended = await drainOnWebWorkers(meet, (db) => Array(2).fill({ db, waitMs: 120_000 }), 2);
  assert.equal(ended.length, 2);
  for (const row of ended) {
    assert.deepEqual(JSON.parse(row.info!), { met: true }, `job ${row.job_id} met the other`);
  }
});

Deno.test("Web Worker pool: timeoutMs aborts ctx.signal inside the Web Worker with a JobTimeoutError", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  let id = -1;
  let startedAt = 0;
  queue.addEventListener("job:start", (event) => {
    if (event.detail.name === timesOut.name) startedAt = Date.now();
  });
  const worker = queue.work({ executor: "workers", workers: 1, pollMs: 20, graceMs: 1_000 });
  try {
    // A first job brings the Web Worker up (its isolate, the jobs module: seconds under load),
    // so the 300 ms timeout below is spent in the handler, not in the Web Worker's start.
    const warmUp = await queue.dispatch(where, { db: tmp.dbPath });
    await waitUntil(
      "a first job ran in the Web Worker",
      () => readLedger(db, "job_id = ? AND outcome = 'success'", warmUp).length === 1,
      90_000,
    );
    id = await queue.dispatch(timesOut, { db: tmp.dbPath });
    await waitUntil(
      "the handler saw its signal abort",
      () => readLedger(db, "job_id = ?", id).length === 1,
      90_000,
    );
  } finally {
    await worker.stop();
  }

  const [run] = readLedger(db, "job_id = ?", id);
  const seen = JSON.parse(run!.info!);
  const abortedAfterMs = run!.end! - startedAt;
  console.log(
    `Web Workers: timeoutMs 300: ctx.signal aborted in the Web Worker ${abortedAfterMs} ms after ` +
      `job:start (${seen.afterMs} ms after the handler began)`,
  );
  assert.equal(seen.isJobTimeoutError, true, "ctx.signal.reason is a JobTimeoutError");
  assert.equal(seen.name, "JobTimeoutError");
  assert.equal(seen.message, 'Job "ww.times-out" timed out: ran past 300 ms');
  assert.equal(seen.timeoutMs, 300);
  // Never before the timeout; how late is the bench's to measure, not a test's.
  assert.ok(abortedAfterMs >= 300, `aborted after ${abortedAfterMs} ms`);
  const failed = await queue.failedJob(id);
  assert.equal(failed?.error, 'JobTimeoutError: Job "ww.times-out" timed out: ran past 300 ms');
  assert.equal(failed?.attempts, 1);
});

Deno.test("Web Worker pool: a job sharing a Web Worker with one that hangs past grace is put back with its attempt given back", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  const hangId = await queue.dispatch(hangs, { db: tmp.dbPath }, { priority: 10 });
  // Held far longer than the hung job's timeout and grace, so a loaded machine still kills the hung
  // job's Web Worker while the sibling runs in it.
  const siblingId = await queue.dispatch(sibling, { db: tmp.dbPath, holdMs: 15_000 });
  const retries = recordEvents(queue, "job:retry");
  const worker = queue.work({
    executor: "workers",
    workers: 1,
    concurrency: 2,
    graceMs: 200,
    pollMs: 20,
  });
  try {
    await waitUntil(
      "the sibling succeeded",
      () => readLedger(db, "job_id = ? AND outcome = 'success'", siblingId).length === 1,
      30_000,
    );
  } finally {
    await worker.stop();
  }

  const runs = readLedger(db, "job_id = ?", siblingId);
  assert.deepEqual(runs.map((row) => [row.outcome, row.attempt]), [
    ["start", 1],
    ["start", 1],
    ["success", 1],
  ]);
  assert.notEqual(runs[0]!.thread, runs[1]!.thread, "the second start was in the replacement");
  const backAfterMs = runs[1]!.start - runs[0]!.start;
  assert.deepEqual(
    retries.filter((retry) => retry.id === siblingId).map(({ attempt, error, delayMs }) => ({
      attempt,
      error: error?.message,
      delayMs,
    })),
    [{
      attempt: 1,
      error: `Web Worker terminated: job ${hangId} did not stop within 200 ms of being aborted`,
      delayMs: 0,
    }],
  );
  const failed = await queue.failedJob(hangId);
  assert.match(failed?.error ?? "", /^JobTimeoutError: /);
  assert.equal(await queue.failedJob(siblingId), null);
  assert.equal(worker.stopReason, "requested");
  console.log(
    `Web Workers: the sibling of a hung job was put back and restarted ${backAfterMs} ms after its first start`,
  );
});

Deno.test("Web Worker pool: stop() terminates every Web Worker of the pool and releases what they ran", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  await queue.dispatchMany(where, Array(3).fill({ db: tmp.dbPath, holdMs: 10_000 }));
  const worker = queue.work({
    executor: "workers",
    workers: 3,
    concurrency: 3,
    graceMs: 100,
    pollMs: 20,
  });
  let threads: Set<string>;
  try {
    await waitUntil(
      "three handlers started",
      () => readLedger(db, "outcome = 'start'").length === 3,
    );
    threads = new Set(readLedger(db, "outcome = 'start'").map((row) => row.thread));
    assert.equal(threads.size, 3);
    const live = liveThreads();
    assert.ok([...threads].every((thread) => live.has(thread)));
  } finally {
    await worker.stop();
  }
  const stoppedAt = performance.now();
  await waitUntil(
    "the pool's threads ended",
    () => [...threads].every((thread) => !liveThreads().has(thread)),
    30_000,
    10,
  );
  console.log(
    `Web Workers: the pool's 3 threads were gone ${
      Math.round(performance.now() - stoppedAt)
    } ms after stop() returned`,
  );
  assert.deepEqual(await queue.counts(), {
    default: { pending: 3, delayed: 0, reserved: 0, failed: 0, running: [] },
  });
});

Deno.test("Web Worker pool: ctx.rateLimitGroup() in a Web Worker holds the job's group and gives its attempt back", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  const id = await queue.dispatch(holdsGroup, { db: tmp.dbPath, tenant: "t1" });
  const worker = queue.work({ executor: "workers", workers: 1, stopWhenEmpty: true, pollMs: 20 });
  await worker.done;
  assert.deepEqual(
    readLedger(db, "job_id = ?", id).map((row) => [row.outcome, JSON.parse(row.info!)]),
    [["start", { inWebWorker: true }]],
  );
  const result = await queue.result(id);
  assert.deepEqual(
    [result?.state, result?.attempts],
    ["pending", 0],
    "put back, attempt given back",
  );
  assert.equal(await queue.resumeGroup(holdsGroup, "t1"), true, "its group was held");
});

Deno.test("Web Worker pool: a job's result goes out while the next job of the same message holds the thread, not after it", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  const short = await queue.dispatch(busy, { ms: 50 });
  const long = await queue.dispatch(busy, { ms: 3_000 });
  const completedAt = new Map<number, number>();
  queue.addEventListener("job:complete", ({ detail }) => completedAt.set(detail.id, Date.now()));
  // One Web Worker, two slots: one tick hands it both jobs in one message.
  const worker = queue.work({
    executor: "workers",
    workers: 1,
    concurrency: 2,
    stopWhenEmpty: true,
    pollMs: 20,
  });
  await worker.done;
  assert.equal(worker.stats.completed, 2);
  const longEnded = (await queue.result(long))?.output as number;
  assert.ok(
    completedAt.get(short)! < longEnded,
    `the short job completed ${completedAt.get(short)! - longEnded} ms after the long one ended`,
  );
});

Deno.test("Web Worker pool: a job's timeout counts from when the Web Workers can run it, not while they load the jobs module", async () => {
  await using tmp = await tempDir();
  const slowJobs = new URL("../fixtures/web_workers/slow_start_jobs.ts", import.meta.url).href;
  const { quick } = await import(slowJobs);
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: slowJobs });
  await queue.dispatchMany(quick, [{ n: 1 }, { n: 2 }, { n: 3 }]);
  const worker = queue.work({
    executor: "workers",
    workers: 2,
    concurrency: 3,
    stopWhenEmpty: true,
    pollMs: 20,
  });
  await worker.done;
  assert.deepEqual(worker.stats, { completed: 3, failed: 0, retried: 0 });
  assert.deepEqual(await storedCounts(queue), {});
});

Deno.test("Web Worker pool: a stop whose grace ends while a job with middleware holds its thread puts the job back only once its handler stopped, so no job of its key runs beside it", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  const id = await queue.dispatch(busyLocked, { db: tmp.dbPath, ms: 1_500 });
  const first = queue.work({ executor: "workers", workers: 1, pollMs: 20, graceMs: 5_000 });
  await waitUntil("the job started", () => readLedger(db, "outcome = 'start'").length === 1);
  const stopped = first.stop({ graceMs: 50 });
  const second = queue.work({ executor: "workers", workers: 1, pollMs: 20 });
  await waitUntil(
    "the job ran again and completed",
    () => readLedger(db, "job_id = ? AND outcome = 'success'", id).length === 2,
  );
  await stopped;
  await second.stop();
  const rows = readLedger(db, "job_id = ?", id);
  assert.deepEqual(rows.map((row) => row.outcome), ["start", "success", "start", "success"]);
  assert.ok(rows[2]!.start >= rows[1]!.end!, "the second run began after the first ended");
  assert.equal(second.stats.completed, 1);
});

Deno.test("Web Worker pool: a job that timed out while it waited behind a handler holding its Web Worker never calls its handler", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  const release = `${tmp.dbPath}.release`;
  const worker = queue.work({ executor: "workers", workers: 1, concurrency: 2, pollMs: 20 });
  try {
    const holding = await queue.dispatch(holdsUntil, { db: tmp.dbPath, release });
    await waitUntil(
      "the first job holds the Web Worker",
      () => readLedger(db, "job_id = ?", holding).length === 1,
      90_000,
    );
    // Handed to the same Web Worker, whose thread is held: its 300 ms run out before it begins.
    const waiting = await queue.dispatch(quick, { db: tmp.dbPath });
    for (const deadline = Date.now() + 90_000; (await queue.failedJob(waiting)) === null;) {
      if (Date.now() > deadline) throw new Error("the waiting job did not time out");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await Deno.writeTextFile(release, "");
    // A job handed over later runs after the waiting one's turn in that Web Worker came.
    const after = await queue.dispatch(where, { db: tmp.dbPath });
    await waitUntil(
      "a later job ran in the Web Worker",
      () => readLedger(db, "job_id = ? AND outcome = 'success'", after).length === 1,
      90_000,
    );
    assert.match((await queue.failedJob(waiting))!.error, /^JobTimeoutError: /);
    assert.deepEqual(readLedger(db, "job_id = ?", waiting), [], "its handler was never called");
  } finally {
    await Deno.writeTextFile(release, "");
    await worker.stop();
  }
});

Deno.test("Web Worker pool: a job aborted while it waits behind a handler holding its Web Worker is given up without terminating that Web Worker, so the handler holding it runs once", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  const release = `${tmp.dbPath}.release`;
  const worker = queue.work({
    executor: "workers",
    workers: 1,
    concurrency: 2,
    pollMs: 20,
    graceMs: 100,
  });
  try {
    const holding = await queue.dispatch(holdsUntil, { db: tmp.dbPath, release });
    await waitUntil(
      "the first job holds the Web Worker",
      () => readLedger(db, "job_id = ?", holding).length === 1,
      90_000,
    );
    const waiting = await queue.dispatch(quick, { db: tmp.dbPath }); // times out after 300 ms
    for (const deadline = Date.now() + 90_000; (await queue.failedJob(waiting)) === null;) {
      if (Date.now() > deadline) throw new Error("the waiting job did not time out");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // Ten times the grace after the abort: a Web Worker terminated for the waiting job would have
    // put the holding job back, and its next start would be in the ledger by the release.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await Deno.writeTextFile(release, "");
    await waitUntil(
      "the holding job completed",
      () => readLedger(db, "job_id = ? AND outcome = 'success'", holding).length === 1,
      90_000,
    );
    assert.equal(readLedger(db, "job_id = ? AND outcome = 'start'", holding).length, 1);
    assert.match((await queue.failedJob(waiting))!.error, /^JobTimeoutError: /);
    assert.deepEqual(readLedger(db, "job_id = ?", waiting), [], "its handler was never called");
    assert.equal((await queue.result(holding))?.attempts, 1);
  } finally {
    await Deno.writeTextFile(release, "");
    await worker.stop();
  }
});

Deno.test("Web Worker pool: when a job kills its Web Worker, a job waiting there whose handler had not begun is put back uncharged, and runs once", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  const release = `${tmp.dbPath}.release`;
  const worker = queue.work({ executor: "workers", workers: 1, concurrency: 2, pollMs: 20 });
  try {
    const dies = await queue.dispatch(holdsThenDies, { db: tmp.dbPath, release });
    await waitUntil(
      "the dying job holds the Web Worker",
      () => readLedger(db, "job_id = ?", dies).length === 1,
      90_000,
    );
    const waiting = await queue.dispatch(where, { db: tmp.dbPath });
    await waitFor(async () => {
      const running = (await queue.counts())["default"]?.running ?? [];
      return running.some((job) => job.id === waiting);
    }, { what: "the waiting job is handed over", timeoutMs: 90_000 });
    await Deno.writeTextFile(release, "");
    await waitFor(async () => (await queue.result(waiting))?.state === "completed", {
      what: "the waiting job completed",
      timeoutMs: 90_000,
    });
    assert.equal(readLedger(db, "job_id = ? AND outcome = 'start'", waiting).length, 1);
    assert.equal((await queue.result(waiting))?.attempts, 1);
    assert.match((await queue.failedJob(dies))?.error ?? "", /Web Worker/);
  } finally {
    await Deno.writeTextFile(release, "");
    await worker.stop();
  }
});

Deno.test("Web Worker pool: a job that succeeded counts as completed when a promise it left rejecting ends its Web Worker before the result is sent", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  using db = openReader(tmp.dbPath);
  const worker = queue.work({ executor: "workers", workers: 1, concurrency: 2, pollMs: 20 });
  try {
    // A job beside it, so its result waits to go out with the next batch instead of at once.
    const beside = await queue.dispatch(where, { db: tmp.dbPath, holdMs: 60_000 });
    await waitUntil(
      "the job beside runs",
      () => readLedger(db, "job_id = ?", beside).length === 1,
      90_000,
    );
    const leaves = await queue.dispatch(leavesRejection, { db: tmp.dbPath });
    await waitFor(async () => (await queue.result(leaves))?.state === "completed", {
      what: "the job that left a rejection completed",
      timeoutMs: 90_000,
    });
    assert.equal(readLedger(db, "job_id = ? AND outcome = 'start'", leaves).length, 1);
    assert.equal((await queue.result(leaves))?.attempts, 1);
  } finally {
    await worker.stop();
  }
});

Deno.test("Web Worker pool: a jobs module that never finishes loading in the Web Workers holds back no stop: maxTimeMs ends the worker; without it the pool gives up on them after its wait, says so, and runs the jobs in this isolate", async () => {
  await using tmp = await tempDir();
  const jobs = new URL("../fixtures/web_workers/hangs_in_web_workers.ts", import.meta.url).href;
  await using queue = await Queue.open({ path: `${tmp.dir}/q.db`, jobs });
  const errors: string[] = [];
  queue.addEventListener("queue:error", (event) => {
    errors.push((event as CustomEvent<QueueEventMap["queue:error"]>).detail.error.message);
  });
  const timed = queue.work({ executor: "workers", maxTimeMs: 1_000 });
  const { reason } = await new Promise<QueueEventMap["worker:stop"]>((resolve) =>
    queue.addEventListener(
      "worker:stop",
      (event) => resolve((event as CustomEvent<QueueEventMap["worker:stop"]>).detail),
      { once: true },
    )
  );
  assert.equal(reason, "time");
  await timed.stop();
  const id = await queue.dispatchByName("hangs-in-web-workers.loaded", { n: 1 });
  await using worker = queue.work({ executor: "workers", pollMs: 20 });
  await waitUntil(
    "the job run once the pool gave up on its Web Workers",
    () => worker.stats.completed === 1,
    90_000,
  );
  assert.equal((await queue.result(id))?.state, "completed");
  assert.ok(
    errors.some((message) => /did not load the jobs module within 20 s/.test(message)),
    errors.join("\n"),
  );
});
