/**
 * The PostgreSQL engine: a postgres.js pool, scripts awaited statement by
 * statement inside `sql.begin` (the statements of one step pipelined on the
 * transaction's connection) or on the pool, unflushed statements on a
 * connection of their own whose commits do not wait for the WAL flush, app
 * transactions, migrations under an advisory lock,
 * `LISTEN` on the schema's channel, and the wake-ups scripts ask for sent on
 * it after their commit (never inside a transaction).
 *
 * @internal
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";
// A full specifier: an app importing this module from another folder resolves bare names with
// its own import map, which need not list this dependency.
// deno-lint-ignore no-import-prefix
import type postgres from "npm:postgres@^3.4.9";
import type { Migration } from "../../../migrations/migration.ts";
import { STEPS_RECORD } from "../../../migrations/postgres/mod.ts";
import { QueueClosedError, QueueMovedError } from "../../errors.ts";
import { QUEUE_MOVED_SQLSTATE } from "./move_fence.ts";
import { guardStrayWrites } from "./crash_guard.ts";
import { isConnectionLost } from "../store_outage.ts";
import { CLOSE_WAITS_MS, closedUnderTransaction } from "../close_wait.ts";
import type { BackupResult } from "../store.ts";
import type { AroundSteps, Engine, EngineTransaction, RunMode } from "../sql/engine.ts";
import { kindUpdates, type MigrationQuery, readPlan } from "../sql/engine.ts";
import {
  blockedStep,
  type MigrateOptions,
  type MigrationPlan,
  planSteps,
} from "../schema_steps.ts";
import { oneWriteAtMost, type Result, runAsync, type Script, type Step } from "../sql/script.ts";
import { WakeUps } from "./wake_ups.ts";

/**
 * Now in ms on the database's clock, which stamps the workers' heartbeats
 * (with `clock: "caller"` they carry the callers' clocks: a host whose clock
 * is off by more than the heartbeat window is judged wrongly).
 */
const NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint";
/** A wake-up of the watchers on channel `$1`. */
const WAKE = "SELECT pg_notify($1, '')";
/**
 * The advisory lock of migrations in this database. Code of before 2026-12-06
 * takes it exclusive, so one process migrates at a time whatever its schema;
 * this code takes it shared, beside an exclusive lock of the schema's own
 * (`pg_advisory_xact_lock(MIGRATION_LOCK, hashtext(schema))`, a key space
 * of its own), so schemas migrate side by side, and both codes still exclude
 * each other on one schema.
 */
const MIGRATION_LOCK = 7_204_310;
/** PostgreSQL's SQLSTATE for a transaction it rolled back to break a cycle of lock waits. */
const DEADLOCK_DETECTED = "40P01";
/** How many times a write script runs when PostgreSQL picks it to break a deadlock. */
const DEADLOCK_TRIES = 3;

/** The driver's pool. */
export type Sql = postgres.Sql<Record<string, never>>;

/**
 * What a pool the engine opens is for: `"shared"`, the pool every other
 * script and every transaction runs on; `"unflushed"`, one connection whose
 * session has `synchronous_commit` off, for the statements of `"unflushed
 * statements"` scripts (each its own commit).
 */
export type PoolKind = "shared" | "unflushed";
/** A transaction's connection, or the pool. */
type Connection = postgres.TransactionSql<Record<string, never>> | Sql;

/** What a {@linkcode PostgresEngine} works on, besides its pools. */
export interface EngineNames {
  /** The schema the queue's tables live in. */
  readonly schema: string;
  /** The channel watchers listen on. */
  readonly channel: string;
  /** The server as errors name it: its URL, password hidden. */
  readonly server: string;
}

