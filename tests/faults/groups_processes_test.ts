/**
 * Groups with real worker processes (docs/groups.md, issue 30), each run
 * written to a ledger of start and end times outside the queue's database:
 * - `groupConcurrency: 2` across 3 worker processes: never more than 2 runs
 *   of one group overlap, on every store;
 * - `groupRate: { max: 3, perMs: 1000 }` across 3 worker processes: never
 *   more than 3 starts of one group in one window, on every store;
 * - ordered groups run in dispatch order, one at a time, across a retry, on
 *   every store;
 * - an ordered group runs in dispatch order across a kill -9 of the process
 *   running one of its jobs: the killed job holds its group until its lease
 *   runs out, then runs again before any later job, on every store;
 * - fairness on SQLite: group A dispatches 10,000 jobs, then group B 10,
 *   with one worker process at concurrency 4: B's 10 finish before A has
 *   run 200 more. B's wait p50/p99 are printed beside the same run with no
 *   groups (printed, not asserted).
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { Queue } from "../../mod.ts";
import { ChildScript } from "../_child.ts";
import { tempDir, unfinishedCount, waitUntil } from "../_helpers.ts";
import { storeTest } from "../_stores.ts";
import { fair, limited, ordered, orderedHang, plain, rated } from "../fixtures/groups/jobs.ts";
import { type LedgerRow, readLedger } from "../fixtures/reliability/ledger.ts";

/** How long a step may take on a loaded machine before it is reported as stuck. */
const DEADLINE_MS = 240_000;
const WORKER = new URL("../fixtures/groups/worker_child.ts", import.meta.url);

/** A ledger row's tenant and n. */
function infoOf(row: LedgerRow): { tenant: string; n: number } {
  return JSON.parse(row.info ?? "{}");
}

/** The most runs of one tenant that overlap in time, by tenant. */
function mostOverlapping(rows: readonly LedgerRow[]): Map<string, number> {
  const edges = new Map<string, [number, number][]>();
  for (const row of rows) {
    const { tenant } = infoOf(row);
    const list = edges.get(tenant) ?? [];
    // An end sorts before a start at the same instant: touching runs do not overlap.
    list.push([row.start, 1], [row.end!, -1]);
    edges.set(tenant, list);
  }
  const most = new Map<string, number>();
  for (const [tenant, list] of edges) {
    list.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let running = 0;
    let peak = 0;
    for (const [, step] of list) {
      running += step;
      peak = Math.max(peak, running);
    }
    most.set(tenant, peak);
  }
  return most;
}

/** Runs `body` with `env` set (children inherit it) and `count` worker processes on `args`. */
async function withWorkers<T>(
  args: readonly string[],
  count: number,
  env: Record<string, string>,
  body: () => Promise<T>,
): Promise<T> {
  for (const [name, value] of Object.entries(env)) Deno.env.set(name, value);
  const children: ChildScript[] = [];
  try {
    for (let index = 0; index < count; index++) {
      const child = new ChildScript(WORKER, args);
      children.push(child);
      await child.line("ready", DEADLINE_MS);
    }
    return await body();
  } finally {
    for (const name of Object.keys(env)) Deno.env.delete(name);
    for (const child of children) await child[Symbol.asyncDispose]();
  }
}

storeTest(
  "groupConcurrency: 2 across 3 worker processes: never more than 2 runs of one group at once, per the ledger",
  async (db) => {
    await using queue = await db.open({ jobs: [limited] });
    const path = join(db.dir, "groups-ledger.db");
    using ledger = new DatabaseSync(path, { timeout: 20_000 });
    const tenants = ["a", "b", "c"];
    await withWorkers(
      await db.childArgs(),
      3,
      { GROUPS_LEDGER: path, GROUPS_JOB_MS: "30", GROUPS_CONCURRENCY: "4" },
      async () => {
        // Dispatched once the three are working, so every one of them claims.
        await queue.dispatchMany(
          limited,
          Array.from({ length: 60 }, (_, n) => ({ tenant: tenants[n % 3]!, n })),
        );
        await waitUntil(() => readLedger(ledger).length >= 60 || null, {
          what: "60 runs in the ledger",
          timeoutMs: DEADLINE_MS,
        });
      },
    );
    const rows = readLedger(ledger);
    const most = mostOverlapping(rows);
    const pids = new Set(rows.map((row) => row.pid));
    console.log(
      `[figure] groups ${db.kind}: most runs of one group at once ${
        JSON.stringify(Object.fromEntries(most))
      } (limit 2) over ${pids.size} processes, ${rows.length} runs`,
    );
    assert.equal(rows.length, 60, "every job ran once");
    for (const [tenant, peak] of most) assert.ok(peak <= 2, `group ${tenant}: ${peak} at once`);
  },
);

/**
 * The most starts of one tenant in one window of `perMs` (windows at
 * multiples of it, as the store counts them), by tenant.
 */
