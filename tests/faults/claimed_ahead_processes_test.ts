/**
 * R18 across processes: two worker processes at concurrency 8 claim quick
 * jobs ahead on one database (SQLite file, PostgreSQL or Redis) while a third
 * process (this one, or the CLI) pauses their queue or cancels jobs they
 * hold ahead, or re-dispatches the `uniqueUntil: "processing"` keys of jobs
 * they hold ahead. Each handler's first line appends its start to a ledger.
 * Figures are printed; no duration is asserted. The pause runs on every
 * store; the cancel and unique tests pick the jobs held ahead with SQL, so
 * they run on the SQL stores only.
 *
 * @module
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ChildScript } from "../_child.ts";
import { failedCount, unfinishedCount, waitUntil } from "../_helpers.ts";
import { type StoreContext, storeTest } from "../_stores.ts";
import { runCli } from "../fixtures/cli/cli_process.ts";
import { once, uniqueOnce } from "../fixtures/claimed_ahead/jobs.ts";

const JOBS = 6_000;
const WORKERS = 2;
const CONCURRENCY = 8;
/** Starts before the third process acts, so that the workers claim ahead. */
const WARM_STARTS = 500;
/** How long a step may take on a loaded machine before it is reported as stuck. */
const DEADLINE_MS = 120_000;

/** The job ids in the ledger, one per start. */
function ledgerIds(path: string): number[] {
  return readFileSync(path, "utf8").split("\n").filter((line) => line !== "").map((line) =>
    Number(line.split(" ")[0])
  );
}

/**
 * Dispatches `JOBS` quick jobs of `job`, starts the worker processes and waits until
 * `WARM_STARTS` of them started; runs `act` while the workers work, then
 * kills them.
 */
async function withWorkers(
  db: StoreContext,
  act: (ledger: string, ids: readonly number[]) => Promise<void>,
  job: typeof once | typeof uniqueOnce = once,
): Promise<void> {
  await using queue = await db.open({ jobs: [once, uniqueOnce] });
  const ledger = join(db.dir, "ledger.txt");
  await Deno.writeTextFile(ledger, "");
  const payloads = Array.from({ length: JOBS }, (_, n) => ({ n }));
  const ids = job === once
    ? await queue.dispatchMany(once, payloads)
    : await queue.dispatchMany(uniqueOnce, payloads);
  const args = await db.childArgs();
  const env = { CLAIMED_AHEAD_LEDGER: ledger, CLAIMED_AHEAD_CONCURRENCY: String(CONCURRENCY) };
  for (const [name, value] of Object.entries(env)) Deno.env.set(name, value);
  const children: ChildScript[] = [];
  try {
    for (let index = 0; index < WORKERS; index++) {
      children.push(
        new ChildScript(
          new URL("../fixtures/claimed_ahead/worker_child.ts", import.meta.url),
          args,
        ),
      );
    }
    for (const child of children) await child.line("ready", DEADLINE_MS);
  } finally {
    for (const name of Object.keys(env)) Deno.env.delete(name);
  }
  try {
    await waitUntil(() => Promise.resolve(ledgerIds(ledger).length >= WARM_STARTS), {
      what: `${WARM_STARTS} starts`,
      timeoutMs: DEADLINE_MS,
    });
    await act(ledger, ids);
  } finally {
    for (const child of children) await child[Symbol.asyncDispose]();
  }
}

/** Pauses "default" from a third process, and checks what starts after. */
function pausedFromAnotherProcess(db: StoreContext, pause: () => Promise<void>, how: string) {
  return withWorkers(db, async (ledger, ids) => {
    await using other = await db.open({ jobs: [once] });
    const leased = async () => (await other.counts()).default?.reserved ?? 0;
    const leasedAtPause = await leased();
    await pause();
    const startsAtPause = ledgerIds(ledger).length;
    await waitUntil(async () => (await leased()) === 0, {
      what: "nothing leased",
      timeoutMs: DEADLINE_MS,
    });
    const startedAfter = ledgerIds(ledger).length - startsAtPause;
    const slots = WORKERS * CONCURRENCY;
    console.log(
      `[figure] R18 ${db.kind} ${WORKERS} processes c${CONCURRENCY}, ${how}: ${leasedAtPause} ` +
        `jobs leased at the pause (running in ${slots} slots or claimed ahead), ` +
        `${startedAfter} started after it (at most ${slots}: confirmed before it)`,
    );
    // A job whose start was confirmed before the pause holds its slot: it is running to every
    // rule, though its handler may begin a moment after the pause returned.
    assert.ok(startedAfter <= slots, `${startedAfter} jobs started after the pause`);
    await other.resume("default");
    await waitUntil(async () => (await unfinishedCount(other)) === 0, {
      what: "every job to run",
      timeoutMs: DEADLINE_MS,
    });
    const starts = ledgerIds(ledger);
    assert.equal(new Set(starts).size, ids.length, "a job never ran");
    assert.equal(starts.length, ids.length, "a job ran twice");
    assert.equal(await failedCount(other), 0);
  });
}

