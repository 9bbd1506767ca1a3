/**
 * Keeping the WAL small. A commit checkpoints every 1,000 pages (10,000
 * while a checkpoint thread runs: `./checkpoint_thread.ts`), but a reader
 * that holds a read transaction pins the WAL: it grows for as long as the
 * reader holds on, and SQLite never shrinks the file again, it only reuses
 * it. So every connection sets `journal_size_limit` (the WAL is
 * cut back to {@linkcode WAL_CAP_BYTES} whenever it restarts from the
 * beginning), and once no process has written to the WAL for
 * {@linkcode IDLE_CHECKPOINT_MS} (its size and modification time stay put),
 * each open connection runs `PRAGMA wal_checkpoint(TRUNCATE)`, which empties
 * it. The checkpoint waits for other connections only as long as the
 * connection's short busy timeout; a busy one is tried at the next quiet
 * moment.
 *
 * @internal
 * @module
 */
import type { DatabaseSync } from "node:sqlite";

/**
 * The size the WAL is cut back to whenever it restarts: 48 MiB, above the
 * 10,000 pages of 4 KiB a commit lets it take while a checkpoint thread
 * runs, so that a WAL of a steady stream of writes is reused as it is
 * rather than cut and grown again.
 */
export const WAL_CAP_BYTES = 48 * 1024 * 1024;

/** How long the WAL goes unwritten before a connection empties it. */
export const IDLE_CHECKPOINT_MS = 1_000;

/** Empties the WAL of `walPath` through `db` whenever it has been quiet for a while. */
export class IdleCheckpoint {
  readonly #db: DatabaseSync;
  readonly #walPath: string;
  readonly #mayRun: () => boolean;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** The WAL's size and modification time at the last look, and since when they held. */
  #seen = "";
  #seenSince = 0;
  #closed = false;

  /** Checkpoints through `db` when `mayRun()` says the connection is free (no transaction open). */
  constructor(db: DatabaseSync, walPath: string, mayRun: () => boolean) {
    this.#db = db;
    this.#walPath = walPath;
    this.#mayRun = mayRun;
  }

  /** Starts looking (once the connection is in use). */
  start(): void {
    if (this.#timer !== undefined || this.#closed) return;
    this.#timer = setInterval(() => this.#look(), IDLE_CHECKPOINT_MS / 2);
    Deno.unrefTimer(this.#timer);
  }

  /** Stops looking, for good. */
  close(): void {
    this.#closed = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #look(): void {
    let seen: string;
    try {
      const { size, mtime } = Deno.statSync(this.#walPath);
      if (size === 0) return;
      seen = `${size}:${mtime?.getTime()}`;
    } catch {
      return; // no WAL (yet), or no permission to look: SQLite's own checkpoints remain
    }
    const now = performance.now();
    if (seen !== this.#seen) {
      this.#seen = seen;
      this.#seenSince = now;
      return;
    }
    if (now - this.#seenSince < IDLE_CHECKPOINT_MS || !this.#mayRun()) return;
    try {
      // Busy (a writer, or a reader on an old snapshot): the file is unchanged, try next look.
      this.#db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    } catch {
      // a full or read-only disk: the writes themselves report it
    }
    this.#seenSince = now;
  }
}
