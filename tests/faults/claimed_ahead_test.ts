/**
 * R18: a job claimed ahead (leased by a worker beyond its free slots, not
 * yet started) is, to every rule of the queue, a job that has not started.
 * Cancelled, it never starts; its queue paused (here, from another
 * connection, or by the CLI in another process), it does not start; its
 * `uniqueUntil: "processing"` key holds while it waits and after `stop()`
 * puts it back, which counts no retry (nor does a drain's time budget
 * running out); its worker killed, it is charged no
 * attempt and no crash. Each scenario holds a worker at a job whose handler
 * waits on a gate while the jobs after it are claimed ahead, and counts
 * starts in a ledger. Figures are printed; no duration is asserted.
 *
 * @module
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import postgres from "postgres";
import { z } from "zod";
import { defineJob } from "../../src/job.ts";
import { Queue } from "../../src/queue.ts";
import type { WorkerStats } from "../../src/runner/runner.ts";
import { PostgresStore } from "../../src/stores/postgres/mod.ts";
import { ChildScript } from "../_child.ts";
import { openTestPostgresStore, postgresTestUrl } from "../_postgres.ts";
import { tempDir, unfinishedCount, waitUntil } from "../_helpers.ts";
import { type StoreContext, storeTest } from "../_stores.ts";
import { runCli } from "../fixtures/cli/cli_process.ts";
import { gate, record } from "../fixtures/runner/harness.ts";
import { once, poison, POISON_EXIT_CODE } from "../fixtures/claimed_ahead/jobs.ts";

/** Quick jobs run before the held one: the worker learns they are quick and claims ahead. */
const WARM_JOBS = 300;
/** Jobs after the held ones, more than a worker claims ahead at concurrency 1 or 8. */
const AFTER_JOBS = 400;
/** How long a scenario may take on a loaded machine before it is reported as stuck. */
const DEADLINE_MS = 60_000;

/** One start of a handler. */
interface Start {
  readonly n: number;
  readonly attempt: number;
}

/** Jobs `n` = 0, 1, … of which those from `WARM_JOBS` on, `held` of them, wait on a gate. */
function heldJobs(held: number, options: { uniqueUntil?: "processing" } = {}) {
  const starts: Start[] = [];
  const release = gate();
  const allHeld = gate();
  let holding = 0;
  const job = defineJob({
    name: "ahead.quick",
    schema: z.object({ n: z.number().int() }),
    ...(options.uniqueUntil !== undefined &&
      { uniqueUntil: options.uniqueUntil, uniqueId: ({ n }) => String(n), uniqueForMs: 600_000 }),
    async handle({ n }, ctx) {
      starts.push({ n, attempt: ctx.attempt });
      if (n < WARM_JOBS || n >= WARM_JOBS + held) return;
      if (++holding === held) allHeld.resolve();
      await release.promise;
    },
  });
  return { job, starts, release, allHeld: allHeld.promise };
}

/** Leased rows now: the jobs running and those claimed ahead. */
type Leased = () => Promise<number>;

/** {@linkcode Leased} on this test's database. */
function leasedIn(db: StoreContext): Leased {
  return () => db.count("jobs", "token IS NOT NULL");
}

/**
 * Dispatches the warm-up jobs, the held ones and `AFTER_JOBS` more, starts a
 * worker at `concurrency` and waits until the held jobs hold every slot and
 * jobs are claimed ahead behind them; the ids in order.
 */
async function holdWorker(
  leased: Leased,
  queue: Queue,
  scenario: ReturnType<typeof heldJobs>,
  concurrency: number,
) {
  const total = WARM_JOBS + concurrency + AFTER_JOBS;
  const ids = await queue.dispatchMany(
    scenario.job,
    Array.from({ length: total }, (_, n) => ({ n })),
  );
  const worker = queue.work({ concurrency, executor: "isolate", pollMs: 20, graceMs: 60_000 });
  await scenario.allHeld;
  const held = await leased();
  assert.ok(held > concurrency, `jobs claimed ahead behind the held ones: ${held - concurrency}`);
  return { ids, worker, aheadAtHold: held - concurrency };
}

/** The starts of jobs `n` in `[from, to)`. */
function startsIn(starts: readonly Start[], from: number, to: number): Start[] {
  return starts.filter(({ n }) => n >= from && n < to);
}

