/**
 * Noticing that a file changed, shared by any number of listeners.
 *
 * It looks at the file's metadata every few milliseconds rather than using
 * the platform's file events: Deno's file watcher opens and closes each file
 * it reports on, and closing any handle to a file drops every POSIX lock this
 * process holds on it, which would break SQLite's locking of the database
 * (measured here: two processes then wrote at once and lost jobs). A stat
 * opens nothing.
 *
 * @internal
 * @module
 */

/** How often the file's metadata is read while someone listens. */
const LOOK_EVERY_MS = 10;

/**
 * Calls its listeners when a file's identity, size or modification time
 * changes. Looks only while it has listeners; where the file cannot be read
 * (no permission) it stops looking and stays silent, and callers fall back to
 * polling.
 */
export class FileWatch {
  readonly #path: string | null;
  readonly #listeners = new Set<() => void>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #last = "";

  /** Watches `path`; `null` watches nothing. */
  constructor(path: string | null) {
    this.#path = path;
  }

  /** Adds a listener; dispose the result to remove it. */
  add(listener: () => void): Disposable {
    this.#listeners.add(listener);
    this.#start();
    return {
      [Symbol.dispose]: () => {
        this.#listeners.delete(listener);
        if (this.#listeners.size === 0) this.close();
      },
    };
  }

  /** Stops looking (listeners stay registered but are no longer called). */
  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #start(): void {
    if (this.#timer !== undefined || this.#path === null) return;
    this.#last = this.#look(this.#path) ?? "";
    this.#timer = setInterval(() => {
      const now = this.#look(this.#path!);
      if (now === null) return this.close();
      if (now === this.#last) return;
      this.#last = now;
      for (const listener of this.#listeners) listener();
    }, LOOK_EVERY_MS);
  }

  /** The file's identity, size and time, `"missing"`, or null when it cannot be read. */
  #look(path: string): string | null {
    try {
      const info = Deno.statSync(path);
      return `${info.ino}:${info.size}:${info.mtime?.getTime()}`;
    } catch (error) {
      return error instanceof Deno.errors.NotFound ? "missing" : null;
    }
  }
}
