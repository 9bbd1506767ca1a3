/**
 * R04's kill storm with jobs of one attempt and one crash (`maxAttempts: 1,
 * maxCrashes: 1`, issue 31): two worker processes at concurrency 32 with
 * Web Workers, claiming ahead, drain them while one of them is killed with
 * SIGKILL at a time, four times, and restarted. Each handler's first line
 * appends its start to a ledger. Must hold: none lost, and every job that
 * failed for a crash had started (its handler's begin was recorded before
 * its worker died): none failed that never started, whether it was held
 * ahead, confirmed or claimed into a free slot and not yet begun when the
 * kill came. The other side of that rule (R04's bound): a job whose
 * handler began but whose begin was not recorded yet (the handler's first
 * milliseconds, or a success not yet settled) is run again, as suspect,
 * so a kill starts again at most the jobs its worker had in flight: those
 * in its slots and those that left them since its last write. On every
 * store: the jobs leased at each kill (running or held ahead) are read
 * through the queue.
 *
 * @module
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ChildScript } from "../_child.ts";
import { unfinishedCount, waitUntil } from "../_helpers.ts";
import { storeTest } from "../_stores.ts";
import { once } from "../fixtures/claimed_ahead/jobs.ts";

const JOBS = 20_000;
const CONCURRENCY = 32;
const KILLS = 4;
/** Starts between two kills, so each kill lands while jobs flow. */
const STARTS_BETWEEN_KILLS = 1_500;
/** How long a step may take on a loaded machine before it is reported as stuck. */
const DEADLINE_MS = 240_000;

/** The job ids in the ledger, one per start. */
function ledgerIds(path: string): number[] {
  return readFileSync(path, "utf8").split("\n").filter((line) => line !== "").map((line) =>
    Number(line.split(" ")[0])
  );
}

storeTest(
  "a kill storm at concurrency 32 with Web Workers fails for a crash only jobs that had started, none lost, none started twice but the jobs in flight at a kill (maxAttempts 1, maxCrashes 1)",
  async (db) => {
    await using queue = await db.open({ jobs: [once] });
    const ledger = join(db.dir, "ledger.txt");
    await Deno.writeTextFile(ledger, "");
    const ids = await queue.dispatchMany(once, Array.from({ length: JOBS }, (_, n) => ({ n })));
    const args = await db.childArgs();
    const env = {
      CLAIMED_AHEAD_LEDGER: ledger,
      CLAIMED_AHEAD_CONCURRENCY: String(CONCURRENCY),
      CLAIMED_AHEAD_EXECUTOR: "workers",
      CLAIMED_AHEAD_LEASE_MS: "2000",
    };
    for (const [name, value] of Object.entries(env)) Deno.env.set(name, value);
    const children: ChildScript[] = [];
    const start = async () => {
      const child = new ChildScript(
        new URL("../fixtures/claimed_ahead/worker_child.ts", import.meta.url),
        args,
      );
      children.push(child);
      await child.line("ready", DEADLINE_MS);
      return child;
    };
    const leasedAtKills: number[] = [];
    try {
      const slots = [await start(), await start()];
      for (let kill = 0; kill < KILLS; kill++) {
        const from = ledgerIds(ledger).length;
        // A quick machine may drain every job before the last kills (the other process drains
        // while a killed one restarts): the storm then ends with the kills it had.
        const flowing = await waitUntil(
          async () =>
            ledgerIds(ledger).length >= from + STARTS_BETWEEN_KILLS
              ? "flowing"
              : (await unfinishedCount(queue)) === 0
              ? "drained"
              : null,
          {
            what: `${STARTS_BETWEEN_KILLS} starts before kill ${kill + 1}`,
            timeoutMs: DEADLINE_MS,
          },
        );
        if (flowing === "drained") break;
        leasedAtKills.push((await queue.counts()).default?.reserved ?? 0);
        const index = kill % 2;
        await slots[index]![Symbol.asyncDispose](); // SIGKILL
        slots[index] = await start();
      }
      await waitUntil(async () => (await unfinishedCount(queue)) === 0, {
        what: "every job settled",
        timeoutMs: DEADLINE_MS,
      });
    } finally {
      for (const name of Object.keys(env)) Deno.env.delete(name);
      for (const child of children) await child[Symbol.asyncDispose]();
    }

    const starts = ledgerIds(ledger);
    const started = new Set(starts);
    // The most a listing gives; more failed jobs than that fail the bound below anyway.
    const failed = await queue.failed({ limit: 1_000 });
    const neverStarted = failed.filter(({ id }) => !started.has(id));
    const failedIds = new Set(failed.map(({ id }) => id));
    const lost = ids.filter((id) => !started.has(id) && !failedIds.has(id));
    console.log(
      `[figure] R04/R18 ${db.kind} c${CONCURRENCY} web workers: ${leasedAtKills.length} kills ` +
        `(leased at each, running or held ahead: ${leasedAtKills.join(", ")}); ` +
        `${failed.length} failed for a crash, ` +
        `${neverStarted.length} of them never started (${
          (neverStarted.length / leasedAtKills.length).toFixed(1)
        } per kill, ${CONCURRENCY} slots); ${starts.length - started.size} started twice; ` +
        `${lost.length} lost`,
    );
    assert.ok(leasedAtKills.length >= 1, "no kill landed while jobs flowed");
    assert.deepEqual(lost, [], "jobs lost");
    const twice = starts.length - started.size;
    const inFlight = leasedAtKills.length * 2 * CONCURRENCY;
    assert.ok(
      twice <= inFlight,
      `${twice} started twice: more than ${inFlight} in flight at the kills`,
    );
    assert.deepEqual(
      neverStarted.map(({ id }) => id),
      [],
      `${neverStarted.length} jobs failed for a crash without starting`,
    );
    assert.ok(failed.length <= KILLS * CONCURRENCY, `${failed.length} failed for ${KILLS} kills`);
  },
);
