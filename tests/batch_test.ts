/**
 * Batches: counters kept exact in the transaction that settles each member,
 * then/catch/finally callbacks that fire at most once, cancellation,
 * retries, growth from handlers, pruning, clearing and listing, on every
 * store. Most tests run handlers in this isolate; the last ones run them in
 * Web Workers, which write what they saw to a SQLite file of the test's own.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import {
  type BatchStatus,
  defineJob,
  type JobContext,
  type Queue,
  type QueueEventMap,
  ValidationError,
} from "../mod.ts";
import { workUntilEmpty } from "../src/testing.ts";
import { join } from "node:path";
import { ManualClock, nextEvent, storedCounts, unfinishedCount, waitUntil } from "./_helpers.ts";
import { type StoreContext, storeTest } from "./_stores.ts";
import { events } from "./fixtures/runner/harness.ts";
import {
  grow as wwGrow,
  leaf as wwLeaf,
  openGate,
  openTables,
  progressing,
  readSeen,
} from "./fixtures/batch/jobs.ts";

const WW_JOBS = new URL("./fixtures/batch/jobs.ts", import.meta.url).href;

/** One handler run, as the handlers of these tests record it. */
interface Ran {
  readonly name: string;
  readonly label: string;
  readonly batchId: number | null;
}

/** What a `grow` handler did. */
interface Grown {
  readonly label: string;
  readonly batchId: number | null;
  readonly added: number[];
  readonly refusals: string[];
}

/** The jobs of one test, recording what ran, steered with `failing` labels and gates. */
function batchJobs() {
  const ran: Ran[] = [];
  const grown: Grown[] = [];
  const failing = new Set<string>();
  const gates = new Map<string, PromiseWithResolvers<void>>();
  let onRun: (label: string, ctx: JobContext) => Promise<void> = () => Promise.resolve();
  const work = defineJob({
    name: "work",
    schema: z.object({ label: z.string() }),
    maxAttempts: 1,
    async handle({ label }, ctx) {
      ran.push({ name: "work", label, batchId: ctx.batchId });
      await onRun(label, ctx);
      await gates.get(label)?.promise;
      if (failing.has(label)) throw new Error(`${label} failed`);
    },
  });
  const callback = defineJob({
    name: "callback",
    schema: z.object({ role: z.enum(["then", "catch", "finally"]), tag: z.string() }),
    handle({ role, tag }, ctx) {
      ran.push({ name: role, label: tag, batchId: ctx.batchId });
    },
  });
  /** Adds `add` work jobs to its batch, then one with a bad payload; records ids and refusals. */
  const grow = defineJob({
    name: "grow",
    schema: z.object({ label: z.string(), add: z.number().int().min(0) }),
    async handle({ label, add }, ctx) {
      ran.push({ name: "grow", label, batchId: ctx.batchId });
      await gates.get(label)?.promise;
      const added: number[] = [];
      const refusals: string[] = [];
      const tryAdd = async (payload: { label: string }) => {
        try {
          added.push(await ctx.addToBatch(work, payload));
        } catch (error) {
          refusals.push(`${(error as Error).name}: ${(error as Error).message}`);
        }
      };
      for (let n = 0; n < add; n++) await tryAdd({ label: `${label}.${n}` });
      await tryAdd({ label: 7 } as never);
      grown.push({ label, batchId: ctx.batchId, added, refusals });
    },
  });
  return {
    ran,
    grown,
    failing,
    work,
    callback,
    grow,
    jobs: [work, callback, grow],
    /** Holds the handler of `label` until the returned gate is resolved. */
    gate(label: string): PromiseWithResolvers<void> {
      const gate = Promise.withResolvers<void>();
      gates.set(label, gate);
      return gate;
    },
    setOnRun(fn: (label: string, ctx: JobContext) => Promise<void>) {
      onRun = fn;
    },
    /** The tags of the callbacks of `role` that ran, in order. */
    fired(role: "then" | "catch" | "finally"): string[] {
      return ran.filter((run) => run.name === role).map((run) => run.label);
    },
    /** The labels of the work jobs that ran, in order. */
    worked(): string[] {
      return ran.filter((run) => run.name === "work").map((run) => run.label);
    },
  };
}

/** The counters and flags of a batch. */
interface Counters {
  total: number;
  pending: number;
  succeeded: number;
  failed: number;
  skipped: number;
  cancelled: boolean;
  finished: boolean;
}

/**
 * Reads a batch, checks `total = pending + failed + skipped + succeeded`, and
 * on the SQL stores checks `pending` and `failed` against the member rows
 * actually in `jobs` and `failed_jobs` (Redis has no rows to count with SQL:
 * its variant checks what the batch's status says); returns the counters.
 */
async function readBatch(db: StoreContext, queue: Queue, id: number): Promise<Counters> {
  const status = await queue.batchStatus(id);
  assert.ok(status !== null, `batch ${id} is there`);
  const { total, pending, succeeded, failed, skipped, cancelled, finished } = status;
  assert.equal(total, pending + failed + skipped + succeeded, `batch ${id} adds up`);
  assert.ok(succeeded >= 0 && pending >= 0 && failed >= 0 && skipped >= 0);
  if (db.kind !== "redis") {
    const [rows] = await db.query<{ live: number; dead: number }>(
      `SELECT (SELECT COUNT(*) FROM jobs WHERE batch_id = ?1 AND batch_member = 1) AS live,
        (SELECT COUNT(*) FROM failed_jobs WHERE batch_id = ?1 AND batch_member = 1) AS dead`,
      [id],
    );
    assert.deepEqual({ live: rows!.live, dead: rows!.dead }, { live: pending, dead: failed });
  }
  return { total, pending, succeeded, failed, skipped, cancelled, finished };
}