/** A postgres.js pool that runs scripts. */
export class PostgresEngine implements Engine {
  /** The pool; replaced by a new one when connections are lost (see `#connected`). */
  #sql: Sql;
  /** The pool of unflushed statements, opened on first use; replaced with `#sql`. */
  #unflushed: Sql | null = null;
  readonly #connect: (kind: PoolKind) => Sql;
  readonly #schema: string;
  readonly #channel: string;
  readonly #server: string;
  readonly #listeners = new Set<() => void>();
  /**
   * Set inside a transaction's callback (the transaction, while open), to
   * refuse work that would escape the transaction: work the callback started
   * that runs after the transaction ended is not refused.
   */
  readonly #insideTransaction = new AsyncLocalStorage<{ open: boolean }>();
  #listening: Promise<{ unlisten(): Promise<void> } | null> | null = null;
  /** Set when a call failed for want of a connection: LISTEN is taken again once calls work. */
  #disconnected = false;
  #closed = false;
  /** When close() has the driver cut the connections still in a transaction (see `#cutByClose`). */
  #cutsAt = Infinity;
  readonly #unguard = guardStrayWrites();
  /** `NOTIFY` on the channel, each in a transaction of its own that writes no WAL. */
  readonly #wakeUps = new WakeUps(() =>
    this.#connected(() => this.#sql.unsafe(WAKE, [this.#channel], { prepare: true }))
  );

  /**
   * Runs on the pools `connect` opens (see {@linkcode PoolKind}), whose
   * connections search `names.schema`; watchers listen on `names.channel`.
   */
  constructor(connect: (kind: PoolKind) => Sql, names: EngineNames) {
    const { schema, channel, server } = names;
    this.#connect = connect;
    try {
      this.#sql = connect("shared");
    } catch (error) {
      this.#unguard(); // no store to close later: the guard would outlive it
      throw error;
    }
    this.#schema = schema;
    this.#channel = channel;
    this.#server = server;
  }

  /**
   * Runs the script in one transaction, or statement by statement on the
   * pool (unflushed statements on their own connection); then, when it
   * asked for one, sends a wake-up on its way (see {@linkcode Engine.run}).
   */
  async run<T>(start: () => Script<T>, mode: RunMode): Promise<T> {
    this.#assertUsable();
    const wakeUp = new WakeUpAsked();
    const result = await this.#retriedOnDeadlock(mode, () =>
      this.#connected(() => {
        if (mode === "statement") {
          return runAsync(
            wakeUp.fresh(start),
            oneWriteAtMost((step) => execute(this.#sql, step, false)),
            wakeUp.ask,
          );
        }
        if (mode === "unflushed statements") {
          // Each statement its own commit, with no BEGIN or COMMIT round trip around it.
          const unflushed = this.#unflushed ??= this.#connect("unflushed");
          return runAsync(
            wakeUp.fresh(start),
            (step) => execute(unflushed, step, false),
            wakeUp.ask,
          );
        }
        return this.#begin((tx) =>
          runAsync(wakeUp.fresh(start), (step) => execute(tx, step, true), wakeUp.ask)
        );
      }));
    // Only here, once the transaction has committed: a rollback rejected above.
    if (wakeUp.asked) this.#wake();
    return result;
  }

  /**
   * Runs `attempt` again, up to {@linkcode DEADLOCK_TRIES} times in all,
   * when PostgreSQL rolled its write transaction back to break a deadlock:
   * the script made no change, and the other side of the cycle goes on, so
   * the next try meets its locks released. Two scripts that lock a job's
   * row and a flow's or a group's in different orders (an admin cancel or
   * clear beside a worker's settle) cannot always be ordered alike; nor can
   * a migration's steps beside the claims of a worker of older code.
   */
  async #retriedOnDeadlock<T>(mode: RunMode, attempt: () => Promise<T>): Promise<T> {
    for (let tries = 1;; tries++) {
      try {
        return await attempt();
      } catch (error) {
        const code = (error as { code?: unknown } | null)?.code;
        if (mode !== "write" || code !== DEADLOCK_DETECTED || tries >= DEADLOCK_TRIES) throw error;
      }
    }
  }

  /** Runs `fn` in one transaction, then sends a wake-up if one of its scripts asked for it. */
  async transaction<T>(fn: (tx: EngineTransaction) => Promise<T>): Promise<T> {
    this.#assertUsable();
    const wakeUp = new WakeUpAsked();
    const result = await this.#connected(() => this.#transaction(fn, wakeUp));
    if (wakeUp.asked) this.#wake();
    return result;
  }

  async #transaction<T>(
    fn: (tx: EngineTransaction) => Promise<T>,
    wakeUp: WakeUpAsked,
  ): Promise<T> {
    // closedBy: set when close() cut the connection of this transaction, still open after its wait.
    const inside: { open: boolean; closedBy?: QueueClosedError } = { open: true };
    try {
      return await this.#inTransaction(fn, wakeUp, inside);
    } catch (error) {
      if (!this.#cutByClose(error)) throw error;
      throw inside.closedBy = closedUnderTransaction({ cause: error });
    }
  }

  async #inTransaction<T>(
    fn: (tx: EngineTransaction) => Promise<T>,
    wakeUp: WakeUpAsked,
    inside: { open: boolean; closedBy?: QueueClosedError },
  ): Promise<T> {
    return await this.#begin(async (connection) => {
      const check = () => {
        if (inside.closedBy !== undefined) throw inside.closedBy;
        if (!inside.open) {
          throw new Error("This transaction has ended: use it only inside its callback");
        }
      };
      // The app's statements, awaited before the transaction ends (see `settledStatements`).
      const statements = new Set<Promise<unknown>>();
      const tx: EngineTransaction = {
        run: async (script) => {
          check();
          return await runAsync(script, (step) => execute(connection, step, true), wakeUp.ask);
        },
        query: async <Row>(text: string, params: readonly unknown[]) => {
          check();
          const statement = appStatement<Row>(connection, text, params);
          statements.add(statement);
          return await statement;
        },
      };
      try {
        const result = await this.#insideTransaction.run(inside, () => fn(tx));
        inside.open = false; // a statement sent from now on is refused, not left unawaited
        await settledStatements(statements);
        return result;
      } finally {
        inside.open = false;
      }
    });
  }

  /**
   * Applies the steps the database lacks under an advisory lock, creating the
   * schema first (see {@linkcode Engine.migrate}); with `apply` false, reads
   * the plan only, creating nothing.
   */
  async migrate(
    migrations: readonly Migration[],
    options: MigrateOptions,
    apply: boolean,
    around?: AroundSteps,
  ): Promise<MigrationPlan> {
    this.#assertUsable();
    // A step's ALTER TABLE locks its tables in its own order, which a worker of older code running
    // beside it (docs/upgrading.md) may meet the other way round: the whole migration rolled back.
    return await this.#retriedOnDeadlock(
      "write",
      () => this.#connected(() => this.#migrate(migrations, options, apply, around)),
    );
  }

  async #migrate(
    migrations: readonly Migration[],
    options: MigrateOptions,
    apply: boolean,
    around: AroundSteps | undefined,
  ): Promise<MigrationPlan> {
    return await this.#begin(async (tx) => {
      const all = async ({ text, params }: MigrationQuery) =>
        [...await tx.unsafe(text, params as never[])] as Record<string, unknown>[];
      const read = async () => {
        const reading = readPlan(migrations, NOW_MS);
        let next = reading.next();
        while (!next.done) next = reading.next(await all(next.value));
        return next.value;
      };
      if (!apply) {
        const [found] = await tx.unsafe(
          "SELECT to_regclass('queue_migrations') IS NOT NULL AS found",
        );
        return found?.found === true ? await read() : planSteps(migrations, [], []);
      }
      await tx.unsafe(
        "SELECT pg_advisory_xact_lock_shared($1::bigint), pg_advisory_xact_lock($1::int, hashtext($2))",
        [MIGRATION_LOCK, this.#schema],
      );
      // Under the schema's lock: creating it races otherwise.
      await tx.unsafe(`CREATE SCHEMA IF NOT EXISTS "${this.#schema}"`);
      await tx.unsafe(STEPS_RECORD);
      const plan = await read();
      if (blockedStep(plan, options) !== undefined) return plan;
      const framed = plan.steps.length > 0 ? around : undefined;
      const write = (script: Script<unknown>) =>
        runAsync(script, (step) => execute(tx, step, true), () => {});
      if (framed) await write(framed.before());
      for (const step of plan.steps) {
        const migration = migrations.find(({ version }) => version === step.version)!;
        await tx.unsafe(migration.sql);
        await tx.unsafe("INSERT INTO queue_migrations (version, applied_at) VALUES ($1, $2)", [
          migration.version,
          Date.now(),
        ]);
      }
      if (framed) await write(framed.after());
      for (const update of kindUpdates(migrations, plan)) await all(update);
      return plan;
    });
  }

  /**
   * Rejects: a PostgreSQL database is backed up with the server's own tools
   * (`pg_dump`, `pg_basebackup`), which the error names; see docs/backups.md.
   */
  backup(_file: string): Promise<BackupResult> {
    return Promise.reject(
      new Error(
        "Cannot back up a PostgreSQL queue from the queue: use the server's own tools, " +
          `pg_dump (a consistent copy of the queue's schema: pg_dump --schema=${this.#schema} ` +
          "--format=custom) or pg_basebackup with WAL archiving (a copy of the whole server, " +
          "restorable to any moment); see docs/backups.md",
      ),
    );
  }

  /**
   * Calls `listener` when any process commits a write that may add or free
   * jobs (`LISTEN` on the schema's channel). The first watcher opens the
   * listening connection; a failure to listen only leaves workers polling.
   */
  watch(listener: () => void): Disposable {
    this.#listeners.add(listener);
    this.#listen();
    return {
      [Symbol.dispose]: () => {
        this.#listeners.delete(listener);
      },
    };
  }

  /**
   * Sends `NOTIFY` on the channel after the caller's commit, one for every
   * call made while the previous one was on its way (see `./wake_ups.ts`),
   * without holding up the caller: `close()` waits for it. Nothing once the
   * engine is closing.
   */
  #wake(): void {
    if (!this.#closed) void this.#wakeUps.wake();
  }

  /** Closes every connection, once the wake-ups asked for have left; later calls fail. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      await this.#wakeUps.settled();
      const listening = await this.#listening;
      await listening?.unlisten().catch(() => {});
      // The driver cuts a connection still in a transaction after this long, which rolls it back.
      this.#cutsAt = Date.now() + CLOSE_WAITS_MS;
      const timeout = CLOSE_WAITS_MS / 1000;
      await Promise.all([this.#sql.end({ timeout }), this.#unflushed?.end({ timeout })]);
    } finally {
      this.#unguard();
    }
  }

  /**
   * Runs `call`; a failure for want of a connection (server down or
   * restarting, connection cut) rejects saying so. The first call that
   * works after one takes LISTEN again: the driver re-subscribes once when
   * its listening connection closes, and gives up if the server is still
   * down then.
   */
  async #connected<T>(call: () => Promise<T>): Promise<T> {
    let result: T;
    try {
      result = await call();
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code === QUEUE_MOVED_SQLSTATE) {
        throw movedError(error as Error);
      }
      if (!isConnectionLost(error) || error instanceof QueueClosedError) throw error;
      // close() ended the pool under a call it had not sent yet: the server is fine, the queue
      // closed. No cause: the driver's error would make it read as an outage, to be waited out.
      if (this.#closed) throw new QueueClosedError("use the PostgreSQL store");
      if (!this.#disconnected) this.#renewPool();
      this.#disconnected = true;
      throw unreachable(error, this.#server);
    }
    if (this.#disconnected) {
      this.#disconnected = false;
      void this.#listenAgain();
    }
    return result;
  }

  /**
   * Swaps the pool for a new one and ends the old at once (the pool of
   * unflushed statements too: opened again on its next use). After a server
   * restart or a cut connection, postgres.js 3.4.9 can leave a call on a
   * surviving connection waiting forever (upstream porsager/postgres#1208,
   * #1215); ending the old pool rejects such calls with its connection
   * error, so the worker retries them on fresh connections instead of
   * hanging.
   */
  #renewPool(): void {
    const old = [this.#sql, this.#unflushed];
    this.#sql = this.#connect("shared");
    this.#unflushed = null;
    this.#listening = null; // the old pool's LISTEN ends with it; taken again once calls work
    for (const pool of old) void pool?.end({ timeout: 0 }).catch(() => {});
  }

  /** Drops the LISTEN subscription, if any, and takes a new one. */
  async #listenAgain(): Promise<void> {
    const listening = this.#listening;
    this.#listening = null;
    await (await listening)?.unlisten().catch(() => {});
    if (this.#closed || this.#listeners.size === 0 || this.#listening !== null) return;
    this.#listen();
  }

  #listen(): void {
    const wake = () => {
      for (const each of [...this.#listeners]) each();
    };
    // The driver calls the third function each time the LISTEN takes hold (at first and after a
    // reconnect): a NOTIFY sent before then reached no one, so the watchers look once.
    this.#listening ??= this.#sql.listen(this.#channel, wake, wake).catch((error) => {
      if (isConnectionLost(error)) this.#disconnected = true; // listen once the server answers
      return null;
    });
  }

  /**
   * Whether `error` is close() cutting a connection still in a transaction
   * once its wait ran out, not an outage nor the callback's own error.
   */
  #cutByClose(error: unknown): boolean {
    return Date.now() >= this.#cutsAt && !(error instanceof QueueClosedError) &&
      isConnectionLost(error);
  }

  async #begin<T>(step: (tx: Connection) => Promise<T>): Promise<T> {
    return await this.#sql.begin((tx) => step(tx)) as T;
  }

  /**
   * Refuses use after close, and use from inside this store's own
   * transaction callback: that work would run on another connection, outside
   * the transaction, and could wait for a lock the transaction holds.
   */
  #assertUsable(): void {
    if (this.#closed) throw new QueueClosedError("use the PostgreSQL store");
    if (this.#insideTransaction.getStore()?.open === true) {
      throw new Error(
        "Cannot use the queue inside its own transaction callback: it would run outside the transaction; use the tx handle (tx.dispatch, tx.query)",
      );
    }
  }
}

