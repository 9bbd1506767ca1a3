/**
 * A fresh PostgreSQL schema for each run of a measurement, so that no run
 * inherits another's tables, dead tuples or statistics: the PostgreSQL
 * counterpart of a fresh temp-file database.
 *
 * @module
 */
import postgres from "postgres";

/** The driver's connection, with the bigint parsing the store uses. */
export type RawSql = postgres.Sql<Record<string, never>>;
/** A transaction of a {@linkcode RawSql} connection. */
export type RawTransaction = postgres.TransactionSql<Record<string, never>>;

/**
 * Connects to `url` as the store does (its bigint parsing, notices
 * ignored), with `schema` first on the search path when given. No session
 * setting is changed: commits are as durable as the server's defaults make
 * them, the same as the store's.
 */
export function connectRaw(url: string, options: { schema?: string; max?: number } = {}): RawSql {
  return postgres(url, {
    max: options.max ?? 1,
    onnotice: () => {},
    ...(options.schema !== undefined &&
      { connection: { search_path: options.schema, application_name: "renox-queue-bench" } }),
    types: { bigint: { to: 20, from: [20], serialize: String, parse: Number } },
  }) as unknown as RawSql;
}

/**
 * Calls `fn` with the name of a schema no one uses (it does not exist yet),
 * and drops it with everything in it once `fn` has settled. `fn` must close
 * its connections, and stop its processes, before it returns.
 */
export async function withTempSchema<T>(
  url: string,
  fn: (schema: string) => Promise<T>,
): Promise<T> {
  const schema = `bench_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  try {
    return await fn(schema);
  } finally {
    const admin = connectRaw(url);
    try {
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    } finally {
      await admin.end({ timeout: 5 });
    }
  }
}
