/**
 * Batches with real worker processes on one SQLite file (RELIABILITY.md R14):
 * a batch of 1,000 jobs, 10 % failing for good, worked by two `work`
 * processes that are killed with SIGKILL and restarted over and over, while
 * a sampler checks the batch's counters against the tables every ~20 ms.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { DatabaseSync } from "node:sqlite";
import { Queue } from "../../mod.ts";
import { tempDir } from "../_helpers.ts";
import { ChildProcess, one, openReader, waitUntil } from "../fixtures/reliability/harness.ts";
import {
  healPath,
  member,
  onCatch,
  onFinally,
  onThen,
  type Role,
} from "../fixtures/reliability_batch/jobs.ts";

const CLI = new URL("../../src/cli.ts", import.meta.url).pathname;
const JOBS_PATH = new URL("../fixtures/reliability_batch/jobs.ts", import.meta.url).pathname;
const JOBS_URL = new URL("../fixtures/reliability_batch/jobs.ts", import.meta.url).href;
const LEASE_MS = 1_000;

/** A `work --no-supervise` process (2 Web Workers, concurrency 4) with a short lease. */
function startWorker(dbPath: string): ChildProcess {
  return new ChildProcess(CLI, [
    "work",
    "--no-supervise",
    "--jobs",
    JOBS_PATH,
    "--db",
    dbPath,
    "--concurrency",
    "4",
    "--workers",
    "2",
    "--lease-ms",
    String(LEASE_MS),
    "--sleep-ms",
    "50",
    "--grace-ms",
    "500",
  ], { RELIABILITY_DB: dbPath });
}

/** Two worker processes; `killEvery` SIGKILLs one of them (in turn) and starts a new one. */
class Crew implements AsyncDisposable {
  readonly all: ChildProcess[] = [];
  readonly problems: string[] = [];
  kills = 0;
  readonly #dbPath: string;
  readonly #slots: ChildProcess[];
  #killing: Promise<void> | null = null;
  #stop = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #wake: () => void = () => {};

  constructor(dbPath: string) {
    this.#dbPath = dbPath;
    this.#slots = [this.#start(), this.#start()];
  }

