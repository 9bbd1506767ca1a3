/**
 * Where a queue keeps its jobs: a SQLite file (the default), a PostgreSQL
 * database by URL or `DATABASE_URL`, a Redis server by URL, or a store the caller opened.
 *
 * @module
 */
import { shown } from "./shown.ts";
import { dirname } from "node:path";
import {
  isOtherUrl,
  isPostgresUrl,
  isRedisUrl,
  isServerUrl,
  queueDatabaseUrl,
  readDatabaseUrlVariable,
  redactPassword,
} from "./stores/database_url.ts";
import { assertSqlitePath, type Durability, SqliteStore } from "./stores/sqlite/mod.ts";
import type { MigrateOptions, Store } from "./stores/store.ts";

/** The options of the SQLite file, which no other store takes. */
const SQLITE_OPTIONS = ["durability", "busyTimeoutMs"] as const;

/** The options of {@linkcode Queue.open} that choose and open its store. */
export interface StoreOptions {
  /**
   * SQLite file to keep jobs in, created with its folder if missing; `":memory:"` for one process.
   * A relative path is resolved against the current folder. A URL (`postgres://…`, in any case
   * and with spaces before it, or of another kind) is refused: pass a database URL as `url`
   * (`readConfig().database` picks the right one).
   * @default {"./.renox/queue.db"}
   */
  path?: string;
  /**
   * A PostgreSQL URL (`postgres://…`): the queue keeps its jobs there, in the
   * `public` schema, instead of a SQLite file. Or a Redis URL (`redis://…`,
   * `rediss://…`): the queue keeps its jobs on that server, under the URL's
   * `prefix` parameter (`redis://host:6379/0?prefix=app`, default `renox`).
   * The driver is loaded only then. For more settings, open a `PostgresStore`
   * from `@renox/queue/postgres` or a `RedisStore` from `@renox/queue/redis`
   * and pass it as `store`. Refused beside `path` or `store`.
   * @default {DATABASE_URL, when it is a postgres:// URL and neither path nor store is given}
   */
  url?: string;
  /**
   * A store opened by the caller, given instead of `path` and `url` (with either it is refused);
   * the queue closes it on close. Refused beside `mode: "inline"`, which stores nothing. Its database must have every schema step of this code: a
   * store opened with `migrate: false` and not migrated since is refused, naming the missing
   * steps.
   */
  store?: Store;
  /**
   * SQLite `synchronous` level: `"normal"` survives a process crash, `"full"` also power loss.
   * Refused beside `url` or `store`, which it would not reach. Without `path`, when
   * `DATABASE_URL` names PostgreSQL, it is ignored with a warning (once per process), so one
   * config serves SQLite on a laptop and PostgreSQL where the variable is set.
   * @default {"normal"}
   */
  durability?: Durability;
  /**
   * How long to wait for another process's write lock before failing (SQLite). Refused beside
   * `url` or `store`, which it would not reach. Without `path`, when `DATABASE_URL` names
   * PostgreSQL, it is ignored with a warning (once per process), as `durability` is.
   * @default {30_000}
   */
  busyTimeoutMs?: number;
  /**
   * How opening applies the schema steps the database lacks
   * (docs/upgrading.md): expand steps are applied while older workers run;
   * a contract step is refused while workers of older code were seen within
   * the heartbeat window, unless `{ force: true }`. Refused beside `store`, which the queue
   * does not migrate: call `store.migrate()` (same options) before `Queue.open`.
   * @default {{}}
   */
  migrate?: MigrateOptions;
}

/**
 * Opens the store `options` name: `store`, else `url` or `DATABASE_URL`,
 * else the SQLite file; applying the schema steps it lacks per `migrate`
 * (`false`: none, to read the plan only).
 */
