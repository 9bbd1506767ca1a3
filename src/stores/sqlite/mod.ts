/**
 * The default store: every job in one SQLite file, through `node:sqlite`.
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";
import { optionBag, optionNames } from "../../option_bags.ts";
import { shown } from "../../shown.ts";
import { migrations } from "../../../migrations/sqlite/mod.ts";
import type { Migration } from "../../../migrations/migration.ts";
import type { MigrateOptions } from "../schema_steps.ts";
import { type Durability, openConnection } from "./connection.ts";
import { explainOpenError } from "./file_errors.ts";
import { sqliteDialect } from "./dialect.ts";
import { SqliteEngine } from "./engine.ts";
import { SqlStore } from "../sql/sql_store.ts";

export type { Durability } from "./connection.ts";

/** Options for {@linkcode SqliteStore.open}. */
export interface SqliteStoreOptions {
  /**
   * `"normal"` survives a process crash and may lose the last commits on
   * power loss; `"full"` syncs every commit.
   * @default {"normal"}
   */
  durability?: Durability;
  /**
   * How long to wait, in whole ms, for another connection's write lock before failing.
   * @default {30_000}
   */
  busyTimeoutMs?: number;
  /**
   * How opening applies the schema steps the database lacks
   * (docs/upgrading.md): `{ force: true }` applies a contract step even
   * while older workers run; `false` applies none, for a store opened only
   * to read {@linkcode SqlStore.migrationPlan}.
   * @default {{}}
   */
  migrate?: MigrateOptions | false;
}

const SQLITE_STORE_OPTIONS = optionNames<SqliteStoreOptions>()([
  "durability",
  "busyTimeoutMs",
  "migrate",
]);

/**
 * Throws a `TypeError` starting with `where` unless `path` is a string that
 * names a file: SQLite opens an empty name as a temporary file, deleted on
 * close, with every job in it.
 * @internal
 */
export function assertSqlitePath(path: unknown, where: string): asserts path is string {
  if (typeof path !== "string" || path.trim() === "") {
    throw new TypeError(
      `${where}: path must name a SQLite file (or ":memory:"): got ${shown(path)}`,
    );
  }
}

/**
 * Jobs in one SQLite file. One connection per store; its operations run one
 * at a time, and an app transaction holds the others back until it ends.
 *
 * @example Opening a store directly
 * ```ts
 * import { SqliteStore } from "@renox/queue";
 * await using store = await SqliteStore.open(":memory:");
 * console.log(await store.counts(Date.now()));
 * ```
 */
export class SqliteStore extends SqlStore {
  private constructor(engine: SqliteEngine, steps: readonly Migration[]) {
    super(engine, sqliteDialect, steps);
  }

  /** Opens (creating if needed) the file at `path`, or `":memory:"`, and migrates it. */
  static open(path: string, options: SqliteStoreOptions = {}): Promise<SqliteStore> {
    return SqliteStore.openWithSteps(path, options, migrations);
  }

  /**
   * Opens the store as {@linkcode SqliteStore.open} does, with `steps` as
   * this code's schema steps: a test's seam for a step no release ships.
   * @internal
   */
  static async openWithSteps(
    path: string,
    given: SqliteStoreOptions,
    steps: readonly Migration[],
  ): Promise<SqliteStore> {
    assertSqlitePath(path, "SqliteStore.open");
    const options = optionBag(given, "SqliteStore.open", SQLITE_STORE_OPTIONS) ?? {};
    const durability = options.durability ?? "normal";
    if (durability !== "normal" && durability !== "full") {
      throw new TypeError(`durability must be "normal" or "full": got ${shown(durability)}`);
    }
    const busyTimeoutMs = options.busyTimeoutMs ?? 30_000;
    if (!(Number.isSafeInteger(busyTimeoutMs) && busyTimeoutMs >= 0)) {
      throw new RangeError(
        `busyTimeoutMs must be a whole number of ms >= 0: got ${shown(busyTimeoutMs)}`,
      );
    }
    // -0 passes the check, and node:sqlite refuses it as no integer.
    const db = await openConnection(path, durability, Math.abs(busyTimeoutMs));
    const store = new SqliteStore(new SqliteEngine(db, { path, busyTimeoutMs, durability }), steps);
    try {
      if (options.migrate !== false) await store.migrate(options.migrate ?? {});
    } catch (error) {
      db.close();
      throw error;
    }
    return store;
  }

  /**
   * Whether the SQLite file at `path` holds a queue (a schema step was
   * applied), read on a plain connection that sets no pragma and writes
   * nothing: another app's database is left as it was (its journal mode
   * too).
   */
  static holdsQueue(path: string): boolean {
    let db: DatabaseSync;
    try {
      db = new DatabaseSync(path, { timeout: 5_000 });
    } catch (error) {
      throw explainOpenError(error, path);
    }
    try {
      const table = db.prepare(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'queue_migrations'",
      ).get();
      return table !== undefined &&
        db.prepare("SELECT 1 FROM queue_migrations LIMIT 1").get() !== undefined;
    } catch (error) {
      throw explainOpenError(error, path);
    } finally {
      db.close();
    }
  }
}