function counters(
  total: number,
  pending: number,
  succeeded: number,
  failed: number,
  skipped: number,
  flags: { cancelled?: boolean; finished?: boolean } = {},
): Counters {
  return {
    total,
    pending,
    succeeded,
    failed,
    skipped,
    cancelled: flags.cancelled ?? false,
    finished: flags.finished ?? false,
  };
}

/** How many unfinished jobs, jobs waiting for their batch or chain, and batches the store holds. */
async function rowCounts(
  db: StoreContext,
  queue: Queue,
): Promise<{ jobs: number; held: number; batches: number }> {
  return {
    jobs: await unfinishedCount(queue),
    held: (await db.waitingJobs()).length,
    batches: (await queue.batches({ limit: 1000 })).length,
  };
}

function isolate(concurrency = 1) {
  return { executor: "isolate" as const, concurrency, pollMs: 10, stopWhenEmpty: true };
}

storeTest(
  "a batch whose jobs all succeed fires each then and finally once, never its catch, and its callbacks see the batch without being counted",
  async (db) => {
    const clock = new ManualClock();
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs, clock });
    const seenWhileRunning: Counters[] = [];
    t.setOnRun(async (_label, ctx) => {
      if (ctx.batchId !== null) seenWhileRunning.push(await readBatch(db, queue, ctx.batchId));
    });
    const id = await queue.batch("import")
      .push(t.work, { label: "a" })
      .pushMany(t.work, [{ label: "b" }, { label: "c" }])
      .then(t.callback, { role: "then", tag: "t1" })
      .then(t.callback, { role: "then", tag: "t2" })
      .catch(t.callback, { role: "catch", tag: "c1" })
      .finally(t.callback, { role: "finally", tag: "f1" })
      .dispatch();
    await queue.dispatch(t.work, { label: "loose" });

    const before = (await queue.batchStatus(id))!;
    assert.deepEqual(await readBatch(db, queue, id), counters(3, 3, 0, 0, 0));
    assert.equal(before.name, "import");
    assert.equal(before.allowFailures, false);
    assert.deepEqual(before.createdAt, new Date(clock.now()));
    assert.equal(before.cancelledAt, null);
    assert.equal(before.finishedAt, null);
    assert.equal(before.progress(), 0);

    await workUntilEmpty(queue, isolate(1));

    // Each member saw the ones before it settled: one less pending, one more succeeded.
    assert.deepEqual(seenWhileRunning, [
      counters(3, 3, 0, 0, 0),
      counters(3, 2, 1, 0, 0),
      counters(3, 1, 2, 0, 0),
    ]);
    assert.deepEqual(t.fired("then"), ["t1", "t2"]);
    assert.deepEqual(t.fired("finally"), ["f1"]);
    assert.deepEqual(t.fired("catch"), []);
    assert.deepEqual(
      t.ran.map(({ name, label, batchId }) => [name, label, batchId]).sort(),
      [
        ["finally", "f1", id],
        ["then", "t1", id],
        ["then", "t2", id],
        ["work", "a", id],
        ["work", "b", id],
        ["work", "c", id],
        ["work", "loose", null],
      ],
    );
    const after = (await queue.batchStatus(id))!;
    assert.deepEqual(await readBatch(db, queue, id), counters(3, 0, 3, 0, 0, { finished: true }));
    assert.deepEqual(after.finishedAt, new Date(clock.now()));
    assert.equal(after.progress(), 100);
    assert.deepEqual(await rowCounts(db, queue), { jobs: 0, held: 1, batches: 1 }); // the unfired catch
  },
);

storeTest(
  "without allowFailures the first failure cancels the batch: waiting jobs are skipped and never run, the running one finishes, then never fires, catch and finally fire once",
  async (db) => {
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const slow = t.gate("slow");
    t.failing.add("bad");
    const id = await queue.batch("strict")
      .push(t.work, { label: "slow" })
      .push(t.work, { label: "bad" })
      .pushMany(t.work, [{ label: "c" }, { label: "d" }], { priority: -1 }) // claimed after those two
      .then(t.callback, { role: "then", tag: "t" })
      .catch(t.callback, { role: "catch", tag: "c" })
      .finally(t.callback, { role: "finally", tag: "f" })
      .dispatch();
    const catchRan = nextEvent<QueueEventMap["job:complete"]>(
      queue,
      "job:complete",
      (detail) => detail.name === "callback",
    );
    const worker = queue.work(isolate(2));

    await catchRan;
    assert.deepEqual(await readBatch(db, queue, id), counters(4, 1, 0, 1, 2, { cancelled: true }));
    const cancelled = (await queue.batchStatus(id))!;
    assert.ok(cancelled.cancelledAt instanceof Date);
    assert.equal(cancelled.finishedAt, null);
    assert.equal(cancelled.progress(), 75);
    assert.deepEqual([t.fired("then"), t.fired("catch"), t.fired("finally")], [[], ["c"], []]);
    assert.deepEqual(await queue.cancelBatch(id), false, "already cancelled");

    slow.resolve();
    await worker.done;

    assert.deepEqual(
      await readBatch(db, queue, id),
      counters(4, 0, 1, 1, 2, { cancelled: true, finished: true }),
    );
    assert.deepEqual(t.worked().sort(), ["bad", "slow"]);
    assert.deepEqual([t.fired("then"), t.fired("catch"), t.fired("finally")], [[], ["c"], ["f"]]);
    assert.deepEqual(worker.stats, { completed: 3, failed: 1, retried: 0 });

    // A retried member runs even in a cancelled batch; then and finally do not fire again.
    t.failing.clear();
    const [failed] = await queue.failed();
    assert.equal(failed!.batchId, id);
    assert.equal(await queue.retry(failed!.id), true);
    assert.deepEqual(await readBatch(db, queue, id), counters(4, 1, 1, 0, 2, { cancelled: true }));
    await workUntilEmpty(queue, isolate());
    assert.deepEqual(
      await readBatch(db, queue, id),
      counters(4, 0, 2, 0, 2, { cancelled: true, finished: true }),
    );
    assert.deepEqual([t.fired("then"), t.fired("catch"), t.fired("finally")], [[], ["c"], ["f"]]);
    assert.deepEqual(t.worked().sort(), ["bad", "bad", "slow"]);
  },
);

