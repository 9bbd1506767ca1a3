/**
 * The PostgreSQL server a bench ran against, printed with its figures: its
 * version and the settings that decide what a commit waits for. Free of the
 * driver, so that the report can import it on SQLite too.
 *
 * @module
 */

/** Version and durability settings of the server, as a plain connection sees them. */
export interface PostgresServer {
  /** The URL, password hidden. */
  readonly url: string;
  /** `server_version`. */
  readonly version: string;
  /** `synchronous_commit`: with `on`, every commit waits for its WAL to reach the disk. */
  readonly synchronousCommit: string;
  /** `fsync`. */
  readonly fsync: string;
  /** `wal_sync_method`. */
  readonly walSyncMethod: string;
}

/** The statement that reads a {@linkcode PostgresServer}'s settings, one row. */
export const SERVER_SETTINGS = `SELECT current_setting('server_version') AS version,
  current_setting('synchronous_commit') AS synchronous_commit,
  current_setting('fsync') AS fsync, current_setting('wal_sync_method') AS wal_sync_method`;

/** One line: `PostgreSQL 15.2 at postgres://… · synchronous_commit on, fsync on (fdatasync) …`. */
export function formatPostgresServer(server: PostgresServer): string {
  return `PostgreSQL ${server.version} at ${server.url} · synchronous_commit ` +
    `${server.synchronousCommit}, fsync ${server.fsync} (${server.walSyncMethod}), the server's ` +
    `defaults, for the store and the raw rows alike`;
}

/** How the PostgreSQL rows were run, for the report's footnote. */
export const POSTGRES_METHOD_NOTE =
  ` PostgreSQL: every row runs the job count in its label; the multi-process drains start ` +
  `their worker processes (each a \`deno run\` opening the queue) untimed, tell them all to go ` +
  `at once, and time from go until the last one found the queue empty. The pick-up poll-only ` +
  `baseline hides the store's watch(), so its worker never LISTENs.`;
