/**
 * Rate windows that end (docs/unique_and_middleware.md):
 * `rate_windows.per_ms`, the length of the window a `rateLimited` start
 * counted in, so that the settles' prune of ended windows, which until now
 * knew only the groups' windows (by their names' `groupRate`), also drops
 * a `rateLimited` window a minute after it ends. Without it a `rate_windows`
 * row stayed for every key that ever started a job.
 *
 * An expand step: a nullable column that code of the step before never
 * names. A window that code counts again keeps the length written before
 * (its upsert sets only the start and the count), so the prune still finds
 * its end; a window only that code ever wrote has none and stays, as
 * before this step.
 *
 * @module
 */

/** Number of the step. */
export const version = 28;

/**
 * Whether code of the step before keeps working on it (expand): a nullable
 * column it never names; the windows only it writes are never pruned.
 */
export const kind = "expand";

/** The statements. */
export const sql = `
ALTER TABLE rate_windows ADD COLUMN per_ms INTEGER;
`;