storeTest(
  "with allowFailures the other jobs run, catch and finally fire once, then not; retrying the failures until they succeed fires then once",
  async (db) => {
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs });
    t.failing.add("b").add("d");
    const id = await queue.batch("lenient")
      .pushMany(t.work, [{ label: "a" }, { label: "b" }, { label: "c" }, { label: "d" }])
      .then(t.callback, { role: "then", tag: "t" })
      .catch(t.callback, { role: "catch", tag: "c" })
      .finally(t.callback, { role: "finally", tag: "f" })
      .allowFailures()
      .dispatch();
    assert.equal((await queue.batchStatus(id))!.allowFailures, true);

    await workUntilEmpty(queue, isolate());

    assert.deepEqual(t.worked(), ["a", "b", "c", "d"]);
    assert.deepEqual(await readBatch(db, queue, id), counters(4, 0, 2, 2, 0, { finished: true }));
    assert.deepEqual([t.fired("then"), t.fired("catch"), t.fired("finally")], [[], ["c"], ["f"]]);

    // A retried member that fails again fires neither catch nor finally a second time.
    const [d, b] = await queue.failed();
    assert.equal(await queue.retry(b!.id), true);
    assert.deepEqual(await readBatch(db, queue, id), counters(4, 1, 2, 1, 0));
    await workUntilEmpty(queue, isolate());
    assert.deepEqual(await readBatch(db, queue, id), counters(4, 0, 2, 2, 0, { finished: true }));
    assert.deepEqual([t.fired("then"), t.fired("catch"), t.fired("finally")], [[], ["c"], ["f"]]);

    t.failing.clear();
    assert.deepEqual([b!.batchId, d!.batchId], [id, id]);
    assert.equal(await queue.retry(b!.id), true);
    const reopened = (await queue.batchStatus(id))!;
    assert.deepEqual(await readBatch(db, queue, id), counters(4, 1, 2, 1, 0));
    assert.equal(reopened.finishedAt, null);
    assert.equal(await queue.retryBatch(id), 1);
    assert.deepEqual(await readBatch(db, queue, id), counters(4, 2, 2, 0, 0));

    await workUntilEmpty(queue, isolate());

    assert.deepEqual(await readBatch(db, queue, id), counters(4, 0, 4, 0, 0, { finished: true }));
    assert.deepEqual([t.fired("then"), t.fired("catch"), t.fired("finally")], [["t"], ["c"], [
      "f",
    ]]);
    assert.equal(await queue.retryBatch(id), 0);
    assert.deepEqual(await rowCounts(db, queue), { jobs: 0, held: 0, batches: 1 });
  },
);

storeTest(
  "Queue.cancelBatch() skips waiting jobs, lets running ones finish, and answers true once, then false; false for a finished or unknown batch",
  async (db) => {
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const running = t.gate("running");
    const id = await queue.batch("to cancel")
      .push(t.work, { label: "running" })
      .pushMany(t.work, [{ label: "w1" }, { label: "w2" }], { priority: -1 })
      .then(t.callback, { role: "then", tag: "t" })
      .finally(t.callback, { role: "finally", tag: "f" })
      .dispatch();
    const started = nextEvent<QueueEventMap["job:start"]>(queue, "job:start");
    const worker = queue.work(isolate(1));
    await started;

    assert.equal(await queue.cancelBatch(id), true);
    assert.equal(await queue.cancelBatch(id), false);
    assert.deepEqual(await readBatch(db, queue, id), counters(3, 1, 0, 0, 2, { cancelled: true }));
    const held = (await db.waitingJobs()).filter((row) => row.batchId === id);
    assert.deepEqual(held.map((row) => row.role), ["finally"], "its then can never fire now");
    running.resolve();
    await worker.done;

    assert.deepEqual(
      await readBatch(db, queue, id),
      counters(3, 0, 1, 0, 2, { cancelled: true, finished: true }),
    );
    assert.deepEqual(t.worked(), ["running"]);
    assert.deepEqual([t.fired("then"), t.fired("finally")], [[], ["f"]]);
    assert.equal(await queue.cancelBatch(id), false);

    const idle = await queue.batch("idle").push(t.work, { label: "x" })
      .finally(t.callback, { role: "finally", tag: "idle" }).dispatch();
    assert.equal(await queue.cancelBatch(idle), true);
    assert.deepEqual(
      await readBatch(db, queue, idle),
      counters(1, 0, 0, 0, 1, { cancelled: true, finished: true }),
    );
    assert.deepEqual((await queue.counts()).default?.pending, 1, "only its finally job is queued");

    const done = await queue.batch("empty").dispatch();
    assert.equal(await queue.cancelBatch(done), false);
    assert.equal((await queue.batchStatus(done))!.cancelled, false);
    assert.equal(await queue.cancelBatch(9_999), false);
    await assert.rejects(queue.cancelBatch(0), {
      name: "RangeError",
      message: "A batch id must be a positive integer: got 0",
    });
  },
);

