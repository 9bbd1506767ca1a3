/**
 * The side work a store's settles do between ticks: pruning rows past their
 * time (kept finished jobs, log lines, metrics rollup rows, ended group rate
 * windows, passed group holds), each table at most once a minute of the
 * settles' time per store instance, so a busy worker does not pay for a
 * delete in every transaction (the holds' walk, a bounded chunk per settle,
 * goes on at each settle until it is through: group_pauses.ts).
 *
 * @internal
 * @module
 */
/**
 * The rows of a job's history (log lines, step memos, signals) whose job
 * is in none of `jobs`, `failed_jobs` and `completed_jobs`: it succeeded
 * and its kept record expired, or it was forgotten or cleared. A `WHERE`
 * condition on a table's `job_id`.
 */
export const JOB_GONE = `job_id NOT IN (SELECT id FROM jobs)
  AND job_id NOT IN (SELECT id FROM failed_jobs) AND job_id NOT IN (SELECT id FROM completed_jobs)`;

/** The least time between two prunes of one table by one store's settles. */
export const PRUNE_EVERY_MS = 60_000;

/** When one table was last pruned by a settle of this store: a prune is due at most once a minute. */
export class PruneSchedule {
  #prunedAt = -Infinity;

  /** Whether a prune is due for a tick whose latest settle is at `at`; true counts as pruning then. */
  due(at: number): boolean {
    if (!(at >= this.#prunedAt + PRUNE_EVERY_MS)) return false;
    this.#prunedAt = at;
    return true;
  }
}
