/**
 * The rules for database URLs, in one place for the stores, `Queue.open`,
 * `readConfig()` and the CLI: which strings name a PostgreSQL database or a
 * Redis server, and how to show one without its password. A URL's scheme is
 * read as URLs read it, in any case, and surrounding whitespace (what
 * `QUEUE_DB= postgres://…` in a .env file leaves) does not hide it; and
 * when `DATABASE_URL` names the queue's database. Imports no driver, so
 * reading them never loads a driver.
 *
 * @internal
 * @module
 */
import { readableEnv } from "../readable_env.ts";

/** The scheme `text` starts with (`postgres` of ` Postgres://…`), in lower case; null when it names none. */
function urlScheme(text: string): string | null {
  const match = /^\s*([a-z][a-z0-9+.-]*):\/\//i.exec(text);
  return match === null ? null : match[1]!.toLowerCase();
}

/** Whether `text` names a PostgreSQL database (`postgres://` or `postgresql://`). */
export function isPostgresUrl(text: string): boolean {
  const scheme = urlScheme(text);
  return scheme === "postgres" || scheme === "postgresql";
}

/** `text` with a URL's password (in its user info or a `password` parameter) replaced by `***`, for messages and status lines. */
export function redactPassword(text: string): string {
  return text.replace(/^(\s*[a-z][a-z0-9+.-]*:\/\/[^:/@]*):[^@]*@/i, "$1:***@")
    .replace(/([?&]password=)[^&#]*/gi, "$1***");
}

/** Whether `text` names a Redis server (`redis://` or `rediss://`). */
export function isRedisUrl(text: string): boolean {
  const scheme = urlScheme(text);
  return scheme === "redis" || scheme === "rediss";
}

/** Whether `text` names a database served over the network (PostgreSQL or Redis), not a file. */
export function isServerUrl(text: string): boolean {
  return isPostgresUrl(text) || isRedisUrl(text);
}

/**
 * Whether `text` is a URL of a kind no store opens (`mysql://…`,
 * `http://…`): neither a server URL nor SQLite's own `file:` URI filename.
 */
export function isOtherUrl(text: string): boolean {
  const scheme = urlScheme(text);
  return scheme !== null && scheme !== "file" && !isServerUrl(text);
}

/**
 * The database `DATABASE_URL` names for the queue, or undefined: its value
 * without surrounding whitespace when it is a PostgreSQL URL. Any other value
 * (a Redis or MySQL URL some other part of the app reads) is not the
 * queue's. The one rule `Queue.open`, `readConfig()` and the CLI apply when
 * nothing else names the database.
 */
export function queueDatabaseUrl(value: string | undefined): string | undefined {
  return value !== undefined && isPostgresUrl(value) ? value.trim() : undefined;
}

/**
 * The process's `DATABASE_URL`, or undefined when it is unset or this
 * process may not read it (no `--allow-env` for it: then it is not the
 * queue's database, and the SQLite default applies). Asked without a
 * permission prompt: an app run with `--allow-env=QUEUE_DB,…` in a terminal
 * is not stopped to ask for a variable it does not use.
 */
export function readDatabaseUrlVariable(): string | undefined {
  return readableEnv("DATABASE_URL");
}