storeTest(
  "a cancel skips delayed members and members waiting for a retry, not only due ones",
  async (db) => {
    const clock = new ManualClock();
    const t = batchJobs();
    const retrying = defineJob({
      name: "retrying",
      schema: z.null(),
      maxAttempts: 3,
      backoff: [60_000],
      jitter: 0,
      handle() {
        throw new Error("try again later");
      },
    });
    await using queue = await db.open({ jobs: [...t.jobs, retrying], clock });
    const id = await queue.batch("waiting in several ways")
      .push(retrying, null)
      .push(t.work, { label: "delayed" }, { delayMs: 60_000 })
      .finally(t.callback, { role: "finally", tag: "f" })
      .dispatch();
    assert.deepEqual(await workUntilEmpty(queue, isolate()), {
      completed: 0,
      failed: 0,
      retried: 1,
    });
    assert.deepEqual(await readBatch(db, queue, id), counters(2, 2, 0, 0, 0));

    assert.equal(await queue.cancelBatch(id), true);

    assert.deepEqual(
      await readBatch(db, queue, id),
      counters(2, 0, 0, 0, 2, { cancelled: true, finished: true }),
    );
    clock.advance(120_000);
    await workUntilEmpty(queue, isolate());
    assert.deepEqual(t.worked(), []);
    assert.deepEqual(t.fired("finally"), ["f"]);
  },
);

storeTest(
  "a running member put back after its batch was cancelled (released, retried, or given back on stop) is skipped then, not run again",
  async (db) => {
    const t = batchJobs();
    const attempts: string[] = [];
    const gates = { release: t.gate("release"), retry: t.gate("retry") };
    const comesBack = defineJob({
      name: "comes-back",
      schema: z.enum(["release", "retry", "stop"]),
      maxAttempts: 3,
      backoff: [0],
      jitter: 0,
      async handle(how, ctx) {
        attempts.push(`${how} ${ctx.attempt}`);
        if (how === "stop") {
          await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
          return;
        }
        await gates[how].promise;
        if (how === "release") ctx.release(0);
        else throw new Error("try again");
      },
    });
    await using queue = await db.open({ jobs: [...t.jobs, comesBack] });
    const id = await queue.batch("put back")
      .pushMany(comesBack, ["release", "retry", "stop"])
      .then(t.callback, { role: "then", tag: "t" })
      .finally(t.callback, { role: "finally", tag: "f" })
      .dispatch();
    const allStarted = events(queue, "job:start", 3);
    const worker = queue.work({ executor: "isolate", concurrency: 3, pollMs: 10, graceMs: 0 });
    await allStarted;
    assert.equal(await queue.cancelBatch(id), true);
    assert.deepEqual(await readBatch(db, queue, id), counters(3, 3, 0, 0, 0, { cancelled: true }));

    const twoPutBack = events(queue, "job:retry", 2);
    gates.release.resolve();
    gates.retry.resolve();
    await twoPutBack;
    await waitUntil(async () => (await queue.batchStatus(id))!.skipped === 2 ? true : undefined, {
      what: "both skipped",
    });
    await worker.stop({ graceMs: 0 });

    assert.deepEqual(
      await readBatch(db, queue, id),
      counters(3, 0, 0, 0, 3, { cancelled: true, finished: true }),
    );
    assert.deepEqual(attempts.sort(), ["release 1", "retry 1", "stop 1"]);
    assert.deepEqual(await queue.counts(), {
      default: { pending: 1, delayed: 0, reserved: 0, failed: 0, running: [] },
    }, "only the finally job is left");
    await workUntilEmpty(queue, isolate());
    assert.deepEqual([t.fired("then"), t.fired("finally")], [[], ["f"]]);
    assert.deepEqual(attempts.sort(), ["release 1", "retry 1", "stop 1"]);
  },
);

storeTest(
  "a second failure in a batch already cancelled by the first fires no second catch",
  async (db) => {
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const first = t.gate("first");
    const second = t.gate("second");
    t.failing.add("first").add("second");
    const id = await queue.batch("two failures")
      .pushMany(t.work, [{ label: "first" }, { label: "second" }])
      .then(t.callback, { role: "then", tag: "t" })
      .catch(t.callback, { role: "catch", tag: "c" })
      .finally(t.callback, { role: "finally", tag: "f" })
      .dispatch();
    const bothStarted = events(queue, "job:start", 2);
    const catchDone = nextEvent<QueueEventMap["job:complete"]>(
      queue,
      "job:complete",
      (detail) => detail.name === "callback",
    );
    const worker = queue.work(isolate(3));
    await bothStarted;
    first.resolve();
    await catchDone;
    assert.deepEqual(await readBatch(db, queue, id), counters(2, 1, 0, 1, 0, { cancelled: true }));
    second.resolve();
    await worker.done;

    assert.deepEqual(
      await readBatch(db, queue, id),
      counters(2, 0, 0, 2, 0, { cancelled: true, finished: true }),
    );
    assert.deepEqual([t.fired("then"), t.fired("catch"), t.fired("finally")], [[], ["c"], ["f"]]);
  },
);