storeTest.sql(
  "Queue.cancel() of jobs claimed ahead cancels them at once, and none of them starts afterwards",
  async (db) => {
    const scenario = heldJobs(1);
    await using queue = await db.open({ jobs: [scenario.job] });
    const { ids, worker, aheadAtHold } = await holdWorker(leasedIn(db), queue, scenario, 1);
    // Another connection cancels a window of jobs just ahead of the worker, all claimed ahead.
    await using other = await db.open({ jobs: [scenario.job] });
    const window = ids.slice(WARM_JOBS + 1, WARM_JOBS + 1 + Math.min(aheadAtHold, 40));
    const outcomes = [];
    for (const id of window) outcomes.push(await other.cancel(id, { reason: "not wanted" }));
    scenario.release.resolve();
    await waitUntil(async () => {
      return (await db.count("jobs")) === 0;
    }, { what: "every other job to run", timeoutMs: DEADLINE_MS });
    await worker.stop();
    const from = WARM_JOBS + 1;
    const ranAfter = startsIn(scenario.starts, from, from + window.length);
    console.log(
      `[figure] R18 ${db.kind}: ${window.length} jobs claimed ahead cancelled; ` +
        `answered ${outcomes.filter((o) => o === "cancelled").length} "cancelled", ` +
        `${ranAfter.length} started after cancel() resolved`,
    );
    assert.deepEqual(outcomes, window.map(() => "cancelled"));
    assert.equal(ranAfter.length, 0, "a cancelled job started");
    assert.equal(scenario.starts.length, ids.length - window.length);
    for (const id of window) assert.equal((await queue.result(id))?.state, "cancelled");
  },
);

for (const concurrency of [1, 8]) {
  storeTest.sql(
    `Queue.pause() stops jobs claimed ahead at concurrency ${concurrency}: only the jobs running may finish, the rest are given back charged nothing`,
    async (db) => {
      const scenario = heldJobs(concurrency);
      await using queue = await db.open({ jobs: [scenario.job] });
      const { worker, aheadAtHold } = await holdWorker(leasedIn(db), queue, scenario, concurrency);
      await using other = await db.open({ jobs: [scenario.job] });
      await other.pause("default", { reason: "R18" });
      const startsAtPause = scenario.starts.length;
      scenario.release.resolve();
      // The held jobs finish; every job claimed ahead is given back, none leased any more.
      await waitUntil(async () => (await leasedIn(db)()) === 0, {
        what: "nothing leased",
        timeoutMs: DEADLINE_MS,
      });
      const startedAfter = scenario.starts.length - startsAtPause;
      console.log(
        `[figure] R18 ${db.kind} c${concurrency}: ${aheadAtHold} jobs claimed ahead at the pause, ` +
          `${startedAfter} started after pause() resolved`,
      );
      assert.equal(startedAfter, 0, "a job started after pause() resolved");
      await other.resume("default");
      await waitUntil(async () => (await db.count("jobs")) === 0, {
        what: "every job to run",
        timeoutMs: DEADLINE_MS,
      });
      await worker.stop();
      const total = WARM_JOBS + concurrency + AFTER_JOBS;
      assert.equal(scenario.starts.length, total, "each job ran once");
      assert.deepEqual(scenario.starts.filter(({ attempt }) => attempt !== 1), []);
    },
  );
}

Deno.test("R18: the CLI's pause in another process stops the jobs a worker claimed ahead", async () => {
  await using tmp = await tempDir();
  const scenario = heldJobs(1);
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [scenario.job] });
  using reader = new DatabaseSync(tmp.dbPath, { readOnly: true });
  const count = reader.prepare("SELECT COUNT(*) AS n FROM jobs WHERE token IS NOT NULL");
  const leased = () => Promise.resolve(Number(count.get()!.n));
  const { worker, aheadAtHold } = await holdWorker(leased, queue, scenario, 1);
  const paused = await runCli(["pause", "default", "--db", tmp.dbPath]);
  assert.equal(paused.code, 0, paused.stderr);
  const startsAtPause = scenario.starts.length;
  scenario.release.resolve();
  await waitUntil(async () => (await leased()) === 0, {
    what: "nothing leased",
    timeoutMs: DEADLINE_MS,
  });
  const startedAfter = scenario.starts.length - startsAtPause;
  console.log(
    `[figure] R18 CLI pause: ${aheadAtHold} jobs claimed ahead, ` +
      `${startedAfter} started after the CLI's pause exited`,
  );
  assert.equal(startedAfter, 0, "a job started after the CLI's pause exited");
  await worker.stop();
});

