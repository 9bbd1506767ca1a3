import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import type { QueueEventMap } from "../../src/events.ts";
import { defineJob, type JobContext } from "../../src/job.ts";
import { Queue } from "../../src/queue.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { nextEvent, tempDir, within } from "../_helpers.ts";
import { events, gate, readRows, record } from "../fixtures/runner/harness.ts";

type Detail<K extends keyof QueueEventMap> = QueueEventMap[K];

/** A job whose first attempt waits on `held` (ignoring its signal); later attempts return. */
function heldJob(name: string, held: PromiseWithResolvers<void>) {
  const seen: { attempt: number; signal: AbortSignal }[] = [];
  const job = defineJob({
    name,
    schema: z.null(),
    async handle(_payload, ctx: JobContext) {
      seen.push({ attempt: ctx.attempt, signal: ctx.signal });
      if (seen.length === 1) await held.promise;
    },
  });
  return { job, seen };
}

Deno.test("stop(): nothing more is claimed, jobs that finish within grace complete, the rest are aborted and released", async () => {
  const shortGate = gate();
  const longGate = gate();
  const short = heldJob("short", shortGate);
  const long = heldJob("long", longGate);
  const waitingGate = gate();
  waitingGate.resolve();
  const waiting = heldJob("waiting", waitingGate);
  await using queue = await Queue.open({
    path: ":memory:",
    jobs: [short.job, long.job, waiting.job],
  });
  await queue.dispatch(short.job, null);
  const longId = await queue.dispatch(long.job, null);
  await queue.dispatch(waiting.job, null);

  const worker = queue.work({ concurrency: 2, pollMs: 5 });
  const stops = record<Detail<"worker:stop">>(worker, "worker:stop");
  const retries = record<Detail<"job:retry">>(worker, "job:retry");
  await events(worker, "job:start", 2);
  const stopping = worker.stop({ graceMs: 150 });
  await queue.dispatch(waiting.job, null); // dispatched after the stop: never claimed
  shortGate.resolve();
  try {
    await stopping;
  } finally {
    longGate.resolve();
  }

  assert.equal(short.seen.length, 1);
  assert.equal(waiting.seen.length, 0, "a job was claimed after stop()");
  const [longRun] = long.seen;
  assert.ok(longRun?.signal.aborted, "the long job's signal was not aborted");
  assert.match(String(longRun.signal.reason?.message), /stopping/);
  assert.deepEqual(retries.map((retry) => ({ ...retry, error: retry.error?.message })), [{
    id: longId,
    name: "long",
    queue: "default",
    attempt: 1,
    error: "worker stopped during the attempt",
    delayMs: 0,
  }]);
  assert.deepEqual(stops, [{ completed: 1, failed: 0, retried: 1, reason: "requested" }]);
  assert.deepEqual({ ...worker.stats, reason: worker.stopReason }, stops[0]);
  assert.deepEqual(await queue.counts(), {
    default: { pending: 3, delayed: 0, reserved: 0, failed: 0, running: [] },
  });

  // The released job got its attempt back: its next run is attempt 1 again.
  assert.deepEqual(await workUntilEmpty(queue, { concurrency: 3 }), {
    completed: 3,
    failed: 0,
    retried: 0,
  });
  assert.deepEqual(long.seen.map((run) => run.attempt), [1, 1]);
});

Deno.test("stop() called again with a shorter grace cuts the wait", async () => {
  const held = gate();
  const { job, seen } = heldJob("held", held);
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  await queue.dispatch(job, null);
  const worker = queue.work({ pollMs: 5 });
  await nextEvent(worker, "job:start");
  const first = worker.stop({ graceMs: 120_000 });
  const second = worker.stop({ graceMs: 0 });
  try {
    // Far within the first grace: the second call, not the first grace, ended the wait.
    await within(second, 60_000, "stop() with graceMs 0");
    await first;
  } finally {
    held.resolve();
  }
  assert.ok(seen[0]?.signal.aborted);
  assert.equal((await queue.counts()).default?.pending, 1);
});