storeTest(
  "a callback job that fails is not counted in its batch: retryBatch() skips it and retrying it changes no counter",
  async (db) => {
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs });
    t.failing.add("then-callback");
    const id = await queue.batch("failing callback")
      .push(t.work, { label: "a" })
      .then(t.work, { label: "then-callback" })
      .finally(t.callback, { role: "finally", tag: "f" })
      .dispatch();
    await workUntilEmpty(queue, isolate());

    assert.deepEqual(await readBatch(db, queue, id), counters(1, 0, 1, 0, 0, { finished: true }));
    const [failed, ...others] = await queue.failed();
    assert.deepEqual(others, []);
    assert.equal(failed!.batchId, id);
    assert.equal(await queue.retryBatch(id), 0);
    assert.equal(await queue.retry(failed!.id), true);
    assert.deepEqual(await readBatch(db, queue, id), counters(1, 0, 1, 0, 0, { finished: true }));
    t.failing.clear();
    await workUntilEmpty(queue, isolate());
    assert.deepEqual(t.worked(), ["a", "then-callback", "then-callback"]);
    assert.deepEqual(t.ran.filter((run) => run.label === "then-callback").map((r) => r.batchId), [
      id,
      id,
    ]);
    assert.deepEqual(t.fired("finally"), ["f"]);
    assert.deepEqual(await readBatch(db, queue, id), counters(1, 0, 1, 0, 0, { finished: true }));
  },
);

storeTest(
  "ctx.addToBatch() adds counted jobs to the handler's batch, and then waits for them",
  async (db) => {
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const id = await queue.batch("growing")
      .push(t.grow, { label: "g", add: 2 })
      .then(t.callback, { role: "then", tag: "t" })
      .finally(t.callback, { role: "finally", tag: "f" })
      .dispatch();
    assert.deepEqual(await readBatch(db, queue, id), counters(1, 1, 0, 0, 0));

    await workUntilEmpty(queue, isolate(2));

    const [grown] = t.grown;
    assert.equal(grown!.batchId, id);
    assert.equal(grown!.added.length, 2);
    assert.deepEqual(grown!.refusals, [
      `ValidationError: Cannot dispatch "work" into batch ${id}: payload.label: Invalid input: expected string, received number`,
    ]);
    assert.deepEqual(await readBatch(db, queue, id), counters(3, 0, 3, 0, 0, { finished: true }));
    const order = t.ran.map((run) => `${run.name} ${run.label} ${run.batchId}`);
    assert.deepEqual(order.slice(0, 1), [`grow g ${id}`]);
    assert.deepEqual(order.slice(1, 3).sort(), [`work g.0 ${id}`, `work g.1 ${id}`]);
    assert.deepEqual(order.slice(3).sort(), [`finally f ${id}`, `then t ${id}`]);
  },
);

storeTest(
  "ctx.addToBatch() is refused outside a batch, once the batch was cancelled or has finished, saying why",
  async (db) => {
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const loose = await queue.dispatch(t.grow, { label: "loose", add: 1 });

    const hold = t.gate("held");
    const cancelled = await queue.batch("cancelled").push(t.grow, { label: "held", add: 1 })
      .dispatch();
    const started = nextEvent<QueueEventMap["job:start"]>(
      queue,
      "job:start",
      (detail) => detail.name === "grow",
    );
    const worker = queue.work(isolate(2));
    await started;
    assert.equal(await queue.cancelBatch(cancelled), true);
    hold.resolve();
    await worker.done;

    const finished = await queue.batch("finished")
      .finally(t.grow, { label: "finally", add: 1 })
      .dispatch();
    await workUntilEmpty(queue, isolate()); // an empty batch finished at once: its finally runs now

    const byLabel = Object.fromEntries(t.grown.map((g) => [g.label, g]));
    assert.deepEqual(byLabel.loose!.refusals, [
      `Error: ctx.addToBatch: job ${loose} (grow) is not in a batch`,
      `Error: ctx.addToBatch: job ${loose} (grow) is not in a batch`,
    ]);
    const bad = (batch: number) =>
      `ValidationError: Cannot dispatch "work" into batch ${batch}: payload.label: Invalid input: expected string, received number`;
    assert.deepEqual(byLabel.held!.refusals, [
      `Error: Cannot add jobs to batch ${cancelled}: it was cancelled`,
      bad(cancelled),
    ]);
    assert.deepEqual(byLabel.finally!.refusals, [
      `Error: Cannot add jobs to batch ${finished}: it has finished`,
      bad(finished),
    ]);
    for (const g of Object.values(byLabel)) assert.deepEqual(g.added, []);
    assert.deepEqual(
      await readBatch(db, queue, cancelled),
      counters(1, 0, 1, 0, 0, { cancelled: true, finished: true }),
    );
    assert.deepEqual(
      await readBatch(db, queue, finished),
      counters(0, 0, 0, 0, 0, { finished: true }),
    );
  },
);

storeTest(
  "ctx.addToBatch() from a callback of a pruned batch is refused with no such batch",
  async (db) => {
    const clock = new ManualClock();
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs, clock });
    const id = await queue.batch("pruned").finally(t.grow, { label: "late", add: 1 }).dispatch();
    clock.advance(1_000);
    assert.equal(await queue.pruneBatches({ olderThanMs: 500 }), 1);
    assert.equal(await queue.batchStatus(id), null);

    await workUntilEmpty(queue, isolate());

    assert.deepEqual(t.grown, [{
      label: "late",
      batchId: id,
      added: [],
      refusals: [
        `Error: Cannot add jobs to batch ${id}: no such batch`,
        `ValidationError: Cannot dispatch "work" into batch ${id}: payload.label: Invalid input: expected string, received number`,
      ],
    }]);
    assert.deepEqual(await rowCounts(db, queue), { jobs: 0, held: 0, batches: 0 });
  },
);

