/**
 * R18 with the default executor (Web Workers) at concurrency 8 and 32: jobs
 * claimed ahead are cancelled and their queue paused from another
 * connection, with every slot held by a job waiting on a gate file, and
 * while quick jobs flow. Each handler's first line appends its start to a
 * ledger file, so starts are counted where the handler runs, not where the
 * worker thinks it started them. And R08 there: a job that ends its Web
 * Worker every time, among quick jobs claimed ahead. Figures are printed; no
 * duration is asserted.
 *
 * @module
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Queue } from "../../src/queue.ts";
import { tempDir, waitUntil } from "../_helpers.ts";
import { type StoreContext, storeTest } from "../_stores.ts";
import { crashesWorker, gated } from "../fixtures/claimed_ahead/gated_jobs.ts";

/** Quick jobs run first: the worker learns they are quick and claims ahead. */
const WARM_JOBS = 300;
/** Quick jobs after the held ones: more than a worker claims ahead at concurrency 32. */
const AFTER_JOBS = 1_000;
/** How long a step may take on a loaded machine before it is reported as stuck. */
const DEADLINE_MS = 120_000;
/** How long each quick job of a flowing scenario waits, so that jobs are in flight at each moment. */
const FLOWING_WAIT_MS = 2;
const JOBS = new URL("../fixtures/claimed_ahead/gated_jobs.ts", import.meta.url);

/** The ids in the ledger, one per start, in order. */
function ledgerIds(path: string): number[] {
  return readFileSync(path, "utf8").split("\n").filter((line) => line !== "").map((line) =>
    Number(line.split(" ")[0])
  );
}

/** A scenario's files and the queue its worker runs on. */
interface Scenario {
  readonly ledger: string;
  readonly gate: string;
  readonly queue: Queue;
  readonly other: Queue;
  readonly ids: number[];
}

/**
 * Dispatches `WARM_JOBS` quick jobs, `held` jobs waiting on the gate file
 * and `AFTER_JOBS` more (each quick one waiting `waitMs`), and opens a
 * second queue on the same database, from which the test acts.
 */
async function scenario(db: StoreContext, held: number, waitMs: number): Promise<Scenario> {
  const ledger = join(db.dir, "ledger.txt");
  const gate = join(db.dir, "gate");
  await Deno.writeTextFile(ledger, "");
  const queue = await db.open({ jobs: JOBS.href });
  const other = await db.open({ jobs: JOBS.href });
  const payloads = Array.from({ length: WARM_JOBS + held + AFTER_JOBS }, (_, n) => {
    const holds = n >= WARM_JOBS && n < WARM_JOBS + held;
    return holds ? { n, ledger, waitMs: 0, gate } : { n, ledger, waitMs };
  });
  const ids = await queue.dispatchMany(gated, payloads);
  return { ledger, gate, queue, other, ids };
}

/** Waits until the held jobs hold every slot and jobs are claimed ahead behind them. */
async function untilHeld(db: StoreContext, s: Scenario, concurrency: number): Promise<number> {
  await waitUntil(() => Promise.resolve(ledgerIds(s.ledger).length >= WARM_JOBS + concurrency), {
    what: "the held jobs to take every slot",
    timeoutMs: DEADLINE_MS,
  });
  const ahead = await db.count("jobs", "claimed_ahead = 1");
  assert.ok(ahead > 0, "no job was claimed ahead behind the held ones");
  return ahead;
}

const nothingLeased = (db: StoreContext) => async () =>
  (await db.count("jobs", "token IS NOT NULL")) === 0;

/** Resumes the paused queue, waits until no job is left, stops `worker`, and checks each ran once. */
async function resumeAndRunEachOnce(
  db: StoreContext,
  s: Scenario,
  worker: { stop(): Promise<unknown> },
): Promise<void> {
  await s.other.resume("default");
  await waitUntil(async () => (await db.count("jobs")) === 0, {
    what: "every job to run",
    timeoutMs: DEADLINE_MS,
  });
  await worker.stop();
  const starts = ledgerIds(s.ledger);
  assert.equal(new Set(starts).size, s.ids.length, "a job never ran");
  assert.equal(starts.length, s.ids.length, "a job ran twice");
}

for (const concurrency of [8, 32]) {
  storeTest.sql(
    `Web Workers c${concurrency}: Queue.cancel() of jobs claimed ahead while every slot is held: none of them starts afterwards`,
    async (db) => {
      const s = await scenario(db, concurrency, 0);
      const worker = s.queue.work({ concurrency, pollMs: 20, graceMs: 60_000 });
      await untilHeld(db, s, concurrency);
      const window = (await db.query<{ id: number }>(
        "SELECT id FROM jobs WHERE claimed_ahead = 1 ORDER BY id LIMIT 60",
      )).map(({ id }) => Number(id));
      const outcomes = [];
      for (const id of window) outcomes.push(await s.other.cancel(id, { reason: "hostile" }));
      await Deno.writeTextFile(s.gate, "");
      await waitUntil(async () => (await db.count("jobs")) === 0, {
        what: "every other job to run",
        timeoutMs: DEADLINE_MS,
      });
      await worker.stop();
      const started = new Set(ledgerIds(s.ledger));
      const startedAfter = window.filter((id) => started.has(id));
      console.log(
        `[figure] R18 web workers ${db.kind} c${concurrency}: ${window.length} jobs claimed ahead ` +
          `cancelled, ${startedAfter.length} started after cancel() resolved`,
      );
      assert.deepEqual(outcomes, window.map(() => "cancelled"));
      assert.deepEqual(startedAfter, [], "a cancelled job started");
      assert.equal(started.size, s.ids.length - window.length);
    },
  );

  storeTest.sql(
    `Web Workers c${concurrency}: Queue.pause() while every slot is held: no job claimed ahead starts afterwards, each runs once after resume()`,
    async (db) => {
      const s = await scenario(db, concurrency, 0);
      const worker = s.queue.work({ concurrency, pollMs: 20, graceMs: 60_000 });
      const ahead = await untilHeld(db, s, concurrency);
      await s.other.pause("default", { reason: "hostile" });
      const startsAtPause = ledgerIds(s.ledger).length;
      await Deno.writeTextFile(s.gate, "");
      await waitUntil(nothingLeased(db), { what: "nothing leased", timeoutMs: DEADLINE_MS });
      const startedAfter = ledgerIds(s.ledger).length - startsAtPause;
      console.log(
        `[figure] R18 web workers ${db.kind} c${concurrency}: ${ahead} jobs claimed ahead at the ` +
          `pause, ${startedAfter} started after pause() resolved`,
      );
      assert.equal(startedAfter, 0, "a job started after pause() resolved");
      await resumeAndRunEachOnce(db, s, worker);
    },
  );
}

