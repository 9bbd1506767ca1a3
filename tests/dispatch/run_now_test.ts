/**
 * The limits of `Queue.dispatchSync()`: its timeout holds even when the
 * handler ignores its signal, and a job that releases itself is refused.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, JobTimeoutError, Queue } from "../../mod.ts";
import { storedCounts } from "../_helpers.ts";

Deno.test("Queue.dispatchSync() rejects with JobTimeoutError at timeoutMs, even if the handler ignores its signal", async () => {
  let handlerEnded = false;
  const ended = Promise.withResolvers<void>();
  let signal: AbortSignal | undefined;
  const slow = defineJob({
    name: "slow",
    schema: z.null(),
    timeoutMs: 100,
    async handle(_payload, ctx) {
      signal = ctx.signal;
      try {
        // Ignores ctx.signal on purpose; ends on its own so that the test leaves no timer behind.
        await new Promise((resolve) => setTimeout(resolve, 500));
      } finally {
        handlerEnded = true;
        ended.resolve();
      }
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [slow] });
  try {
    const startedAt = performance.now();
    await assert.rejects(queue.dispatchSync(slow, null), (error: unknown) => {
      assert.ok(error instanceof JobTimeoutError, `got ${String(error)}`);
      assert.equal(error.timeoutMs, 100);
      return true;
    });
    const tookMs = performance.now() - startedAt;
    assert.equal(handlerEnded, false, "dispatchSync waited for the handler past its timeout");
    assert.ok(tookMs >= 95, `rejected after ${Math.round(tookMs)} ms`);
    assert.ok(signal?.aborted);
    assert.ok(signal.reason instanceof JobTimeoutError);
  } finally {
    await ended.promise;
  }
});

Deno.test("Queue.dispatchSync() rejects when the handler releases the job, since it cannot be put back", async () => {
  const releasing = defineJob({
    name: "releasing",
    schema: z.null(),
    handle(_payload, ctx) {
      ctx.release(1_000);
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [releasing] });
  await assert.rejects(
    queue.dispatchSync(releasing, null),
    /"releasing".*released the job.*cannot be put back/,
  );
  assert.deepEqual(await storedCounts(queue), {});
});

Deno.test("Queue.dispatchSync() rejects when the handler holds back its group, since it cannot be put back; no group is held", async () => {
  const holding = defineJob({
    name: "holding",
    schema: z.object({ tenant: z.string() }),
    group: (p) => p.tenant,
    handle(_payload, ctx) {
      ctx.rateLimitGroup(1_000);
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [holding] });
  await assert.rejects(
    queue.dispatchSync(holding, { tenant: "t" }),
    /"holding": the handler held back its group \(ctx.rateLimitGroup\), but a job run now cannot be put back/,
  );
  assert.equal(await queue.resumeGroup(holding, "t"), false);
});
