/**
 * The rules for database URLs, in one place for the stores, `Queue.open`,
 * `readConfig()` and the CLI: which strings name a PostgreSQL database or a
 * Redis server, what each store reads from its URL (`schema`, `prefix`), and
 * how to show one without its password. A URL's scheme is
 * read as URLs read it, in any case, and surrounding whitespace (what
 * `QUEUE_DB= postgres://…` in a .env file leaves) does not hide it; and
 * when `DATABASE_URL` names the queue's database. Imports no driver, so
 * reading them never loads a driver.
 *
 * @internal
 * @module
 */
import { readableEnv } from "../readable_env.ts";
import { shown } from "../shown.ts";

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

/**
 * What the PostgreSQL store reads from `url` (a `postgres://` URL): the
 * queue's schema (`schemaOption` if given, else the `schema` parameter,
 * else `public`) and the URL for the driver, without that parameter (the
 * driver would send it to the server as a setting of that name). Throws a
 * `TypeError` naming what is wrong: the parameter given twice, a
 * `search_path` (the store sets its own), a schema that is not a name.
 * The CLI reads `--db` with it, so a bad one is a usage error.
 */
export function postgresUrlParts(
  url: string,
  schemaOption?: string,
): { server: string; schema: string } {
  let parsed: URL | null = null;
  try {
    parsed = new URL(url);
  } catch {
    // The driver reads URLs the URL parser refuses (several hosts): no parameter of ours there.
  }
  if (parsed !== null && parsed.searchParams.getAll("schema").length > 1) {
    throw new TypeError(`url takes the schema parameter once: got ${shown(redactPassword(url))}`);
  }
  // The driver would send it over the store's own, and the queue's tables would go there.
  const options = parsed?.searchParams.get("options") ?? "";
  if (parsed?.searchParams.has("search_path") || /search_path/i.test(options)) {
    throw new TypeError(
      `url sets search_path, which the store sets itself to the queue's schema: give the schema parameter (or the schema option) instead: got ${
        shown(redactPassword(url))
      }`,
    );
  }
  const ofUrl = parsed?.searchParams.get("schema") ?? undefined;
  const schema = schemaOption ?? ofUrl ?? "public";
  // Lower case only (the unquoted name in search_path is folded to lower case), and short
  // enough that "renox_queue_" + schema is a valid NOTIFY channel (63 bytes).
  if (typeof schema !== "string" || !/^[a-z_][a-z0-9_]{0,50}$/.test(schema)) {
    throw new TypeError(
      `schema must be 1 to 51 lower-case letters, digits and underscores, not starting with a digit: got ${
        shown(schema)
      }`,
    );
  }
  if (parsed === null || ofUrl === undefined) return { server: url, schema };
  parsed.searchParams.delete("schema");
  return { server: parsed.href, schema };
}

/**
 * What the Redis store reads from `url` (a `redis://` URL): the key prefix
 * (`prefixOption` if given, else the `prefix` parameter, else `renox`) and
 * the URL for the client, without that parameter. Throws a `TypeError`
 * naming what is wrong: not a URL, a path that is no database number, a
 * parameter other than `prefix` or `prefix` twice, a prefix of other
 * characters. The CLI reads `--db` with it, so a bad one is a usage error.
 */
export function redisUrlParts(
  url: string,
  prefixOption?: string,
): { server: string; prefix: string } {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    // The URL parser's own message quotes the whole URL, password included.
    throw new TypeError(`url is not a valid URL: got ${shown(redactPassword(url))}`);
  }
  if (!/^\/?(\d+)?$/.test(target.pathname)) {
    throw new TypeError(
      `url's path is a database number or nothing (redis://host:6379/0): got ${
        shown(target.pathname)
      } in ${shown(redactPassword(url))}`,
    );
  }
  const unread = [...new Set(target.searchParams.keys())].filter((name) => name !== "prefix");
  if (unread.length > 0 || target.searchParams.getAll("prefix").length > 1) {
    throw new TypeError(
      `url takes one parameter, prefix, once: got ${
        shown(redactPassword(url))
      } (a parameter the store does not read would be ignored, and a misspelt prefix would open another queue)`,
    );
  }
  const prefix = prefixOption ?? target.searchParams.get("prefix") ?? "renox";
  if (typeof prefix !== "string" || !/^[A-Za-z0-9_.:-]{1,100}$/.test(prefix)) {
    throw new TypeError(
      `prefix must be 1 to 100 letters, digits, "_", "-", "." and ":": got ${shown(prefix)}`,
    );
  }
  target.searchParams.delete("prefix");
  return { server: target.href, prefix };
}
