/**
 * SQLite's errors about the database file, reworded to name the file and
 * the cause: for a database that cannot take writes, "database or disk is
 * full", "attempt to write a readonly database", and the bare "disk I/O
 * error" that a file made read-only under an open connection gives; for a
 * file being opened, "file is not a database". The original stays as
 * `cause`, with its code.
 *
 * @internal
 * @module
 */

const SQLITE_READONLY = 8;
const SQLITE_IOERR = 10;
const SQLITE_FULL = 13;
const SQLITE_NOTADB = 26;

/** `error` as an error naming `path` when SQLite found it is not a database; else `error`. */
export function explainOpenError(error: unknown, path: string): unknown {
  if (!(error instanceof Error) || ((codeOf(error) ?? 0) & 0xff) !== SQLITE_NOTADB) return error;
  return new Error(`Cannot open ${path}: it is not a SQLite database (SQLite: ${error.message})`, {
    cause: error,
  });
}

/** `error` as a clearer error naming the cause when SQLite could not write `path`; else `error`. */
export function explainWriteError(error: unknown, path: string): unknown {
  if (!(error instanceof Error)) return error;
  const errcode = codeOf(error);
  if (errcode === null) return error;
  const primary = errcode & 0xff;
  let cause: string;
  if (primary === SQLITE_FULL) cause = "the disk is full";
  else if (primary === SQLITE_READONLY) cause = "the database is read-only";
  else if (primary === SQLITE_IOERR) {
    cause = readOnlyFile(path) ?? "the file system reported an I/O error";
  } else return error;
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
  return null;
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