storeTest.sql(
  'uniqueUntil "processing" holds the key of jobs claimed ahead that stop() puts back, and stop() counts them as no retry',
  async (db) => {
    const scenario = heldJobs(1, { uniqueUntil: "processing" });
    await using queue = await db.open({ jobs: [scenario.job] });
    const { worker, aheadAtHold } = await holdWorker(leasedIn(db), queue, scenario, 1);
    const retries = record(worker, "job:retry");
    const stopped = new Promise<WorkerStats>((resolve) =>
      worker.addEventListener("worker:stop", (event) => resolve((event as CustomEvent).detail))
    );
    const stopping = worker.stop();
    scenario.release.resolve();
    await stopping;
    const stats = await stopped;
    const total = WARM_JOBS + 1 + AFTER_JOBS;
    const waiting = await db.count("jobs");
    assert.equal(waiting, total - scenario.starts.length);
    // Every job not started still holds its key: dispatching it again stores nothing.
    const again = Array.from({ length: AFTER_JOBS }, (_, index) => ({ n: total - 1 - index }));
    await queue.dispatchMany(scenario.job, again);
    const duplicates = (await db.count("jobs")) - waiting;
    console.log(
      `[figure] R18 ${db.kind}: ${aheadAtHold} jobs claimed ahead put back by stop(); ` +
        `${duplicates} duplicates stored on dispatching them again; ${stats.retried} counted retried`,
    );
    assert.equal(duplicates, 0, "a job put back lost its unique key");
    assert.deepEqual([stats.retried, retries.length], [0, 0], "put-backs counted as retries");
    assert.equal(stats.completed, scenario.starts.length);
  },
);

storeTest.sql(
  "drain() at the end of its time budget counts the jobs it claimed ahead and put back as no retry",
  async (db) => {
    const scenario = heldJobs(1);
    await using queue = await db.open({ jobs: [scenario.job] });
    const total = WARM_JOBS + 1 + AFTER_JOBS;
    await queue.dispatchMany(scenario.job, Array.from({ length: total }, (_, n) => ({ n })));
    // The budget ends while the held job runs: long enough for the warm-up on a loaded machine.
    const drained = queue.drain({ maxTimeMs: 20_000, concurrency: 1 });
    const held = await Promise.race([scenario.allHeld.then(() => true), drained.then(() => false)]);
    assert.ok(held, "the drain ended before the held job started");
    const aheadAtHold = (await leasedIn(db)()) - 1;
    const result = await drained;
    scenario.release.resolve();
    console.log(
      `[figure] R18 ${db.kind} drain: ${aheadAtHold} jobs claimed ahead at the end of the budget; ` +
        `${result.retried} counted retried`,
    );
    assert.ok(aheadAtHold > 0, "no job was claimed ahead behind the held one");
    assert.equal(result.stoppedBecause, "time");
    // Only the held job ran and was put back; the jobs claimed ahead behind it never started.
    assert.equal(result.retried, 1, "put-backs of jobs claimed ahead counted as retries");
    assert.equal(result.completed, WARM_JOBS);
    assert.equal(await db.count("jobs"), total - WARM_JOBS);
  },
);

