/**
 * The start mark: `jobs.claimed_ahead` is 1 while a worker holds the job
 * leased ahead of its free slots and has not started it, 0 once its start
 * is confirmed (or when it was claimed into a free slot). A claim that
 * takes over a dead worker's lease charges an attempt and a crash only to
 * a row marked started; cancel, pause and `uniqueUntil: "processing"` treat
 * an unstarted row as pending.
 *
 * An expand step: code of the step before never reads or writes the column,
 * and its rows keep the default 0, so its jobs count as started, as they
 * always did.
 *
 * @module
 */

/** Number of the step. */
export const version = 14;

/** Whether code of the step before keeps working on it (expand): code of the step before never reads or writes the column, and its rows keep the default 0. */
export const kind = "expand";

/** The statements (both engines run them unchanged). */
export const sql = `
ALTER TABLE jobs ADD COLUMN claimed_ahead INTEGER NOT NULL DEFAULT 0;
`;
