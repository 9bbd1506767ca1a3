/**
 * pg-boss as a PostgreSQL peer: the same workloads as ours (single send,
 * bulk insert of {@linkcode PEER_BULK_SIZE} per call, drains of pre-queued
 * no-op jobs, pick-up by an idle worker), each in pg-boss's default
 * configuration apart from the worker's concurrency (`localConcurrency`),
 * each in a fresh database that is verified (every job completed, nothing
 * else in its job table) and then dropped. Its defaults fetch one job per
 * worker per fetch and wait `pollingIntervalSeconds` (2 s) after each fetch,
 * with no LISTEN/NOTIFY, so its drains and pick-ups are bound by that poll.
 * Loaded only by `--peers --store postgres`.
 *
 * @module
 */
import { measureRate } from "../measurement.ts";
import type { LatencySample } from "../pickup.ts";
import { connectRaw } from "../postgres_schema.ts";
import { PEER_BULK_SIZE } from "./bullmq.ts";
import { withFreshDatabase } from "./fresh_database.ts";
import { serialPickups, StartSignals } from "./serial_pickups.ts";

const QUEUE = "noop";
/** pg-boss's default wait after each fetch, in ms (`pollingIntervalSeconds` 2). */
export const PG_BOSS_POLL_MS = 2_000;

// deno-lint-ignore no-explicit-any
type Boss = any;

/** A started pg-boss instance on `url` with the no-op queue created, stopped after `fn`. */
async function withBoss<T>(url: string, fn: (boss: Boss) => Promise<T>): Promise<T> {
  const { PgBoss } = await import("pg-boss");
  const boss: Boss = new PgBoss(url);
  boss.on("error", (error: Error) => console.error(`bench: pg-boss: ${error.message}`));
  await boss.start();
  try {
    await boss.createQueue(QUEUE);
    return await fn(boss);
  } finally {
    await boss.stop({ graceful: false, wait: true });
  }
}

/** A fresh database with pg-boss started on it; checks the job table afterwards. */
function withFreshBoss<T>(
  url: string,
  expect: { readonly state: "created" | "completed"; readonly jobs: number },
  fn: (boss: Boss, databaseUrl: string) => Promise<T>,
): Promise<T> {
  return withFreshDatabase(url, async (databaseUrl) => {
    const result = await withBoss(databaseUrl, (boss) => fn(boss, databaseUrl));
    await assertJobs(databaseUrl, expect.state, expect.jobs);
    return result;
  });
}

/** Checks that pg-boss's job table holds `jobs` jobs in `state` and nothing else. */
async function assertJobs(databaseUrl: string, state: string, jobs: number): Promise<void> {
  const sql = connectRaw(databaseUrl);
  try {
    const rows = await sql.unsafe(
      "SELECT state::text AS state, COUNT(*)::int AS n FROM pgboss.job GROUP BY state",
    );
    const counts = Object.fromEntries(rows.map((row) => [String(row.state), Number(row.n)]));
    const others = rows.filter((row) => row.state !== state).length;
    if (counts[state] !== jobs || others !== 0) {
      throw new Error(
        `pg-boss: expected ${jobs} ${state} jobs and nothing else: got ${JSON.stringify(counts)}`,
      );
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** `boss.send()` of `jobs` jobs, one awaited at a time. */
export function bossSendSingle(url: string, jobs: number): Promise<number> {
  return withFreshBoss(url, { state: "created", jobs }, (boss) =>
    measureRate(jobs, async () => {
      for (let n = 0; n < jobs; n++) await boss.send(QUEUE, { n });
    }));
}

/** `boss.insert()` of `jobs` jobs, {@linkcode PEER_BULK_SIZE} per call. */
export function bossInsertBulk(url: string, jobs: number): Promise<number> {
  return withFreshBoss(
    url,
    { state: "created", jobs },
    (boss) => measureRate(jobs, () => insertAll(boss, jobs)),
  );
}

async function insertAll(boss: Boss, jobs: number): Promise<void> {
  for (let first = 0; first < jobs; first += PEER_BULK_SIZE) {
    const size = Math.min(PEER_BULK_SIZE, jobs - first);
    await boss.insert(QUEUE, Array.from({ length: size }, (_, i) => ({ data: { n: first + i } })));
  }
}

/** Pre-inserts `jobs` no-op jobs, then times `boss.work()` at `concurrency` until all completed. */
export function bossDrain(url: string, jobs: number, concurrency: number): Promise<number> {
  return withFreshBoss(url, { state: "completed", jobs }, async (boss) => {
    await insertAll(boss, jobs);
    let handled = 0;
    const all = Promise.withResolvers<void>();
    const rate = await measureRate(jobs, async () => {
      await boss.work(QUEUE, { localConcurrency: concurrency }, (batch: unknown[]) => {
        handled += batch.length;
        if (handled >= jobs) all.resolve();
        return Promise.resolve();
      });
      await all.promise;
    });
    await boss.offWork(QUEUE, { wait: true });
    if (handled !== jobs) throw new Error(`pg-boss: handled ${handled} of ${jobs} jobs`);
    return rate;
  });
}

/**
 * Serial pick-ups by an idle `boss.work()` worker, sent by a second pg-boss
 * instance; each send falls at a random moment of the worker's poll.
 */
export function bossPickup(url: string, jobs: number): Promise<LatencySample> {
  return withFreshBoss(url, { state: "completed", jobs }, async (worker, databaseUrl) => {
    const signals = new StartSignals();
    await worker.work(QUEUE, (batch: { data: { n: number } }[]) => {
      for (const job of batch) signals.start(job.data.n);
      return Promise.resolve();
    });
    const sample = await withBoss(databaseUrl, (sender) =>
      serialPickups(jobs, {
        dispatch: (n) => sender.send(QUEUE, { n }),
        started: (n) => signals.started(n),
      }, () => Math.random() * PG_BOSS_POLL_MS));
    await worker.offWork(QUEUE, { wait: true });
    return sample;
  });
}
