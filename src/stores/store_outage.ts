/**
 * Telling an outage from a refusal: an error that says the database cannot
 * take writes right now (the disk is full, the file is read-only, an I/O
 * error, a lock held too long, the connection lost, the server shutting
 * down or, on Redis, loading its data) holds for every settle of a tick, so
 * the runner keeps them all and tries again; any other error may be about
 * one job's row only.
 *
 * @internal
 * @module
 */
import { QueueClosedError, QueueMovedError } from "../errors.ts";

/** SQLite's primary result codes that mean the database, not the row: BUSY, LOCKED, NOMEM, READONLY, IOERR, FULL, CANTOPEN. */
const SQLITE_OUTAGE_CODES = new Set([5, 6, 7, 8, 10, 13, 14]);

/** SQLite's messages for those codes. */
const SQLITE_OUTAGE_MESSAGE =
  /database or disk is full|readonly database|disk I\/O error|database (table )?is locked|unable to open database file|out of memory/i;

/** The Redis store's code for a server that cannot run scripts now (loading its data, busy, a replica). */
const REDIS_UNAVAILABLE = "REDIS_UNAVAILABLE";

/** PostgreSQL's SQLSTATE classes and codes for a server that cannot serve now. */
const POSTGRES_OUTAGE =
  /^(08[0-9A-Z]{3}|53[0-9A-Z]{3}|57P0[123]|58[0-9A-Z]{3}|25006|40001|40P01|55P03)$/;

/**
 * Driver and socket errors of a connection that is gone or cannot be made;
 * `REDIS_UNREACHABLE` is the Redis store's (its client's errors carry no code).
 */
const CONNECTION_CODES = new Set([
  "REDIS_UNREACHABLE",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENOTFOUND",
]);
const CONNECTION_NAMES =
  /^(ConnectionRefused|ConnectionReset|ConnectionAborted|BrokenPipe|TimedOut|NotConnected|Interrupted|QueueClosedError)$/;

/** PostgreSQL's SQLSTATEs of a connection that failed or that the server ended. */
const POSTGRES_CONNECTION = /^(08[0-9A-Z]{3}|57P0[123])$/;

/**
 * Whether PostgreSQL failed the statement only, its connection still
 * serving: a connection the server ends or refuses is FATAL, while an
 * ERROR of class 08 is about the statement (a Bind with fewer parameters
 * than the app's statement takes, 08P01; dblink failing to connect).
 */
function statementOnly(error: Error): boolean {
  return (error as { severity?: unknown }).severity === "ERROR";
}

/** Whether `error` (or an error it wraps) says the connection to the server failed or was cut. */
export function isConnectionLost(error: unknown): boolean {
  for (let depth = 0; error instanceof Error && depth < 5; depth++) {
    const { code } = error as { code?: unknown };
    if (
      typeof code === "string" &&
      (CONNECTION_CODES.has(code) || (POSTGRES_CONNECTION.test(code) && !statementOnly(error)))
    ) {
      return true;
    }
    if (CONNECTION_NAMES.test(error.name)) return true;
    error = error.cause;
  }
  return false;
}

/** Whether `error` (or an error it wraps) says the database cannot take writes now. */
export function isStoreOutage(error: unknown): boolean {
  if (isConnectionLost(error)) return true;
  for (let depth = 0; error instanceof Error && depth < 5; depth++) {
    const { errcode, code } = error as { errcode?: unknown; code?: unknown };
    if (typeof errcode === "number" && SQLITE_OUTAGE_CODES.has(errcode & 0xff)) return true;
    if (
      typeof code === "string" && POSTGRES_OUTAGE.test(code) &&
      !(code.startsWith("08") && statementOnly(error))
    ) {
      return true;
    }
    if (code === REDIS_UNAVAILABLE) return true;
    // node:sqlite's exec() (a failed COMMIT) sets no errcode: its message is the only sign.
    if (code === "ERR_SQLITE_ERROR" && SQLITE_OUTAGE_MESSAGE.test(error.message)) return true;
    error = error.cause;
  }
  return false;
}

/**
 * Whether `error` says the store cannot answer for now, and a later read
 * may: not a closed queue, which the outage test counts as a lost
 * connection (for the workers' sake) but which never answers again, nor a
 * moved one.
 */
export function isPassingOutage(error: unknown): boolean {
  if (error instanceof QueueClosedError || error instanceof QueueMovedError) return false;
  return isStoreOutage(error);
}