function mostPerWindow(rows: readonly LedgerRow[], perMs: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (const row of rows) {
    const key = `${infoOf(row).tenant}@${Math.floor(row.start / perMs)}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const most = new Map<string, number>();
  for (const [key, count] of counts) {
    const tenant = key.slice(0, key.indexOf("@"));
    most.set(tenant, Math.max(most.get(tenant) ?? 0, count));
  }
  return most;
}

storeTest(
  "groupRate: 3 per 2 s across 3 worker processes: never more than 3 starts of one group in one window, per the ledger",
  async (db) => {
    await using queue = await db.open({ jobs: [rated] });
    const path = join(db.dir, "groups-ledger.db");
    using ledger = new DatabaseSync(path, { timeout: 20_000 });
    const tenants = ["a", "b", "c"];
    const perMs = 2_000;
    await withWorkers(
      await db.childArgs(),
      3,
      { GROUPS_LEDGER: path, GROUPS_JOB_MS: "10", GROUPS_CONCURRENCY: "4" },
      async () => {
        // The store counts a job in the window of its claim and the ledger its start, a little
        // later: dispatched early in a window, its first claims start in it, and the later ones
        // are claimed as a window turns (the workers wake then), so each start is in its claim's
        // window unless a handler starts over a second and a half after its claim.
        await waitUntil(() => Date.now() % perMs < 500, {
          what: "the start of a window",
          everyMs: 5,
        });
        await queue.dispatchMany(
          rated,
          Array.from({ length: 27 }, (_, n) => ({ tenant: tenants[n % 3]!, n })),
        );
        await waitUntil(() => readLedger(ledger).length >= 27 || null, {
          what: "27 runs in the ledger",
          timeoutMs: DEADLINE_MS,
        });
      },
    );
    const rows = readLedger(ledger);
    const most = mostPerWindow(rows, perMs);
    const pids = new Set(rows.map((row) => row.pid));
    console.log(
      `[figure] group rate ${db.kind}: most starts of one group in one window ${
        JSON.stringify(Object.fromEntries(most))
      } (limit 3 per ${perMs} ms) over ${pids.size} processes, ${rows.length} runs`,
    );
    assert.equal(rows.length, 27, "every job ran once");
    for (const [tenant, peak] of most) assert.ok(peak <= 3, `group ${tenant}: ${peak} in a window`);
  },
);

storeTest(
  "ordered groups run in dispatch order, one at a time, across a retry, with 3 worker processes",
  async (db) => {
    await using queue = await db.open({ jobs: [ordered] });
    const path = join(db.dir, "groups-ledger.db");
    using ledger = new DatabaseSync(path, { timeout: 20_000 });
    for (let n = 0; n < 6; n++) {
      for (const tenant of ["x", "y"]) {
        await queue.dispatch(ordered, { tenant, n, failFirst: tenant === "x" && n === 1 });
      }
    }
    await withWorkers(
      await db.childArgs(),
      3,
      { GROUPS_LEDGER: path, GROUPS_JOB_MS: "10", GROUPS_CONCURRENCY: "4" },
      () =>
        waitUntil(async () => (await unfinishedCount(queue)) === 0 || null, {
          what: "every ordered job settled",
          timeoutMs: DEADLINE_MS,
        }),
    );
    const rows = readLedger(ledger).sort((a, b) => a.start - b.start);
    const runs = (tenant: string) =>
      rows.filter((row) => infoOf(row).tenant === tenant).map((row) =>
        `${infoOf(row).n}${row.outcome === "error" ? "!" : ""}`
      );
    assert.deepEqual(runs("x"), ["0", "1!", "1", "2", "3", "4", "5"], "x waits for its retry");
    assert.deepEqual(runs("y"), ["0", "1", "2", "3", "4", "5"]);
    const most = mostOverlapping(rows);
    assert.deepEqual([most.get("x"), most.get("y")], [1, 1], "one at a time per group");
  },
);

storeTest(
  "an ordered group runs in dispatch order across a kill -9: the killed job runs again before any later job starts, none skipped",
  async (db) => {
    await using queue = await db.open({ jobs: [orderedHang] });
    const path = join(db.dir, "groups-ledger.db");
    using ledger = new DatabaseSync(path, { timeout: 20_000 });
    const killedN = 2;
    const count = 6;
    for (let n = 0; n < count; n++) await queue.dispatch(orderedHang, { tenant: "k", n });
    const args = await db.childArgs();
    // A short lease, so the killed job's hold on its group runs out soon.
    const env = { GROUPS_LEDGER: path, GROUPS_JOB_MS: "10", GROUPS_LEASE_MS: "1500" };
    const spawn = async (hangN: number | null) => {
      for (const [name, value] of Object.entries(env)) Deno.env.set(name, value);
      if (hangN !== null) Deno.env.set("GROUPS_HANG_N", String(hangN));
      try {
        const child = new ChildScript(WORKER, args);
        await child.line("ready", DEADLINE_MS);
        return child;
      } finally {
        for (const name of [...Object.keys(env), "GROUPS_HANG_N"]) Deno.env.delete(name);
      }
    };
    const starts = () => readLedger(ledger, "outcome = 'start'").map((row) => infoOf(row).n);
    {
      await using first = await spawn(killedN);
      await waitUntil(() => starts().includes(killedN) || null, {
        what: `job ${killedN}'s start in the ledger`,
        timeoutMs: DEADLINE_MS,
      });
      first.kill("SIGKILL");
      await first.status;
    }
    {
      await using _second = await spawn(null);
      await waitUntil(async () => (await unfinishedCount(queue)) === 0 || null, {
        what: "every job of the group settled after the kill",
        timeoutMs: DEADLINE_MS,
      });
    }
    const order = starts();
    const firstStarts = order.filter((n, index) => order.indexOf(n) === index);
    assert.deepEqual(firstStarts, [0, 1, 2, 3, 4, 5], `first starts in dispatch order: ${order}`);
    const rerun = order.indexOf(killedN, order.indexOf(killedN) + 1);
    assert.ok(rerun > 0, `job ${killedN} ran again after the kill: ${order}`);
    assert.ok(
      order.slice(0, rerun).every((n) => n <= killedN),
      `no later job started before job ${killedN} ran again: ${order}`,
    );
    const ended = readLedger(ledger, "outcome = 'success'").map((row) => infoOf(row).n);
    assert.deepEqual(ended.sort((a, b) => a - b), [0, 1, 2, 3, 4, 5], "each job succeeded once");
  },
);