Deno.test("stop() with a longer grace than a pending one does not extend the wait", async () => {
  const held = gate();
  const { job } = heldJob("held-longer", held);
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  await queue.dispatch(job, null);
  const worker = queue.work({ pollMs: 5 });
  await nextEvent(worker, "job:start");
  const first = worker.stop({ graceMs: 50 });
  void worker.stop({ graceMs: 120_000 });
  try {
    // Far within the second grace: the first one still ended the wait.
    await within(first, 60_000, "stop() with graceMs 50");
  } finally {
    held.resolve();
  }
});

Deno.test("stop() resolves with done, and worker:stop fires once however often stop() is called", async () => {
  const { job } = heldJob("quick", Promise.withResolvers());
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  const worker = queue.work({ pollMs: 5 });
  const stops = record<Detail<"worker:stop">>(queue, "worker:stop");
  let doneSettled = false;
  worker.done.then(() => doneSettled = true);
  await Promise.all([worker.stop(), worker.stop({ graceMs: 0 }), worker.stop()]);
  assert.ok(doneSettled);
  assert.deepEqual(stops, [{ completed: 0, failed: 0, retried: 0, reason: "requested" }]);
});

Deno.test("`await using` a worker stops it at the end of the block", async () => {
  const quick = defineJob({ name: "quick", schema: z.null(), handle() {} });
  await using queue = await Queue.open({ path: ":memory:", jobs: [quick] });
  await queue.dispatch(quick, null);
  let stopped = false;
  {
    await using worker = queue.work({ pollMs: 5, graceMs: 100 });
    worker.done.then(() => stopped = true);
    await nextEvent(worker, "job:complete");
    assert.equal(stopped, false);
  }
  assert.equal(stopped, true);
});

Deno.test("Queue.close() stops its workers and releases their running jobs after grace", async () => {
  const held = gate();
  const { job, seen } = heldJob("closing", held);
  const queue = await Queue.open({ path: ":memory:", jobs: [job] });
  try {
    await queue.dispatch(job, null);
    const worker = queue.work({ pollMs: 5, graceMs: 20 });
    await nextEvent(worker, "job:start");
    const stopped = nextEvent<Detail<"worker:stop">>(worker, "worker:stop");
    await queue.close();
    assert.deepEqual(await stopped, { completed: 0, failed: 0, retried: 1, reason: "requested" });
    assert.ok(seen[0]?.signal.aborted);
  } finally {
    held.resolve();
    await queue.close();
  }
});

Deno.test("stop() on an idle worker returns at once, not after its poll interval or grace", async () => {
  const quick = defineJob({ name: "quick", schema: z.null(), handle() {} });
  await using queue = await Queue.open({ path: ":memory:", jobs: [quick] });
  await queue.dispatch(quick, null);
  const worker = queue.work({ pollMs: 120_000, graceMs: 120_000 });
  await nextEvent(worker, "job:complete");
  // Far within both the poll interval and the grace.
  await within(worker.stop(), 60_000, "stop() of an idle worker");
});

Deno.test("stop() on a worker that already stopped leaves no timer behind to hold the process", async () => {
  const fixture = fileURLToPath(new URL("../fixtures/runner/stop_after_done.ts", import.meta.url));
  const config = fileURLToPath(new URL("../../deno.json", import.meta.url));
  const graceMs = 120_000;
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", "--config", config, fixture, String(graceMs)],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(output.stderr);
  assert.ok(output.success, `the child failed: ${stderr}`);
  const report = JSON.parse(new TextDecoder().decode(output.stdout)) as {
    completed: number;
    lingerMs: number;
  };
  assert.equal(report.completed, 1);
  assert.ok(
    report.lingerMs < graceMs / 2,
    `the process lingered ${Math.round(report.lingerMs)} ms after the queue closed`,
  );
});

