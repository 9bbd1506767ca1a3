/**
 * What a SQL store needs from its database, whatever the engine: running a
 * script on one connection (in a write transaction, or statement by
 * statement), an app transaction, noticing other processes' writes, and
 * closing. An engine knows nothing of jobs; the rules are the store's.
 *
 * @internal
 * @module
 */
import type { Migration } from "../../../migrations/migration.ts";
import type { BackupResult } from "../store.ts";
import type { Script } from "./script.ts";

/**
 * How a script runs: `"write"` in one write transaction (all or nothing,
 * tried again whole while another process holds the lock); `"unflushed
 * write"` the same, except that its commit need not wait for the disk where
 * the engine can say so per transaction (PostgreSQL: `synchronous_commit`
 * off; SQLite keeps the connection's durability), for a write whose loss
 * in a crash of the database server leaves the rows as they were before it
 * and costs nothing stored (commits are flushed in order: a later flushed
 * commit flushes it too); `"statement"` one statement at a time, each its
 * own commit, for a script that reads or writes with a single statement.
 */
export type RunMode = "write" | "unflushed write" | "statement";

/** An app transaction as the store uses it. */
export interface EngineTransaction {
  /** Runs a script inside the transaction. */
  run<T>(script: Script<T>): Promise<T>;
  /** Runs the app's own statement (the engine's placeholders) and returns its rows. */
  query<Row>(text: string, params: readonly unknown[]): Promise<Row[]>;
}

/** A database connection (or pool) that runs scripts. */
export interface Engine {
  /** Runs the script `start` makes; `start` is called again for each retry. */
  run<T>(start: () => Script<T>, mode: RunMode): Promise<T>;
  /**
   * Runs `fn` in one transaction: what it runs through its handle commits or
   * rolls back together. Calls of the store from inside `fn` other than
   * through the handle are refused.
   */
  transaction<T>(fn: (tx: EngineTransaction) => Promise<T>): Promise<T>;
  /** Applies the steps the database lacks, safe from several processes at once. */
  migrate(migrations: readonly Migration[]): Promise<void>;
  /** Calls `listener` soon after another connection may have added or freed jobs; best effort. */
  watch(listener: () => void): Disposable;
  /**
   * Copies the database to the new file `file` as of one commit, or
   * rejects naming the server's own tools (see `Store.backup`).
   */
  backup(file: string): Promise<BackupResult>;
  /** Closes the connection once running work has ended; later calls fail. */
  close(): Promise<void>;
}

/** The steps of `migrations` the database lacks, in order; throws if it has a step newer than all of them. */
export function migrationPlan(
  migrations: readonly Migration[],
  applied: ReadonlySet<number>,
): Migration[] {
  const newest = migrations.at(-1)?.version ?? 0;
  const ahead = [...applied].filter((version) => version > newest);
  if (ahead.length > 0) {
    throw new Error(
      `Cannot open the queue database: it has schema step ${
        Math.max(...ahead)
      }, newer than this version of @renox/queue knows (${newest})`,
    );
  }
  return migrations.filter((migration) => !applied.has(migration.version));
}
