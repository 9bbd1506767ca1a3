/**
 * A move's fence on SQLite (docs/moving.md): three triggers per table the
 * queue writes (`queue_moved_<table>_<event>`), each `RAISE(ABORT)` before
 * any insert, update or delete; none exist until a move fences the store,
 * so a dispatch costs nothing more before. The error they raise has the
 * result code `SQLITE_CONSTRAINT_TRIGGER`, which the engine turns into a
 * `QueueMovedError` naming where the queue went (`queue_moves`). And the
 * id counters a move reads and raises: `sqlite_sequence`, and for job ids
 * (schema step 24) one more than the highest of `jobs`'s ids and
 * `job_id_floor`.
 *
 * @internal
 * @module
 */
import { exec, type Script } from "../sql/script.ts";
import { type Statement, statement } from "../sql/statement.ts";
import { ID_COUNTER_NAMES, type IdCounter } from "../rows/transfer.ts";
import { FENCED_TABLES } from "../sql/transfer.ts";

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

const SEQUENCES = ID_COUNTER_NAMES.filter((counter) => counter !== "jobs");

const READ_COUNTERS = statement(
  `SELECT name, seq AS value FROM sqlite_sequence
    WHERE name IN (${SEQUENCES.map((counter) => `'${counter}'`).join(", ")})
  UNION ALL SELECT 'jobs', {{newJobId}} - 1`,
);

/** The highest id each counter handed out (0: none), by counter. */
export function* idCounters(): Script<Record<IdCounter, number>> {
  const counters = Object.fromEntries(ID_COUNTER_NAMES.map((counter) => [counter, 0]));
  const { rows } = yield* exec<{ name: IdCounter; value: number }>(READ_COUNTERS);
  for (const { name, value } of rows) counters[name] = Number(value);
  return counters as Record<IdCounter, number>;
}

const RAISE: Readonly<Record<IdCounter, readonly Statement[]>> = Object.fromEntries(
  ID_COUNTER_NAMES.map((counter): [IdCounter, readonly Statement[]] => [
    counter,
    counter === "jobs"
      // Job ids count from the table's highest and its floor (schema step 24), not a sequence.
      ? [statement("UPDATE job_id_floor SET floor = $1 WHERE floor < $1")]
      : [
        statement(`UPDATE sqlite_sequence SET seq = $1 WHERE name = '${counter}' AND seq < $1`),
        statement(
          `INSERT INTO sqlite_sequence (name, seq) SELECT '${counter}', $1
          WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = '${counter}')`,
        ),
      ],
  ]),
) as Record<IdCounter, readonly Statement[]>;

/** Raises `counter` so that the next id it hands out is past `value`; never lowers it. */
export function* raiseIdCounter(counter: IdCounter, value: number): Script<void> {
  for (const raise of RAISE[counter]) yield* exec(raise, value);
}
