/**
 * Schedules across real processes on one database: 3 worker processes fire
 * each slot of an every-second schedule as exactly one job (SQLite file and
 * PostgreSQL), a process killed with SIGKILL after it fired a slot leaves
 * exactly one job for it, a dispatch-only process leaves the stored
 * schedules as they are, and the lateness of each run past its slot is
 * printed (not asserted: the machine is shared).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { z } from "zod";
import { defineJob } from "../../src/job.ts";
import { Queue } from "../../src/queue.ts";
import { defineSchedule } from "../../src/schedule.ts";
import { ChildScript } from "../_child.ts";
import { tempDir, waitUntil } from "../_helpers.ts";
import { openTestPostgresStore, postgresTestUrl } from "../_postgres.ts";

const WORKER = new URL("../fixtures/schedules/worker.ts", import.meta.url);
const JOBS = new URL("../fixtures/schedules/jobs.ts", import.meta.url).href;
const DISPATCH_ONLY = new URL("../fixtures/schedules/dispatch_only.ts", import.meta.url);

interface RunLine {
  readonly slot: number;
  readonly pid: number;
  readonly lateMs: number;
}

/** A worker process, and the `run` lines it printed. */
class ScheduleWorker implements AsyncDisposable {
  readonly runs: RunLine[] = [];
  readonly child: ChildScript;
  pid = 0;
  readonly #collected: Promise<void>;

  constructor(target: string, schema: string, queues: string) {
    const child = new ChildScript(WORKER, [target, schema, queues]);
    this.child = child;
    this.#collected = (async () => {
      this.pid = Number((await child.line("ready ", 60_000)).slice(6));
      try {
        for (;;) this.runs.push(JSON.parse((await child.line("run ", 600_000)).slice(4)));
      } catch {
        // it exited
      }
    })();
  }

  /** Stops the process gracefully and waits for its last lines. */
  async stop(): Promise<void> {
    await this.child.exit(30_000);
    await this.#collected;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.child[Symbol.asyncDispose]();
    await this.#collected;
  }
}

/** The database the processes share, with a reader queue in the parent. */
interface Shared {
  readonly target: string;
  readonly schema: string;
  readonly reader: Queue;
  count(where: string): Promise<number>;
}

async function onSqlite(fn: (shared: Shared) => Promise<void>): Promise<void> {
  await using dir = await tempDir();
  const path = join(dir.dir, "queue.db");
  await using reader = await Queue.open({ path, jobs: JOBS });
  await fn({
    target: path,
    schema: "-",
    reader,
    count: (where) => countRows(reader, where),
  });
}

async function onPostgres(url: string, fn: (shared: Shared) => Promise<void>): Promise<void> {
  await using pg = await openTestPostgresStore(url, { maxConnections: 2 });
  pg.sharedOutside(); // worker processes, some killed, work on the schema
  const reader = await Queue.open({ store: pg.store, jobs: JOBS });
  await fn({ target: url, schema: pg.schema, reader, count: (where) => countRows(reader, where) });
}

async function countRows(reader: Queue, where: string): Promise<number> {
  const [row] = await reader.transaction((tx) =>
    tx.query<{ n: number }>(`SELECT COUNT(*) AS n FROM ${where}`)
  );
  return Number(row!.n);
}

/** Each slot exactly once, the slots consecutive; prints the lateness figure. */
function assertOncePerSlot(label: string, runs: readonly RunLine[]): void {
  const slots = runs.map((run) => run.slot).sort((a, b) => a - b);
  assert.equal(new Set(slots).size, slots.length, `${label}: a slot ran twice: ${slots}`);
  for (let i = 1; i < slots.length; i++) {
    assert.equal(slots[i]! - slots[i - 1]!, 1_000, `${label}: a slot is missing: ${slots}`);
  }
  const late = runs.map((run) => run.lateMs).sort((a, b) => a - b);
  const at = (p: number) => late[Math.min(late.length - 1, Math.floor(p * late.length))];
  console.log(
    `${label}: ${runs.length} slots, each once, by ${
      new Set(runs.map((run) => run.pid)).size
    } processes; lateness past the slot p50 ${at(0.5)} ms, p99 ${at(0.99)} ms`,
  );
}

