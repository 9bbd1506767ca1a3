/**
 * Reliability on PostgreSQL with real processes (RELIABILITY.md R01, R03):
 * three `work` processes of the real CLI on one database drain 20,000 jobs
 * while a fourth process dispatches, one of them killed with SIGKILL
 * mid-drain; an idle worker woken by LISTEN/NOTIFY; two processes migrating
 * a fresh database at the same moment.
 *
 * `work --db postgres://…` uses the `public` schema, so each test makes a
 * database of its own (through the test database's connection) and drops it
 * at the end. Handlers write the ledger (job id, attempt, pid, start time)
 * to a table in that database through a connection of their own, see
 * `fixtures/reliability_postgres/ledger.ts`. Runs when
 * `QUEUE_TEST_POSTGRES_URL` is set; otherwise says why it skips.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { migrations } from "../../migrations/postgres/mod.ts";
import { Queue } from "../../mod.ts";
import { postgresTestUrl } from "../_postgres.ts";
import { tempDir } from "../_helpers.ts";
import { tick } from "../fixtures/reliability_postgres/jobs.ts";
import { type LedgerRow, stamp } from "../fixtures/reliability_postgres/ledger.ts";
import { mostAhead } from "../../src/runner/claim_ahead.ts";
import {
  type ChildProcess,
  cliEvent,
  cliEvents,
  count,
  type FreshDatabase,
  freshDatabase,
  freshName,
  JOBS_URL,
  type MigrateTarget,
  openReader,
  quantile,
  startDispatcher,
  startMigrator,
  startWork,
  waitUntil,
  withConnection,
  workerStarted,
} from "../fixtures/reliability_postgres/harness.ts";

const baseUrl = postgresTestUrl();
const ignore = baseUrl === null;
if (ignore) {
  console.log("PostgreSQL reliability tests skipped: QUEUE_TEST_POSTGRES_URL is not set");
}

Deno.test({
  name:
    "R03 + R01 on PostgreSQL: three `work` processes drain 20,000 jobs while a fourth dispatches, one is killed with SIGKILL mid-drain: none lost, none completed twice, its jobs come back after their lease",
  ignore,
  async fn() {
    const total = 20_000;
    const leaseMs = 1_000;
    const concurrency = 16;
    await using db = await freshDatabase(baseUrl!);
    await using reader = await openReader(db.url);
    await using queue = await Queue.open({ url: db.url, jobs: JOBS_URL });
    const payloads = Array.from({ length: total / 2 }, (_, n) => ({ n }));
    const firstIds = await queue.dispatchMany(tick, payloads);

    const flags = [
      "--concurrency",
      String(concurrency),
      "--lease-ms",
      String(leaseMs),
      "--sleep-ms",
      "200",
    ];
    await using workerA = startWork(db.url, flags);
    await using workerB = startWork(db.url, flags);
    await using victim = startWork(db.url, flags);
    const workers = [workerA, workerB, victim];
    await Promise.all(workers.map((child) => workerStarted(child)));
    await using dispatcher = startDispatcher(db.url, total / 2, 20, total / 2);
    const startedAt = Date.now();

    // A quarter of the way through, with every process busy: kill -9 one of them.
    await waitUntil(
      "a quarter of the jobs run",
      async () => await count(reader, "ledger") >= total / 4,
      40_000,
      25,
    );
    victim.kill("SIGKILL");
    const killedAt = Date.now();
    const victimStatus = await victim.exit(10_000);
    // What is leased now: the dead process's jobs (and the survivors' of the moment).
    const leased = await reader<{ id: number; available_at: number }[]>`
      SELECT id, available_at FROM jobs WHERE token IS NOT NULL`;
    const leaseEnds = new Map(leased.map((row) => [row.id, row.available_at]));
    const dispatchedLeft = dispatcher.exitedAt === null;

    // Generous: at load average 20 three processes drained the 20,000 jobs in over a minute.
    const done = await dispatcher.waitFor("done", (line) => line.type === "done", 180_000);
    const drained = await waitUntil(
      "every job settled",
      async () => await count(reader, "jobs") === 0,
      180_000,
      100,
    ).catch((error: Error) => error);
    const [{ last } = { last: NaN }] = await reader<{ last: number }[]>`
      SELECT max(at) AS last FROM ledger`;
    workerA.kill("SIGTERM");
    workerB.kill("SIGTERM");
    const exits = [
      await workerA.exit(15_000),
      await workerB.exit(15_000),
      await dispatcher.exit(10_000),
    ];

    const dispatched = [...firstIds, ...(done.ids as number[])];
    const ids = new Set(dispatched);
    const ledger = await reader<LedgerRow[]>`
      SELECT job_id, attempt, pid, thread, at FROM ledger ORDER BY at`;
    const runs = new Map<number, LedgerRow[]>();
    for (const row of ledger) runs.set(row.job_id, [...runs.get(row.job_id) ?? [], row]);
    const lost = dispatched.filter((id) => !runs.has(id));
    const strangers = [...runs.keys()].filter((id) => !ids.has(id));

    // Completions: the `job:complete` lines, printed once a settle fenced by the lease's token
    // committed. A job killed mid-run may run twice; it must never complete twice.
    const completions = new Map<number, number>();
    for (const child of workers) {
      for (const line of cliEvents(child, "job:complete")) {
        completions.set(line.id as number, (completions.get(line.id as number) ?? 0) + 1);
      }
    }
    const completedTwice = [...completions].filter(([, n]) => n > 1).map(([id]) => id);

    // Runs after the first, by the ledger: only a job the dead process ran (its handler had
    // written the row, its settle never committed) may run again, once: in a later attempt, or in
    // the same one when the kill came before its handler's begin was recorded (charged nothing).
    const again = [...runs].filter(([, rows]) => rows.length > 1);
    const unexplained = again.filter(([, rows]) =>
      !(rows.length === 2 && rows[0]!.pid === victim.pid && rows[1]!.pid !== victim.pid &&
        rows[1]!.attempt >= rows[0]!.attempt)
    );
    const duplicates = unexplained.reduce((sum, [, rows]) => sum + rows.length - 1, 0);

    // Jobs the dead process held: a survivor ran them after their lease, in a later attempt, or in
    // the same one when it had run them without recording their begin.
    const ranByVictim = new Set(
      ledger.filter((row) => row.pid === victim.pid).map((row) => row.job_id),
    );
    const recovered = ledger.filter((row) =>
      row.pid !== victim.pid && (row.attempt > 1 || ranByVictim.has(row.job_id))
    );
    const early = recovered.filter((row) =>
      !leaseEnds.has(row.job_id) || row.at < leaseEnds.get(row.job_id)! - 5
    );
    // A job whose lease ran out is due from then on, so it waits behind every job due earlier:
    // with a backlog, recovery takes the lease plus the time to run what is ahead of it.
    const rerunAt = recovered.map((row) => row.at);
    const recoveryMs = [Math.min(...rerunAt) - killedAt, Math.max(...rerunAt) - killedAt];
    const leaseEnd = Math.max(...recovered.map((row) => leaseEnds.get(row.job_id) ?? NaN));
    const ranMeanwhile = ledger.filter((row) =>
      row.attempt === 1 && row.at > leaseEnd && row.at < Math.max(...rerunAt)
    ).length;
    const byPid = new Map<number, number>();
    for (const row of ledger) {
      byPid.set(row.pid, (byPid.get(row.pid) ?? 0) + 1);
    }
    const seconds = (last - startedAt) / 1000;
    const perProcess = workers.map((child) =>
      byPid.get(child.pid) ?? 0
    ).join(" + ");
    const when = dispatchedLeft
      ? "while the dispatcher still ran"
      : "after the dispatcher finished";
    console.log([
      `R03 + R01 on PostgreSQL (3 work processes × concurrency ${concurrency}, Web Workers, ` +
      `lease ${leaseMs} ms): ${total} jobs in ${seconds.toFixed(1)} s = ` +
      `${Math.round(total / seconds)} jobs/s (runs per process ${perProcess}, the last one killed)`,
      `lost ${lost.length}, duplicates ${duplicates}, completed twice ${completedTwice.length}`,
      `kill -9 ${when}: ${recovered.length} of its jobs came back after their lease, ` +
      `${again.length} of them had run there already`,
      `lease ran out ${(leaseEnd - killedAt).toFixed(0)} ms after the kill; recovery (reruns) ` +
      `${recoveryMs[0]!.toFixed(0)}–${recoveryMs[1]!.toFixed(0)} ms after it, ` +
      `${ranMeanwhile} first runs between the lease's end and the last rerun`,
      `dispatcher stored ${total / 2} in ${Math.round(done.ms as number)} ms`,
    ].join("; "));

    assert.equal(victimStatus.signal, "SIGKILL");
    assert.equal(ids.size, total);
    assert.deepEqual(lost.slice(0, 20), [], `${lost.length} jobs lost`);
    assert.deepEqual(strangers, []);
    assert.deepEqual(completedTwice.slice(0, 20), [], `${completedTwice.length} completed twice`);
    assert.deepEqual(
      unexplained.slice(0, 10).map(([id, rows]) => ({ id, rows })),
      [],
      `${duplicates} runs beyond the first not explained by the kill (killed pid ${victim.pid})`,
    );
    if (drained instanceof Error) throw drained;
    assert.equal(await count(reader, "failed_jobs"), 0);
    assert.ok((byPid.get(victim.pid) ?? 0) > 0, "the killed process ran nothing before the kill");
    assert.ok(
      workers.every((child) => (byPid.get(child.pid) ?? 0) > 0),
      "a process took no jobs",
    );
    assert.ok(recovered.length >= 1, "the killed process held no job: nothing came back");
    // What a process holds: its running jobs and those it claimed ahead of its free slots.
    const held = concurrency + mostAhead(concurrency);
    assert.ok(
      recovered.length <= held,
      `${recovered.length} jobs came back, more than the ${held} the process could hold`,
    );
    assert.deepEqual(
      early.map((row) => ({ ...row, leaseEnd: leaseEnds.get(row.job_id) ?? null })),
      [],
      "jobs run again before their lease ran out (or that were not leased at the kill)",
    );
    // The lease was the one asked for: it ran out within leaseMs of the kill.
    assert.ok(leaseEnd - killedAt <= leaseMs + 50, `lease ran out ${leaseEnd - killedAt} ms after`);
    assert.deepEqual(exits.map((status) => status.code), [0, 0, 0]);
    for (const child of [workerA, workerB, victim, dispatcher]) {
      assert.deepEqual(cliEvents(child, "queue:error"), [], `queue:error from ${child.pid}`);
    }
  },
});

Deno.test({
  name:
    "LISTEN/NOTIFY on PostgreSQL: an idle `work` process polling every 2 min starts each job another process dispatches without waiting for a poll",
  ignore,
  async fn() {
    const pollMs = 120_000;
    const jobs = 200;
    const warmup = 5; // the Web Worker's first jobs load modules and open the ledger connection
    await using db = await freshDatabase(baseUrl!);
    await using reader = await openReader(db.url);
    await using queue = await Queue.open({ url: db.url, jobs: JOBS_URL });
    await using worker = startWork(db.url, ["--concurrency", "1", "--sleep-ms", String(pollMs)]);
    await workerStarted(worker);
    // The worker listens from its loop's start, just after `worker:start`: wait for its LISTEN.
    await waitUntil("the worker listening", async () => {
      const [row] = await reader<{ n: number }[]>`
        SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND query ILIKE 'listen %'`;
      return row!.n > 0;
    }, 10_000);

    const sentAt = new Map<number, number>();
    const measured: number[] = [];
    const deadline = Date.now() + 60_000;
    for (let n = 0; n < warmup + jobs && Date.now() < deadline; n++) {
      const before = stamp();
      const id = await queue.dispatch(tick, { n });
      sentAt.set(id, before);
      if (n >= warmup) measured.push(id);
      await worker.waitFor(`job:complete of ${id}`, (line) => {
        const event = cliEvent(line);
        return event?.event === "job:complete" && event.id === id;
      }, pollMs / 2);
    }
    const ledger = await reader<LedgerRow[]>`SELECT job_id, attempt, pid, thread, at FROM ledger`;
    const startedAt = new Map(ledger.map((row) => [row.job_id, row.at]));
    const latencies = measured.map((id) => startedAt.get(id)! - sentAt.get(id)!);
    worker.kill("SIGTERM");
    assert.equal((await worker.exit(10_000)).code, 0, worker.stderr);

    const [p50, p90, p99] = [0.5, 0.9, 0.99].map((q) => quantile(latencies, q));
    const max = Math.max(...latencies);
    console.log(
      `LISTEN/NOTIFY on PostgreSQL: dispatch → handler start in an idle \`work\` process ` +
        `(poll every ${pollMs} ms), ${latencies.length} serial jobs: p50 ${p50!.toFixed(1)} ms, ` +
        `p90 ${p90!.toFixed(1)} ms, p99 ${p99!.toFixed(1)} ms, max ${max.toFixed(1)} ms ` +
        `(the bench measures it)`,
    );
    assert.equal(latencies.length, jobs, `only ${latencies.length} jobs within 60 s`);
    assert.equal(ledger.length, warmup + jobs, "a job ran twice or not at all");
    // How fast is the bench's to measure; a test only sees that no job waited for a poll.
    assert.ok(max < pollMs / 2, `max ${max} ms: a job waited for a poll`);
    assert.deepEqual(cliEvents(worker, "queue:error"), []);
  },
});

/** What two processes opening every target at the same moments saw. */
interface MigrationRace {
  /** One entry per process and target that failed, or whose schema steps came out wrong. */
  readonly failures: string[];
  /** Per target, how long the two processes' opens overlapped (ms). */
  readonly overlaps: number[];
}

