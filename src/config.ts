/**
 * The settings an app reads from its environment, validated with errors that
 * name the variable and the value.
 *
 * @module
 */
// A full specifier: an app importing this module from another folder resolves bare names with
// its own import map, which need not list this dependency.
// deno-lint-ignore no-import-prefix
import { z } from "npm:zod@4";
import {
  isOtherUrl,
  isServerUrl,
  queueDatabaseUrl,
  readDatabaseUrlVariable,
  redactPassword,
} from "./stores/database_url.ts";
import { shown } from "./shown.ts";

/** The queue's settings, as {@linkcode readConfig} returns them. */
export interface QueueConfig {
  /**
   * The database, from `QUEUE_DB`: a SQLite file (relative to the current
   * folder), a `postgres://` URL or a `redis://` URL (`?prefix=` names the store's prefix).
   * Without `QUEUE_DB`, `DATABASE_URL` when it is a `postgres://` URL (as `Queue.open` reads it).
   * @default {"./.renox/queue.db"}
   */
  readonly db: string;
  /**
   * `db` as `Queue.open` takes it: `{ url }` for a `postgres://` or `redis://` URL, else
   * `{ path }`. Spread it into the options: `Queue.open({ ...config.database, jobs })`.
   */
  readonly database: DatabaseOptions;
  /**
   * Jobs a serving app runs at once in its own process, from `QUEUE_WORKERS`; 0 runs none there
   * (a separate `work` process does the work).
   * @default {2}
   */
  readonly workers: number;
}

/** Where `Queue.open` finds a database named by one string: `{ url }` or `{ path }`. */
export type DatabaseOptions = { readonly url: string } | { readonly path: string };

/**
 * The one rule for a database named by one string (`QUEUE_DB`, `--db`),
 * read without its surrounding whitespace: a `postgres://` or
 * `postgresql://` URL selects PostgreSQL, a `redis://` or `rediss://` URL
 * selects Redis (schemes in any case), anything else is a SQLite file. A
 * URL of another kind is refused where the string is read (see
 * {@linkcode DATABASE_PROBLEM}).
 */
export function databaseOptions(db: string): DatabaseOptions {
  const text = db.trim();
  return isServerUrl(text) ? { url: text } : { path: text };
}

/**
 * Why `QUEUE_DB` and `--db` refuse a URL no store opens (`mysql://…`), which
 * would otherwise be taken for a SQLite file named like it.
 * @internal
 */
export const DATABASE_PROBLEM = "must be a path, a postgres:// URL or a redis:// URL";

/**
 * The variables {@linkcode readConfig} needs leave to read. It also reads
 * `DATABASE_URL` when it has leave to; without it, that one counts as unset.
 */
const VARIABLES = ["QUEUE_DB", "QUEUE_WORKERS"] as const;

const MAX_WORKERS = 10_000;

const schema = z.object({
  QUEUE_DB: z.string({ error: DATABASE_PROBLEM })
    .refine((db) => !isOtherUrl(db), { error: DATABASE_PROBLEM })
    .default("./.renox/queue.db"),
  QUEUE_WORKERS: z.string({ error: "must be a whole number >= 0" })
    .regex(/^\s*\d+\s*$/, { error: "must be a whole number >= 0" })
    .transform(Number)
    .refine((workers) => workers <= MAX_WORKERS, { error: `must be at most ${MAX_WORKERS}` })
    .default(2),
});

/**
 * Reads {@linkcode QueueConfig} from environment variables: `QUEUE_DB` (the
 * SQLite file, default `./.renox/queue.db` in the current folder, a
 * `postgres://` URL or a `redis://` URL) and `QUEUE_WORKERS` (jobs a serving app runs in its own
 * process, default 2, 0 for none). Without `QUEUE_DB`, a `postgres://` URL in `DATABASE_URL`
 * names the database, as it does for `Queue.open` given no `path` (a `DATABASE_URL` of another
 * kind is not the queue's and is ignored); `QUEUE_DB` wins when both are set. Open the queue with
 * `Queue.open({ ...config.database, jobs })`, so a URL selects PostgreSQL or Redis. Values are
 * read without surrounding whitespace, and a URL's scheme in any case. An unset or
 * empty variable takes its default; a bad value (a URL of another kind in `QUEUE_DB`) throws a
 * `TypeError` that names the variable and the value, without a URL's password.
 *
 * By default it reads the process environment, one variable at a time, so
 * `--allow-env=QUEUE_DB,QUEUE_WORKERS,DATABASE_URL` is enough for it (without leave to read
 * `DATABASE_URL`, it is taken as unset). The PostgreSQL
 * store's driver reads PostgreSQL's `PG*` variables as well
 * (`--allow-env=QUEUE_DB,QUEUE_WORKERS,DATABASE_URL,PG*`; it says so when refused); the
 * Redis store reads none.
 *
 * @example Read the settings, with the defaults filled in
 * ```ts
 * import { readConfig } from "@renox/queue";
 *
 * const config = readConfig({ QUEUE_WORKERS: "4" });
 * console.log(config.db, config.workers); // ./.renox/queue.db 4
 * console.log(config.database); // { path: "./.renox/queue.db" }
 * ```
 */
export function readConfig(
  env: Record<string, string | undefined> = processEnv(),
): QueueConfig {
  if (typeof env !== "object" || env === null) {
    throw new TypeError(
      `readConfig: env must be an object of environment variables (or nothing, for Deno.env): got ${
        shown(env)
      }`,
    );
  }
  // An empty variable (`QUEUE_WORKERS=`) is read as unset, as shells and .env files often leave
  // them; so is one of spaces only, and `QUEUE_DB= postgres://…` names PostgreSQL, not a file.
  const result = schema.safeParse({
    QUEUE_DB: env.QUEUE_DB?.trim() || queueDatabaseUrl(env.DATABASE_URL) || undefined,
    QUEUE_WORKERS: env.QUEUE_WORKERS || undefined,
  });
  if (result.success) {
    const db = result.data.QUEUE_DB;
    return { db, database: databaseOptions(db), workers: result.data.QUEUE_WORKERS };
  }
  const problems = result.error.issues.map((issue) => {
    const variable = String(issue.path[0]);
    const value = env[variable];
    return `${variable} ${issue.message}: got ${
      JSON.stringify(typeof value === "string" ? redactPassword(value) : value)
    }`;
  });
  throw new TypeError(problems.join("; "));
}

function processEnv(): Record<string, string | undefined> {
  return {
    ...Object.fromEntries(VARIABLES.map((name) => [name, Deno.env.get(name)])),
    DATABASE_URL: readDatabaseUrlVariable(),
  };
}
