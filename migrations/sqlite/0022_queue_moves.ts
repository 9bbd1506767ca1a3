/**
 * The fence a move leaves on its source (`moveQueue`, the `move` command;
 * docs/moving.md): `queue_moves` holds one row at most, where the queue went
 * and when the move fenced it. While the row is there, triggers the move
 * creates on the queue's tables (named `queue_moved_<table>_<event>`, none
 * exist before a move starts) refuse every write with `RAISE(ABORT)`; the
 * store reads this row to say where the queue went. Lifting the fence drops
 * the triggers and the row.
 *
 * An expand step: a new table that code of the step before never names.
 *
 * @module
 */

/** Number of the step. */
export const version = 22;

/** Whether code of the step before keeps working on it (expand): a new table it never names. */
export const kind = "expand";

/** The statements. */
export const sql = `
CREATE TABLE queue_moves (
  id        INTEGER PRIMARY KEY CHECK (id = 1),
  to_url    TEXT    NOT NULL,
  fenced_at INTEGER NOT NULL
);
`;
