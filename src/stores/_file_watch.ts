/**
 * Watching one file for changes with the platform's file events (inotify on
 * Linux), shared by any number of listeners.
 *
 * @internal
 * @module
 */
import { basename, dirname, resolve } from "node:path";

/**
 * Calls its listeners when a file changes. Watches the file's folder, since
 * the file may not exist yet; starts with the first listener and stops with
 * the last. Where watching is not possible (no permission, no file events)
 * it stays silent and callers fall back to polling.
 */
export class FileWatch {
  readonly #path: string | null;
  readonly #listeners = new Set<() => void>();
  #watcher: Deno.FsWatcher | null = null;

  /** Watches `path`; `null` watches nothing. */
  constructor(path: string | null) {
    this.#path = path === null ? null : resolve(path);
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

  /** Stops watching (listeners stay registered but are no longer called). */
  close(): void {
    this.#watcher?.close();
    this.#watcher = null;
  }

  #start(): void {
    if (this.#watcher !== null || this.#path === null) return;
    const name = basename(this.#path);
    let watcher: Deno.FsWatcher;
    try {
      watcher = Deno.watchFs(dirname(this.#path), { recursive: false });
    } catch {
      return; // no permission or no file events here: polling covers it
    }
    this.#watcher = watcher;
    (async () => {
      for await (const event of watcher) {
        if (!event.paths.some((path) => basename(path) === name)) continue;
        for (const listener of this.#listeners) listener();
      }
    })().catch(() => {});
  }
}
