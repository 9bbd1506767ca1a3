/**
 * The SQLite engine: one `node:sqlite` connection, scripts driven
 * synchronously inside `BEGIN IMMEDIATE` … `COMMIT` (no microtask between
 * two statements, so nothing else reaches the connection mid-transaction),
 * busy waits that yield to the event loop, app transactions that hold the
 * other work back until they end, and a watch on the WAL file (which sees
 * every commit, so the wake-ups scripts ask for need no message), and a
 * check that the path still names the file opened (`./file_identity.ts`).
 *
 * A write outside a transaction is read with `all()` or `run()`, never
 * `get()`: on an autocommit write, `get()` returns the row and swallows the
 * commit's error (a full disk then "stores" a job that is not there).
 *
 * @internal
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { resolve } from "node:path";
import type { DatabaseSync, SQLInputValue, SQLOutputValue, StatementSync } from "node:sqlite";
import type { Migration } from "../../../migrations/migration.ts";
import { STEPS_RECORD } from "../../../migrations/sqlite/mod.ts";
import { QueueClosedError, QueueMovedError } from "../../errors.ts";
import { CLOSE_WAITS_MS, closedUnderTransaction, untilAborted, waitAtMost } from "../close_wait.ts";
import { TimerTurns } from "../../timer_turns.ts";
import { SQLITE_CONSTRAINT_TRIGGER } from "./move_fence.ts";
import type { BackupResult } from "../store.ts";
import { copyDatabase } from "./backup.ts";
import { FileIdentity } from "./file_identity.ts";
import { FileWatch } from "./file_watch.ts";
import { CheckpointThread } from "./checkpoint_thread.ts";
import { type Durability, isBusy, retryWhileBusy } from "./connection.ts";
import { explainWriteError } from "./file_errors.ts";
import { ParamCounts } from "./positional_params.ts";
import { IdleCheckpoint } from "./wal_checkpoint.ts";
import type { AroundSteps, Engine, EngineTransaction, RunMode } from "../sql/engine.ts";
import { kindUpdates, type MigrationQuery, readPlan } from "../sql/engine.ts";
import {
  blockedStep,
  type MigrateOptions,
  type MigrationPlan,
  planSteps,
} from "../schema_steps.ts";
import { oneWriteAtMost, type Result, runSync, type Script, type Step } from "../sql/script.ts";
import type { Statement } from "../sql/statement.ts";

/**
 * What a script's wake-up request does here: nothing, since other
 * processes' watchers see every commit change the WAL file.
 */
function sendsNoWakeUp(): void {}

/** Now in ms, as the workers' heartbeats on SQLite are stamped (the caller's clock, this machine's). */
const NOW_MS = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";

/** How a {@linkcode SqliteEngine}'s connection was opened. */
export interface SqliteEngineOptions {
  /** The file's path, `:memory:` or a `file:` URI. */
  readonly path: string;
  /** How long a call waits for another connection's lock. */
  readonly busyTimeoutMs: number;
  /** The connection's `synchronous` level. */
  readonly durability: Durability;
}

/** One SQLite connection that runs scripts. */
export class SqliteEngine implements Engine {
  readonly #db: DatabaseSync;
  /** The param counts of the app's `tx.query` texts, read once each. */
  readonly #paramCounts = new ParamCounts();
  readonly #path: string;
  readonly #busyTimeoutMs: number;
  readonly #changes: FileWatch;
  readonly #checkpoint: IdleCheckpoint | null;
  /** Copies the WAL into the file beside the commits; null for `:memory:` and URIs. */
  readonly #checkpointThread: CheckpointThread | null;
  /** The file opened, checked to be the one at its path still; null for `:memory:` and URIs. */
  readonly #file: FileIdentity | null;
  readonly #statements = new Map<string, Prepared>();
  /** Settles when the app transaction now running ends; null when none runs. */
  #transaction: Promise<void> | null = null;
  /** Set inside a transaction's callback, to refuse calls that would wait for it forever. */
  readonly #insideTransaction = new AsyncLocalStorage<Promise<void>>();
  #closed = false;
  /** Settles once close() has closed the connection: every call of close() waits for it. */
  #closeDone: Promise<void> | null = null;
  /** Set by close() or `startClosing()`: an app transaction asked for from here on is refused. */
  #closing = false;
  /** When close() stops waiting for the app transactions asked for before it. */
  #closeDeadline = Infinity;
  /** Settles once the app transactions asked for before the close have ended. */
  #transactionsEnded: Promise<void> = Promise.resolve();
  /** Resolved when `#closeDeadline` comes nearer, for the wait of `#endTransactions`. */
  #deadlineMoved = Promise.withResolvers<void>();
  /** Aborted by close() when the running app transaction is still open after its wait. */
  #transactionClosing: AbortController | null = null;
  /** When this process's timers last had a turn between calls (see `#whenFree`). */
  readonly #timerTurns = new TimerTurns();
  readonly #step = (step: Step): unknown => {
    const prepared = this.#prepared(step.statement);
    if ("each" in step) {
      return step.each.map((params) => this.#execute(prepared, step.statement, params));
    }
    return this.#execute(prepared, step.statement, step.params);
  };