storeTest.sql(
  "a worker process killed while holding jobs claimed ahead charges them no attempt and no crash (maxAttempts 1, maxCrashes 1)",
  async (db) => {
    await using queue = await db.open({ jobs: [once] });
    const ledger = join(db.dir, "ledger.txt");
    await Deno.writeTextFile(ledger, "");
    const total = WARM_JOBS + 1 + AFTER_JOBS;
    await queue.dispatchMany(once, Array.from({ length: total }, (_, n) => ({ n })));
    const args = await db.childArgs();
    Deno.env.set("CLAIMED_AHEAD_LEDGER", ledger);
    Deno.env.set("CLAIMED_AHEAD_HOLD", String(WARM_JOBS));
    try {
      const child = new ChildScript(
        new URL("../fixtures/claimed_ahead/worker_child.ts", import.meta.url),
        args,
      );
      // Jobs that run here after the kill record their starts in the same ledger, and hold nothing.
      Deno.env.delete("CLAIMED_AHEAD_HOLD");
      await using _ = child;
      await child.line("holding", DEADLINE_MS);
      // How many jobs a worker claims ahead follows its handlers' recent run times (no more
      // than fit in 20 ms): give a tick that claims them a few seconds to come.
      let heldAhead = 0;
      await waitUntil(async () => (heldAhead = (await leasedIn(db)()) - 1) > 0, {
        what: "jobs claimed ahead behind the holding one",
        timeoutMs: 5_000,
      }).catch(() => {});
      // Its worker records that the holding job's handler began: from then on a death charges it.
      await waitUntil(
        async () =>
          (await db.count("jobs", "token IS NOT NULL AND claimed_ahead = 0 AND begun = 1")) === 1,
        { what: "the holding job's begin mark", timeoutMs: DEADLINE_MS },
      );
      await child[Symbol.asyncDispose](); // SIGKILL: the child never stops on its own
      const ranBeforeKill = readLedger(ledger).length;

      // A worker here takes their leases over once they run out (60 s: moved back to now).
      await db.query("UPDATE jobs SET available_at = 0 WHERE token IS NOT NULL");
      const worker = queue.work({ concurrency: 4, executor: "isolate", pollMs: 20 });
      await waitUntil(async () => (await db.count("jobs")) === 0, {
        what: "every job settled",
        timeoutMs: DEADLINE_MS,
      });
      await worker.stop();

      const runs = readLedger(ledger);
      const ran = new Set(runs.map(({ id }) => id));
      const failed = await db.query<{ id: number; error: string }>(
        "SELECT id, error FROM failed_jobs",
      );
      const neverStarted = failed.filter(({ id }) => !ran.has(Number(id)));
      console.log(
        `[figure] R18 ${db.kind}: killed holding ${heldAhead} jobs claimed ahead after ${ranBeforeKill} ` +
          `started; ${failed.length} failed, ${neverStarted.length} of them never started`,
      );
      if (heldAhead === 0) {
        // On a machine so loaded that a no-op handler took over 20 ms, the worker claimed
        // nothing ahead: what this test is about did not happen, and the rest proves nothing.
        console.log(`[figure] R18 ${db.kind}: inconclusive, nothing was claimed ahead at the kill`);
        return;
      }
      assert.deepEqual(neverStarted, [], "a job failed that never started");
      // Only the job that held its slot at the kill failed: it had started.
      assert.equal(failed.length, 1, failed.map((row) => row.error).join("; "));
      assert.deepEqual(
        runs.filter(({ attempt }) => attempt !== 1),
        [],
        "a job was charged an attempt",
      );
      assert.equal(ran.size, total);
    } finally {
      Deno.env.delete("CLAIMED_AHEAD_LEDGER");
      Deno.env.delete("CLAIMED_AHEAD_HOLD");
    }
  },
);

/** The ledger's `<id> <attempt>` lines. */
function readLedger(path: string): { id: number; attempt: number }[] {
  return readFileSync(path, "utf8").split("\n").filter((line) => line !== "").map((line) => {
    const [id, attempt] = line.split(" ").map(Number);
    return { id: id!, attempt: attempt! };
  });
}