export async function openStore(
  options: StoreOptions,
  migrate: MigrateOptions | false = options.migrate ?? {},
): Promise<Store> {
  assertOneStore(options);
  if (options.store !== undefined) return assertStore(options.store);
  if (options.path !== undefined) assertPath(options.path);
  const url = options.url ?? (options.path === undefined ? databaseUrl() : undefined);
  if (url !== undefined) {
    if (options.url === undefined) warnSqliteOptionsIgnored(options);
    return await openServer(url, migrate);
  }
  const path = options.path ?? "./.renox/queue.db";
  try {
    return await SqliteStore.open(path, {
      migrate,
      ...(options.durability !== undefined && { durability: options.durability }),
      ...(options.busyTimeoutMs !== undefined && { busyTimeoutMs: options.busyTimeoutMs }),
    });
  } catch (error) {
    if (error instanceof Deno.errors.NotCapable) throw sqlitePermissionError(path, error);
    throw error;
  }
}

/**
 * Throws unless `options` name at most one of `store`, `path` and `url`,
 * give the SQLite file's own options (`durability`, `busyTimeoutMs`) only
 * for a SQLite file, and `migrate` only for a store the queue opens: one of
 * them beside `url` or `store` would be ignored.
 */
function assertOneStore(options: StoreOptions): void {
  const places = (["path", "url", "store"] as const).filter((name) => options[name] !== undefined);
  if (places.length > 1) {
    throw new TypeError(`Queue.open: give one of path, url and store: got ${places.join(" and ")}`);
  }
  const other = places.find((name) => name !== "path");
  const sqlite = SQLITE_OPTIONS.find((name) => options[name] !== undefined);
  if (other !== undefined && sqlite !== undefined) {
    throw new TypeError(
      `Queue.open: ${sqlite} is an option of the SQLite file (path), so it takes no ${other}`,
    );
  }
  // `false` (the stores' own option, from JavaScript) holds for a store given: none is applied.
  if (options.store !== undefined && options.migrate !== undefined && !appliesNoStep(options)) {
    throw new TypeError(
      `Queue.open: migrate applies to a store the queue opens (path or url), so it takes no store: got ${
        shown(options.migrate)
      }; migrate the store before Queue.open with store.migrate(), which takes the same options`,
    );
  }
}

/** The SQLite options named in a warning so far: each warns once per process. */
const warnedIgnored = new Set<string>();

/**
 * Warns, once per process for each set of them, that the SQLite file's
 * options in `options` are ignored, the queue keeping its jobs in the
 * PostgreSQL database `DATABASE_URL` names. Not refused, as beside `url`:
 * an app may give them for its local SQLite file and run where the
 * variable is set with the same code.
 */
function warnSqliteOptionsIgnored(options: StoreOptions): void {
  const ignored = SQLITE_OPTIONS.filter((name) => options[name] !== undefined).join(" and ");
  if (ignored === "" || warnedIgnored.has(ignored)) return;
  warnedIgnored.add(ignored);
  console.warn(
    `@renox/queue: Queue.open ignores ${ignored}: ${
      ignored.includes(" and ") ? "they are options" : "it is an option"
    } of the SQLite file, and the queue keeps its jobs in the PostgreSQL database DATABASE_URL names (pass path to keep them in a SQLite file)`,
  );
}

/**
 * Whether `migrate` is `false`: outside `QueueOptions`' type, but the
 * stores' "apply no step", given anyway from JavaScript.
 */
export function appliesNoStep(options: { readonly migrate?: MigrateOptions }): boolean {
  return (options.migrate as unknown) === false;
}

/**
 * What the store `options` name holds instead of a queue, or null when it
 * holds one (a schema step, or a Redis key layout, applied): `"no queue
 * tables in this file"` (SQLite), `"… in this schema"` (PostgreSQL), `"no
 * key of this prefix"` (Redis). Reads only: no table or key is created, and
 * a SQLite file (which must exist) is read on a plain connection that
 * leaves another app's settings alone. The one check of every command that
 * must find a queue where it is told to look (the admin commands' `--db`,
 * a move's source).
 */