  /**
   * Runs on `db`, opened as `options` say (`:memory:` or a `file:` URI
   * watch nothing and checkpoint on no thread).
   */
  constructor(db: DatabaseSync, options: SqliteEngineOptions) {
    const { path, busyTimeoutMs, durability } = options;
    // As opened: a relative path names the file in the directory of the open, not of a later
    // Deno.chdir(), for the WAL's watchers and the backup alike.
    const file = path === ":memory:" || path.startsWith("file:") ? null : resolve(path);
    this.#db = db;
    this.#path = file ?? path;
    this.#busyTimeoutMs = busyTimeoutMs;
    // Every commit in WAL mode writes the -wal file: a change there may be new jobs.
    this.#changes = new FileWatch(file === null ? null : `${file}-wal`);
    this.#file = file === null ? null : new FileIdentity(file);
    this.#checkpoint = file === null
      ? null
      : new IdleCheckpoint(db, `${file}-wal`, () => this.#transaction === null && !this.#closed);
    this.#checkpointThread = file === null ? null : new CheckpointThread(db, file, durability);
  }

  /** Runs the script in one write transaction, or statement by statement. */
  run<T>(start: () => Script<T>, mode: RunMode): Promise<T> {
    const replaced = this.#fileReplaced();
    if (replaced !== null) return Promise.reject(replaced);
    this.#countCall();
    // Explained where SQLite throws, rather than in a `catch` of the promise: one promise fewer
    // per statement on the hot path (a single dispatch).
    return this.#whenFree(
      mode === "statement"
        ? () => this.#explained(() => runSync(start(), oneWriteAtMost(this.#step), sendsNoWakeUp))
        : () =>
          this.#explained(() =>
            this.#inWriteTransaction(() => runSync(start(), this.#step, sendsNoWakeUp))
          ),
    );
  }

  /** Runs `fn` inside `BEGIN IMMEDIATE` … `COMMIT`, rolling back if it throws. */
  transaction<T>(fn: (tx: EngineTransaction) => Promise<T>): Promise<T> {
    if (this.#closing) return Promise.reject(new QueueClosedError("start a transaction"));
    const replaced = this.#fileReplaced();
    if (replaced !== null) return Promise.reject(replaced);
    this.#countCall();
    return this.#runTransaction(fn).catch(this.#explain);
  }

  /** Tells the WAL's keepers of a call: the idle checkpoint starts looking, the thread counts it. */
  #countCall(): void {
    this.#checkpoint?.start();
    this.#checkpointThread?.countCall();
  }

  /** The error every call gets once the path names another file or none (see `FileIdentity`). */
  #fileReplaced(): Error | null {
    try {
      this.#file?.assertSame();
      return null;
    } catch (error) {
      return error as Error;
    }
  }

  /** Rethrows a write error with its cause named (disk full, read-only). */
  readonly #explain = (error: unknown): never => {
    throw this.#moved(error) ?? explainWriteError(error, this.#path);
  };

  /**
   * The error of a write the fence of a move refused (a trigger raised it:
   * see `./move_fence.ts`), naming where the queue went; null for any other.
   */
  #moved(error: unknown): QueueMovedError | null {
    if ((error as { errcode?: unknown } | null)?.errcode !== SQLITE_CONSTRAINT_TRIGGER) return null;
    const fence = this.#db.prepare("SELECT to_url, fenced_at FROM queue_moves WHERE id = 1").get();
    if (fence === undefined) return null;
    return new QueueMovedError(String(fence.to_url), Number(fence.fenced_at), { cause: error });
  }

  /** `step()`, its write error rethrown with its cause named (a busy error stays as it is). */
  #explained<T>(step: () => T): T {
    try {
      return step();
    } catch (error) {
      return this.#explain(error);
    }
  }

  async #runTransaction<T>(fn: (tx: EngineTransaction) => Promise<T>): Promise<T> {
    let end!: () => void;
    const ended = new Promise<void>((resolve) => end = resolve);
    if (this.#transaction !== null && this.#insideTransaction.getStore() === this.#transaction) {
      throw new Error(
        "Cannot use the queue inside its own transaction callback: a transaction inside it would wait for it; use the tx handle (tx.dispatch, tx.query)",
      );
    }
    // Take the lane in the same tick the previous holder is seen gone, so no one slips in.
    while (this.#transaction !== null) await this.#transaction;
    if (this.#closed) throw new QueueClosedError("start a transaction");
    this.#transaction = ended;
    const closing = this.#transactionClosing = new AbortController();
    let open = false;
    try {
      await retryWhileBusy(() => this.#db.exec("BEGIN IMMEDIATE"), this.#busyTimeoutMs);
      open = true;
      // Its turn came after close() stopped waiting: refused before its callback runs.
      if (Date.now() >= this.#closeDeadline) throw new QueueClosedError("start a transaction");
      // The first statement that failed (the app's own or a dispatch's): it ends the transaction, caught or not,
      // as PostgreSQL ends one at its first failed statement, so that a callback that catches it
      // commits on neither store.
      let failed: { readonly error: unknown } | null = null;
      const failing = <T>(statement: () => T): T => {
        try {
          return statement();
        } catch (error) {
          failed = { error };
          throw error;
        }
      };
      const check = () => {
        if (closing.signal.aborted) throw closing.signal.reason;
        if (!open) {
          throw new Error("This transaction has ended: use it only inside its callback");
        }
        if (failed !== null) throw abortedBy(failed.error);
        this.#assertStillOpen();
      };
      const tx: EngineTransaction = {
        // deno-lint-ignore require-await
        run: async (script) => {
          check();
          return runSync(script, (step) => failing(() => this.#step(step)), sendsNoWakeUp);
        },
        // deno-lint-ignore require-await
        query: async <Row>(text: string, params: readonly unknown[]) => {
          check();
          return failing(() => {
            const statement = this.#db.prepare(text);
            // node:sqlite would read a placeholder left without a value as NULL.
            this.#paramCounts.assert(statement, params.length);
            return statement.all(...params.map(bind)) as unknown as Row[];
          });
        },
      };
      let result: T;
      try {
        result = await untilAborted(
          this.#insideTransaction.run(ended, () => fn(tx)),
          closing.signal,
        );
      } catch (error) {
        // The refusal of a call after the failure, let through by the callback: the transaction
        // rejects with the failure itself, as on PostgreSQL.
        const first = failed as { readonly error: unknown } | null;
        if (first !== null && (error as Error | null)?.cause === first.error) throw first.error;
        throw error;
      }
      if (failed !== null) throw (failed as { readonly error: unknown }).error;
      this.#assertStillOpen();
      this.#db.exec("COMMIT");
      open = false;
      return result;
    } finally {
      try {
        // SQLite may already have rolled back on its own (ON CONFLICT ROLLBACK, I/O error).
        if (open && this.#db.isTransaction) this.#db.exec("ROLLBACK");
      } finally {
        open = false;
        this.#transaction = null;
        this.#transactionClosing = null;
        end();
      }
    }
  }

  /**
   * Applies the steps this file lacks, in one write transaction (see
   * {@linkcode Engine.migrate}); with `apply` false, reads the plan only.
   */
  migrate(
    migrations: readonly Migration[],
    options: MigrateOptions,
    apply: boolean,
    around?: AroundSteps,
  ): Promise<MigrationPlan> {
    const all = ({ text, params }: MigrationQuery) =>
      this.#db.prepare(text.replace(/\$(\d+)/g, "?$1")).all(
        ...params as SQLInputValue[],
      ) as Record<string, unknown>[];
    const read = () => {
      const reading = readPlan(migrations, NOW_MS);
      let next = reading.next();
      while (!next.done) next = reading.next(all(next.value));
      return next.value;
    };
    if (!apply) {
      return this.#whenFree(() => {
        const table = this.#db.prepare(
          "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'queue_migrations'",
        ).get();
        return table === undefined ? planSteps(migrations, [], []) : read();
      });
    }
    return this.#whenFree(() =>
      this.#inWriteTransaction(() => {
        this.#db.exec(STEPS_RECORD);
        const plan = read();
        if (blockedStep(plan, options) !== undefined) return plan;
        const framed = plan.steps.length > 0 ? around : undefined;
        if (framed) runSync(framed.before(), this.#step, sendsNoWakeUp);
        for (const step of plan.steps) {
          const migration = migrations.find(({ version }) => version === step.version)!;
          this.#db.exec(migration.sql);
          this.#db.prepare("INSERT INTO queue_migrations (version, applied_at) VALUES (?, ?)")
            .run(migration.version, Date.now());
        }
        if (framed) runSync(framed.after(), this.#step, sendsNoWakeUp);
        for (const update of kindUpdates(migrations, plan)) all(update);
        return plan;
      })
    );
  }

  /** Calls `listener` when the database's WAL file changes (any process's commit). */
  watch(listener: () => void): Disposable {
    return this.#changes.add(listener);
  }

  /**
   * Copies the database to the new file `file` from a read-only connection
   * of its own, as of one commit (see `./backup.ts`): an app transaction
   * open on this connection is not in the copy, and need not end first.
   */
  async backup(file: string): Promise<BackupResult> {
    if (this.#closed) throw new QueueClosedError("back up the database");
    return await copyDatabase(this.#path, file, this.#busyTimeoutMs);
  }

  /**
   * Refuses app transactions from now on, and rolls back those asked for
   * before that are still open `waitMs` later (see
   * {@linkcode Engine.startClosing}): this connection's other writes, a
   * worker's among them, wait for an open transaction, so a worker's stop
   * would otherwise wait for it as long as its callback runs. A later call
   * may bring that time nearer, never push it back.
   */
  startClosing(waitMs: number): void {
    const deadline = Date.now() + waitMs;
    if (deadline < this.#closeDeadline) {
      this.#closeDeadline = deadline;
      this.#deadlineMoved.resolve();
      this.#deadlineMoved = Promise.withResolvers();
    }
    if (this.#closing) return;
    this.#closing = true;
    this.#transactionsEnded = this.#endTransactions();
  }

  /** Waits for the running transaction and those queued behind it, each until the close's deadline. */
  async #endTransactions(): Promise<void> {
    while (this.#transaction !== null) {
      const running = this.#transaction;
      const ended = Promise.race([running, this.#deadlineMoved.promise]);
      await waitAtMost(ended, this.#closeDeadline - Date.now());
      if (this.#transaction !== running || Date.now() < this.#closeDeadline) continue;
      this.#transactionClosing?.abort(closedUnderTransaction());
      await running;
    }
  }

  /**
   * Closes the connection once the app transactions begun before it (or
   * before {@linkcode startClosing}) have ended, rolling back those still
   * open {@linkcode CLOSE_WAITS_MS} after it was called (or earlier, when
   * `startClosing` said so); a transaction asked for after it is refused.
   */
  close(): Promise<void> {
    this.#closeDone ??= this.#close();
    return this.#closeDone;
  }

  async #close(): Promise<void> {
    this.startClosing(CLOSE_WAITS_MS);
    await this.#transactionsEnded;
    this.#closed = true;
    this.#changes.close();
    this.#checkpoint?.close();
    await this.#checkpointThread?.close();
    this.#db.close();
  }

  /** `statement` prepared on this connection, once. */
  #prepared(statement: Statement): Prepared {
    let prepared = this.#statements.get(statement.sqlite);
    if (prepared === undefined) {
      prepared = prepare(this.#db, statement);
      this.#statements.set(statement.sqlite, prepared);
    }
    return prepared;
  }

  #execute(prepared: Prepared, statement: Statement, params: readonly unknown[]): Result {
    const values = params.map(bind);
    const { sql, returnsRows, columns } = prepared;
    if (!returnsRows) {
      const { changes, lastInsertRowid } = sql.run(...values);
      return { rows: [], count: Number(changes), lastId: Number(lastInsertRowid) };
    }
    // get() is cheaper, but on a write outside a transaction it swallows the commit's error.
    if (statement.oneRow && (statement.readsOnly || this.#db.isTransaction)) {
      const row = sql.get(...values);
      return row === undefined ? { rows: [], count: 0 } : { rows: [toRow(row, columns)], count: 1 };
    }
    const rows = sql.all(...values).map((row) => toRow(row, columns));
    return { rows, count: rows.length };
  }

  /** SQLite rolls back on its own after some errors; going on would write outside the transaction. */
  #assertStillOpen(): void {
    if (!this.#db.isTransaction) {
      throw new Error(
        "Cannot go on with this transaction: SQLite rolled it back after a statement failed",
      );
    }
  }

  /**
   * Runs `step` (its own commit, or a whole transaction) once no app
   * transaction runs. When none runs and SQLite is not busy, `step` runs at
   * once with nothing to wait for (one dispatch is one such step): only a
   * busy answer or a transaction in the way takes the waiting loop.
   */
  #whenFree<T>(step: () => T): Promise<T> {
    // Every call is synchronous underneath: a loop of awaited calls would never let a timer run.
    if (this.#timerTurns.starved) return this.#timerTurns.take().then(() => this.#whenFree(step));
    if (this.#transaction === null && !this.#closed) {
      try {
        return Promise.resolve(step());
      } catch (error) {
        if (!isBusy(error)) return Promise.reject(error);
      }
    }
    return retryWhileBusy(step, this.#busyTimeoutMs, this.#waitTurn);
  }

  /** Holds a step back while an app transaction runs or after close. */
  readonly #waitTurn = (): Promise<void> | undefined => {
    if (this.#transaction === null && !this.#closed) return undefined;
    // Only the transaction's own callback: work it merely started may wait its turn later.
    if (this.#transaction !== null && this.#insideTransaction.getStore() === this.#transaction) {
      return Promise.reject(
        new Error(
          "Cannot use the queue inside its own transaction callback: it would wait for itself; use the tx handle (tx.dispatch, tx.query)",
        ),
      );
    }
    return this.#idle();
  };

  async #idle(): Promise<void> {
    while (this.#transaction !== null) await this.#transaction;
    if (this.#closed) throw new QueueClosedError("use the SQLite store");
  }

  /** Runs `step` inside `BEGIN IMMEDIATE` … `COMMIT`, rolling back if it throws. */
  #inWriteTransaction<T>(step: () => T): T {
    this.#db.exec("BEGIN IMMEDIATE");
    try {
      const result = step();
      this.#db.exec("COMMIT");
      return result;
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec("ROLLBACK");
      throw error;
    }
  }
}

/** A statement prepared on the connection, and how it hands over the rows it returns. */
interface Prepared {
  readonly sql: StatementSync;
  /** Whether it returns rows. */
  readonly returnsRows: boolean;
  /** Its columns' names when it hands over rows as arrays; null when as objects. */
  readonly columns: readonly string[] | null;
}

/** `setReturnArrays`, which the `node:sqlite` types of some Deno versions lack. */
type ArraysOption = { setReturnArrays?: (enabled: boolean) => void };

/**
 * Prepares `statement`. One that returns rows hands them over as arrays,
 * made into objects here: `node:sqlite`'s own row objects are slow to build
 * and to read (a claim's 17 columns cost microseconds per row). A runtime
 * without `setReturnArrays` hands over its objects.
 */
function prepare(db: DatabaseSync, statement: Statement): Prepared {
  const sql = db.prepare(statement.sqlite);
  const { returnsRows } = statement;
  const arrays = (sql as StatementSync & ArraysOption).setReturnArrays;
  if (!returnsRows || arrays === undefined) return { sql, returnsRows, columns: null };
  arrays.call(sql, true);
  return { sql, returnsRows, columns: sql.columns().map((column) => column.name) };
}

/** A row as it is handed over (an array of `columns`, or an object), as an object. */
function toRow(row: unknown, columns: readonly string[] | null): Record<string, unknown> {
  if (columns === null) return row as Record<string, unknown>;
  const values = row as readonly SQLOutputValue[];
  const object: Record<string, unknown> = {};
  for (let index = 0; index < columns.length; index++) object[columns[index]!] = values[index];
  return object;
}

/** A parameter as SQLite binds it: booleans as 1/0, undefined as null, arrays as JSON text. */
function bind(value: unknown): SQLInputValue {
  if (value === undefined) return null;
  if (typeof value === "boolean") return value ? 1 : 0;
  if (Array.isArray(value)) return JSON.stringify(value);
  return value as SQLInputValue;
}

/**
 * The error of a call on a transaction whose statement failed before
 * (`cause`): worded as PostgreSQL words it, with what failed.
 */
function abortedBy(cause: unknown): Error {
  const first = cause instanceof Error ? cause.message : String(cause);
  return new Error(
    `current transaction is aborted, commands ignored until end of transaction block: an earlier statement failed (${first}), which ends the transaction whether or not the callback caught it`,
    { cause },
  );
}