/** Resolves once `signal` aborts; rejects after `timeoutMs`. */
function aborted(signal: AbortSignal, timeoutMs = 5_000): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no abort within ${timeoutMs} ms`)), timeoutMs);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

/**
 * Two jobs run on a file queue, "held" (ignoring its signal) and "quick".
 * "quick" returns while another connection holds the write lock, so its
 * settle waits; `stop({ graceMs: 0 })` comes during that wait and aborts
 * "held". With `lateJob`, a third job is due by then, so the waiting
 * settle's claim takes it while the worker is stopping. Returns what the
 * file holds once the worker is done.
 */
async function stopWhileSettleWaitsOnLock(lateJob: boolean) {
  await using dir = await tempDir();
  const heldGate = gate();
  const quickGate = gate();
  const held = heldJob("held", heldGate);
  const quick = heldJob("quick", quickGate);
  const lateGate = gate();
  lateGate.resolve(); // were "late" started, it would end at once
  const late = heldJob("late", lateGate);
  await using queue = await Queue.open({
    path: dir.dbPath,
    jobs: [held.job, quick.job, late.job],
  });
  await queue.dispatch(held.job, null);
  await queue.dispatch(quick.job, null);
  const worker = queue.work({ concurrency: 2, pollMs: 5 });
  let stoppedAt = Infinity;
  const startsAfterStop: string[] = [];
  worker.addEventListener("job:start", (event) => {
    if (performance.now() >= stoppedAt) startsAfterStop.push(event.detail.name);
  });
  const quickCompleted = nextEvent(worker, "job:complete").then(() => performance.now());
  let unlockedAt = Infinity;
  try {
    await events(worker, "job:start", 2);
    if (lateJob) await queue.dispatch(late.job, null);
    // A second connection takes the write lock, as another process would.
    const other = new DatabaseSync(dir.dbPath);
    other.exec("BEGIN IMMEDIATE");
    const lockedAt = performance.now();
    let stopping: Promise<void>;
    try {
      quickGate.resolve(); // "quick" returns; settling it (and claiming) now waits on the lock
      // The settle starts in the microtasks after "quick" returns; one timer turn later it waits.
      await new Promise((resolve) => setTimeout(resolve, 0));
      stoppedAt = performance.now();
      stopping = worker.stop({ graceMs: 0 });
      await aborted(held.seen[0]!.signal);
      // A short hold of the lock, so that the settle is still waiting after the abort.
      const restMs = Math.max(0, lockedAt + 300 - performance.now());
      await new Promise((resolve) => setTimeout(resolve, restMs));
    } finally {
      unlockedAt = performance.now();
      other.exec("COMMIT");
      other.close();
    }
    await stopping;
  } finally {
    heldGate.resolve();
  }
  assert.ok(
    (await quickCompleted) >= unlockedAt,
    "quick settled before the lock was released: the scenario did not happen",
  );
  assert.equal(quick.seen.length, 1);
  return {
    counts: await queue.counts(),
    attempts: Object.fromEntries(
      readRows<{ name: string; attempts: number }>(dir.dbPath, "SELECT name, attempts FROM jobs")
        .map((row) => [row.name, row.attempts]),
    ),
    startsAfterStop,
    lateRuns: late.seen.length,
    stats: worker.stats,
  };
}

Deno.test("stop({ graceMs: 0 }) while a settle waits on another connection's lock still releases the aborted job", async () => {
  const result = await stopWhileSettleWaitsOnLock(false);
  assert.deepEqual(result.counts, {
    default: { pending: 1, delayed: 0, reserved: 0, failed: 0, running: [] },
  }, "the aborted job must be put back, not left reserved until its lease ends");
  assert.deepEqual(result.attempts, { held: 0 }, "the aborted attempt is given back");
  assert.deepEqual(result.stats, { completed: 1, failed: 0, retried: 1 });
});

Deno.test("stop({ graceMs: 0 }) while a settle waits on a lock starts none of the jobs that settle claims, and puts them back", async () => {
  const result = await stopWhileSettleWaitsOnLock(true);
  assert.deepEqual(result.startsAfterStop, [], "a job started after stop()");
  assert.equal(result.lateRuns, 0);
  assert.deepEqual(result.counts, {
    default: { pending: 2, delayed: 0, reserved: 0, failed: 0, running: [] },
  });
  assert.deepEqual(result.attempts, { held: 0, late: 0 });
});
