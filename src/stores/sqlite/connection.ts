/**
 * Opening a SQLite connection with the pragmas every connection needs, and
 * waiting out another process's write lock without blocking the event loop.
 *
 * @internal
 * @module
 */
import { DatabaseSync } from "node:sqlite";
import { dirname } from "node:path";
import { explainOpenError } from "./file_errors.ts";
import { WAL_CAP_BYTES } from "./wal_checkpoint.ts";

/** How hard a commit is made durable. */
export type Durability = "normal" | "full";

/** Longest single blocking wait inside SQLite before yielding to the event loop. */
const STEP_WAIT_MS = 50;

/**
 * Opens `path` (creating its folder) with WAL, the chosen `synchronous`
 * level, a short busy timeout and foreign keys on.
 */
export async function openConnection(
  path: string,
  durability: Durability,
  busyTimeoutMs: number,
): Promise<DatabaseSync> {
  if (path !== ":memory:" && !path.startsWith("file:")) {
    await Deno.mkdir(dirname(path), { recursive: true });
  }
  let db: DatabaseSync;
  try {
    db = new DatabaseSync(path, { timeout: Math.min(STEP_WAIT_MS, busyTimeoutMs) });
  } catch (error) {
    throw explainOpenError(error, path);
  }
  try {
    await retryWhileBusy(() => db.exec("PRAGMA journal_mode = WAL"), busyTimeoutMs);
    db.exec(`PRAGMA synchronous = ${durability === "full" ? "FULL" : "NORMAL"}`);
    db.exec("PRAGMA foreign_keys = ON");
    db.exec(`PRAGMA journal_size_limit = ${WAL_CAP_BYTES}`);
  } catch (error) {
    db.close();
    throw explainOpenError(error, path);
  }
  return db;
}

/** Whether `error` is SQLite saying another connection holds the lock. */
export function isBusy(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { errcode?: unknown }).errcode;
  if (typeof code === "number") return (code & 0xff) === 5 || (code & 0xff) === 6;
  return /database (table )?is locked|database is busy/i.test(error.message);
}

/**
 * Runs `step` (a whole transaction, or a single statement) and, while SQLite
 * answers busy, tries again after a short async pause until `timeoutMs`.
 * `beforeEachTry` may hold a try back, e.g. until the connection is free.
 */
export async function retryWhileBusy<T>(
  step: () => T,
  timeoutMs: number,
  beforeEachTry?: () => Promise<void> | undefined,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let pauseMs = 2;
  for (;;) {
    // Re-check after every wait: another caller may have taken the connection meanwhile.
    for (let wait = beforeEachTry?.(); wait !== undefined; wait = beforeEachTry?.()) await wait;
    try {
      return step();
    } catch (error) {
      if (!isBusy(error)) throw error;
      if (Date.now() >= deadline) {
        throw new Error(
          `Cannot use the SQLite database: another connection held its lock for over ${timeoutMs} ms`,
          { cause: error },
        );
      }
    }
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
    pauseMs = Math.min(pauseMs * 2, STEP_WAIT_MS);
  }
}
