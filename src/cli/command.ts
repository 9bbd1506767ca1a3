/**
 * The shape every CLI command shares (its flags, its help, how it runs) and
 * the help text built from it.
 *
 * @module
 * @internal
 */
import { relative } from "node:path";
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
      "a SQLite file or a postgres:// URL (default: $QUEUE_DB, else ./.renox/queue.db in the current folder)",
  },
  verbose: { type: "boolean", help: "print the stack of an error" },
  help: { type: "boolean", short: "h", help: "print this help" },
};

/**
 * How the CLI is started, for usage lines: `jsr:@renox/queue/cli` when it
 * comes from JSR, the path of its module when it runs from source.
 */
export const PROGRAM: string = program(new URL("../cli.ts", import.meta.url));

function program(cli: URL): string {
  if (cli.protocol !== "file:") return "deno run -A jsr:@renox/queue/cli";
  const path = fileURLToPath(cli);
  let shown = path;
  try {
    const fromHere = relative(Deno.cwd(), path);
    if (!fromHere.startsWith("..")) shown = fromHere.startsWith(".") ? fromHere : `./${fromHere}`;
  } catch {
    // no read permission for the current folder: the absolute path
  }
  return `deno run -A ${shown}`;
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
} as const;

/** The exit codes, as every help text lists them. */
export const EXIT_CODES = `Exit codes:
  0  done (a worker stopped by a signal, a limit, or an empty queue also exits 0)
  1  failed: the error is printed on one line (--verbose adds its stack)
  2  usage error: unknown command or flag, missing or extra argument, bad value
  3  a job was stuck in synchronous code and could not be stopped: restart the worker`;

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
