import assert from "node:assert/strict";
import { z } from "zod";
import type { QueueEventMap } from "../src/events.ts";
import { defineJob } from "../src/job.ts";
import { drain } from "../src/testing.ts";
import { gate, record } from "./fixtures/runner/harness.ts";
import { storeTest } from "./_stores.ts";

const JOBS = 20;

storeTest(
  "a worker at concurrency 1 claims quick jobs ahead, leased, and runs each once in order",
  async (db) => {
    const order: number[] = [];
    const reservedSeen: number[] = [];
    const opened: { queue?: { counts(): Promise<Record<string, { reserved: number }>> } } = {};
    const job = defineJob({
      name: "quick",
      schema: z.number(),
      async handle(n) {
        order.push(n);
        if (n === 5) reservedSeen.push((await opened.queue!.counts()).default!.reserved);
      },
    });
    await using queue = await db.open({ jobs: [job] });
    opened.queue = queue;
    await queue.dispatchMany(job, Array.from({ length: JOBS }, (_, n) => n));
    const stats = await drain(queue, { concurrency: 1 });
    assert.equal(stats.completed, JOBS);
    assert.deepEqual(order, Array.from({ length: JOBS }, (_, n) => n));
    // Job 5 ran while the jobs after it were already claimed: leased, not yet started.
    assert.ok(reservedSeen[0]! > 1, `reserved while job 5 ran: ${reservedSeen[0]}`);
    const left = (await queue.counts()).default;
    assert.deepEqual([left?.pending, left?.reserved, left?.failed], [0, 0, 0]);
  },
);

storeTest(
  "stop() puts jobs claimed ahead back with their attempt given back, and none starts",
  async (db) => {
    const held = gate();
    const third = gate();
    const ran: number[] = [];
    const job = defineJob({
      name: "held-at-3",
      schema: z.number(),
      async handle(n) {
        ran.push(n);
        if (n === 3) {
          third.resolve();
          await held.promise;
        }
      },
    });
    await using queue = await db.open({ jobs: [job] });
    await queue.dispatchMany(job, Array.from({ length: JOBS }, (_, n) => n));
    const worker = queue.work({ concurrency: 1, pollMs: 10, graceMs: 60_000 });
    const started = record<QueueEventMap["job:start"]>(worker, "job:start");
    await third.promise;
    const stopping = worker.stop();
    held.resolve();
    await stopping;
    assert.deepEqual(ran, [0, 1, 2, 3]);
    assert.equal(started.length, 4);
    const counts = (await queue.counts()).default!;
    assert.deepEqual([counts.pending, counts.reserved, counts.failed], [JOBS - 4, 0, 0]);
    // Put back untouched: a later worker runs each at attempt 1.
    const attempts: number[] = [];
    queue.addEventListener("job:start", ({ detail }) => attempts.push(detail.attempt));
    assert.equal((await drain(queue, { concurrency: 1 })).completed, JOBS - 4);
    assert.deepEqual([...new Set(attempts)], [1]);
  },
);

storeTest(
  "jobs claimed ahead behind a slow job that outlasts a third of their lease are put back, then each runs once",
  async (db) => {
    const runs = new Map<number, number>();
    const job = defineJob({
      name: "mostly-quick",
      schema: z.number(),
      async handle(n) {
        runs.set(n, (runs.get(n) ?? 0) + 1);
        if (n === 4) await new Promise((resolve) => setTimeout(resolve, 1_500));
      },
    });
    await using queue = await db.open({ jobs: [job] });
    await queue.dispatchMany(job, Array.from({ length: JOBS }, (_, n) => n));
    const failed = record(queue, "job:failed");
    const stats = await drain(queue, { concurrency: 1, leaseMs: 1_200, timeoutMs: 60_000 });
    assert.equal(stats.completed, JOBS);
    assert.deepEqual([...runs.values()], Array(JOBS).fill(1), "a job ran twice or not at all");
    assert.deepEqual(failed, []);
  },
);
