/**
 * Which PostgreSQL server `deno task bench --store postgres` measures: the
 * `--postgres-url` flag, else the environment the tests read, else a local
 * default.
 *
 * @module
 */

/** The server used when neither the flag nor the environment names one. */
export const DEFAULT_POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/test";

/**
 * The URL to measure: `flag` when given, else `QUEUE_TEST_POSTGRES_URL`,
 * else `DATABASE_URL` when it is a `postgres://` URL, else
 * {@linkcode DEFAULT_POSTGRES_URL}. `env` reads one variable.
 */
export function resolvePostgresUrl(
  flag: string | null,
  env: (name: string) => string | undefined,
): string {
  if (flag !== null) return flag;
  const test = env("QUEUE_TEST_POSTGRES_URL");
  if (test) return test;
  const database = env("DATABASE_URL");
  if (database && isPostgresUrl(database)) return database;
  return DEFAULT_POSTGRES_URL;
}

/** Whether `url` names a PostgreSQL server. */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//.test(url);
}

/** `url` with its password replaced, for the report. */
export function redactPostgresUrl(url: string): string {
  return url.replace(/\/\/([^:/@]*):[^@]*@/, "//$1:***@");
}