storeTest.sql(
  "a job claimed ahead whose lease ran out while it waited for its start starts on a renewed lease: another worker does not run it again or charge it a crash",
  async (db) => {
    const starts: Start[] = [];
    const release = gate();
    const held = gate();
    const next = gate();
    const nextStarted = gate();
    const job = defineJob({
      name: "ahead.lapsed",
      schema: z.object({ n: z.number().int() }),
      async handle({ n }, ctx) {
        starts.push({ n, attempt: ctx.attempt });
        if (n === WARM_JOBS) {
          held.resolve();
          await release.promise;
        } else if (n === WARM_JOBS + 1) {
          nextStarted.resolve();
          await next.promise;
        }
      },
    });
    await using queue = await db.open({ jobs: [job] });
    const total = WARM_JOBS + 1 + AFTER_JOBS;
    await queue.dispatchMany(job, Array.from({ length: total }, (_, n) => ({ n })));
    const worker = queue.work({ concurrency: 1, executor: "isolate", pollMs: 20 });
    await held.promise;
    // The leases of the jobs claimed ahead run out while the worker's slot is busy (their 30 s
    // moved back to now); the worker still holds them, each under a third of its lease old.
    const lapsed = await db.count("jobs", "claimed_ahead = 1");
    assert.ok(lapsed > 0, "no job was claimed ahead behind the held one");
    await db.query("UPDATE jobs SET available_at = 0 WHERE claimed_ahead = 1");
    release.resolve();
    await nextStarted.promise;
    // Another worker takes over every lease that ran out.
    await using other = await db.open({ jobs: [job] });
    const otherWorker = other.work({ concurrency: 4, executor: "isolate", pollMs: 20 });
    await waitUntil(() => Promise.resolve(new Set(starts.map(({ n }) => n)).size === total), {
      what: "every job to start",
      timeoutMs: DEADLINE_MS,
    });
    await waitUntil(async () => (await db.count("jobs")) === 1, {
      what: "every job but the one started on a lapsed lease to settle",
      timeoutMs: DEADLINE_MS,
    });
    const twice = startsIn(starts, WARM_JOBS + 1, WARM_JOBS + 2);
    const [row] = await db.query<{ crashes: number }>(
      "SELECT crashes FROM jobs WHERE token IS NOT NULL",
    );
    console.log(
      `[figure] R18 ${db.kind}: ${lapsed} jobs claimed ahead lost their lease while waiting; ` +
        `the one confirmed next started ${twice.length} times, crashes ${row?.crashes}`,
    );
    next.resolve();
    await waitUntil(async () => (await db.count("jobs")) === 0, {
      what: "every job settled",
      timeoutMs: DEADLINE_MS,
    });
    await Promise.all([worker.stop(), otherWorker.stop()]);
    assert.deepEqual(twice, [{ n: WARM_JOBS + 1, attempt: 1 }], "started on a lapsed lease");
    assert.equal(Number(row?.crashes), 0, "charged a crash while it ran");
    assert.equal(await db.count("failed_jobs"), 0);
  },
);

storeTest(
  "R08: a job that kills its worker process every time reaches failed_jobs after maxCrashes, and the jobs its dead workers held ahead are charged nothing (maxAttempts 1, maxCrashes 1)",
  async (db) => {
    await using queue = await db.open({ jobs: [once, poison] });
    const ledger = join(db.dir, "ledger.txt");
    await Deno.writeTextFile(ledger, "");
    const quick = await queue.dispatchMany(
      once,
      Array.from({ length: WARM_JOBS }, (_, n) => ({ n })),
    );
    const [poisonId] = await queue.dispatchMany(poison, [{ n: WARM_JOBS }]);
    quick.push(
      ...await queue.dispatchMany(
        once,
        Array.from({ length: AFTER_JOBS }, (_, n) => ({ n: WARM_JOBS + 1 + n })),
      ),
    );
    const args = await db.childArgs();
    Deno.env.set("CLAIMED_AHEAD_LEDGER", ledger);
    // A short lease brings back what a dead worker held.
    Deno.env.set("CLAIMED_AHEAD_LEASE_MS", "1000");
    const deaths: number[] = [];
    try {
      // Each worker process runs until the poison job kills it; a new one takes its place.
      while ((await unfinishedCount(queue)) > 0) {
        assert.ok(deaths.length <= poison.maxCrashes, `${deaths.length} deaths: never quarantined`);
        await using child = new ChildScript(
          new URL("../fixtures/claimed_ahead/worker_child.ts", import.meta.url),
          args,
        );
        const settled = waitUntil(async () => (await unfinishedCount(queue)) === 0, {
          what: "every job settled",
          timeoutMs: DEADLINE_MS,
        }).then(() => null);
        const died = await Promise.race([child.status, settled]);
        if (died !== null) deaths.push(died.code);
      }
    } finally {
      Deno.env.delete("CLAIMED_AHEAD_LEDGER");
      Deno.env.delete("CLAIMED_AHEAD_LEASE_MS");
    }
    const runs = readLedger(ledger);
    const failed = await queue.failed({ limit: 1_000 });
    const poisonRuns = runs.filter(({ id }) => id === poisonId);
    console.log(
      `[figure] R08 ${db.kind}: the poison job killed ${deaths.length} worker processes ` +
        `(maxCrashes ${poison.maxCrashes}) before quarantine; ${failed.length} failed`,
    );
    assert.deepEqual(deaths, Array(poison.maxCrashes).fill(POISON_EXIT_CODE));
    assert.equal(poisonRuns.length, poison.maxCrashes);
    assert.deepEqual(
      failed.map(({ id }) => id),
      [poisonId],
      failed.map((f) => f.error).join("; "),
    );
    assert.match(failed[0]!.error, /worker/);
    const quickRuns = runs.filter(({ id }) => id !== poisonId);
    assert.equal(
      new Set(quickRuns.map(({ id }) => id)).size,
      quick.length,
      "a quick job never ran",
    );
    assert.deepEqual(quickRuns.filter(({ attempt }) => attempt !== 1), [], "charged an attempt");
  },
);

