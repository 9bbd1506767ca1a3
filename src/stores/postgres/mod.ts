/**
 * The PostgreSQL store: the same queue across many machines. Claims take due
 * jobs in one statement with `FOR UPDATE SKIP LOCKED`, each worker tick
 * settles in one transaction, leases are measured on the database's clock,
 * and idle workers wake on `LISTEN/NOTIFY` (polling stays as the fallback).
 *
 * This module and the pools it opens (`./pools.ts`) are the only ones that
 * import the `postgres` driver, from the `@renox/queue/postgres` entry point
 * (and `Queue.open({ url })` on demand): SQLite apps never load it at run
 * time.
 *
 * @example Open a queue on PostgreSQL
 * ```ts ignore
 * import { Queue } from "@renox/queue";
 * import { PostgresStore } from "@renox/queue/postgres";
 *
 * const store = await PostgresStore.open("postgres://postgres@127.0.0.1:5432/app");
 * const queue = await Queue.open({ store, jobs: import.meta.resolve("./jobs.ts") });
 * ```
 *
 * @module
 */
import { LONGEST_TIMER_MS } from "../../clock.ts";
import { optionBag, optionNames } from "../../option_bags.ts";
import { shown } from "../../shown.ts";
import { migrations } from "../../../migrations/postgres/mod.ts";
import type { Migration } from "../../../migrations/migration.ts";
import type { MigrateOptions } from "../schema_steps.ts";
import { postgresDialect } from "./dialect.ts";
import { PostgresEngine } from "./engine.ts";
import { openPool } from "./pools.ts";
import { isPostgresUrl, postgresUrlParts, redactPassword } from "../database_url.ts";
import { SqlStore } from "../sql/sql_store.ts";
import { isConnectionLost } from "../store_outage.ts";

/** Options for {@linkcode PostgresStore.open}. */
export interface PostgresStoreOptions {
  /**
   * The schema the queue's tables live in, created if missing; a name of
   * letters, digits and underscores. The URL's `schema` parameter
   * (`postgres://host/app?schema=jobs`) gives it too, so that every place
   * that takes a URL (`QUEUE_DB`, the CLI's `--db`) takes it; this option
   * wins.
   * @default {"public"}
   */
  schema?: string;
  /**
   * Whose clock the times the store writes and compares go by (due times,
   * leases, locks, pauses, recorded times, prune cutoffs, counts; the
   * "Clocks" section of docs/stores.md lists the few that stay the caller's):
   * `"database"` (the server's clock, so hosts whose clocks disagree still
   * agree) or `"caller"` (the times the queue passes in, e.g. a test's clock).
   * @default {"database"}
   */
  clock?: "database" | "caller";
  /**
   * Connections in the pool. One more is opened for `LISTEN`, and one more
   * once a worker writes a tick that only confirms starts of jobs claimed
   * ahead or marks handlers begun (its statements commit without waiting
   * for the disk): up to `maxConnections` + 2 in all.
   * @default {4}
   */
  maxConnections?: number;
  /**
   * How long a call waits for a new connection to the server before it
   * rejects, in ms (whole seconds; a server that refuses connections, e.g.
   * one that is down on a reachable host, is reported at once).
   * @default {10_000}
   */
  connectTimeoutMs?: number;
  /**
   * How opening applies the schema steps the database lacks
   * (docs/upgrading.md): `{ force: true }` applies a contract step even
   * while older workers run; `false` applies none, for a store opened only
   * to read {@linkcode SqlStore.migrationPlan}.
   * @default {{}}
   */
  migrate?: MigrateOptions | false;
}

const POSTGRES_STORE_OPTIONS = optionNames<PostgresStoreOptions>()([
  "schema",
  "clock",
  "maxConnections",
  "connectTimeoutMs",
  "migrate",
]);

/**
 * Jobs in a PostgreSQL database, shared by any number of processes on any
 * number of machines. Each operation takes a pooled connection; every write
 * that may add or free jobs notifies the other processes' watchers after it
 * commits.
 */
export class PostgresStore extends SqlStore {
  private constructor(engine: PostgresEngine, dbClock: boolean, steps: readonly Migration[]) {
    super(engine, postgresDialect({ dbClock }), steps);
  }

