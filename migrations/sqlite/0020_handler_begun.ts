/**
 * The handler's begin mark and the suspect mark: `jobs.begun` is 1 once the
 * worker that holds the job has recorded that its handler began (or when
 * the job's start is written before its handler runs, see below), 0 while
 * the worker has not; `jobs.suspect` is 1 when the last worker that held
 * the job died before recording that its handler began. A claim that takes
 * over a dead worker's lease charges an attempt and a crash only to a job
 * whose handler is known to have begun (a suspect one also pays the death
 * it was suspected of); a job whose begin was not recorded is charged
 * nothing and becomes suspect, and its next start is written as begun
 * before its handler runs.
 *
 * An expand step: code of the step before never reads or writes the
 * columns; rows it claims keep what they held, and rows dispatched before
 * this step get `begun` 1 (a crash is charged as it always was).
 *
 * @module
 */

/** Number of the step. */
export const version = 20;

/**
 * Whether code of the step before keeps working on it (expand): two columns
 * it never names; rows it writes keep `begun` = 1, so the jobs its workers
 * claim are charged for a death as they always were.
 */
export const kind = "expand";

/** The statements (both engines run them unchanged). */
export const sql = `
ALTER TABLE jobs ADD COLUMN begun INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN suspect INTEGER NOT NULL DEFAULT 0;
`;