/** Two migrator processes open each target at the same moment, one target after another. */
async function migrationRace(targets: readonly MigrateTarget[]): Promise<MigrationRace> {
  const spacingMs = 400;
  await using tmp = await tempDir();
  const gate = join(tmp.dir, "gate");
  await using first = startMigrator(gate, spacingMs, targets);
  await using second = startMigrator(gate, spacingMs, targets);
  const children: ChildProcess[] = [first, second];
  await Promise.all(children.map((child) => child.waitFor("ready", (l) => l.type === "ready")));
  await Deno.writeTextFile(`${gate}.tmp`, String(Date.now() + 200));
  await Deno.rename(`${gate}.tmp`, gate);
  for (const child of children) {
    assert.equal((await child.exit(targets.length * spacingMs + 30_000)).code, 0, child.stderr);
  }

  const versions = migrations.map((migration) => migration.version);
  const overlaps: number[] = [];
  const failures: string[] = [];
  for (const [round, target] of targets.entries()) {
    const [a, b] = children.map((child) =>
      child.linesOf("migrated").find((line) => line.round === round)
    );
    const what = target.schema === undefined
      ? `database ${new URL(target.url).pathname.slice(1)}`
      : `schema ${target.schema}`;
    for (const line of [a, b]) {
      if (line === undefined) failures.push(`${what}: no result`);
      else if (line.ok !== true) failures.push(`${what}: ${line.error}`);
    }
    if (a !== undefined && b !== undefined) {
      const [startA, endA, startB, endB] = [a.start, a.end, b.start, b.end] as number[];
      overlaps.push(Math.max(0, Math.min(endA!, endB!) - Math.max(startA!, startB!)));
    }
    const table = target.schema === undefined
      ? "queue_migrations"
      : `"${target.schema}".queue_migrations`;
    const applied = await withConnection(
      target.url,
      async (sql) =>
        (await sql.unsafe<{ version: number }[]>(`SELECT version FROM ${table} ORDER BY version`))
          .map((row) => Number(row.version)),
    ).catch((error: Error) => error.message);
    if (JSON.stringify(applied) !== JSON.stringify(versions)) {
      failures.push(`${what}: schema steps ${JSON.stringify(applied)}, not ${versions}`);
    }
  }
  return { failures, overlaps };
}

