/**
 * One schema step, the same shape for every engine.
 *
 * @module
 */

/**
 * Whether code of the step before keeps working on a database with the step
 * applied: `"expand"` (new tables, new nullable or defaulted columns, new or
 * dropped indexes that older code never names: older workers keep running
 * while it is applied) or `"contract"` (older code fails on it, or leaves
 * rows the newer code misreads: it waits until no older worker is seen).
 */
export type SchemaStepKind = "expand" | "contract";

/** One schema step. */
export interface Migration {
  /** Number of the step; applied in increasing order, recorded in `queue_migrations`. */
  readonly version: number;
  /** Whether code of the step before keeps working on it. */
  readonly kind: SchemaStepKind;
  /** The statements. */
  readonly sql: string;
}
