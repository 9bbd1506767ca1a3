/**
 * The `backup <file>` command: a consistent copy of the queue's SQLite
 * database in a new file, made while workers run (`Queue.backup()`). On
 * PostgreSQL and Redis it fails, naming the server's own tools.
 *
 * @module
 * @internal
 */
import { openAdminQueue } from "./admin.ts";
import { expectPositionals, type ParsedArgs, readDb, UsageError } from "./args.ts";
import { type Command, EXIT } from "./command.ts";
import { redactPassword } from "../stores/database_url.ts";
import { shown } from "../shown.ts";

/** `backup <file>`. */
export const backupCommand: Command = {
  name: "backup",
  operands: "<file>",
  summary: "copy the SQLite database to a new file while workers run",
  description:
    "Writes a consistent copy of the SQLite database (--db) to <file>, a new file, while workers go on:\nthe copy is the database as of one commit. A file that exists is refused, never overwritten.\nRestoring: stop every worker, put the copy in place of the database, remove the old -wal and -shm\nfiles, start the workers (docs/backups.md). On PostgreSQL and Redis it fails and names the\nserver's own tools (pg_dump, pg_basebackup; BGSAVE, the AOF).",
  flags: {},
  async run(args) {
    expectPositionals(args, 1, 1, "the backup file (<file>)");
    const file = readBackupFile(args);
    await using queue = await openAdminQueue(args);
    const started = performance.now();
    const { path, bytes } = await queue.backup(file);
    const ms = Math.round(performance.now() - started);
    console.log(
      `Backed up ${redactPassword(readDb(args))} to ${path} (${
        bytes.toLocaleString("en-US")
      } bytes) in ${ms} ms`,
    );
    return EXIT.ok;
  },
};

/** The `<file>` operand: a file path, not empty, not `:memory:`, not a URL. */
function readBackupFile(args: ParsedArgs): string {
  const file = args.positionals[0]!;
  if (file.trim() === "" || file === ":memory:" || /^([a-z][a-z0-9+.-]*:\/\/|file:)/i.test(file)) {
    throw new UsageError(
      args.command,
      `<file> must be the path of a new file: got ${shown(file)}`,
    );
  }
  return file;
}
