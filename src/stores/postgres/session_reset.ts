/**
 * The reset of what the app's own statements (`tx.query`) changed on the
 * connection of their transaction beyond it, before it goes back to the
 * pool, where the queue's statements run on it next: settings made with
 * `set_config(…, false)` (a search path naming another schema, a time zone,
 * a statement timeout), the role, `LISTEN`, prepared statements, cursors
 * `WITH HOLD`, temporary tables (which come first on the search path, ahead
 * of the queue's tables), session advisory locks and sequences' `currval`.
 * Reading the text cannot catch them all (a function or a `DO` block may
 * run any of them), so the session is reset whatever the text was.
 *
 * `DISCARD ALL` does it in one statement, but not inside a transaction, and
 * its `DEALLOCATE ALL` would drop the driver's own prepared statements, which
 * it then fails to find inside the next transaction on that connection. So
 * the reset is `DISCARD ALL`'s other parts, run just before the commit (the
 * driver gives the connection back to the pool as the commit ends), and it
 * deallocates only the statements SQL's `PREPARE` made. (`DISCARD PLANS` is
 * left out too: it changes no statement's outcome, and the server plans a
 * statement again when its search path changed.)
 *
 * Some of this outlives a rollback (`PREPARE`, `pg_advisory_lock`), and a
 * transaction whose statement failed runs nothing more: so a savepoint is
 * taken before the app's first statement, sent with it, and a transaction
 * that rolls back goes back to it first, then resets. A transaction whose
 * callback ran no app statement pays for none of this.
 *
 * @internal
 * @module
 */
import type { Connection } from "./engine.ts";

const SAVEPOINT = "SAVEPOINT queue_app_statements";
const ROLLBACK_TO_SAVEPOINT = "ROLLBACK TO SAVEPOINT queue_app_statements";

/** `DISCARD ALL` but its `DEALLOCATE ALL` and `DISCARD PLANS`, as one text of statements. */
const RESET_SESSION = [
  "SET SESSION AUTHORIZATION DEFAULT",
  "RESET ALL",
  "CLOSE ALL",
  "UNLISTEN *",
  "SELECT pg_catalog.pg_advisory_unlock_all()",
  "DISCARD TEMP",
  "DISCARD SEQUENCES",
  `DO $$ DECLARE statement text; BEGIN
     FOR statement IN SELECT p.name FROM pg_catalog.pg_prepared_statements p WHERE p.from_sql LOOP
       EXECUTE pg_catalog.format('DEALLOCATE %I', statement);
     END LOOP;
   END $$`,
].join("; ");

/**
 * The app's statements of one transaction, and the savepoint taken before
 * the first, as the reset needs them.
 */
export class SessionReset {
  readonly #connection: Connection;
  /** Whether the savepoint was taken, once the app's first statement asked for it. */
  #saved: Promise<boolean> | null = null;
  /** The app's statements not answered yet. */
  readonly #pending = new Set<Promise<unknown>>();

  /** Follows the app's statements on `connection`, a transaction's. */
  constructor(connection: Connection) {
    this.#connection = connection;
  }

  /** Runs one statement of the app's, after the savepoint the first time (sent together). */
  query<Row>(text: string, params: readonly unknown[]): Promise<Row[]> {
    this.#saved ??= this.#connection.unsafe(SAVEPOINT).then(() => true, () => false);
    // The extended protocol, which runs one statement: without params the driver would send
    // the text by the simple one, which runs each statement of it (a COMMIT past the check).
    const options = { prepare: true, simple: false };
    const answer =
      (async () => [...await this.#connection.unsafe(text, params as never[], options)] as Row[])();
    const settled = answer.then(() => {}, () => {});
    this.#pending.add(settled);
    void settled.then(() => this.#pending.delete(settled));
    return answer;
  }

  /**
   * Resets the session if the app ran a statement, once its statements
   * were answered; `rollingBack` when the transaction is to roll back
   * whatever happens (its callback threw).
   */
  async reset(rollingBack: boolean): Promise<void> {
    if (this.#saved === null) return;
    while (this.#pending.size > 0) await Promise.all(this.#pending);
    // Not taken: the transaction had failed before the app's first statement, which ran none.
    if (!await this.#saved) return;
    // Without params the driver sends a text by the simple protocol, which runs each statement.
    if (!rollingBack) {
      try {
        return void await this.#connection.unsafe(RESET_SESSION);
      } catch {
        // A statement failed before (the transaction, aborted, runs nothing more): the driver rolls
        // the transaction back with the first error, once the session is reset from the savepoint.
      }
    }
    await Promise.all(
      [ROLLBACK_TO_SAVEPOINT, RESET_SESSION].map((text) => this.#connection.unsafe(text)),
    );
  }
}