storeTest(
  "a pause from a third process (the CLI, or a process of the test's own on PostgreSQL) while two worker processes claim ahead: at most the jobs holding slots start afterwards; each job runs once after resume()",
  (db) =>
    pausedFromAnotherProcess(db, async () => {
      const args = await db.childArgs();
      if (args.length === 1) {
        const paused = await runCli(["pause", "default", "--db", ...args]);
        assert.equal(paused.code, 0, paused.stderr);
        return;
      }
      await using child = new ChildScript(
        new URL("../fixtures/claimed_ahead/pause_child.ts", import.meta.url),
        args,
      );
      await child.line("paused", DEADLINE_MS);
    }, "paused from a third process"),
);

storeTest.sql(
  'Queue.cancel() from a third process of jobs two worker processes claimed ahead: a job answered "cancelled" never starts',
  (db) =>
    withWorkers(db, async (ledger, ids) => {
      await using other = await db.open({ jobs: [once] });
      const window = (await db.query<{ id: number }>(
        "SELECT id FROM jobs WHERE claimed_ahead = 1 ORDER BY id DESC LIMIT 100",
      )).map(({ id }) => Number(id));
      const outcomes = new Map<number, string>();
      for (const id of window) outcomes.set(id, await other.cancel(id, { reason: "R18" }));
      await waitUntil(async () => (await db.count("jobs")) === 0, {
        what: "every other job to run",
        timeoutMs: DEADLINE_MS,
      });
      const started = new Set(ledgerIds(ledger));
      const cancelled = window.filter((id) => outcomes.get(id) === "cancelled");
      const startedAfter = cancelled.filter((id) => started.has(id));
      console.log(
        `[figure] R18 ${db.kind} ${WORKERS} processes c${CONCURRENCY}: ${window.length} cancels ` +
          `of jobs claimed ahead, ${cancelled.length} answered "cancelled", ` +
          `${startedAfter.length} of those started`,
      );
      assert.deepEqual(startedAfter, [], 'a job answered "cancelled" started');
      assert.equal(started.size + cancelled.length, ids.length, "a job was lost");
    }),
);

storeTest.sql(
  'uniqueUntil "processing" re-dispatched from a third process while two worker processes claim the jobs ahead: never two jobs of one key waiting to start',
  (db) =>
    withWorkers(db, async (ledger, ids) => {
      await using other = await db.open({ jobs: [once, uniqueOnce] });
      const known = new Set(ids);
      let stored = 0;
      let refused = 0;
      let doubled = 0;
      for (let round = 0; round < 20 && (await db.count("jobs")) > 0; round++) {
        // The keys of jobs held ahead now, and of pending jobs after them.
        const waiting = await db.query<{ payload: string }>(
          "SELECT payload FROM jobs WHERE token IS NULL OR claimed_ahead = 1 ORDER BY id LIMIT 200",
        );
        const again = waiting.map(({ payload }) => JSON.parse(payload) as { n: number });
        for (const id of await other.dispatchMany(uniqueOnce, again)) {
          if (known.has(id)) refused++;
          else {
            known.add(id);
            stored++;
          }
        }
        // Jobs of one key not started (pending, or held ahead): at most one, at every moment.
        const [row] = await db.query<{ n: number }>(
          `SELECT COUNT(*) AS n FROM (SELECT payload FROM jobs
            WHERE token IS NULL OR claimed_ahead = 1 GROUP BY payload HAVING COUNT(*) > 1) d`,
        );
        doubled += Number(row!.n);
      }
      await waitUntil(async () => (await db.count("jobs")) === 0, {
        what: "every job to run",
        timeoutMs: DEADLINE_MS,
      });
      const starts = ledgerIds(ledger);
      console.log(
        `[figure] R18 ${db.kind} ${WORKERS} processes c${CONCURRENCY}: uniqueUntil "processing" ` +
          `re-dispatched: ${refused} answered with the waiting holder, ${stored} stored as new ` +
          `jobs; ${doubled} keys seen with two jobs waiting to start`,
      );
      assert.equal(doubled, 0, "two jobs of one key waited to start");
      assert.equal(starts.length, known.size, "a job ran twice or never");
    }, uniqueOnce),
);
