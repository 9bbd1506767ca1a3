/**
 * The command line of `@renox/queue`: the `work` command that runs jobs
 * (supervised, with graceful stops on SIGINT/SIGTERM), and admin commands on
 * the same database: `failed`, `retry`, `forget`, `flush`, `prune-failed`,
 * `clear`, `stats`, `migrate`, `backup` (a copy of the SQLite file made
 * while workers run), `logs`, `steps` and `signal` (a job's durable
 * steps, and a signal for its `ctx.waitFor`), and `dashboard`, which serves the
 * dashboard over HTTP.
 *
 * ```sh
 * deno run -A jsr:@renox/queue/cli work --jobs ./jobs.ts --queue high,default --concurrency 4
 * deno run -A jsr:@renox/queue/cli failed
 * deno run -A jsr:@renox/queue/cli retry all
 * deno run -A jsr:@renox/queue/cli migrate --plan
 * deno run -A jsr:@renox/queue/cli backup ./backups/queue-2026-12-04.db
 * deno run -A jsr:@renox/queue/cli signal 42 survey '{"score": 9}'
 * deno run -A jsr:@renox/queue/cli dashboard --port 8080
 * deno run -A jsr:@renox/queue/cli help work
 * ```
 *
 * Exit codes: 0 done, 1 failed, 2 usage error, 3 a worker was stuck in
 * synchronous code (restart it; the supervisor does), 75 the database has a
 * contract schema step newer than this code (a worker first finished its
 * running jobs; restart it on the new version: docs/upgrading.md).
 *
 * @example Run a command from code
 * ```ts
 * import { main } from "@renox/queue/cli";
 *
 * const db = await Deno.makeTempFile({ suffix: ".db" });
 * await main(["migrate", "--db", db]); // creates the queue
 * const code = await main(["stats", "--db", db, "--json"]);
 * console.log(code); // 0
 * ```
 *
 * @module
 */
import { OutdatedCodeError } from "./errors.ts";
import { ADMIN_COMMANDS } from "./cli/admin.ts";
import { type ParsedArgs, parseFlags, UsageError } from "./cli/args.ts";
import { backupCommand } from "./cli/backup.ts";
import { moveCommand } from "./cli/move.ts";
import { BATCH_COMMANDS } from "./cli/batches.ts";
import { FLOW_COMMANDS } from "./cli/flows.ts";
import { dashboardCommand } from "./cli/dashboard.ts";
import {
  type Command,
  commandHelp,
  COMMON_FLAGS,
  EXIT,
  EXIT_CODES,
  PROGRAM,
} from "./cli/command.ts";
import { JOB_CONTROL_COMMANDS } from "./cli/job_control.ts";
import { keyGenerate } from "./cli/key_generate.ts";
import { SCHEDULE_COMMANDS } from "./cli/schedules.ts";
import { logsCommand } from "./cli/logs.ts";
import { stats } from "./cli/stats.ts";
import { STEP_COMMANDS } from "./cli/steps.ts";
import { work } from "./cli/work.ts";

const help: Command = {
  name: "help",
  operands: "[command]",
  summary: "print the help of the CLI or of one command",
  description: "Prints the help of the CLI, or of one command.",
  flags: {},
  run(args: ParsedArgs) {
    const [name, ...extra] = args.positionals;
    if (extra.length > 0) {
      throw new UsageError(args.command, `unexpected argument ${JSON.stringify(extra[0])}`);
    }
    console.log(name === undefined ? overview() : commandHelp(find(name)));
    return Promise.resolve(EXIT.ok);
  },
};

const COMMANDS: readonly Command[] = [
  work,
  ...ADMIN_COMMANDS,
  backupCommand,
  moveCommand,
  ...BATCH_COMMANDS,
  ...FLOW_COMMANDS,
  ...SCHEDULE_COMMANDS,
  ...JOB_CONTROL_COMMANDS,
  logsCommand,
  ...STEP_COMMANDS,
  stats,
  dashboardCommand,
  keyGenerate,
  help,
];

function find(name: string): Command {
  const command = COMMANDS.find((candidate) => candidate.name === name);
  if (command === undefined) {
    throw new UsageError(null, `unknown command ${JSON.stringify(name)} (see --help)`);
  }
  return command;
}

function overview(): string {
  const width = Math.max(...COMMANDS.map(({ name }) => name.length));
  return [
    "@renox/queue: background jobs kept in a SQLite file, a PostgreSQL database or Redis",
    "",
    `Usage: ${PROGRAM} <command> [flags]`,
    "",
    "Commands:",
    ...COMMANDS.map(({ name, summary }) => `  ${name.padEnd(width)}  ${summary}`),
    "",
    `Every command takes ${Object.keys(COMMON_FLAGS).map((flag) => `--${flag}`).join(", ")}.`,
    `The database (a SQLite file, a postgres:// URL or a redis:// URL) is --db, else $QUEUE_DB, else`,
    `$DATABASE_URL if it is a postgres:// URL, else ./.renox/queue.db in the current folder.`,
    `"<command> --help" says more.`,
    "",
    EXIT_CODES,
  ].join("\n");
}

/**
 * Runs one command line (without the program name) and resolves with its
 * exit code: 0 done, 1 failed, 2 usage error, 3 a worker stopped stuck.
 * Errors are printed on one line to stderr (`--verbose` adds the stack).
 */
export async function main(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  if (name === undefined || name === "--help" || name === "-h") {
    (name === undefined ? console.error : console.log)(overview());
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  try {
    const command = find(name);
    if (rest.includes("--help") || rest.includes("-h")) {
      console.log(commandHelp(command));
      return EXIT.ok;
    }
    return await command.run(parseFlags(command.name, rest, { ...command.flags, ...COMMON_FLAGS }));
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(error.message);
      return EXIT.usage;
    }
    if (error instanceof OutdatedCodeError) {
      console.error(`queue ${name}: ${error.message}`);
      return EXIT.outdated;
    }
    const failure = error instanceof Error ? error : new Error(String(error));
    console.error(`queue ${name}: ${failure.message.split("\n", 1)[0]}`);
    if (rest.includes("--verbose")) console.error(failure.stack);
    return EXIT.failure;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
