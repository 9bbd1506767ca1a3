/**
 * A move's fence on SQLite (docs/moving.md): three triggers per table the
 * queue writes (`queue_moved_<table>_<event>`), each `RAISE(ABORT)` before
 * any insert, update or delete; none exist until a move fences the store,
 * so a dispatch costs nothing more before. The error they raise has the
 * result code `SQLITE_CONSTRAINT_TRIGGER`, which the engine turns into a
 * `QueueMovedError` naming where the queue went (`queue_moves`). And the
 * id counters (`sqlite_sequence`, and `job_id_floor` for job ids) moved
 * past the highest id a move copied.
 *
 * @internal
 * @module
 */
import { exec, type Script } from "../sql/script.ts";
import { type Statement, statement } from "../sql/statement.ts";
import { FENCED_TABLES, highestIdSql, ID_COUNTERS } from "../sql/transfer.ts";

/** SQLite's extended result code of an error a trigger raised (`SQLITE_CONSTRAINT_TRIGGER`). */
export const SQLITE_CONSTRAINT_TRIGGER = 1811;

const EVENTS = ["INSERT", "UPDATE", "DELETE"] as const;
const TRIGGERS = FENCED_TABLES.flatMap((table) =>
  EVENTS.map((event) => ({ table, event, name: `queue_moved_${table}_${event.toLowerCase()}` }))
);
const CREATE: readonly Statement[] = TRIGGERS.map(({ table, event, name }) =>
  statement(
    `CREATE TRIGGER IF NOT EXISTS ${name} BEFORE ${event} ON ${table}
    BEGIN SELECT RAISE(ABORT, 'queue moved: see queue_moves'); END`,
  )
);
const DROP: readonly Statement[] = TRIGGERS.map(({ name }) =>
  statement(`DROP TRIGGER IF EXISTS ${name}`)
);

/** Creates the fence's triggers (`on`), or drops them. */
export function* fenceWrites(on: boolean): Script<void> {
  for (const ddl of on ? CREATE : DROP) yield* exec(ddl);
}

const RAISE_COUNTERS: readonly Statement[] = Object.keys(ID_COUNTERS).flatMap((counter) => {
  const highest = highestIdSql(counter);
  if (counter === "jobs") {
    // Job ids count from the table's highest and its floor (schema step 24), not a sequence.
    return [statement(`UPDATE job_id_floor SET floor = max(floor, COALESCE(${highest}, 0))`)];
  }
  return [
    statement(
      `UPDATE sqlite_sequence SET seq = max(seq, COALESCE(${highest}, 0)) WHERE name = '${counter}'`,
    ),
    statement(
      `INSERT INTO sqlite_sequence (name, seq) SELECT '${counter}', ${highest}
      WHERE ${highest} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = '${counter}')`,
    ),
  ];
});

/** Moves every id counter past the highest id the tables hold, never back. */
export function* moveIdCountersPast(): Script<void> {
  for (const raise of RAISE_COUNTERS) yield* exec(raise);
}
