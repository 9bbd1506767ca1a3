/**
 * A move's fence on PostgreSQL (docs/moving.md): one statement trigger per
 * table the queue writes (`queue_moved`), before any insert, update or
 * delete, running `queue_moved_refuse()` (schema step 22), which raises
 * SQLSTATE `RQ001` naming where the queue went; none exist until a move
 * fences the store, so a dispatch costs nothing more before. Creating a
 * trigger waits for the transactions writing its table and holds new
 * writes until the fence commits, so no write slips past it. And the id
 * counters a move reads and raises: the identity sequences.
 *
 * @internal
 * @module
 */
import { exec, type Script } from "../sql/script.ts";
import { type Statement, statement } from "../sql/statement.ts";
import { ID_COUNTER_NAMES, type IdCounter } from "../rows/transfer.ts";
import { FENCED_TABLES } from "../sql/transfer.ts";

/** The SQLSTATE `queue_moved_refuse()` raises. */
export const QUEUE_MOVED_SQLSTATE = "RQ001";

const DROP: readonly Statement[] = FENCED_TABLES.map((table) =>
  statement(`DROP TRIGGER IF EXISTS queue_moved ON ${table}`)
);
const CREATE: readonly Statement[] = FENCED_TABLES.map((table) =>
  statement(
    `CREATE TRIGGER queue_moved BEFORE INSERT OR UPDATE OR DELETE ON ${table}
    FOR EACH STATEMENT EXECUTE FUNCTION queue_moved_refuse()`,
  )
);

/** Creates the fence's triggers (`on`, replacing any left), or drops them. */
export function* fenceWrites(on: boolean): Script<void> {
  for (const ddl of DROP) yield* exec(ddl);
  if (on) { for (const ddl of CREATE) yield* exec(ddl); }
}

/** The identity sequence of `counter`'s table. */
const sequence = (counter: IdCounter) => `pg_get_serial_sequence('${counter}', 'id')::regclass`;

const READ_COUNTERS = statement(
  ID_COUNTER_NAMES.map((counter) =>
    `SELECT '${counter}' AS name, COALESCE(pg_sequence_last_value(${
      sequence(counter)
    }), 0) AS value`
  ).join(" UNION ALL "),
);

/** The highest id each counter handed out (0: none), by counter. */
export function* idCounters(): Script<Record<IdCounter, number>> {
  const counters = Object.fromEntries(ID_COUNTER_NAMES.map((counter) => [counter, 0]));
  const { rows } = yield* exec<{ name: IdCounter; value: number | string }>(READ_COUNTERS);
  for (const { name, value } of rows) counters[name] = Number(value);
  return counters as Record<IdCounter, number>;
}

const RAISE: Readonly<Record<IdCounter, Statement>> = Object.fromEntries(
  ID_COUNTER_NAMES.map((counter) => [
    counter,
    statement(
      `SELECT setval(${sequence(counter)}, $1::bigint)
      WHERE COALESCE(pg_sequence_last_value(${sequence(counter)}), 0) < $1::bigint`,
    ),
  ]),
) as Record<IdCounter, Statement>;

/** Raises `counter`'s sequence so that its next id is past `value`; never lowers it. */
export function* raiseIdCounter(counter: IdCounter, value: number): Script<void> {
  yield* exec(RAISE[counter], value);
}