async function threeProcesses(label: string, shared: Shared): Promise<void> {
  const workers = [0, 1, 2].map(() => new ScheduleWorker(shared.target, shared.schema, "default"));
  try {
    const all = () => workers.flatMap((worker) => worker.runs);
    await waitUntil(() => Promise.resolve(all().length >= 6), {
      what: "6 slots run",
      timeoutMs: 120_000,
      everyMs: 50,
    });
    await Promise.all(workers.map((worker) => worker.stop()));
    assertOncePerSlot(label, all());
    assert.equal(await shared.count("schedule_runs"), new Set(all().map((run) => run.slot)).size);
  } finally {
    await Promise.all(workers.map((worker) => worker[Symbol.asyncDispose]()));
  }
}

async function killAfterFiring(label: string, shared: Shared): Promise<void> {
  // This process fires slots but works another queue, so their jobs wait; then it is killed.
  await using firer = new ScheduleWorker(shared.target, shared.schema, "elsewhere");
  await waitUntil(async () => await shared.count("schedule_runs") >= 2, {
    what: "a slot fired",
    timeoutMs: 120_000,
    everyMs: 50,
  });
  Deno.kill(firer.pid, "SIGKILL");
  await firer.child.status;
  const fired = await shared.count("schedule_runs");
  assert.equal(await shared.count("jobs"), fired, "one job per fired slot, none run yet");
  assert.equal(firer.runs.length, 0);
  await using runner = new ScheduleWorker(shared.target, shared.schema, "default");
  await waitUntil(() => Promise.resolve(runner.runs.length >= fired + 2), {
    what: "the fired slots and 2 more run",
    timeoutMs: 120_000,
    everyMs: 50,
  });
  await runner.stop();
  assertOncePerSlot(`${label}, after kill -9 of the firing process`, runner.runs);
}

Deno.test("SQLite file: 3 worker processes fire each slot as exactly one job", async () => {
  await onSqlite((shared) => threeProcesses("SQLite, 3 processes", shared));
});

Deno.test("SQLite file: kill -9 of the process that fired a slot leaves exactly one job", async () => {
  await onSqlite((shared) => killAfterFiring("SQLite", shared));
});

const url = postgresTestUrl();
Deno.test({
  name: "PostgreSQL: 3 worker processes fire each slot as exactly one job",
  ignore: url === null,
  async fn() {
    await onPostgres(url!, (shared) => threeProcesses("PostgreSQL, 3 processes", shared));
  },
});

Deno.test({
  name: "PostgreSQL: kill -9 of the process that fired a slot leaves exactly one job",
  ignore: url === null,
  async fn() {
    await onPostgres(url!, (shared) => killAfterFiring("PostgreSQL", shared));
  },
});

Deno.test(
  "SQLite file: a dispatch-only process leaves the stored schedules, and their pause, as they are",
  async () => {
    await using dir = await tempDir();
    const path = join(dir.dir, "queue.db");
    // Another app's schedule, paused: no process of this test defines it but this one.
    const nightlyJob = defineJob({ name: "nightly-report", schema: z.null(), handle() {} });
    const nightly = defineSchedule({
      name: "nightly",
      cron: "30 2 * * *",
      job: nightlyJob,
      payload: null,
    });
    {
      await using app = await Queue.open({ path, jobs: [nightlyJob, nightly] });
      assert.equal(await app.pauseSchedule("nightly"), true);
    }
    const listed = async () => {
      await using admin = await Queue.open({ path, jobs: [] });
      return (await admin.schedules()).map((each) => [each.name, each.paused]);
    };
    {
      await using worker = new ScheduleWorker(path, "-", "default");
      await waitUntil(() => Promise.resolve(worker.runs.length >= 2), {
        what: "2 slots run",
        timeoutMs: 120_000,
        everyMs: 50,
      });
      await using dispatcher = new ChildScript(DISPATCH_ONLY, [path]);
      await dispatcher.line("dispatched ", 60_000);
      assert.equal((await dispatcher.status).code, 0, dispatcher.stderr);
      const before = worker.runs.length;
      await waitUntil(() => Promise.resolve(worker.runs.length >= before + 3), {
        what: "3 more slots run after the dispatch-only process opened",
        timeoutMs: 120_000,
        everyMs: 50,
      });
      assert.deepEqual(await listed(), [["every-second", false], ["nightly", true]]);
      await worker.stop();
      assertOncePerSlot("SQLite, beside a dispatch-only process", worker.runs);
    }
    // A restarted worker syncs its schedule again; the other app's pause holds.
    await using restarted = new ScheduleWorker(path, "-", "default");
    await waitUntil(() => Promise.resolve(restarted.runs.length >= 1), {
      what: "a slot run",
      timeoutMs: 120_000,
      everyMs: 50,
    });
    await restarted.stop();
    assert.deepEqual(await listed(), [["every-second", false], ["nightly", true]]);
  },
);
