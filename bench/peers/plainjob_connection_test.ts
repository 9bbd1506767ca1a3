/**
 * The plainjob connection on `node:sqlite` keeps better-sqlite3's
 * transaction rules that plainjob relies on, and plainjob runs on it.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { type Connection, defineQueue, JobStatus, type Logger } from "plainjob";
import { withTempDatabase } from "../temp_database.ts";
import { nodeSqliteConnection } from "./plainjob_connection.ts";

const QUIET: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** The rows of table `t`. */
function rows(connection: Connection): number {
  return (connection.prepare("SELECT COUNT(*) AS n FROM t").get() as { n: number }).n;
}

/** Whether a second connection to `path` can write now, without waiting for a lock. */
function otherCanWrite(path: string): boolean {
  const other = new DatabaseSync(path, { timeout: 0 });
  try {
    other.exec("INSERT INTO t (v) VALUES ('other')");
    return true;
  } catch (error) {
    assert.match(String(error), /locked|busy/i);
    return false;
  } finally {
    other.close();
  }
}

Deno.test("plainjob connection: transaction() commits and returns what its function returns", () =>
  withTempDatabase((path) => {
    const connection = nodeSqliteConnection(path);
    try {
      connection.exec("CREATE TABLE t (v TEXT)");
      const insert = connection.prepare("INSERT INTO t (v) VALUES (@v)");
      const inserted = connection.transaction((values: string[]) => {
        for (const v of values) insert.run({ v });
        return values.length;
      })(["a", "b"]);
      assert.equal(inserted, 2);
      assert.equal(rows(connection), 2);
    } finally {
      connection.close();
    }
    return Promise.resolve();
  }));

Deno.test("plainjob connection: a transaction whose function throws is rolled back and rethrows", () =>
  withTempDatabase((path) => {
    const connection = nodeSqliteConnection(path);
    try {
      connection.exec("CREATE TABLE t (v TEXT)");
      const insert = connection.prepare("INSERT INTO t (v) VALUES (@v)");
      assert.throws(
        () =>
          connection.transaction(() => {
            insert.run({ v: "a" });
            throw new Error("boom");
          })(),
        /boom/,
      );
      assert.equal(rows(connection), 0);
      connection.transaction(() => insert.run({ v: "b" }))();
      assert.equal(rows(connection), 1);
    } finally {
      connection.close();
    }
    return Promise.resolve();
  }));

Deno.test("plainjob connection: .immediate() takes the write lock at once, a plain call does not", () =>
  withTempDatabase((path) => {
    const connection = nodeSqliteConnection(path);
    try {
      connection.pragma("journal_mode = WAL");
      connection.exec("CREATE TABLE t (v TEXT)");
      const read = connection.prepare("SELECT COUNT(*) AS n FROM t");
      assert.equal(connection.transaction(() => (read.get(), otherCanWrite(path)))(), true);
      assert.equal(
        connection.transaction(() => (read.get(), otherCanWrite(path))).immediate(),
        false,
      );
    } finally {
      connection.close();
    }
    return Promise.resolve();
  }));

Deno.test("plainjob connection: a transaction inside a transaction is refused", () =>
  withTempDatabase((path) => {
    const connection = nodeSqliteConnection(path);
    try {
      assert.throws(
        () => connection.transaction(() => connection.transaction(() => 1)())(),
        /a transaction inside a transaction is not supported/,
      );
    } finally {
      connection.close();
    }
    return Promise.resolve();
  }));

Deno.test("plainjob runs on the connection: add, claim, done, counted", () =>
  withTempDatabase((path) => {
    const queue = defineQueue({ connection: nodeSqliteConnection(path), logger: QUIET });
    try {
      queue.addMany("noop", [{ n: 0 }, { n: 1 }]);
      const { id } = queue.add("noop", { n: 2 });
      assert.equal(queue.getJobById(id)?.data, '{"n":2}');
      const claimed = queue.getAndMarkJobAsProcessing("noop");
      assert.ok(claimed !== undefined);
      queue.markJobAsDone(claimed.id);
      assert.equal(queue.countJobs({ status: JobStatus.Done }), 1);
      assert.equal(queue.countJobs({ status: JobStatus.Pending }), 2);
    } finally {
      queue.close();
    }
    return Promise.resolve();
  }));
