/**
 * The fence a move leaves on its source, as SQLite's step 22 says
 * (migrations/sqlite/0022_queue_moves.ts): `queue_moves` holds one row at
 * most, where the queue went and when. On PostgreSQL the triggers a move
 * creates (one `queue_moved` statement trigger per table, none before a
 * move) run `queue_moved_refuse()`, made here: it raises SQLSTATE `RQ001`
 * with the destination in its message and the fence as JSON in its detail,
 * which the store turns into a `QueueMovedError`.
 *
 * An expand step: a new table and a new function that code of the step
 * before never names.
 *
 * @module
 */

/** Number of the step. */
export const version = 22;

/**
 * Whether code of the step before keeps working on it (expand): a new table
 * and function it never names.
 */
export const kind = "expand";

/** The statements. */
export const sql = `
CREATE TABLE queue_moves (
  id        integer PRIMARY KEY CHECK (id = 1),
  to_url    text    NOT NULL,
  fenced_at bigint  NOT NULL
);

CREATE FUNCTION queue_moved_refuse() RETURNS trigger LANGUAGE plpgsql AS $fence$
DECLARE
  fence record;
BEGIN
  SELECT to_url, fenced_at INTO fence FROM queue_moves WHERE id = 1;
  RAISE EXCEPTION 'queue moved to %', fence.to_url
    USING ERRCODE = 'RQ001',
      DETAIL = json_build_object('to', fence.to_url, 'at', fence.fenced_at)::text;
END
$fence$;
`;
