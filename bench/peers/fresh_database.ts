/**
 * A fresh PostgreSQL database for each run of a PostgreSQL peer, so that a
 * peer keeps its default schema names and no run inherits another's tables,
 * dead tuples or statistics; dropped (its connections cut) afterwards.
 *
 * @module
 */
import { connectRaw } from "../postgres_schema.ts";

/** How long the drop waits for a peer's connections to the database to close. */
const CLOSE_WAIT_MS = 10_000;

/** Waits until no connection to database `name` is left, or `CLOSE_WAIT_MS` passed. */
async function closedConnections(admin: ReturnType<typeof connectRaw>, name: string) {
  const deadline = Date.now() + CLOSE_WAIT_MS;
  while (Date.now() < deadline) {
    const [row] = await admin.unsafe(
      "SELECT COUNT(*)::int AS n FROM pg_stat_activity WHERE datname = $1",
      [name],
    );
    if (row?.n === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Creates a database no one uses on the server of `url`, calls `fn` with a
 * URL to it, and drops it once `fn` has settled. `fn` should close its
 * connections first; a peer's pool may still be ending them, so the drop
 * waits for them (up to `CLOSE_WAIT_MS`): one cut by the drop would be an
 * error event on that pool, which a peer without a listener throws
 * uncaught.
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
      await closedConnections(admin, name);
      await admin.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    }
  } finally {
    await admin.end({ timeout: 5 });
  }
}