storeTest(
  "an empty batch finishes at dispatch and queues its then and finally jobs at once",
  async (db) => {
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const id = await queue.batch("nothing to do")
      .then(t.callback, { role: "then", tag: "t" })
      .catch(t.callback, { role: "catch", tag: "c" })
      .finally(t.callback, { role: "finally", tag: "f" })
      .dispatch();

    const status = (await queue.batchStatus(id))!;
    assert.deepEqual(await readBatch(db, queue, id), counters(0, 0, 0, 0, 0, { finished: true }));
    assert.deepEqual(status.finishedAt, status.createdAt);
    assert.equal(status.progress(), 100);
    assert.equal((await queue.counts()).default?.pending, 2);
    await workUntilEmpty(queue, isolate());
    assert.deepEqual([t.fired("then"), t.fired("catch"), t.fired("finally")], [["t"], [], ["f"]]);
  },
);

storeTest(
  "a callback's delayMs counts from when it is queued, not from the batch's dispatch",
  async (db) => {
    const clock = new ManualClock();
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs, clock });
    await queue.batch("late report")
      .push(t.work, { label: "a" })
      .finally(t.callback, { role: "finally", tag: "f" }, { delayMs: 5_000 })
      .dispatch();
    clock.advance(60_000);
    await workUntilEmpty(queue, isolate());
    const finishedAt = clock.now();

    const [row, ...others] = (await queue.jobs()).jobs;
    assert.deepEqual(others, []);
    assert.equal(row?.availableAt.getTime(), finishedAt + 5_000);
    assert.deepEqual(t.fired("finally"), []);
    clock.advance(5_000);
    await workUntilEmpty(queue, isolate());
    assert.deepEqual(t.fired("finally"), ["f"]);
  },
);

storeTest(
  "Queue.batch().dispatch() refuses a bad payload in push #3 or in a callback, naming where, and stores nothing",
  async (db) => {
    const t = batchJobs();
    const other = defineJob({ name: "other", schema: z.null(), handle() {} });
    await using queue = await db.open({ jobs: t.jobs });

    await assert.rejects(
      queue.batch("bad push")
        .push(t.work, { label: "1" })
        .push(t.work, { label: "2" })
        .push(t.work, { label: 3 } as never)
        .finally(t.callback, { role: "finally", tag: "f" })
        .dispatch(),
      (error) => {
        assert.ok(error instanceof ValidationError);
        assert.equal(
          error.message,
          'Cannot dispatch "work" in batch "bad push": payload.label: Invalid input: expected string, received number',
        );
        return true;
      },
    );
    await assert.rejects(
      queue.batch("bad callback")
        .push(t.work, { label: "1" })
        .then(t.callback, { role: "then", tag: "t" })
        .finally(t.callback, { role: "later", tag: "f" } as never)
        .dispatch(),
      {
        name: "ValidationError",
        message:
          'Cannot dispatch "callback" as the finally of batch "bad callback": payload.role: Invalid option: expected one of "then"|"catch"|"finally"',
      },
    );
    await assert.rejects(queue.batch("unknown job").push(other, null).dispatch(), {
      name: "TypeError",
      message:
        'Cannot dispatch "other" in batch "unknown job": it is not a job registered with this queue (export it from the jobs module)',
    });
    assert.throws(() => queue.batch("x").pushMany(t.work, { label: "1" } as never), {
      name: "TypeError",
      message: "batch.pushMany: payloads must be an array: got object",
    });

    assert.deepEqual(await rowCounts(db, queue), { jobs: 0, held: 0, batches: 0 });
    assert.deepEqual(await queue.batches(), []);
    assert.deepEqual(await storedCounts(queue), {});
  },
);

storeTest("Queue.batch() takes a name of 1 to 255 characters", async (db) => {
  const t = batchJobs();
  await using queue = await db.open({ jobs: t.jobs });
  const long = "n".repeat(255);
  for (const name of ["", "n".repeat(256), 42 as never, undefined as never]) {
    const shown = typeof name === "string" ? JSON.stringify(name.slice(0, 64)) : String(name);
    assert.throws(() => queue.batch(name), {
      name: "TypeError",
      message:
        `batch: name must be a string of 1 to 255 characters, without NUL or lone surrogates: got ${shown}`,
    });
  }
  const id = await queue.batch(long).dispatch();
  assert.equal((await queue.batchStatus(id))!.name, long);
});

storeTest(
  "a batch builder dispatched twice refuses the second time; awaiting it instead of dispatch() is a TypeError",
  async (db) => {
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const batch = queue.batch("once").push(t.work, { label: "a" });
    await batch.dispatch();

    await assert.rejects(batch.dispatch(), {
      name: "Error",
      message: 'Batch "once" was already dispatched: build a new one with queue.batch()',
    });
    await assert.rejects(
      async () => {
        await (queue.batch("awaited").push(t.work, { label: "b" }) as unknown as Promise<unknown>);
      },
      {
        name: "TypeError",
        message:
          "batch.then(job, payload) takes a job definition, not a callback: a batch is not a promise, await batch.dispatch()",
      },
    );
    assert.deepEqual(await rowCounts(db, queue), { jobs: 1, held: 0, batches: 1 });
  },
);

