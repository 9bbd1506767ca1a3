/**
 * One schema step, the same shape for every engine.
 *
 * @module
 */

/** One schema step. */
export interface Migration {
  /** Number of the step; applied in increasing order, recorded in `queue_migrations`. */
  readonly version: number;
  /** The statements. */
  readonly sql: string;
}
