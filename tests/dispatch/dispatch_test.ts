/**
 * Dispatching while the queue closes: a running handler's follow-up is
 * stored within the grace period, dispatches from outside are refused. A
 * loop of dispatches on SQLite still lets timers run.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, Queue, QueueClosedError } from "../../mod.ts";
import { nextEvent, tempDir, within } from "../_helpers.ts";
import { gate, readRows } from "../fixtures/runner/harness.ts";

Deno.test("Queue.close() lets a running handler dispatch its follow-up within grace, while outside dispatches are refused", async () => {
  await using dir = await tempDir();
  const proceed = gate();
  const dispatched = Promise.withResolvers<number>();
  const followUp = defineJob({ name: "follow-up", schema: z.number(), handle() {} });
  const parent = defineJob({
    name: "parent",
    schema: z.null(),
    async handle(_payload, ctx) {
      await proceed.promise;
      try {
        dispatched.resolve(await ctx.queue.dispatch(followUp, ctx.id));
      } catch (error) {
        dispatched.reject(error);
        throw error;
      }
    },
  });
  const queue = await Queue.open({ path: dir.dbPath, jobs: [parent, followUp] });
  try {
    const parentId = await queue.dispatch(parent, null);
    const worker = queue.work({ pollMs: 5, graceMs: 5_000 });
    await nextEvent(worker, "job:start");
    const closing = queue.close();
    await assert.rejects(queue.dispatch(followUp, 0), QueueClosedError);
    proceed.resolve();
    const followUpId = await within(dispatched.promise, 5_000, "the handler's dispatch");
    await within(closing, 5_000, "close()");
    assert.deepEqual(worker.stats, { completed: 1, failed: 0, retried: 0 });
    const rows = readRows<{ id: number; name: string; payload: string }>(
      dir.dbPath,
      "SELECT id, name, payload FROM jobs",
    ).map((row) => ({ ...row }));
    assert.deepEqual(rows, [{ id: followUpId, name: "follow-up", payload: String(parentId) }]);
  } finally {
    proceed.resolve();
    await queue.close();
  }
});

Deno.test("a loop of awaited dispatches on SQLite lets the process's timers run: every call is synchronous underneath, and the store gives timers a turn", async () => {
  const job = defineJob({ name: "loop", schema: z.number(), handle() {} });
  await using dir = await tempDir();
  await using queue = await Queue.open({ path: dir.dbPath, jobs: [job] });
  let fired = false;
  const timer = setTimeout(() => fired = true, 10);
  const started = performance.now();
  let n = 0;
  try {
    while (!fired && performance.now() - started < 20_000) await queue.dispatch(job, n++);
  } finally {
    clearTimeout(timer);
  }
  assert.ok(fired, `the timer never ran during ${n} dispatches`);
});
