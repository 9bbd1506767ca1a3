/**
 * Noticing that the database file was deleted or replaced under an open
 * connection. SQLite goes on with the file it opened: deleted, it lives on
 * unlinked until the connection closes; replaced (`mv backup.db jobs.db`),
 * the other processes open the new file. Either way this process would
 * write where no one reads, and its jobs would vanish when it exits, so
 * from the moment the path names another file or none every call fails
 * with one error that says so (Redis's store does the same when its server
 * comes back without its data).
 *
 * @internal
 * @module
 */
import { resolve } from "node:path";

/** The least time between two looks at the path: a call pays a clock read, not a stat. */
const LOOK_EVERY_MS = 1_000;

/** The file a connection opened, checked at most once a second to be the one at its path. */
export class FileIdentity {
  readonly #path: string;
  /** The opened file's device and inode; null where they cannot be read (nothing is checked). */
  readonly #opened: string | null;
  #lookedAt = performance.now();
  #replaced: Error | null = null;

  /** Notes the identity of the file now at `path` (just opened). */
  constructor(path: string) {
    this.#path = resolve(path);
    const opened = identity(this.#path);
    this.#opened = opened === "none" ? null : opened;
  }

  /** Throws once the path names another file or none (looked at most once a second). */
  assertSame(): void {
    if (this.#replaced !== null) throw this.#replaced;
    if (this.#opened === null) return;
    const now = performance.now();
    if (now - this.#lookedAt < LOOK_EVERY_MS) return;
    this.#lookedAt = now;
    const current = identity(this.#path);
    if (current === null || current === this.#opened) return;
    this.#replaced = new Error(
      `The SQLite file ${this.#path} was ${
        current === "none" ? "deleted" : "replaced by another file"
      } while this queue had it open: this process's writes would go to a file no one else ` +
        "reads. Close the queue and open it again (restart the process) to use the file at the " +
        "path now; stop every worker before restoring a backup over the file (docs/backups.md)",
    );
    throw this.#replaced;
  }
}

/** `path`'s device and inode, `"none"` when no file is there, null when they cannot be read. */
function identity(path: string): string | null {
  try {
    const { dev, ino } = Deno.statSync(path);
    return ino === null ? null : `${dev}:${ino}`;
  } catch (error) {
    return error instanceof Deno.errors.NotFound ? "none" : null;
  }
}