  /**
   * Kills a worker every `minMs` to `maxMs` of its work, alternating between
   * the two, until `stopKilling`. The wait starts once the victim has settled
   * a job: on a loaded machine a restart can take longer than the wait, and
   * killing workers before they work would only stall the batch.
   */
  killEvery(minMs: number, maxMs: number): void {
    this.#stop = false;
    this.#killing = (async () => {
      for (let turn = 0;; turn++) {
        const next = this.#slots[turn % 2]!;
        const worked = next.waitFor(
          "its first job",
          (line) => line.type === "text" && /"event":"job:/.test(String(line.text)),
          20_000,
        ).catch(() => {});
        await Promise.race([worked, new Promise<void>((resolve) => this.#wake = resolve)]);
        if (this.#stop) return;
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
          this.#timer = setTimeout(resolve, minMs + Math.random() * (maxMs - minMs));
        });
        clearTimeout(this.#timer);
        if (this.#stop) return;
        const slot = turn % 2;
        const victim = this.#slots[slot]!;
        if (victim.exitedAt !== null) {
          this.problems.push(
            `worker ${victim.pid} exited on its own: ${(await victim.status).code}; ` +
              `stderr ${victim.stderr.slice(-500)}`,
          );
        }
        victim.kill("SIGKILL");
        const status = await victim.status;
        if (status.signal === "SIGKILL") this.kills++;
        await victim[Symbol.asyncDispose]();
        this.#slots[slot] = this.#start();
      }
    })();
  }

  async stopKilling(): Promise<void> {
    this.#stop = true;
    this.#wake();
    await this.#killing;
    this.#killing = null;
  }

  /** Lines any worker printed with `"event":"queue:error"`, and stderr naming a locked database. */
  errors(): string[] {
    return this.all.flatMap((child) => [
      ...child.lines.filter((line) =>
        line.type === "text" && /"queue:error"/.test(String(line.text))
      )
        .map((line) => `${child.pid}: ${line.text}`),
      ...(/SQLITE_BUSY|database is locked/i.test(child.stderr)
        ? [`${child.pid}: ${child.stderr}`]
        : []),
    ]);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stopKilling();
    await Promise.all(this.all.map((child) => child[Symbol.asyncDispose]()));
  }

  #start(): ChildProcess {
    const child = startWorker(this.#dbPath);
    this.all.push(child);
    return child;
  }
}

interface BatchRow {
  total: number;
  pending: number;
  failed: number;
  skipped: number;
  cancelled_at: number | null;
  finished_at: number | null;
}

/** Reads the batch row, its member rows and the ledger in one snapshot every ~20 ms. */
class Sampler implements Disposable {
  samples = 0;
  maxDrift = 0;
  firstBad: string | null = null;
  last: BatchRow | null = null;
  readonly #db: DatabaseSync;
  readonly #batchId: number;
  readonly #total: number;
  readonly #timer: ReturnType<typeof setInterval>;
  #succeeded = 0;

  constructor(db: DatabaseSync, batchId: number, total: number) {
    this.#db = db;
    this.#batchId = batchId;
    this.#total = total;
    this.#timer = setInterval(() => this.sample(), 20);
  }

  sample(): void {
    const db = this.#db;
    db.exec("BEGIN");
    let row: BatchRow;
    let inJobs: number;
    let inFailed: number;
    let ledgerSucceeded: number;
    try {
      row = one<BatchRow>(
        db,
        "SELECT total, pending, failed, skipped, cancelled_at, finished_at FROM batches WHERE id = ?",
        this.#batchId,
      );
      const count = (sql: string) => one<{ n: number }>(db, sql, this.#batchId).n;
      inJobs = count("SELECT COUNT(*) AS n FROM jobs WHERE batch_id = ? AND batch_member = 1");
      inFailed = count(
        "SELECT COUNT(*) AS n FROM failed_jobs WHERE batch_id = ? AND batch_member = 1",
      );
      ledgerSucceeded = one<{ n: number }>(
        db,
        `SELECT COUNT(DISTINCT job_id) AS n FROM ledger WHERE info = '"member"' AND outcome = 'success'`,
      ).n;
    } finally {
      db.exec("COMMIT");
    }
    this.samples++;
    this.last = row;
    const succeeded = row.total - row.pending - row.failed - row.skipped;
    // Each term on its own: pending and failed are the member rows left in each table, nothing
    // was skipped, a job counted as succeeded has a success in the ledger (written before its
    // settle), and the count of successes never goes down.
    const drift = Math.abs(row.total - this.#total) + Math.abs(row.pending - inJobs) +
      Math.abs(row.failed - inFailed) + Math.abs(row.skipped) +
      Math.max(0, succeeded - ledgerSucceeded) + Math.max(0, this.#succeeded - succeeded) +
      (row.pending < 0 || row.failed < 0 || succeeded < 0 ? 1 : 0);
    this.#succeeded = Math.max(this.#succeeded, succeeded);
    if (drift > this.maxDrift) this.maxDrift = drift;
    if (drift > 0 && this.firstBad === null) {
      this.firstBad = `sample ${this.samples}: ${JSON.stringify(row)}, succeeded ${succeeded}, ` +
        `member rows in jobs ${inJobs}, in failed_jobs ${inFailed}, ledger successes ${ledgerSucceeded}`;
    }
  }

  [Symbol.dispose](): void {
    clearInterval(this.#timer);
  }
}

/** Callback jobs of one role: distinct ids queued, running, failed or run, and runs in the ledger. */
function callbackIds(db: DatabaseSync, role: Exclude<Role, "member">, batchId: number) {
  const ids = new Set<number>();
  for (const table of ["jobs", "failed_jobs"]) {
    for (
      const { id } of db.prepare(`SELECT id FROM ${table} WHERE name = ? AND batch_id = ?`).all(
        `relb.${role}`,
        batchId,
      ) as { id: number }[]
    ) ids.add(id);
  }
  const ledger = db.prepare("SELECT job_id, outcome FROM ledger WHERE info = ?").all(
    JSON.stringify(role),
  ) as { job_id: number; outcome: string }[];
  for (const row of ledger) ids.add(row.job_id);
  return {
    ids: [...ids].sort((a, b) => a - b),
    starts: ledger.filter((row) => row.outcome === "start").length,
    successes: ledger.filter((row) => row.outcome === "success").length,
  };
}

Deno.test("R14: a batch of 1,000 with 10 % failing, worked by two processes killed with SIGKILL over and over: counters add up on every sample, then/catch/finally are queued once each", async () => {
  await using tmp = await tempDir();
  const total = 1_000;
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
  using db = openReader(tmp.dbPath);
  const payloads = Array.from({ length: total }, (_, n) => ({ n }));
  const batchId = await queue.batch("R14").pushMany(member, payloads)
    .then(onThen, null).catch(onCatch, null).finally(onFinally, null)
    .allowFailures().dispatch();
  const memberIds = db.prepare("SELECT id FROM jobs WHERE batch_id = ? ORDER BY id").all(batchId)
    .map((row) => Number(row.id));
  assert.equal(memberIds.length, total);
  const failingIds = memberIds.filter((_, n) => n % 10 === 0);

  using sampleDb = openReader(tmp.dbPath);
  using sampler = new Sampler(sampleDb, batchId, total);
  const started = Date.now();
  await using crew = new Crew(tmp.dbPath);
  const count = (sql: string, ...params: number[]) => one<{ n: number }>(db, sql, ...params).n;
  const settled = (role: "catch" | "then") => () => {
    const callback = callbackIds(db, role, batchId);
    return count("SELECT COUNT(*) AS n FROM jobs") === 0 && callback.successes > 0 &&
      callbackIds(db, "finally", batchId).successes > 0;
  };

  // Phase 1: the batch runs to its end with 100 failures, catch and finally run.
  crew.killEvery(300, 500);
  await waitUntil("the batch finished, its catch and finally run", settled("catch"), 180_000, 50);
  await crew.stopKilling();
  const phase1Ms = Date.now() - started;
  const phase1Kills = crew.kills;
  sampler.sample();
  const end1 = sampler.last!;
  const failedRows = db.prepare(
    "SELECT id, error FROM failed_jobs WHERE batch_id = ? AND batch_member = 1 ORDER BY id",
  ).all(batchId) as { id: number; error: string }[];
  const catch1 = callbackIds(db, "catch", batchId);
  const finally1 = callbackIds(db, "finally", batchId);
  const then1 = callbackIds(db, "then", batchId);
  const thenHeld = count(
    "SELECT COUNT(*) AS n FROM waiting_jobs WHERE batch_id = ? AND role = 'then'",
    batchId,
  );

  // Phase 2: the failing members now succeed; retrying the batch lets then run.
  await Deno.writeTextFile(healPath(tmp.dbPath), "");
  const retried = await queue.retryBatch(batchId);
  crew.killEvery(300, 500);
  await waitUntil("the retried members and then run", settled("then"), 60_000, 50);
  await crew.stopKilling();
  const durationMs = Date.now() - started;
  sampler.sample();
  const end2 = sampler.last!;
  const catch2 = callbackIds(db, "catch", batchId);
  const finally2 = callbackIds(db, "finally", batchId);
  const then2 = callbackIds(db, "then", batchId);

  const memberRuns = one<{ starts: number; distinct_ids: number; cut: number }>(
    db,
    `SELECT COUNT(*) AS starts, COUNT(DISTINCT job_id) AS distinct_ids,
      SUM(NOT EXISTS (SELECT 1 FROM ledger e WHERE e.job_id = s.job_id AND e.attempt = s.attempt
        AND e.pid = s.pid AND e.outcome != 'start')) AS cut
     FROM ledger s WHERE info = '"member"' AND outcome = 'start'`,
  );
  console.log(
    `R14: ${total} jobs, 10 % failing, 2 processes × concurrency 4, lease ${LEASE_MS} ms: ` +
      `${crew.kills} SIGKILLs (${phase1Kills} before the batch finished), ${
        (phase1Ms / 1000).toFixed(1)
      } s to finish, ${
        (durationMs / 1000).toFixed(1)
      } s with the retry; ${sampler.samples} samples, ` +
      `max drift ${sampler.maxDrift}; member runs ${memberRuns.starts} (${memberRuns.cut} cut by a kill); ` +
      `callback runs then ${then2.starts}, catch ${catch2.starts}, finally ${finally2.starts}; ` +
      `distinct callback jobs then ${then2.ids.length}, catch ${catch2.ids.length}, finally ${finally2.ids.length}`,
  );

  assert.equal(sampler.maxDrift, 0, `the counters drifted: ${sampler.firstBad}`);
  assert.ok(sampler.samples >= 50, `only ${sampler.samples} samples`);
  assert.ok(phase1Kills >= 3, `only ${phase1Kills} kills before the batch finished`);
  assert.deepEqual(crew.problems, []);
  assert.deepEqual(crew.errors(), []);

  // After phase 1: 100 failed for good, nothing pending, finished, catch and finally queued once
  // (each maybe run more than once after a kill), then never queued.
  assert.deepEqual(
    { ...end1, finished: end1.finished_at !== null, finished_at: null },
    {
      total,
      pending: 0,
      failed: 100,
      skipped: 0,
      cancelled_at: null,
      finished: true,
      finished_at: null,
    },
  );
  assert.deepEqual(failedRows.map((row) => row.id), failingIds);
  assert.ok(
    failedRows.every((row) => /^PermanentError: member \d+ fails for good/.test(row.error)),
  );
  assert.equal(catch1.ids.length, 1, `catch jobs ${catch1.ids}`);
  assert.equal(finally1.ids.length, 1, `finally jobs ${finally1.ids}`);
  assert.deepEqual(then1.ids, [], "then was queued though 100 jobs failed");
  assert.equal(thenHeld, 1, "then no longer waits");
  assert.ok(catch1.successes >= 1 && finally1.successes >= 1);

  // After phase 2: every member succeeded, then queued once; catch and finally never again.
  assert.equal(retried, 100);
  assert.deepEqual(
    { ...end2, finished: end2.finished_at !== null, finished_at: null },
    {
      total,
      pending: 0,
      failed: 0,
      skipped: 0,
      cancelled_at: null,
      finished: true,
      finished_at: null,
    },
  );
  assert.equal(then2.ids.length, 1, `then jobs ${then2.ids}`);
  assert.ok(then2.successes >= 1);
  assert.deepEqual(catch2, catch1, "catch ran again after the retry");
  assert.deepEqual(finally2, finally1, "finally ran again after the retry");
  assert.equal(count("SELECT COUNT(*) AS n FROM failed_jobs"), 0);
  assert.equal(count("SELECT COUNT(*) AS n FROM waiting_jobs"), 0);
  const succeededIds = db.prepare(
    `SELECT DISTINCT job_id FROM ledger WHERE info = '"member"' AND outcome = 'success' ORDER BY job_id`,
  ).all().map((row) => Number(row.job_id));
  assert.deepEqual(succeededIds, memberIds, "every member has a success in the ledger");
  assert.equal(
    one<{ integrity_check: string }>(db, "PRAGMA integrity_check").integrity_check,
    "ok",
  );
});