storeTest(
  "Queue.pruneBatches() deletes only batches finished or cancelled before the cutoff, with their unfired callbacks",
  async (db) => {
    const clock = new ManualClock();
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs, clock });
    const emptyOld = await queue.batch("empty old").dispatch();
    const cancelledOld = await queue.batch("cancelled old").push(t.work, { label: "never" })
      .dispatch();
    assert.equal(await queue.cancelBatch(cancelledOld), true);
    const succeededOld = await queue.batch("succeeded old").push(t.work, { label: "a" })
      .catch(t.callback, { role: "catch", tag: "unfired" })
      .dispatch();
    await workUntilEmpty(queue, isolate());
    const runningOld = await queue.batch("running old").push(t.work, { label: "waiting" })
      .finally(t.callback, { role: "finally", tag: "f" })
      .dispatch();
    clock.advance(10_000);
    const emptyNew = await queue.batch("empty new").dispatch();
    assert.equal((await rowCounts(db, queue)).held, 2); // succeeded old's catch, running old's finally

    assert.equal(await queue.pruneBatches({ olderThanMs: 10_000 }), 0, "the cutoff is exclusive");
    assert.equal(await queue.pruneBatches({ olderThanMs: 9_999 }), 3);

    for (const id of [emptyOld, cancelledOld, succeededOld]) {
      assert.equal(await queue.batchStatus(id), null);
    }
    assert.deepEqual((await queue.batches()).map((batch) => batch.id), [emptyNew, runningOld]);
    assert.deepEqual(await readBatch(db, queue, runningOld), counters(1, 1, 0, 0, 0));
    assert.deepEqual(await rowCounts(db, queue), { jobs: 1, held: 1, batches: 2 });
    await assert.rejects(queue.pruneBatches({ olderThanMs: -1 }), {
      name: "RangeError",
      message: "pruneBatches: olderThanMs must be a finite number >= 0: got -1",
    });
  },
);

storeTest(
  "Queue.clear() counts batch jobs it deletes as skipped and finishes their batch, firing finally once",
  async (db) => {
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const id = await queue.batch("cleared")
      .pushMany(t.work, [{ label: "a" }, { label: "b" }])
      .push(t.work, { label: "c" }, { queue: "other" })
      .then(t.callback, { role: "then", tag: "t" })
      .finally(t.callback, { role: "finally", tag: "f" })
      .dispatch();

    assert.equal(await queue.clear("default"), 2);
    assert.deepEqual(await readBatch(db, queue, id), counters(3, 1, 0, 0, 2));
    assert.equal((await queue.batchStatus(id))!.progress(), 66);
    assert.equal(await queue.clear(), 1);
    assert.deepEqual(await readBatch(db, queue, id), counters(3, 0, 0, 0, 3, { finished: true }));
    assert.deepEqual(await queue.counts(), {
      default: { pending: 1, delayed: 0, reserved: 0, failed: 0, running: [] },
    });

    await workUntilEmpty(queue, isolate());
    assert.deepEqual(t.worked(), []);
    assert.deepEqual([t.fired("then"), t.fired("finally")], [[], ["f"]]);
  },
);

storeTest(
  "Queue.clear() leaves a running batch job to finish: it succeeds, and the batch fires then and finally",
  async (db) => {
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const running = t.gate("running");
    const id = await queue.batch("cleared while running")
      .push(t.work, { label: "running" })
      .then(t.callback, { role: "then", tag: "t" })
      .finally(t.callback, { role: "finally", tag: "f" })
      .dispatch();
    const started = nextEvent<QueueEventMap["job:start"]>(queue, "job:start");
    const worker = queue.work(isolate(1));
    await started;

    assert.equal(await queue.clear(), 0);
    assert.deepEqual(await readBatch(db, queue, id), counters(1, 1, 0, 0, 0));
    running.resolve();
    await worker.done;

    assert.deepEqual(await readBatch(db, queue, id), counters(1, 0, 1, 0, 0, { finished: true }));
    assert.deepEqual([t.fired("then"), t.fired("finally")], [["t"], ["f"]]);
  },
);

storeTest(
  "Queue.batches() lists batches newest first, with limit and offset checked",
  async (db) => {
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const ids: number[] = [];
    for (const name of ["first", "second", "third"]) {
      ids.push(await queue.batch(name).push(t.work, { label: name }).dispatch());
    }
    const names = (list: BatchStatus[]) => list.map((batch) => [batch.id, batch.name]);

    assert.deepEqual(names(await queue.batches()), [
      [ids[2], "third"],
      [ids[1], "second"],
      [ids[0], "first"],
    ]);
    assert.deepEqual(names(await queue.batches({ limit: 2 })), [[ids[2], "third"], [
      ids[1],
      "second",
    ]]);
    assert.deepEqual(names(await queue.batches({ limit: 1, offset: 1 })), [[ids[1], "second"]]);
    assert.deepEqual(await queue.batches({ offset: 3 }), []);
    const refusals: [object, string][] = [
      [{ limit: 0 }, "batches: limit must be an integer from 1 to 1000: got 0"],
      [{ limit: 1001 }, "batches: limit must be an integer from 1 to 1000: got 1001"],
      [{ limit: 1.5 }, "batches: limit must be an integer from 1 to 1000: got 1.5"],
      [{ offset: -1 }, "batches: offset must be an integer >= 0: got -1"],
    ];
    for (const [options, message] of refusals) {
      await assert.rejects(queue.batches(options), { name: "RangeError", message });
    }
    await assert.rejects(queue.batchStatus(1.5), {
      name: "RangeError",
      message: "A batch id must be a positive integer: got 1.5",
    });
    assert.equal(await queue.batchStatus(9_999), null);
  },
);

