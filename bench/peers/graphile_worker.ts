/**
 * Graphile Worker as a PostgreSQL peer: the same workloads as ours (single
 * `addJob`, bulk `addJobs` of {@linkcode PEER_BULK_SIZE} per call, drains of
 * pre-queued no-op jobs, pick-up by an idle worker), each in Graphile
 * Worker's default configuration apart from `concurrency` (its local queue
 * off, `pollInterval` 2 s, woken by LISTEN/NOTIFY), each in a fresh database
 * that is verified (every job handled, nothing left in its jobs table) and
 * then dropped. Its log lines are discarded (they would fill the report).
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

const TASK = "noop";
/** The gap between a started job and the next dispatch of a pick-up run, in ms. */
const PICKUP_GAP_MS = 2;

// deno-lint-ignore no-explicit-any
type Graphile = any;

let loaded: Promise<Graphile> | null = null;
function graphile(): Promise<Graphile> {
  return loaded ??= import("graphile-worker");
}

/** Options every runner and worker-utils instance gets: the database and a silent logger. */
async function common(databaseUrl: string): Promise<Record<string, unknown>> {
  const { Logger } = await graphile();
  return { connectionString: databaseUrl, logger: new Logger(() => () => {}) };
}

/** Worker utils (migrated) on a fresh database; checks what is left and handled afterwards. */
function withFreshUtils<T>(
  url: string,
  left: number,
  fn: (utils: Graphile, databaseUrl: string) => Promise<T>,
): Promise<T> {
  return withFreshDatabase(url, async (databaseUrl) => {
    const { makeWorkerUtils } = await graphile();
    const utils = await makeWorkerUtils(await common(databaseUrl));
    let result: T;
    try {
      await utils.migrate();
      result = await fn(utils, databaseUrl);
    } finally {
      await utils.release();
    }
    await assertLeft(databaseUrl, left);
    return result;
  });
}

/** Checks that Graphile Worker's jobs table holds `left` jobs. */
async function assertLeft(databaseUrl: string, left: number): Promise<void> {
  const sql = connectRaw(databaseUrl);
  try {
    const [row] = await sql.unsafe(
      "SELECT COUNT(*)::int AS n FROM graphile_worker._private_jobs",
    );
    if (row?.n !== left) {
      throw new Error(`Graphile Worker: expected ${left} jobs left: got ${row?.n}`);
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** Starts a runner at `concurrency` whose no-op task calls `handled(payload)`. */
async function startRunner(
  databaseUrl: string,
  concurrency: number,
  handled: (payload: { n: number }) => void,
): Promise<Graphile> {
  const { run } = await graphile();
  return await run({
    ...await common(databaseUrl),
    concurrency,
    noHandleSignals: true,
    taskList: {
      [TASK]: (payload: { n: number }) => {
        handled(payload);
        return Promise.resolve();
      },
    },
  });
}

/** `addJob()` of `jobs` jobs, one awaited at a time. */
export function graphileAddSingle(url: string, jobs: number): Promise<number> {
  return withFreshUtils(url, jobs, (utils) =>
    measureRate(jobs, async () => {
      for (let n = 0; n < jobs; n++) await utils.addJob(TASK, { n });
    }));
}

/** `addJobs()` of `jobs` jobs, {@linkcode PEER_BULK_SIZE} per call. */
export function graphileAddBulk(url: string, jobs: number): Promise<number> {
  return withFreshUtils(url, jobs, (utils) => measureRate(jobs, () => addAll(utils, jobs)));
}

async function addAll(utils: Graphile, jobs: number): Promise<void> {
  for (let first = 0; first < jobs; first += PEER_BULK_SIZE) {
    const size = Math.min(PEER_BULK_SIZE, jobs - first);
    await utils.addJobs(
      Array.from({ length: size }, (_, i) => ({ identifier: TASK, payload: { n: first + i } })),
    );
  }
}

/** Pre-adds `jobs` no-op jobs, then times a runner at `concurrency` until all were handled. */
export function graphileDrain(url: string, jobs: number, concurrency: number): Promise<number> {
  return withFreshUtils(url, 0, async (utils, databaseUrl) => {
    await addAll(utils, jobs);
    let handled = 0;
    let runner: Graphile;
    const all = Promise.withResolvers<void>();
    const rate = await measureRate(jobs, async () => {
      runner = await startRunner(databaseUrl, concurrency, () => {
        if (++handled === jobs) all.resolve();
      });
      await all.promise;
    });
    await runner.stop();
    if (handled !== jobs) throw new Error(`Graphile Worker: handled ${handled} of ${jobs} jobs`);
    return rate;
  });
}

/** Serial pick-ups by an idle runner (concurrency 1), added through the worker utils. */
export function graphilePickup(url: string, jobs: number): Promise<LatencySample> {
  return withFreshUtils(url, 0, async (utils, databaseUrl) => {
    const signals = new StartSignals();
    const runner = await startRunner(databaseUrl, 1, ({ n }) => signals.start(n));
    try {
      return await serialPickups(jobs, {
        dispatch: (n) => utils.addJob(TASK, { n }),
        started: (n) => signals.started(n),
      }, () => PICKUP_GAP_MS);
    } finally {
      await runner.stop();
    }
  });
}
