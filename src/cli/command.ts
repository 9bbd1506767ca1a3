/**
 * The shape every CLI command shares (its flags, its help, how it runs) and
 * the help text built from it.
 *
 * @module
 * @internal
 */
import { isAbsolute, relative } from "node:path";
import { fileURLToPath } from "node:url";
import type { Flag, ParsedArgs } from "./args.ts";

/** One command of the CLI. */
export interface Command {
  /** What the user types: `work`, `retry`. */
  readonly name: string;
  /** What follows the name in the usage line, e.g. `<id…|all>`; empty for nothing. */
  readonly operands: string;
  /** One line for the list of commands. */
  readonly summary: string;
  /** The paragraphs of its `--help` after the usage line. */
  readonly description: string;
  /** Its own flags; {@linkcode COMMON_FLAGS} are added to every command. */
  readonly flags: Readonly<Record<string, Flag>>;
  /** Runs it; resolves with the exit code. */
  run(args: ParsedArgs): Promise<number>;
}

/** Flags every command takes. */
export const COMMON_FLAGS: Readonly<Record<string, Flag>> = {
  db: {
    type: "string",
    value: "DB",
    help:
      "a SQLite file, a postgres:// URL or a redis:// URL (?schema= names the PostgreSQL schema, ?prefix= the Redis store's prefix; default: $QUEUE_DB, else $DATABASE_URL if it is a postgres:// URL, else ./.renox/queue.db in the current folder)",
  },
  verbose: { type: "boolean", help: "print the stack of an error" },
  help: { type: "boolean", short: "h", help: "print this help" },
};

/** The published CLI's URL on JSR, whatever its version: `https://jsr.io/@renox/queue/1.2.3/src/cli.ts`. */
const JSR_CLI = /^https:\/\/jsr\.io\/@renox\/queue\/[^/]+\/src\/cli\.ts$/;

/**
 * How the CLI was started, for usage lines: `deno run -A jsr:@renox/queue/cli`
 * for the published module, else what was run (the main module's path from
 * the current folder, or its URL).
 */
export const PROGRAM: string = programFor(
  new URL("../cli.ts", import.meta.url).href,
  Deno.mainModule,
  currentFolder(),
);

/**
 * The command that starts the CLI whose module is `cliUrl`, run with
 * `mainUrl` as its main module (the CLI itself, or a script that calls
 * `main()`), from `cwd` (null when unknown). @internal
 */
export function programFor(cliUrl: string, mainUrl: string, cwd: string | null): string {
  const started = mainUrl === "" ? cliUrl : mainUrl;
  if (started.startsWith("jsr:@renox/queue") || JSR_CLI.test(started)) {
    return "deno run -A jsr:@renox/queue/cli";
  }
  if (!started.startsWith("file:")) return `deno run -A ${started}`;
  const path = fileURLToPath(started);
  if (cwd === null) return `deno run -A ${path}`;
  const fromHere = relative(cwd, path);
  if (fromHere.startsWith("..") || isAbsolute(fromHere)) return `deno run -A ${path}`;
  return `deno run -A ${fromHere.startsWith(".") ? fromHere : `./${fromHere}`}`;
}

/** The current folder, or null without permission to read it. */
function currentFolder(): string | null {
  try {
    return Deno.cwd();
  } catch {
    return null;
  }
}

/** The exit codes of every command. */
export const EXIT = {
  /** Done. */
  ok: 0,
  /** Failed: the error was printed. */
  failure: 1,
  /** Bad command-line input: starting again would fail the same way. */
  usage: 2,
  /** A job was stuck in synchronous code: the worker process must be replaced. */
  stuck: 3,
  /**
   * The database has a contract schema step newer than this code (sysexits'
   * EX_TEMPFAIL): restart the process on the new version. A supervisor that
   * restarts on any exit brings up the new code; `work`'s own supervisor
   * passes it on rather than starting the same old code again.
   */
  outdated: 75,
} as const;

/** The exit codes, as every help text lists them. */
export const EXIT_CODES = `Exit codes:
  0  done (a worker stopped by a signal, a limit, or an empty queue also exits 0)
  1  failed: the error is printed on one line (--verbose adds its stack)
  2  usage error: unknown command or flag, missing or extra argument, bad value
  3  a job was stuck in synchronous code and could not be stopped: restart the worker
  75 the database has a contract schema step newer than this code (a worker stopped claiming and
     finished its running jobs first): restart it on the new version (docs/upgrading.md)`;

/** The `--help` text of `command`. */
export function commandHelp(command: Command): string {
  const operands = command.operands === "" ? "" : ` ${command.operands}`;
  const flags = { ...command.flags, ...COMMON_FLAGS };
  const rows = Object.entries(flags).map(([name, flag]) => {
    const short = flag.short === undefined ? "    " : `-${flag.short}, `;
    return [`${short}--${name}${flag.value === undefined ? "" : ` ${flag.value}`}`, flag.help];
  });
  const width = Math.max(...rows.map(([left]) => left!.length));
  return [
    `Usage: ${PROGRAM} ${command.name}${operands} [flags]`,
    "",
    command.description,
    "",
    "Flags:",
    ...rows.map(([left, help]) => `  ${left!.padEnd(width)}  ${help}`),
    "",
    EXIT_CODES,
  ].join("\n");
}
