/**
 * How big each Redis measurement is: jobs per run, processes and their
 * concurrency, pick-ups. Fixed, as BullMQ's rows beside them run the same
 * counts: `--jobs` lowers them, never raises them.
 *
 * @module
 */

/** Most jobs per run of the rows in one process (ours and BullMQ's alike). */
export const MAX_REDIS_JOBS = 5_000;
/** Most jobs per run of the multi-process drains. */
export const MAX_REDIS_PROCESS_DRAIN_JOBS = 20_000;
/** Concurrency of each worker process in the multi-process drains. */
export const REDIS_PROCESS_CONCURRENCY = 32;
/** Serial pick-ups per run. */
export const REDIS_PICKUP_JOBS = 300;
