/**
 * A plainjob `Connection` on `node:sqlite`'s `DatabaseSync`, in the shape of
 * plainjob's better-sqlite3 adapter (`better()`), for the peer bench.
 * plainjob ships adapters for better-sqlite3 and bun:sqlite only, and
 * better-sqlite3 does not load in Deno: it is a native addon on V8's C++ API
 * (`NODE_MODULE`), not Node-API, which Deno refuses. `node:sqlite` is the
 * SQLite our store runs on, so plainjob and our queue meet on the same
 * engine; plainjob applies its own settings on it (WAL, `synchronous = 1`,
 * `busy_timeout = 5000`), as it does on better-sqlite3.
 *
 * What plainjob uses of better-sqlite3 is mirrored: `pragma`, `exec`,
 * `prepare` (statements with `run`, `get`, `all`, named parameters given
 * without their `@`), and `transaction(fn)`, which returns `fn` wrapped in
 * `BEGIN` / `COMMIT` (`ROLLBACK` when it throws), with `.deferred`,
 * `.immediate` and `.exclusive` variants. plainjob never nests a
 * transaction; better-sqlite3 would use a savepoint there, this refuses.
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";
import type { Connection } from "plainjob";

// deno-lint-ignore no-explicit-any
type AnyFunction = (...params: any[]) => unknown;

/** Opens `path` (created if missing) and gives plainjob its connection to it. */
export function nodeSqliteConnection(path: string): Connection {
  const database = new DatabaseSync(path);
  function transaction<F extends AnyFunction>(fn: F) {
    const run = (begin: string) => (...params: Parameters<F>): ReturnType<F> => {
      if (database.isTransaction) {
        throw new Error("plainjob connection: a transaction inside a transaction is not supported");
      }
      database.exec(begin);
      try {
        const result = fn(...params) as ReturnType<F>;
        database.exec("COMMIT");
        return result;
      } catch (error) {
        if (database.isTransaction) database.exec("ROLLBACK");
        throw error;
      }
    };
    return Object.assign(run("BEGIN"), {
      default: run("BEGIN"),
      deferred: run("BEGIN DEFERRED"),
      immediate: run("BEGIN IMMEDIATE"),
      exclusive: run("BEGIN EXCLUSIVE"),
    });
  }
  return {
    // plainjob reads no field of it: the shape is better-sqlite3's.
    driver: "better-sqlite3",
    filename: path,
    pragma: (statement) => database.exec(`PRAGMA ${statement}`),
    exec: (sql) => database.exec(sql),
    prepare: (sql) => database.prepare(sql) as unknown as ReturnType<Connection["prepare"]>,
    transaction: transaction as Connection["transaction"],
    close: () => database.close(),
  };
}
