/**
 * plainjob (npm `plainjob`, a job queue on SQLite) as a peer, in this
 * process on the same `node:sqlite` engine as ours through
 * {@linkcode nodeSqliteConnection} (plainjob's better-sqlite3 adapter does
 * not load in Deno): `queue.add()` one at a time, `queue.addMany()` of all
 * jobs in one call (one transaction), and a drain of pre-queued no-op jobs
 * by one worker (`defineWorker`, which takes one job at a time: plainjob has
 * no concurrency setting). Each on a fresh database file, in plainjob's
 * default configuration (its pragmas, timeouts, 1 s poll interval, done jobs
 * kept) apart from its logger: plainjob's default logs every job with
 * `console.debug`, which would time the terminal and spoil the report, so
 * debug and info lines are dropped (warnings and errors still go to stderr).
 * Each run is verified: after an add, every job pending and nothing else;
 * after a drain, every job handled once and done, nothing else left.
 *
 * @module
 */
import { defineQueue, defineWorker, JobStatus, type Logger, type Queue } from "plainjob";
import { measureRate } from "../measurement.ts";
import { withTempDatabase } from "../temp_database.ts";
import { nodeSqliteConnection } from "./plainjob_connection.ts";

/** The job type every job of the peer's runs has. */
const JOB_TYPE = "noop";

/** plainjob's logger without the per-job lines. */
const QUIET: Logger = {
  debug: () => {},
  info: () => {},
  warn: (message, ...meta) => console.error(`plainjob: ${message}`, ...meta),
  error: (message, ...meta) => console.error(`plainjob: ${message}`, ...meta),
};

/** Runs `fn` on a plainjob queue on a fresh database file, closed afterwards. */
function withPlainjobQueue<T>(fn: (queue: Queue) => Promise<T>): Promise<T> {
  return withTempDatabase(async (path) => {
    const queue = defineQueue({ connection: nodeSqliteConnection(path), logger: QUIET });
    try {
      return await fn(queue);
    } finally {
      queue.close();
    }
  });
}

/** Checks that the queue holds `count` jobs, all with `status`. */
function assertAll(queue: Queue, count: number, status: JobStatus): void {
  const total = queue.countJobs();
  const withStatus = queue.countJobs({ status });
  if (total !== count || withStatus !== count) {
    throw new Error(
      `plainjob: expected ${count} jobs, all ${JobStatus[status]}: got ${withStatus} of ${total}`,
    );
  }
}

/** `count` payloads, as ours and the other peers' (`{ n }`). */
function payloads(count: number): { n: number }[] {
  return Array.from({ length: count }, (_, n) => ({ n }));
}

/** `queue.add()` of `jobs` jobs, one at a time; its rate in jobs per second. */
export function plainjobAddSingle(jobs: number): Promise<number> {
  return withPlainjobQueue(async (queue) => {
    const rate = await measureRate(jobs, () => {
      for (let n = 0; n < jobs; n++) queue.add(JOB_TYPE, { n });
    });
    assertAll(queue, jobs, JobStatus.Pending);
    return rate;
  });
}

/** `queue.addMany()` of all `jobs` jobs in one call (one transaction). */
export function plainjobAddMany(jobs: number): Promise<number> {
  return withPlainjobQueue(async (queue) => {
    const data = payloads(jobs);
    const rate = await measureRate(jobs, () => queue.addMany(JOB_TYPE, data));
    assertAll(queue, jobs, JobStatus.Pending);
    return rate;
  });
}

/** Pre-adds `jobs` no-op jobs, then times one plainjob worker that handles them all. */
export function plainjobDrain(jobs: number): Promise<number> {
  return withPlainjobQueue(async (queue) => {
    queue.addMany(JOB_TYPE, payloads(jobs));
    const handled = new Set<number>();
    let repeated = 0;
    const all = Promise.withResolvers<void>();
    const worker = defineWorker(JOB_TYPE, (job) => {
      if (handled.has(job.id)) repeated++;
      handled.add(job.id);
    }, {
      queue,
      logger: QUIET,
      onCompleted: () => {
        if (handled.size === jobs) all.resolve();
      },
      onFailed: (job, error) => all.reject(new Error(`plainjob: job ${job.id} failed: ${error}`)),
    });
    let running: Promise<void> | undefined;
    const rate = await measureRate(jobs, async () => {
      running = worker.start();
      running.catch((error) => all.reject(error));
      await all.promise;
    });
    await worker.stop();
    await running;
    if (handled.size !== jobs || repeated !== 0) {
      throw new Error(`plainjob: ${handled.size} of ${jobs} jobs handled, ${repeated} again`);
    }
    assertAll(queue, jobs, JobStatus.Done);
    return rate;
  });
}