  /**
   * Connects to `url` (`postgres://…`, an optional `schema` parameter),
   * creates the schema if missing and migrates it.
   */
  static open(url: string, options: PostgresStoreOptions = {}): Promise<PostgresStore> {
    return PostgresStore.openWithSteps(url, options, migrations);
  }

  /**
   * Opens the store as {@linkcode PostgresStore.open} does, with `steps` as
   * this code's schema steps: a test's seam for a step no release ships.
   * @internal
   */
  static async openWithSteps(
    url: string,
    given: PostgresStoreOptions,
    steps: readonly Migration[],
  ): Promise<PostgresStore> {
    if (typeof url !== "string") {
      throw new TypeError(`PostgresStore.open: url must be a string: got ${shown(url)}`);
    }
    const options = optionBag(given, "PostgresStore.open", POSTGRES_STORE_OPTIONS) ?? {};
    // As QUEUE_DB is read: a space before the URL (left by a .env file) does not hide it.
    url = url.trim();
    if (!isPostgresUrl(url)) {
      throw new TypeError(
        `url must start with postgres:// or postgresql://: got ${redactPassword(url)}`,
      );
    }
    const { server, schema } = postgresUrlParts(url, options.schema);
    const clock = options.clock ?? "database";
    if (clock !== "database" && clock !== "caller") {
      throw new TypeError(`clock must be "database" or "caller": got ${shown(clock)}`);
    }
    const maxConnections = options.maxConnections ?? 4;
    if (!Number.isSafeInteger(maxConnections) || maxConnections < 1) {
      throw new RangeError(
        `maxConnections must be a whole number >= 1: got ${shown(maxConnections)}`,
      );
    }
    const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    // A longer timer fires at once.
    if (!(connectTimeoutMs >= 1_000 && connectTimeoutMs <= LONGEST_TIMER_MS)) {
      throw new RangeError(
        `connectTimeoutMs must be a number of ms from 1000 to ${LONGEST_TIMER_MS}: got ${
          shown(connectTimeoutMs)
        }`,
      );
    }
    const poolSettings = { server, schema, maxConnections, connectTimeoutMs };
    const store = new PostgresStore(
      new PostgresEngine((kind) => openPool(poolSettings, kind), {
        schema,
        channel: `renox_queue_${schema}`,
        server: redactPassword(url),
      }),
      clock === "database",
      steps,
    );
    try {
      if (options.migrate !== false) await store.migrate(options.migrate ?? {});
    } catch (error) {
      await store.close().catch(() => {});
      const setting = refusedUrlSetting(error, server);
      if (setting !== null) {
        throw new TypeError(
          `url has a parameter the PostgreSQL server does not know, ${
            shown(setting)
          }: the driver sends every parameter of the URL other than its own and schema to the server as a setting, and the server refused it (${
            (error as Error).message
          })`,
          { cause: error },
        );
      }
      if (!isConnectionLost(error) && !REFUSED_LOGIN.test(String((error as PgError)?.code))) {
        throw error;
      }
      // Worded as the Redis store's open: the driver's error alone names no server.
      const cause = (error as Error).cause ?? error;
      throw new Error(
        `could not connect to PostgreSQL at ${redactPassword(url)}: ${
          (cause as Error)?.message ?? cause
        }`,
        { cause },
      );
    }
    return store;
  }
}

/** SQLSTATEs of a server that refused the login: bad credentials (class 28), no such database. */
const REFUSED_LOGIN = /^(28[0-9A-Z]{3}|3D000)$/;

/** A driver error's SQLSTATE, where it has one. */
type PgError = { readonly code?: unknown };

/** SQLSTATE of a setting the server does not know (`unrecognized configuration parameter`). */
const UNKNOWN_SETTING = "42704";

/**
 * The name of the parameter of `url` the server refused as an unknown
 * setting when `error` is that refusal, or null. The name is read from the
 * server's message, in English unless the server's `lc_messages` says
 * otherwise: in another language the server's own error stands.
 */
function refusedUrlSetting(error: unknown, url: string): string | null {
  if ((error as PgError)?.code !== UNKNOWN_SETTING) return null;
  const name = /configuration parameter "([^"]+)"/.exec((error as Error).message)?.[1];
  if (name === undefined) return null;
  try {
    return new URL(url).searchParams.has(name) ? name : null;
  } catch {
    return null;
  }
}