storeTest(
  "tx.batch() is stored with its transaction, and not at all when it rolls back; job:queued waits for the commit",
  async (db) => {
    const t = batchJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const queued: string[] = [];
    queue.addEventListener("job:queued", (event) => queued.push(event.detail.name));

    await assert.rejects(
      queue.transaction(async (tx) => {
        await tx.batch("rolled back").push(t.work, { label: "a" })
          .finally(t.callback, { role: "finally", tag: "f" }).dispatch();
        throw new Error("roll back");
      }),
      { message: "roll back" },
    );
    assert.deepEqual(await rowCounts(db, queue), { jobs: 0, held: 0, batches: 0 });
    assert.deepEqual(queued, [], "no job:queued for a rolled-back batch");

    const id = await queue.transaction(async (tx) => {
      const id = await tx.batch("committed").pushMany(t.work, [{ label: "a" }, { label: "b" }])
        .then(t.callback, { role: "then", tag: "t" }).dispatch();
      assert.deepEqual(queued, [], "job:queued waits for the commit");
      return id;
    });
    assert.deepEqual(queued, ["work", "work"]);
    assert.deepEqual(await rowCounts(db, queue), { jobs: 2, held: 1, batches: 1 });
    assert.deepEqual(await readBatch(db, queue, id), counters(2, 2, 0, 0, 0));
    await workUntilEmpty(queue, isolate());
    assert.deepEqual(await readBatch(db, queue, id), counters(2, 0, 2, 0, 0, { finished: true }));
    assert.deepEqual(t.fired("then"), ["t"]);
  },
);

storeTest(
  "Web Workers: ctx.addToBatch() adds counted jobs, handlers and callbacks see ctx.batchId, a job outside a batch sees null",
  async (db) => {
    await using queue = await db.open({ jobs: WW_JOBS });
    const path = join(db.dir, "seen.db");
    using seenDb = openTables(path);
    const id = await queue.batch("in web workers")
      .push(wwGrow, { db: path, label: "g", add: 2 })
      .push(wwLeaf, { db: path, label: "l" })
      .then(wwLeaf, { db: path, label: "then" })
      .finally(wwLeaf, { db: path, label: "finally" })
      .dispatch();
    const loose = await queue.dispatch(wwGrow, { db: path, label: "loose", add: 1 });
    const worker = queue.work({ workers: 1, concurrency: 2, stopWhenEmpty: true, pollMs: 10 });
    await worker.done;

    assert.equal(worker.options.executor, "workers");
    const seen = readSeen(seenDb);
    const byLabel = Object.fromEntries(seen.map((row) => [row.label, row]));
    const grown = JSON.parse(byLabel.g!.info!) as { added: number[]; refusals: string[] };
    assert.equal(grown.added.length, 2);
    assert.deepEqual(grown.refusals, [
      `ValidationError: Cannot dispatch "bw.leaf" into batch ${id}: payload.label: Invalid input: expected string, received number`,
    ]);
    assert.deepEqual(
      seen.map((row) => [row.label, row.batch_id]).sort(),
      [
        ["finally", id],
        ["g", id],
        ["g.0", id],
        ["g.1", id],
        ["l", id],
        ["loose", null],
        ["then", id],
      ],
    );
    assert.deepEqual([byLabel["g.0"]!.job_id, byLabel["g.1"]!.job_id], grown.added);
    assert.deepEqual(JSON.parse(byLabel.loose!.info!), {
      added: [],
      refusals: [
        `Error: ctx.addToBatch: job ${loose} (bw.grow) is not in a batch`,
        `Error: ctx.addToBatch: job ${loose} (bw.grow) is not in a batch`,
      ],
    });
    assert.deepEqual(await readBatch(db, queue, id), counters(4, 0, 4, 0, 0, { finished: true }));
  },
);

storeTest(
  "Web Workers: ctx.progress() of a batch job shows in counts().running with its batch",
  async (db) => {
    await using queue = await db.open({ jobs: WW_JOBS });
    const path = join(db.dir, "seen.db");
    using seenDb = openTables(path);
    const id = await queue.batch("progress")
      .push(progressing, { db: path, label: "p", percent: 42 })
      .dispatch();
    const worker = queue.work({ workers: 1, stopWhenEmpty: true, pollMs: 10 });

    const running = await waitUntil(async () => {
      const [job] = (await queue.counts()).default?.running ?? [];
      return job?.progress === 42 ? job : undefined;
    }, { what: "progress 42" });
    assert.equal(running.name, "bw.progressing");
    assert.equal(running.batchId, id);
    assert.equal(running.attempt, 1);
    openGate(seenDb, "p");
    await worker.done;

    assert.equal(worker.stats.completed, 1);
    assert.deepEqual(await readBatch(db, queue, id), counters(1, 0, 1, 0, 0, { finished: true }));
    assert.deepEqual(readSeen(seenDb).map((row) => [row.label, row.batch_id]), [
      ["p:reported", id],
      [
        "p",
        id,
      ],
    ]);
  },
);

const noop = defineJob({ name: "noop", schema: z.number(), handle() {} });

storeTest("a batch or chain dispatched twice at once is stored once", async (db) => {
  await using queue = await db.open({ jobs: [noop] });
  const batch = queue.batch("x").push(noop, 1);
  const batchResults = await Promise.allSettled([batch.dispatch(), batch.dispatch()]);
  assert.equal(batchResults.filter((result) => result.status === "fulfilled").length, 1);
  const batchRefusals = batchResults.filter((result) => result.status === "rejected");
  assert.equal(batchRefusals.length, 1);
  assert.match(String(batchRefusals[0]!.reason), /already dispatched/);
  assert.equal((await queue.batches()).length, 1);
  assert.equal(await unfinishedCount(queue), 1);

  const chain = queue.chain().then(noop, 2).then(noop, 3);
  const chainResults = await Promise.allSettled([chain.dispatch(), chain.dispatch()]);
  assert.equal(chainResults.filter((result) => result.status === "fulfilled").length, 1);
  const chainRefusals = chainResults.filter((result) => result.status === "rejected");
  assert.equal(chainRefusals.length, 1);
  assert.match(String(chainRefusals[0]!.reason), /already dispatched/);
  assert.equal(await unfinishedCount(queue), 2, "the batch's job and the chain's first link");
});
