/**
 * A fresh PostgreSQL database for each run of a PostgreSQL peer, so that a
 * peer keeps its default schema names and no run inherits another's tables,
 * dead tuples or statistics; dropped (its connections cut) afterwards.
 *
 * @module
 */
import { connectRaw } from "../postgres_schema.ts";

/**
 * Creates a database no one uses on the server of `url`, calls `fn` with a
 * URL to it, and drops it once `fn` has settled. `fn` should close its
 * connections first; any it left open are cut by the drop.
 */
export async function withFreshDatabase<T>(
  url: string,
  fn: (databaseUrl: string) => Promise<T>,
): Promise<T> {
  const name = `bench_peer_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = connectRaw(url);
  try {
    await admin.unsafe(`CREATE DATABASE "${name}"`);
    try {
      const databaseUrl = new URL(url);
      databaseUrl.pathname = `/${name}`;
      return await fn(databaseUrl.href);
    } finally {
      await admin.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    }
  } finally {
    await admin.end({ timeout: 5 });
  }
}
