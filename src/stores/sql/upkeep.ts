/**
 * The side work a store's settles do between ticks: pruning rows past their
 * time (kept finished jobs, log lines, metrics rollup rows), each table at
 * most once a minute of the settles' time per store instance, so a busy
 * worker does not pay for a delete in every transaction.
 *
 * @internal
 * @module
 */
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