/**
 * Whether the script of one call asked for a wake-up: set by `ask` (the
 * drivers' `askWakeUp`), read once the call's transaction has committed.
 */
class WakeUpAsked {
  #asked = false;
  /** Notes that the script asked for a wake-up. */
  readonly ask = (): void => {
    this.#asked = true;
  };

  /** Whether the script asked for one. */
  get asked(): boolean {
    return this.#asked;
  }

  /** The script `start` makes, forgetting what an earlier try of it asked for. */
  fresh<T>(start: () => Script<T>): Script<T> {
    this.#asked = false;
    return start();
  }
}

/**
 * Runs one app statement on a transaction's `connection`, by the extended
 * protocol: one statement (without params the driver would send the text
 * by the simple one, which runs each statement of it, a COMMIT past the
 * text's check).
 */
async function appStatement<Row>(
  connection: Connection,
  text: string,
  params: readonly unknown[],
): Promise<Row[]> {
  const options = { prepare: true, simple: false };
  return [...await connection.unsafe(text, params as never[], options)] as Row[];
}

/**
 * Waits for every app statement of a transaction whose callback returned,
 * awaited or not, and rejects with the first one's error. A statement still
 * running when the callback returns would otherwise fail after the driver
 * checked, and its COMMIT would answer ROLLBACK without an error: the
 * transaction would resolve with nothing of it stored.
 */
