/**
 * SQLite's errors about the database file, reworded to name the file and
 * the cause: for a database that cannot take writes, "database or disk is
 * full", "attempt to write a readonly database", and the bare "disk I/O
 * error" that a file made read-only under an open connection gives; for a
 * file being opened, every error SQLite gives (not a database, cannot open,
 * damaged). The original stays as `cause`, with its code.
 *
 * @internal
 * @module
 */
import { dirname } from "node:path";

const SQLITE_READONLY = 8;
const SQLITE_IOERR = 10;
const SQLITE_CORRUPT = 11;
const SQLITE_FULL = 13;
const SQLITE_CANTOPEN = 14;
const SQLITE_NOTADB = 26;

/** The cause told for an I/O error that no read-only file explains. */
const IO_ERROR = "the file system reported an I/O error";

/** What SQLite's code `errcode` says of a write that failed, or null when it is no such code. */
function explainedWrite(errcode: number): string | null {
  switch (errcode & 0xff) {
    case SQLITE_FULL:
      return "the disk is full";
    case SQLITE_READONLY:
      return "the database is read-only";
    default:
      return null;
  }
}

/**
 * SQLite's error on opening `path` as one that names the file and, where
 * SQLite's words do not, the cause; any other error as it is.
 */
export function explainOpenError(error: unknown, path: string): unknown {
  if (!(error instanceof Error)) return error;
  const errcode = codeOf(error);
  if (errcode === null) return error;
  let cause: string;
  switch (errcode & 0xff) {
    case SQLITE_NOTADB:
      cause = "it is not a SQLite database";
      break;
    case SQLITE_CANTOPEN:
      cause = readOnlyFolder(path) ??
        "SQLite cannot open it (can this process read it, and write its folder, where SQLite keeps its -wal and -shm files?)";
      break;
    case SQLITE_CORRUPT:
      cause = "the file is damaged: restore it from a backup (docs/backups.md)";
      break;
    default:
      cause = explainedWrite(errcode) ?? "SQLite refused it";
  }
  return Object.assign(
    new Error(`Cannot open the queue database ${path}: ${cause} (SQLite: ${error.message})`, {
      cause: error,
    }),
    { errcode },
  );
}

/** `error` as a clearer error naming the cause when SQLite could not write `path`; else `error`. */
export function explainWriteError(error: unknown, path: string): unknown {
  if (!(error instanceof Error)) return error;
  const errcode = codeOf(error);
  if (errcode === null) return error;
  const cause = explainedWrite(errcode) ??
    ((errcode & 0xff) === SQLITE_IOERR ? readOnlyFile(path) ?? IO_ERROR : null);
  if (cause === null) return error;
  const wrapped = new Error(
    `Cannot write the queue database ${path}: ${cause} (${error.message})`,
    {
      cause: error,
    },
  );
  return Object.assign(wrapped, { errcode });
}

/**
 * SQLite's result code of `error`: node:sqlite sets `errcode` on a
 * statement's error, but not on `exec()`'s (a failed `COMMIT`), whose
 * message is then the only sign.
 */
function codeOf(error: Error): number | null {
  const errcode = (error as { errcode?: unknown }).errcode;
  if (typeof errcode === "number") return errcode;
  if ((error as { code?: unknown }).code !== "ERR_SQLITE_ERROR") return null;
  if (/database or disk is full/i.test(error.message)) return SQLITE_FULL;
  if (/readonly database/i.test(error.message)) return SQLITE_READONLY;
  if (/disk I\/O error/i.test(error.message)) return SQLITE_IOERR;
  if (/^file is not a database$/i.test(error.message)) return SQLITE_NOTADB;
  if (/unable to open database file/i.test(error.message)) return SQLITE_CANTOPEN;
  if (/database disk image is malformed/i.test(error.message)) return SQLITE_CORRUPT;
  return null;
}

/** Why SQLite cannot make its files beside `path` (its folder is read-only), or null. */
function readOnlyFolder(path: string): string | null {
  if (path === ":memory:" || path.startsWith("file:")) return null;
  const probe = `${dirname(path)}/.renox-write-check-${crypto.randomUUID()}`;
  try {
    Deno.openSync(probe, { write: true, createNew: true }).close();
    Deno.removeSync(probe);
    return null;
  } catch (error) {
    return error instanceof Deno.errors.PermissionDenied ||
        /read-only|not permitted/i.test(String(error))
      ? `its folder ${dirname(path)} is read-only, and SQLite keeps its -wal and -shm files there`
      : null;
  }
}

/** Why `path` or its WAL cannot be written now (read-only), or null when both can. */
function readOnlyFile(path: string): string | null {
  if (path === ":memory:" || path.startsWith("file:")) return null;
  for (const file of [path, `${path}-wal`]) {
    try {
      Deno.openSync(file, { write: true }).close();
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) continue;
      if (
        error instanceof Deno.errors.PermissionDenied ||
        /read-only|not permitted/i.test(String(error))
      ) {
        return `${file} is read-only`;
      }
    }
  }
  return null;
}
