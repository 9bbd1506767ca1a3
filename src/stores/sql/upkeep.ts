/**
 * The side work a store's settles do between ticks: pruning rows past their
 * time (kept finished jobs, log lines, metrics rollup rows, ended rate
 * windows, passed group holds), each table at most once a minute of the
 * settles' time per store instance, so a busy worker does not pay for a
 * delete in every transaction (the holds' walk, a bounded chunk per settle,
 * goes on at each settle until it is through: {@linkcode HoldsPrune}). The
 * Redis store keeps these schedules too, for the prunes of its kept finished
 * jobs, metrics rollup and group holds, so a settle between prunes sends no
 * command for them.
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

/**
 * Whether job `id` (an SQL expression) is in one of the tables that keep
 * its history: the reads of its log lines, memos and signals hold this, so
 * a job removed for good has none even before the prune deletes them.
 */
export function jobStored(id: string): string {
  return `(EXISTS (SELECT 1 FROM jobs WHERE id = ${id})
    OR EXISTS (SELECT 1 FROM failed_jobs WHERE id = ${id})
    OR EXISTS (SELECT 1 FROM completed_jobs WHERE id = ${id}))`;
}

/** The least time between two prunes of one table by one store's settles. */
export const PRUNE_EVERY_MS = 60_000;

/**
 * How long a rate window (of a `rateLimited` key or of a group) is kept
 * after it ends, as the Redis store keeps a window's HASH: a claim or an
 * acquire whose now is still in the window (its clock a little behind, or
 * read before the window ended) finds the window's count instead of
 * counting the window again from nothing.
 */
export const ENDED_WINDOW_KEPT_MS = 60_000;

/** When one table was last pruned by a settle of this store: a prune is due at most once a minute. */
export class PruneSchedule {
  #prunedAt = -Infinity;

  /** Whether a prune is due for a tick whose latest settle is at `at`; true counts as pruning then. */
  due(at: number): boolean {
    if (!(at >= this.#prunedAt + PRUNE_EVERY_MS)) return false;
    this.#prunedAt = at;
    return true;
  }

  /**
   * Counts the prune that {@linkcode PruneSchedule.due} last allowed as cut
   * short (a bounded prune that left rows past their time): the next tick's
   * is due whatever its time.
   */
  cutShort(): void {
    this.#prunedAt = -Infinity;
  }
}

/**
 * Where one store instance's walk through its group holds stands, for the
 * settles' prune of passed holds (`Position` is where a chunk starts, in
 * the store's own terms): a settle reads one bounded chunk while a walk is
 * under way, going on from where the last one ended, and starts a walk
 * again at most once a minute. Between walks a settle reads nothing.
 */
export class HoldsPrune<Position> {
  readonly #start: Position;
  /** Where the walk under way goes on, or null between walks. */
  #after: Position | null = null;
  #walkedAt = -Infinity;

  /** A walk that begins at `start` (before every hold). */
  constructor(start: Position) {
    this.#start = start;
  }

  /** Where a settle at `at` reads its chunk from (`start`: a new walk), or null when none is due. */
  next(at: number): Position | null {
    if (this.#after !== null) return this.#after;
    return at >= this.#walkedAt + PRUNE_EVERY_MS ? this.#start : null;
  }

  /** Records a chunk read at `at` that ended at `last` (null: the walk reached the end). */
  walked(at: number, last: Position | null): void {
    this.#after = last;
    if (last === null) this.#walkedAt = at;
  }
}
