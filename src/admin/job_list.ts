/**
 * Listing the jobs that have not finished: pending, delayed and running,
 * filtered by queue and job name, a page at a time.
 *
 * @module
 */
import { shown } from "../shown.ts";
import { assertName, assertQueueName } from "../names.ts";
import type { Clock } from "../clock.ts";
import type { JobFilter, JobList, JobState, StatsStore } from "../stores/store.ts";
import { optionNames } from "../option_bags.ts";
import { page } from "./listing.ts";

export type { JobList, JobState, ListedJob } from "../stores/store.ts";

const STATES: readonly JobState[] = ["pending", "delayed", "running"];

/** Options for {@linkcode Queue.jobs}. */
export interface JobListOptions {
  /**
   * Only jobs in this state: `"pending"` (due now, including jobs whose
   * worker died), `"delayed"` (due later) or `"running"` (leased to a live worker).
   * @default {every state}
   */
  state?: JobState;
  /**
   * Only jobs of this queue.
   * @default {every queue}
   */
  queue?: string;
  /**
   * Only jobs of this name.
   * @default {every name}
   */
  name?: string;
  /**
   * Jobs at most, 1 to 1000.
   * @default {100}
   */
  limit?: number;
  /**
   * Jobs to skip.
   * @default {0}
   */
  offset?: number;
}

/** A job not yet finished, as {@linkcode Queue.unfinishedJob} reads it by id. */
export interface UnfinishedJob {
  /** Its payload as stored: JSON text, or an encrypted envelope when its job is encrypted. */
  readonly payload: string;
  /** The error of its last attempt, or why it was put back, or null. */
  readonly lastError: string | null;
}

/** Checks the filter of {@linkcode JobListOptions}; a field left out matches every job. */
export function jobFilter(options: JobListOptions): JobFilter {
  const { state, queue, name } = options;
  if (state !== undefined && !STATES.includes(state)) {
    throw new TypeError(
      `jobs: state must be "pending", "delayed" or "running": got ${shown(state)}`,
    );
  }
  if (queue !== undefined) assertQueueName(queue, "jobs");
  if (name !== undefined) assertName(name, "jobs", "name");
  return { state: state ?? null, queue: queue ?? null, name: name ?? null };
}

/** Lists the jobs in `store` that `options` pick, at `clock`'s now. */
export async function listJobs(
  store: Pick<StatsStore, "jobs">,
  clock: Clock,
  options: JobListOptions | undefined,
): Promise<JobList> {
  const slice = page(options, "jobs", JOB_LIST_OPTIONS);
  return await store.jobs(jobFilter(options ?? {}), slice, clock.now());
}

/** Every option of {@linkcode Queue.jobs}. */
const JOB_LIST_OPTIONS = optionNames<JobListOptions>()([
  "state",
  "queue",
  "name",
  "limit",
  "offset",
]);
