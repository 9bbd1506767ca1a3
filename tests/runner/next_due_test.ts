import assert from "node:assert/strict";
import { z } from "zod";
import type { QueueEventMap } from "../../src/events.ts";
import { defineJob } from "../../src/job.ts";
import { nextEvent } from "../_helpers.ts";
import { storeTest } from "../_stores.ts";

const POLL_MS = 120_000;

storeTest(
  "an idle worker starts a delayed job at its due time, not at its next poll",
  async (db) => {
    const job = defineJob({ name: "later", schema: z.null(), handle() {} });
    await using queue = await db.open({ jobs: [job] });
    const worker = queue.work({ pollMs: POLL_MS });
    try {
      // Far within the poll interval: the due time, not the poll, woke the worker.
      const started = nextEvent<QueueEventMap["job:start"]>(
        worker,
        "job:start",
        () => true,
        60_000,
      );
      const dueAt = Date.now() + 300;
      const id = await queue.dispatch(job, null, { delayMs: 300 });
      assert.equal((await started).id, id);
      assert.ok(Date.now() >= dueAt, "the job started before it was due");
    } finally {
      await worker.stop();
    }
  },
);

storeTest("a worker wakes at each of several due times in turn", async (db) => {
  const order: number[] = [];
  const job = defineJob({
    name: "in-turn",
    schema: z.number(),
    handle(n) {
      order.push(n);
    },
  });
  await using queue = await db.open({ jobs: [job] });
  const worker = queue.work({ pollMs: POLL_MS });
  try {
    const third = nextEvent<QueueEventMap["job:complete"]>(
      worker,
      "job:complete",
      () => order.length === 3,
      60_000,
    );
    // Due times fixed up front, so that slow dispatches (a loaded machine) cannot reorder them.
    const base = Date.now() + 2_000;
    for (const n of [3, 1, 2]) {
      await queue.dispatch(job, n, { delayMs: Math.max(0, base + n * 300 - Date.now()) });
    }
    await third;
    assert.deepEqual(order, [1, 2, 3], JSON.stringify(order));
  } finally {
    await worker.stop();
  }
});
