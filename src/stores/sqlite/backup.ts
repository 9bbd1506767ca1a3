/**
 * Copying a live SQLite database to a new file: SQLite's online backup
 * API, in one step, from a read-only connection of its own. One step is one
 * read transaction, so the copy is the database as of one commit, whatever
 * other connections and processes write meanwhile (in WAL mode readers and
 * writers do not wait for each other); a copy made in several steps would
 * start again after every commit of another connection, and never end under
 * a busy worker.
 *
 * Not `VACUUM INTO`: under Deno it works only with every permission granted
 * (`-A`); with `--allow-read`/`--allow-write` scoped to a folder it fails
 * with "too many attached databases - max 0", because SQLite would write its
 * target past Deno's permission checks. The backup API opens its target
 * through them.
 *
 * The copy is written to a temporary file beside the target and then
 * hard-linked to the target's name, which fails if that name exists: a
 * backup never overwrites a file, and a backup killed halfway leaves a
 * `.partial-…` file, never a target that looks whole.
 *
 * @internal
 * @module
 */
import { backup, DatabaseSync } from "node:sqlite";
import { dirname, resolve } from "node:path";
import { shown } from "../../shown.ts";
import type { BackupResult } from "../store.ts";
import { isBusy } from "./connection.ts";

/** Whether `path`, as `SqliteStore.open` took it, names a database that lives in memory only. */
function inMemory(path: string): boolean {
  return path === ":memory:" ||
    (path.startsWith("file:") && (/^file::memory:/.test(path) || /[?&]mode=memory\b/.test(path)));
}

/**
 * Copies the database at `source` to the new file `target`, as of one
 * commit; `busyTimeoutMs` bounds the wait for a read lock. Rejects, writing
 * nothing, for a database in memory, a target that is not a plain file
 * path, a target that exists, or a target whose folder does not.
 */
export async function copyDatabase(
  source: string,
  target: string,
  busyTimeoutMs: number,
): Promise<BackupResult> {
  if (inMemory(source)) {
    throw new Error(
      `Cannot back up a database in memory (${shown(source)}): it lives only in this process; ` +
        "open the queue on a file to have something to back up (docs/backups.md)",
    );
  }
  if (
    typeof target !== "string" || target.trim() === "" || target === ":memory:" ||
    /^file:/i.test(target) || /^[a-z][a-z0-9+.-]*:\/\//i.test(target)
  ) {
    throw new TypeError(`Cannot back up to ${shown(target)}: give the path of a new file`);
  }
  const path = resolve(target);
  await assertFree(path);
  const partial = `${path}.partial-${crypto.randomUUID().slice(0, 8)}`;
  try {
    await copyInOneStep(source, partial, busyTimeoutMs);
    await Deno.link(partial, path);
  } catch (error) {
    if (error instanceof Deno.errors.AlreadyExists) throw exists(path);
    throw error;
  } finally {
    await removeIfThere(partial);
    await removeIfThere(`${partial}-journal`);
  }
  return { path, bytes: (await Deno.stat(path)).size };
}

/** Copies `source` to `target` in one backup step, trying again while SQLite answers busy. */
async function copyInOneStep(source: string, target: string, busyTimeoutMs: number): Promise<void> {
  const deadline = Date.now() + busyTimeoutMs;
  const db = new DatabaseSync(source, { readOnly: true, timeout: Math.min(50, busyTimeoutMs) });
  try {
    for (let pauseMs = 2;; pauseMs = Math.min(pauseMs * 2, 50)) {
      try {
        // rate -1: every page in one step, one read transaction.
        await backup(db, target, { rate: -1 });
        return;
      } catch (error) {
        if (!isBusy(error) || Date.now() >= deadline) throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  } finally {
    db.close();
  }
}

/** Throws unless nothing is at `path` and its folder exists. */
async function assertFree(path: string): Promise<void> {
  try {
    await Deno.lstat(path);
    throw exists(path);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  const folder = dirname(path);
  try {
    if ((await Deno.stat(folder)).isDirectory) return;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  throw new Deno.errors.NotFound(`Cannot back up to ${path}: no folder ${folder}`);
}

function exists(path: string): Error {
  return new Deno.errors.AlreadyExists(
    `Cannot back up to ${path}: the file exists, and a backup never overwrites one (choose a new name)`,
  );
}

async function removeIfThere(path: string): Promise<void> {
  try {
    await Deno.remove(path);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
}
