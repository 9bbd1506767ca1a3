/**
 * The rules for database URLs, in one place for the store, `Queue.open` and
 * the CLI: which strings name a PostgreSQL database or a Redis server, and how to show one
 * without its password. Imports nothing, so reading them never loads a driver.
 *
 * @internal
 * @module
 */

/** Whether `text` names a PostgreSQL database (`postgres://` or `postgresql://`). */
export function isPostgresUrl(text: string): boolean {
  return /^postgres(ql)?:\/\//.test(text);
}

/** `text` with a URL's password replaced by `***`, for messages and status lines. */
export function redactPassword(text: string): string {
  return text.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*):[^@]*@/i, "$1:***@");
}

/** Whether `text` names a Redis server (`redis://` or `rediss://`). */
export function isRedisUrl(text: string): boolean {
  return /^rediss?:\/\//.test(text);
}

/** Whether `text` names a database served over the network (PostgreSQL or Redis), not a file. */
export function isServerUrl(text: string): boolean {
  return isPostgresUrl(text) || isRedisUrl(text);
}
