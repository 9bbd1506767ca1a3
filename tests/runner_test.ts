import assert from "node:assert/strict";
import { z } from "zod";
import type { QueueEventMap } from "../src/events.ts";
import { defineJob } from "../src/job.ts";
import { Queue } from "../src/queue.ts";
import { drain } from "../src/testing.ts";
import { ManualClock, nextEvent, tempDir } from "./_helpers.ts";
import { events, gate, readRows } from "./fixtures/runner/harness.ts";

type Detail<K extends keyof QueueEventMap> = QueueEventMap[K];

/** A job that records its payload's label in `order` when it runs. */
function labelJob(name: string, order: string[], queue = "default") {
  return defineJob({
    name,
    queue,
    schema: z.object({ label: z.string() }),
    handle({ label }) {
      order.push(label);
    },
  });
}

Deno.test("work() over [high, default] runs every due high job before any default job", async () => {
  const order: string[] = [];
  const job = labelJob("step", order);
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  for (const n of [1, 2, 3]) {
    await queue.dispatch(job, { label: `default-${n}` });
    await queue.dispatch(job, { label: `high-${n}` }, { queue: "high" });
  }
  await drain(queue, { queues: ["high", "default"], concurrency: 1 });
  assert.deepEqual(order, ["high-1", "high-2", "high-3", "default-1", "default-2", "default-3"]);
});