async function settledStatements(statements: ReadonlySet<Promise<unknown>>): Promise<void> {
  for (const outcome of await Promise.allSettled(statements)) {
    if (outcome.status === "rejected") throw outcome.reason;
  }
}

/**
 * A connection failure as an error that says the database at `server`
 * cannot be reached, keeping the driver's error (and its `code`) as the cause.
 */
function unreachable(error: unknown, server: string): Error {
  const cause = error instanceof Error ? error : new Error(String(error));
  const wrapped = new Error(
    `Cannot reach the PostgreSQL database at ${server}: ${cause.message}` +
      " (the server is down, restarting or cut the connection; calls work again once it is back)",
    { cause },
  );
  return Object.assign(wrapped, { code: (cause as { code?: unknown }).code });
}

/**
 * The error of a write the fence of a move refused: `queue_moved_refuse()`
 * (schema step 22) puts the fence in the error's detail, as JSON.
 */
function movedError(error: Error): Error {
  try {
    const fence = JSON.parse(String((error as { detail?: unknown }).detail));
    return new QueueMovedError(String(fence.to), Number(fence.at), { cause: error });
  } catch {
    return error;
  }
}

/**
 * Runs a step on `connection`. Inside a transaction the statements of an
 * `each` step are sent together (pipelined on its one connection, run in
 * order); on the pool they go one after another.
 */
async function execute(connection: Connection, step: Step, pipelined: boolean): Promise<unknown> {
  if (!("each" in step)) return await send(connection, step.statement.postgres, step.params);
  if (pipelined) {
    return await Promise.all(
      step.each.map((params) => send(connection, step.statement.postgres, params)),
    );
  }
  const results: Result[] = [];
  for (const params of step.each) {
    results.push(await send(connection, step.statement.postgres, params));
  }
  return results;
}

async function send(connection: Connection, text: string, params: readonly unknown[]) {
  const rows = await connection.unsafe(text, params as never[], { prepare: true });
  return { rows: [...rows], count: rows.count } as Result;
}
