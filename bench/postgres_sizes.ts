/**
 * How big each PostgreSQL measurement is: jobs, processes, concurrencies. A
 * commit there waits for the WAL to reach the disk (milliseconds on a plain
 * disk), so the counts are smaller than SQLite's and fixed: `--jobs` lowers
 * them, never raises them, so that a default run stays near three minutes.
 *
 * @module
 */

/** Most jobs per run of the rows that commit once per job (autocommit insert, single dispatch). */
export const MAX_POSTGRES_COMMIT_JOBS = 500;
/** Most jobs per run of the other throughput rows (one-transaction insert, ceiling, drains). */
export const MAX_POSTGRES_JOBS = 2_000;
/**
 * Most jobs per run of the drains by worker processes (one, and
 * {@linkcode DRAIN_PROCESSES}): at 2,000 a run took a few hundred ms, so
 * how soon each process got going and how soon the last found the queue
 * empty weighed as much as how fast they drained together.
 */
export const MAX_POSTGRES_PROCESS_DRAIN_JOBS = 20_000;
/** Serial jobs per timed run with a worker process woken by `LISTEN/NOTIFY`. */
export const POSTGRES_PICKUP_JOBS = 300;
/** Worker processes of the multi-process drains. */
export const DRAIN_PROCESSES = 3;
/** Concurrencies the PostgreSQL drains in this process are measured at. */
export const POSTGRES_DRAIN_CONCURRENCIES = [1, 8, 32] as const;
/** Concurrencies, per worker, of the drains by {@linkcode DRAIN_PROCESSES} worker processes. */
export const POSTGRES_PROCESS_DRAIN_CONCURRENCIES = [8, 32] as const;

/** The job counts of one bench run, from `--jobs`. */
export interface PostgresSizes {
  /** Jobs per run of the rows that commit once per job. */
  readonly commitJobs: number;
  /** Jobs per run of the other throughput rows. */
  readonly jobs: number;
  /** Jobs per run of the drains by worker processes. */
  readonly processDrainJobs: number;
}

/** The counts for `--jobs N`. */
export function postgresSizes(jobs: number): PostgresSizes {
  return {
    commitJobs: Math.min(jobs, MAX_POSTGRES_COMMIT_JOBS),
    jobs: Math.min(jobs, MAX_POSTGRES_JOBS),
    processDrainJobs: Math.min(jobs, MAX_POSTGRES_PROCESS_DRAIN_JOBS),
  };
}