Deno.test("one claim of several jobs takes every due high job before a default one", async () => {
  const release = gate();
  const job = defineJob({
    name: "batched",
    schema: z.object({ label: z.string() }),
    async handle() {
      await release.promise;
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  for (const n of [1, 2, 3]) await queue.dispatch(job, { label: `default-${n}` });
  for (const n of [1, 2]) await queue.dispatch(job, { label: `high-${n}` }, { queue: "high" });
  const worker = queue.work({ queues: ["high", "default"], concurrency: 3, pollMs: 5 });
  const firstClaim = await events<Detail<"job:start">>(worker, "job:start", 3);
  release.resolve();
  await worker.stop();
  assert.deepEqual(firstClaim.map((start) => start.queue).sort(), ["default", "high", "high"]);
});

Deno.test("within a queue a higher priority runs first, then the earlier due time", async () => {
  const order: string[] = [];
  const job = labelJob("ranked", order);
  const urgent = defineJob({
    name: "urgent",
    schema: z.object({ label: z.string() }),
    priority: 3,
    handle({ label }) {
      order.push(label);
    },
  });
  const clock = new ManualClock();
  await using queue = await Queue.open({ path: ":memory:", jobs: [job, urgent], clock });
  await queue.dispatch(job, { label: "due+300" }, { delayMs: 300 });
  await queue.dispatch(job, { label: "due+100" }, { delayMs: 100 });
  await queue.dispatch(job, { label: "priority-5" }, { delayMs: 200, priority: 5 });
  await queue.dispatch(urgent, { label: "job-priority-3" }, { delayMs: 250 });
  clock.advance(50);
  await queue.dispatch(job, { label: "due+50" });
  clock.advance(1_000);
  await drain(queue, { concurrency: 1 });
  assert.deepEqual(order, ["priority-5", "job-priority-3", "due+50", "due+100", "due+300"]);
});

Deno.test("a high job dispatched while default jobs are being worked goes next", async () => {
  const order: string[] = [];
  const job = defineJob({
    name: "chatty",
    schema: z.object({ label: z.string(), spawn: z.boolean() }),
    async handle({ label, spawn }, ctx) {
      order.push(label);
      if (spawn) await ctx.queue.dispatch(job, { label: "high", spawn: false }, { queue: "high" });
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  await queue.dispatch(job, { label: "default-1", spawn: true });
  await queue.dispatch(job, { label: "default-2", spawn: false });
  await queue.dispatch(job, { label: "default-3", spawn: false });
  await drain(queue, { queues: ["high", "default"], concurrency: 1 });
  assert.deepEqual(order, ["default-1", "high", "default-2", "default-3"]);
});

Deno.test("a worker given no queues works the registered jobs' queues, default first", async () => {
  const order: string[] = [];
  await using queue = await Queue.open({
    path: ":memory:",
    jobs: [
      labelJob("z-mail", order, "mail"),
      labelJob("a-plain", order),
      labelJob("b", order, "b"),
    ],
  });
  const worker = queue.work({ pollMs: 5 });
  assert.deepEqual(worker.options.queues, ["default", "b", "mail"]);
  await worker.stop();
});

Deno.test("a worker never runs more handlers at once than its concurrency", async () => {
  let inFlight = 0;
  let peak = 0;
  const job = defineJob({
    name: "tracked",
    schema: z.number(),
    async handle() {
      peak = Math.max(peak, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, 10));
      inFlight--;
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  await queue.dispatchMany(job, Array.from({ length: 15 }, (_, i) => i));
  const stats = await drain(queue, { concurrency: 3 });
  assert.equal(stats.completed, 15);
  assert.equal(peak, 3);
});

Deno.test("jobs that finish together are settled together, in one transaction", async () => {
  await using dir = await tempDir();
  const release = gate();
  const job = defineJob({
    name: "grouped",
    schema: z.number(),
    async handle() {
      await release.promise;
    },
  });
  await using queue = await Queue.open({ path: dir.dbPath, jobs: [job] });
  await queue.dispatchMany(job, [1, 2, 3, 4]);
  const worker = queue.work({ concurrency: 4, pollMs: 5 });
  await events(worker, "job:start", 4);
  let leftAtFirstComplete = -1;
  let completesAtFirst = -1;
  const completes: number[] = [];
  worker.addEventListener("job:complete", (event) => {
    completes.push(event.detail.id);
    if (completes.length > 1) return;
    // Events are sent after the commit: a second connection sees the whole settle.
    leftAtFirstComplete = readRows<{ n: number }>(dir.dbPath, "SELECT COUNT(*) AS n FROM jobs")[0]!
      .n;
    queueMicrotask(() => completesAtFirst = completes.length);
  });
  const allDone = events(worker, "job:complete", 4);
  release.resolve();
  await allDone;
  await worker.stop();
  assert.equal(leftAtFirstComplete, 0);
  assert.equal(completesAtFirst, 4);
});

Deno.test("stopWhenEmpty stops once nothing is due now; delayed jobs do not keep it alive", async () => {
  const order: string[] = [];
  const job = labelJob("soon", order);
  const clock = new ManualClock();
  await using queue = await Queue.open({ path: ":memory:", jobs: [job], clock });
  await queue.dispatch(job, { label: "now-1" });
  await queue.dispatch(job, { label: "now-2" });
  await queue.dispatch(job, { label: "later" }, { delayMs: 60_000 });
  const worker = queue.work({ stopWhenEmpty: true, pollMs: 5 });
  await worker.done;
  assert.deepEqual(order, ["now-1", "now-2"]);
  assert.deepEqual(worker.stats, { completed: 2, failed: 0, retried: 0 });
  assert.deepEqual(await queue.counts(), {
    default: { pending: 0, delayed: 1, reserved: 0, failed: 0, running: [] },
  });
});

Deno.test("maxJobs starts exactly that many handlers even with concurrency above it", async () => {
  for (const [maxJobs, concurrency] of [[2, 5], [1, 4]] as const) {
    let starts = 0;
    const job = defineJob({
      name: "limited",
      schema: z.number(),
      async handle() {
        starts++;
        await new Promise((resolve) => setTimeout(resolve, 5));
      },
    });
    await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
    await queue.dispatchMany(job, [1, 2, 3, 4, 5, 6]);
    const worker = queue.work({ maxJobs, concurrency, pollMs: 5 });
    await worker.done;
    assert.equal(starts, maxJobs, `maxJobs ${maxJobs}, concurrency ${concurrency}`);
    assert.equal(worker.stats.completed, maxJobs);
    assert.equal((await queue.counts()).default?.pending, 6 - maxJobs);
  }
});

Deno.test("maxTimeMs stops claiming after that time and lets the running job finish", async () => {
  const order: string[] = [];
  const job = defineJob({
    name: "slow",
    schema: z.object({ label: z.string() }),
    async handle({ label }) {
      order.push(`start ${label}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
      order.push(`end ${label}`);
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  await queue.dispatch(job, { label: "a" });
  await queue.dispatch(job, { label: "b" });
  const worker = queue.work({ maxTimeMs: 100, concurrency: 1, pollMs: 5 });
  await worker.done;
  assert.deepEqual(order, ["start a", "end a"]);
  assert.deepEqual(worker.stats, { completed: 1, failed: 0, retried: 0 });
  assert.equal((await queue.counts()).default?.pending, 1);
});

Deno.test("maxTimeMs stops an idle worker on its own", async () => {
  const job = labelJob("idle", []);
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  const worker = queue.work({ maxTimeMs: 50, pollMs: 5 });
  const stopped = await nextEvent<Detail<"worker:stop">>(worker, "worker:stop", () => true, 2_000);
  assert.deepEqual(stopped, { completed: 0, failed: 0, retried: 0, reason: "limit" });
  await worker.done;
});

Deno.test("a dispatch wakes an idle worker at once instead of at its next poll", async () => {
  const order: string[] = [];
  const job = labelJob("woken", order);
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  const worker = queue.work({ pollMs: 60_000 });
  const started = performance.now();
  const completed = nextEvent(worker, "job:complete", () => true, 2_000);
  await queue.dispatch(job, { label: "x" });
  await completed;
  const wokeMs = performance.now() - started;
  await worker.stop();
  assert.deepEqual(order, ["x"]);
  assert.ok(wokeMs < 1_000, `took ${wokeMs} ms`);
});

Deno.test("a worker's stats count what it completed, failed and retried", async () => {
  const job = defineJob({
    name: "mixed",
    schema: z.enum(["ok", "retry", "fail"]),
    maxAttempts: 2,
    backoff: [60_000],
    handle(kind, ctx) {
      if (kind === "retry" && ctx.attempt === 1) throw new Error("once");
      if (kind === "fail") throw new Error("always");
    },
  });
  const clock = new ManualClock();
  await using queue = await Queue.open({ path: ":memory:", jobs: [job], clock });
  await queue.dispatchMany(job, ["ok", "ok", "retry", "fail"]);
  const first = await drain(queue, { concurrency: 4 });
  assert.deepEqual(first, { completed: 2, failed: 0, retried: 2 });
  clock.advance(120_000);
  const second = await drain(queue, { concurrency: 4 });
  assert.deepEqual(second, { completed: 1, failed: 1, retried: 0 });
});
