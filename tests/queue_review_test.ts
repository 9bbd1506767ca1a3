/**
 * Queue behaviour fixed after review (commit 488b607): transactions SQLite
 * ended on its own or that the callback waits on, dispatching from handlers
 * while the queue closes, and the limits of dispatchSync. (queue_test.ts is
 * at its size limit.)
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, JobTimeoutError, Queue, QueueClosedError } from "../mod.ts";
import { nextEvent, storedCounts, tempDir, within } from "./_helpers.ts";
import { gate, readRows } from "./fixtures/runner/harness.ts";

const note = defineJob({ name: "note", schema: z.object({ n: z.number() }), handle() {} });

/** The `note` jobs stored in the file, read through a connection of its own. */
function storedNotes(path: string): number[] {
  return readRows<{ payload: string }>(path, "SELECT payload FROM jobs ORDER BY id")
    .map((row) => (JSON.parse(row.payload) as { n: number }).n);
}

Deno.test("Queue.transaction() that SQLite rolled back on its own rejects with SQLite's error, and the queue keeps working", async () => {
  await using dir = await tempDir();
  const queue = await Queue.open({ path: dir.dbPath, jobs: [note] });
  try {
    await queue.transaction((tx) => tx.query("CREATE TABLE t (x UNIQUE ON CONFLICT ROLLBACK)"));
    const failing = queue.transaction(async (tx) => {
      await tx.dispatch(note, { n: 1 });
      await tx.query("INSERT INTO t VALUES (1)");
      await tx.query("INSERT INTO t VALUES (1)"); // SQLite rolls the whole transaction back here
    });
    await assert.rejects(
      within(failing, 2_000, "the transaction"),
      /UNIQUE constraint failed: t\.x/,
    );
    await within(queue.dispatch(note, { n: 2 }), 2_000, "a dispatch after the rollback");
    assert.deepEqual(await within(queue.counts(), 2_000, "counts() after the rollback"), {
      default: { pending: 1, delayed: 0, reserved: 0, failed: 0, running: [] },
    });
    const [row] = await within(
      queue.transaction((tx) => tx.query<{ rows: number }>("SELECT COUNT(*) AS rows FROM t")),
      2_000,
      "a transaction after the rollback",
    );
    assert.equal(row?.rows, 0);
    assert.deepEqual(storedNotes(dir.dbPath), [2]);
  } finally {
    await within(queue.close(), 2_000, "close()");
  }
});

Deno.test("Queue.transaction(): what a callback does after SQLite rolled back on its own is not kept either", async () => {
  await using dir = await tempDir();
  const queue = await Queue.open({ path: dir.dbPath, jobs: [note] });
  try {
    await queue.transaction((tx) => tx.query("CREATE TABLE t (x UNIQUE ON CONFLICT ROLLBACK)"));
    const failing = queue.transaction(async (tx) => {
      await tx.dispatch(note, { n: 1 });
      await tx.query("INSERT INTO t VALUES (1)");
      await tx.query("INSERT INTO t VALUES (1)").catch(() => {}); // the app carries on
      await tx.dispatch(note, { n: 2 }); // outside any transaction, were it allowed
      await tx.query("INSERT INTO t VALUES (2)");
    });
    await assert.rejects(within(failing, 2_000, "the transaction"));
    // All or nothing: the transaction rejected, so neither its jobs nor its rows may be kept.
    assert.deepEqual(storedNotes(dir.dbPath), []);
    assert.deepEqual(readRows(dir.dbPath, "SELECT x FROM t").length, 0);
  } finally {
    await within(queue.close(), 2_000, "close()");
  }
});

Deno.test("Queue calls inside the queue's own transaction callback reject at once, saying to use the tx handle", async () => {
  await using dir = await tempDir();
  const queue = await Queue.open({ path: dir.dbPath, jobs: [note] });
  try {
    const useTx = /use (the|its) tx handle/;
    await within(
      queue.transaction(async (tx) => {
        await tx.dispatch(note, { n: 1 });
        await assert.rejects(within(queue.counts(), 1_000, "counts() inside"), useTx);
        await assert.rejects(within(queue.dispatch(note, { n: 2 }), 1_000, "dispatch()"), useTx);
        await assert.rejects(within(queue.transaction(() => {}), 1_000, "a nested one"), useTx);
        await tx.dispatch(note, { n: 3 });
      }),
      5_000,
      "the outer transaction",
    );
    assert.deepEqual(storedNotes(dir.dbPath), [1, 3], "the outer transaction committed");

    const rolledBack = queue.transaction(async (tx) => {
      await tx.dispatch(note, { n: 4 });
      await assert.rejects(within(queue.dispatchMany(note, [{ n: 5 }]), 1_000, "inside"), useTx);
      throw new Error("changed my mind");
    });
    await assert.rejects(within(rolledBack, 5_000, "the outer transaction"), /changed my mind/);
    assert.deepEqual(storedNotes(dir.dbPath), [1, 3], "the outer transaction rolled back");
    assert.equal((await within(queue.counts(), 1_000, "counts() after")).default?.pending, 2);
  } finally {
    await within(queue.close(), 2_000, "close()");
  }
});

Deno.test("Queue calls that merely started inside an earlier transaction's callback wait their turn", async () => {
  // A continuation set up inside the callback runs later, while another transaction is open:
  // it is not inside that transaction and must wait for it, not be refused.
  await using dir = await tempDir();
  const queue = await Queue.open({ path: dir.dbPath, jobs: [note] });
  try {
    const go = gate();
    let later!: Promise<unknown>;
    await queue.transaction(() => {
      later = go.promise.then(() => queue.counts());
    });
    const ran = Promise.withResolvers<void>();
    const other = queue.transaction(async (tx) => {
      go.resolve();
      await ran.promise;
      await tx.dispatch(note, { n: 1 });
    });
    const outcome = later.then(() => "counted", (error: Error) => error.message);
    await go.promise;
    await Promise.resolve();
    ran.resolve();
    await within(other, 2_000, "the other transaction");
    assert.equal(await within(outcome, 2_000, "the later call"), "counted");
  } finally {
    await within(queue.close(), 2_000, "close()");
  }
});

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