Deno.test({
  name:
    "Migrations on PostgreSQL: two processes opening a fresh database at the same moment (as `work --db postgres://…` does) both migrate it, once (advisory lock)",
  ignore,
  async fn() {
    const databases: FreshDatabase[] = [];
    try {
      for (let n = 0; n < 3; n++) databases.push(await freshDatabase(baseUrl!));
      const { failures, overlaps } = await migrationRace(databases.map((db) => ({ url: db.url })));
      console.log(
        `Migrations on PostgreSQL: ${databases.length} fresh databases, each opened by 2 processes ` +
          `at once: ${failures.length} failures; opens overlapping by ${
            overlaps.map((ms) => ms.toFixed(0)).join(", ")
          } ms`,
      );
      assert.deepEqual(failures, []);
      assert.ok(overlaps.every((ms) => ms > 0), "the two processes did not migrate at once");
    } finally {
      for (const db of databases) await db[Symbol.asyncDispose]();
    }
  },
});

Deno.test({
  name:
    "Migrations on PostgreSQL: two processes opening the same fresh schema at the same moment (PostgresStore.open(url, { schema })) both create and migrate it, once",
  ignore,
  async fn() {
    const schemas = Array.from({ length: 5 }, freshName);
    try {
      const { failures, overlaps } = await migrationRace(
        schemas.map((schema) => ({ url: baseUrl!, schema })),
      );
      console.log(
        `Migrations on PostgreSQL: ${schemas.length} fresh schemas, each opened by 2 processes at ` +
          `once: ${failures.length} failures; opens overlapping by ${
            overlaps.map((ms) => ms.toFixed(0)).join(", ")
          } ms`,
      );
      assert.deepEqual(failures, []);
      assert.ok(overlaps.every((ms) => ms > 0), "the two processes did not migrate at once");
    } finally {
      await withConnection(baseUrl!, async (sql) => {
        for (const schema of schemas) await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      });
    }
  },
});