export async function missingQueue(
  options: { readonly url: string } | { readonly path: string },
): Promise<string | null> {
  if ("path" in options) {
    return SqliteStore.holdsQueue(options.path) ? null : "no queue tables in this file";
  }
  await using store = await openStore(options, false);
  if ((await store.migrationPlan()).databaseStep > 0) return null;
  return isRedisUrl(options.url) ? "no key of this prefix" : "no queue tables in this schema";
}

/**
 * The error for a SQLite file this process may not read or write: which
 * flags to add, for its folder, and the way out on a host without a disk.
 */
function sqlitePermissionError(path: string, cause: Error): Error {
  const folder = dirname(path);
  const missing = (["read", "write"] as const).filter((name) => {
    try {
      return Deno.permissions.querySync({ name, path: folder }).state !== "granted";
    } catch {
      return true;
    }
  }).map((name) => `--allow-${name}=${folder}`);
  return new Deno.errors.NotCapable(
    `Cannot open the SQLite file ${path}: the SQLite store needs to read and write its folder; ` +
      `run with ${
        missing.length > 0 ? missing.join(" ") : `--allow-read=${folder} --allow-write=${folder}`
      }` +
      " (on a host without a writable disk, keep the jobs in PostgreSQL: set DATABASE_URL to a postgres:// URL): " +
      cause.message,
    { cause },
  );
}

/** `store`, unless it is no store (a plain object, a URL): then a `TypeError` naming the way. */
function assertStore(store: Store): Store {
  if (
    typeof store !== "object" || store === null || typeof store.migrationPlan !== "function" ||
    typeof store.insertJobs !== "function"
  ) {
    throw new TypeError(
      `Queue.open: store must be a store opened by SqliteStore.open(), PostgresStore.open() or RedisStore.open() (a URL goes in url): got ${
        shown(store)
      }`,
    );
  }
  return store;
}

/** Throws a `TypeError` unless `path` can name a SQLite file: not empty, not a URL. */
function assertPath(path: unknown): void {
  assertSqlitePath(path, "Queue.open");
  // `file:` is SQLite's own URI filename form; any other scheme names another kind of database.
  if (isServerUrl(path)) {
    throw new TypeError(
      `Queue.open: path is a URL, not a SQLite file: got "${
        redactPassword(path)
      }" (pass a database URL as url, e.g. Queue.open({ ...readConfig().database, jobs }))`,
    );
  }
  if (isOtherUrl(path)) {
    throw new TypeError(
      `Queue.open: path is a URL, not a SQLite file: got "${
        redactPassword(path)
      }" (the queue keeps its jobs in a SQLite file, or in PostgreSQL or Redis by a postgres:// or redis:// URL given as url)`,
    );
  }
}

/** `DATABASE_URL` when it names a PostgreSQL database (and the environment may be read). */
function databaseUrl(): string | undefined {
  return queueDatabaseUrl(readDatabaseUrlVariable());
}

/**
 * Opens the PostgreSQL or Redis store `url` names, imported on demand: apps
 * on SQLite never load a driver at run time. The specifiers are literals, so
 * the modules are in the app's graph: they load without `--allow-read`, and
 * hosts that bundle the graph (Deno Deploy) include them. Type-checking an
 * app fetches the drivers' types once.
 */
async function openServer(url: unknown, migrate: MigrateOptions | false): Promise<Store> {
  if (typeof url === "string" && isPostgresUrl(url)) {
    const { PostgresStore } = await import("./stores/postgres/mod.ts");
    return await PostgresStore.open(url, { migrate });
  }
  if (typeof url === "string" && isRedisUrl(url)) {
    const { RedisStore } = await import("./stores/redis/mod.ts");
    return await RedisStore.open(url, { migrate });
  }
  throw new TypeError(
    `Queue.open: url must start with postgres://, postgresql://, redis:// or rediss://: got ${
      shown(typeof url === "string" ? redactPassword(url) : url)
    }`,
  );
}
