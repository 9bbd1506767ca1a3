/**
 * A move's fence on PostgreSQL (docs/moving.md): one statement trigger per
 * table the queue writes (`queue_moved`), before any insert, update or
 * delete, running `queue_moved_refuse()` (schema step 22), which raises
 * SQLSTATE `RQ001` naming where the queue went; none exist until a move
 * fences the store, so a dispatch costs nothing more before. Creating a
 * trigger waits for the transactions writing its table and holds new
 * writes until the fence commits, so no write slips past it. And the
 * identity sequences moved past the highest id a move copied.
 *
 * @internal
 * @module
 */
import { exec, type Script } from "../sql/script.ts";
import { type Statement, statement } from "../sql/statement.ts";
import { FENCED_TABLES, highestIdSql, ID_COUNTERS } from "../sql/transfer.ts";

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

const RAISE_COUNTERS: readonly Statement[] = Object.keys(ID_COUNTERS).map((counter) => {
  const sequence = `pg_get_serial_sequence('${counter}', 'id')`;
  return statement(
    `SELECT setval(${sequence}, GREATEST(h, COALESCE(pg_sequence_last_value(${sequence}::regclass), 0)))
    FROM (SELECT ${highestIdSql(counter)} AS h) s WHERE h IS NOT NULL`,
  );
});

/** Moves every identity sequence past the highest id the tables hold, never back. */
export function* moveIdCountersPast(): Script<void> {
  for (const raise of RAISE_COUNTERS) yield* exec(raise);
}