/** Percentile `p` (0 to 100) of `values`, nearest rank. */
function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/**
 * One fairness run on a fresh SQLite file: one worker process at
 * concurrency 4 works 10,000 jobs of tenant A (1 ms each); once A runs, 10
 * of tenant B are dispatched. B's waits (start less the dispatch call), and
 * how many of A's ran between B's commit and B's last end.
 */
async function fairnessRun(grouped: boolean) {
  await using dir = await tempDir();
  const job = grouped ? fair : plain;
  await using queue = await Queue.open({ path: dir.dbPath, jobs: [job] });
  const path = join(dir.dir, "ledger.db");
  using ledger = new DatabaseSync(path, { timeout: 20_000 });
  await queue.dispatchMany(job, Array.from({ length: 10_000 }, (_, n) => ({ tenant: "A", n })));
  return await withWorkers(
    [dir.dbPath],
    1,
    { GROUPS_LEDGER: path, GROUPS_JOB_MS: "1", GROUPS_CONCURRENCY: "4" },
    async () => {
      await waitUntil(() => readLedger(ledger).length >= 100 || null, {
        what: "A's first 100 runs",
        timeoutMs: DEADLINE_MS,
      });
      const dispatchedAt = performance.timeOrigin + performance.now();
      const bIds = await queue.dispatchMany(
        job,
        Array.from({ length: 10 }, (_, n) => ({ tenant: "B", n })),
      );
      // A's runs count from B's commit: what ran before it could not make way for B.
      const storedAt = performance.timeOrigin + performance.now();
      const bRows = await waitUntil(() => {
        const rows = readLedger(ledger, "job_id >= ?", bIds[0]!)
          .filter((row) => infoOf(row).tenant === "B");
        return rows.length === 10 ? rows : null;
      }, { what: "B's 10 runs", timeoutMs: DEADLINE_MS });
      const bLastEnd = Math.max(...bRows.map((row) => row.end!));
      const aMeanwhile = readLedger(ledger, "start >= ? AND end <= ?", storedAt, bLastEnd)
        .filter((row) => infoOf(row).tenant === "A").length;
      const waits = bRows.map((row) => row.start - dispatchedAt);
      return { aMeanwhile, p50: percentile(waits, 50), p99: percentile(waits, 99) };
    },
  );
}

Deno.test("fairness on SQLite: B's 10 jobs finish before A, with 10,000 queued ahead, has run 200 more (4 workers); B's waits printed beside the run without groups", async () => {
  const withGroups = await fairnessRun(true);
  const withoutGroups = await fairnessRun(false);
  const shown = (run: typeof withGroups) =>
    `B wait p50 ${run.p50.toFixed(1)} ms, p99 ${run.p99.toFixed(1)} ms, ` +
    `A ran ${run.aMeanwhile} meanwhile`;
  console.log(
    `[figure] groups fairness sqlite, 1 process x concurrency 4, A 10,000 then B 10: ` +
      `with groups: ${shown(withGroups)}; without groups (baseline): ${shown(withoutGroups)}`,
  );
  assert.ok(
    withGroups.aMeanwhile < 200,
    `A ran ${withGroups.aMeanwhile} jobs before B's 10 finished`,
  );
});