storeTest.sql(
  "a queue paused and resumed at once while its jobs claimed ahead are given back: each job runs once, on its first attempt, none failed or counted retried",
  async (db) => {
    const concurrency = 8;
    const scenario = heldJobs(concurrency);
    await using queue = await db.open({ jobs: [scenario.job] });
    const { worker } = await holdWorker(leasedIn(db), queue, scenario, concurrency);
    const retries = record(worker, "job:retry");
    await using other = await db.open({ jobs: [scenario.job] });
    await other.pause("default", { reason: "R18" });
    scenario.release.resolve();
    // The worker's next tick is refused the starts and gives back what it holds, racing the resume.
    await other.resume("default");
    await waitUntil(async () => (await db.count("jobs")) === 0, {
      what: "every job to run",
      timeoutMs: DEADLINE_MS,
    });
    await worker.stop();
    const total = WARM_JOBS + concurrency + AFTER_JOBS;
    const ran = new Set(scenario.starts.map(({ n }) => n));
    console.log(
      `[figure] R18 ${db.kind}: pause and resume racing the give-back: ${scenario.starts.length} ` +
        `starts for ${total} jobs, ${retries.length} counted retried`,
    );
    assert.equal(ran.size, total, "a job never ran");
    assert.equal(scenario.starts.length, total, "a job ran twice");
    assert.deepEqual(scenario.starts.filter(({ attempt }) => attempt !== 1), []);
    assert.equal(retries.length, 0, "put-backs counted as retries");
    assert.equal(await db.count("failed_jobs"), 0);
  },
);

storeTest.sql(
  "stop() with jobs claimed ahead while a pause is in flight: none of them starts, nothing stays leased, and each runs once on its first attempt after resume()",
  async (db) => {
    const concurrency = 8;
    const scenario = heldJobs(concurrency);
    await using queue = await db.open({ jobs: [scenario.job] });
    const { worker } = await holdWorker(leasedIn(db), queue, scenario, concurrency);
    await using other = await db.open({ jobs: [scenario.job] });
    const startsAtStop = scenario.starts.length;
    const pausing = other.pause("default", { reason: "R18" });
    const stopping = worker.stop();
    scenario.release.resolve();
    await Promise.all([pausing, stopping]);
    const leasedAfter = await leasedIn(db)();
    const startedAfter = scenario.starts.length - startsAtStop;
    console.log(
      `[figure] R18 ${db.kind}: stop() during a pause: ${startedAfter} started after stop(), ` +
        `${leasedAfter} left leased`,
    );
    assert.equal(startedAfter, 0, "a job claimed ahead started after stop()");
    assert.equal(leasedAfter, 0, "jobs left leased after stop()");
    await other.resume("default");
    const again = other.work({ concurrency, executor: "isolate", pollMs: 20 });
    await waitUntil(async () => (await db.count("jobs")) === 0, {
      what: "every job to run",
      timeoutMs: DEADLINE_MS,
    });
    await again.stop();
    const total = WARM_JOBS + concurrency + AFTER_JOBS;
    assert.equal(new Set(scenario.starts.map(({ n }) => n)).size, total, "a job never ran");
    assert.equal(scenario.starts.length, total, "a job ran twice");
    // The held jobs ran to their end before the stop took effect: none needed a second attempt.
    assert.deepEqual(scenario.starts.filter(({ attempt }) => attempt !== 1), []);
    assert.equal(await db.count("failed_jobs"), 0);
  },
);