storeTest.sql(
  'Web Workers c32: Queue.cancel() of jobs claimed ahead while quick jobs flow: a job answered "cancelled" never starts',
  async (db) => {
    const s = await scenario(db, 0, FLOWING_WAIT_MS);
    const worker = s.queue.work({ concurrency: 32, pollMs: 20, graceMs: 60_000 });
    await waitUntil(() => Promise.resolve(ledgerIds(s.ledger).length >= WARM_JOBS), {
      what: "the warm-up jobs to run",
      timeoutMs: DEADLINE_MS,
    });
    const window = (await db.query<{ id: number }>(
      "SELECT id FROM jobs WHERE claimed_ahead = 1 ORDER BY id DESC LIMIT 200",
    )).map(({ id }) => Number(id));
    const outcomes = new Map<number, string>();
    for (const id of window) outcomes.set(id, await s.other.cancel(id, { reason: "hostile" }));
    await waitUntil(async () => (await db.count("jobs")) === 0, {
      what: "every other job to run",
      timeoutMs: DEADLINE_MS,
    });
    await worker.stop();
    const started = new Set(ledgerIds(s.ledger));
    const cancelled = window.filter((id) => outcomes.get(id) === "cancelled");
    const startedAfter = cancelled.filter((id) => started.has(id));
    console.log(
      `[figure] R18 web workers ${db.kind} c32 flowing: ${window.length} cancels of jobs claimed ` +
        `ahead, ${cancelled.length} answered "cancelled", ${startedAfter.length} of those started; ` +
        `answers: ${
          JSON.stringify(
            Object.fromEntries(
              Object.entries(Object.groupBy(outcomes.values(), String)).map((
                [answer, all],
              ) => [answer, all?.length]),
            ),
          )
        }`,
    );
    assert.deepEqual(startedAfter, [], 'a job answered "cancelled" started');
  },
);

storeTest.sql(
  "Web Workers c32: Queue.pause() while quick jobs flow: at most the jobs holding slots start afterwards, and each job runs once after resume()",
  async (db) => {
    const s = await scenario(db, 0, FLOWING_WAIT_MS);
    const worker = s.queue.work({ concurrency: 32, pollMs: 20, graceMs: 60_000 });
    await waitUntil(() => Promise.resolve(ledgerIds(s.ledger).length >= WARM_JOBS), {
      what: "the warm-up jobs to run",
      timeoutMs: DEADLINE_MS,
    });
    const ahead = await db.count("jobs", "claimed_ahead = 1");
    await s.other.pause("default", { reason: "hostile" });
    const startsAtPause = ledgerIds(s.ledger).length;
    await waitUntil(nothingLeased(db), { what: "nothing leased", timeoutMs: DEADLINE_MS });
    const startedAfter = ledgerIds(s.ledger).length - startsAtPause;
    console.log(
      `[figure] R18 web workers ${db.kind} c32 flowing: ${ahead} jobs claimed ahead at the ` +
        `pause, ${startedAfter} started after pause() resolved (at most 32: confirmed before it)`,
    );
    // A job whose start was confirmed before the pause holds its slot: it is running to every
    // rule, though its handler may begin a moment after pause() resolved.
    assert.ok(startedAfter <= 32, `${startedAfter} jobs started after pause() resolved`);
    await resumeAndRunEachOnce(db, s, worker);
  },
);

Deno.test({
  name:
    "R08 with Web Workers: a job that ends its Web Worker every time is quarantined, and no other job fails for that worker's crashes",
  async fn() {
    await using tmp = await tempDir();
    const ledger = join(tmp.dir, "ledger.txt");
    await Deno.writeTextFile(ledger, "");
    await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS.href });
    const ids = await queue.dispatchMany(
      crashesWorker,
      Array.from({ length: 200 }, (_, n) => ({ n, ledger, crash: n === 50 })),
    );
    // A Web Worker per slot: no quick job shares the poison job's Web Worker when it dies.
    const worker = queue.work({ concurrency: 2, workers: 2, pollMs: 20 });
    await waitUntil(async () => {
      const counts = (await queue.counts()).default;
      return counts !== undefined && counts.pending + counts.delayed + counts.reserved === 0;
    }, { what: "every job settled", timeoutMs: DEADLINE_MS });
    await worker.stop();
    const failed = await queue.failed();
    console.log(
      `[figure] R08 web workers: ${failed.length} failed for good: ${
        failed.map((job) => `${job.id} (${job.error})`).join("; ")
      }`,
    );
    assert.deepEqual(failed.map((job) => job.id), [ids[50]], "a job failed for another's crashes");
  },
});