Deno.test({
  name:
    "PostgreSQL: a pause that commits while a worker's start confirmation is in flight: the job held ahead does not start afterwards",
  // The confirmation reads the pauses with its statement's snapshot (READ COMMITTED): a pause that
  // committed while the confirmation's transaction was open (here held open by a row lock) used to
  // let the jobs it confirmed start after pause() resolved. A pause now waits for that transaction
  // (a table lock that conflicts with every claim and confirmation), so the jobs confirmed are
  // started before it resolves and the ones still held ahead after it never start.
  ignore: postgresTestUrl() === null,
  async fn() {
    const url = postgresTestUrl();
    assert.ok(url !== null, "QUEUE_TEST_POSTGRES_URL is not set");
    await using pg = await openTestPostgresStore(url);
    const sql = postgres(url, { max: 2, onnotice: () => {} });
    try {
      const jobs = `"${pg.schema}".jobs`;
      const count = async (where: string) =>
        Number((await sql.unsafe(`SELECT COUNT(*) AS n FROM ${jobs} WHERE ${where}`))[0]!.n);
      const scenario = heldJobs(1);
      await using queue = await Queue.open({ jobs: [scenario.job], store: pg.store });
      const { ids, worker } = await holdWorker(
        () => count("token IS NOT NULL"),
        queue,
        scenario,
        1,
      );
      const [next] = await sql.unsafe(
        `SELECT id FROM ${jobs} WHERE claimed_ahead = 1 ORDER BY id LIMIT 1`,
      );
      // Another transaction locks the row the worker confirms next, and keeps it locked.
      const locked = gate<string>();
      const unlock = gate();
      const holding = sql.begin(async (tx) => {
        const [row] = await tx.unsafe("SELECT txid_current()::text AS xid");
        await tx.unsafe(`SELECT id FROM ${jobs} WHERE id = ${Number(next!.id)} FOR UPDATE`);
        locked.resolve(String(row!.xid));
        await unlock.promise;
      });
      const xid = await locked.promise;
      scenario.release.resolve();
      await waitUntil(async () =>
        Number(
          (await sql`SELECT COUNT(*) AS n FROM pg_locks
            WHERE NOT granted AND locktype = 'transactionid' AND transactionid::text = ${xid}`)[0]!
            .n,
        ) > 0, { what: "the worker's confirmation to wait on the lock", timeoutMs: DEADLINE_MS });
      await using other = await Queue.open({
        jobs: [scenario.job],
        store: await PostgresStore.open(url, { schema: pg.schema }),
      });
      const pausing = other.pause("default", { reason: "R18" });
      await waitUntil(async () =>
        Number(
          (await sql`SELECT COUNT(*) AS n FROM pg_locks
            WHERE NOT granted AND locktype = 'relation' AND mode = 'ShareRowExclusiveLock'`)[0]!.n,
        ) > 0, { what: "the pause to wait for the open confirmation", timeoutMs: DEADLINE_MS });
      unlock.resolve();
      await pausing;
      const notStarted = new Set(
        (await sql.unsafe(`SELECT id FROM ${jobs} WHERE claimed_ahead = 1`)).map((row) =>
          Number(row.id)
        ),
      );
      await holding;
      await waitUntil(async () => (await count("token IS NOT NULL")) === 0, {
        what: "nothing leased",
        timeoutMs: DEADLINE_MS,
      });
      await worker.stop();
      const startedAfter = scenario.starts.filter(({ n }) => notStarted.has(ids[n]!));
      console.log(
        `[figure] R18 postgres: ${startedAfter.length} jobs held ahead when pause() resolved ` +
          `started afterwards`,
      );
      assert.deepEqual(startedAfter, [], "a job held ahead at the pause started after it");
    } finally {
      await sql.end();
    }
  },
});
