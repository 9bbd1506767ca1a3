/**
 * The `logs <id>` command: prints a job's log (what its handler wrote with
 * `ctx.log()`), oldest line first, one line each: time, attempt, level,
 * text and fields, every control character escaped.
 *
 * @module
 * @internal
 */
import { jobKnown, noSuchJob, openAdminQueue, readIds } from "./admin.ts";
import { expectPositionals, readSwitch } from "./args.ts";
import { type Command, EXIT } from "./command.ts";
import { printable } from "./table.ts";

/** `logs <id> [--json]`. */
export const logsCommand: Command = {
  name: "logs",
  operands: "<id>",
  summary: "print a job's log, oldest line first",
  description:
    "Prints what a job's handler wrote with ctx.log() (and, with captureConsole, printed), across its\nattempts, oldest line first: time (UTC), attempt, level, text and fields. An encrypted job's lines\nare opened with APP_KEY or APP_PREVIOUS_KEYS; a value set in them that is not a key is refused.\nA job's log is kept as long as the job or its history (keepFinishedMs).",
  flags: {
    json: { type: "boolean", help: "print a JSON array of the lines" },
  },
  async run(args) {
    expectPositionals(args, 1, 1, "<id>");
    const [id] = readIds(args);
    const json = readSwitch(args, "json");
    await using queue = await openAdminQueue(args, { keys: true });
    const lines = await queue.logs(id!);
    if (lines.length === 0 && !await jobKnown(queue, id!)) {
      console.error(`queue logs: ${noSuchJob(id!)}`);
      return EXIT.failure;
    }
    if (json) {
      console.log(JSON.stringify(lines, null, 2));
    } else if (lines.length === 0) {
      console.log(`No log lines for job ${id}`);
    } else {
      for (const line of lines) {
        const at = line.at.toISOString().replace("T", " ").slice(0, 23);
        const attempt = line.attempt === 0 ? "-" : String(line.attempt);
        const fields = line.fields === null ? "" : ` ${JSON.stringify(line.fields)}`;
        console.log(
          printable(`${at} #${attempt} ${line.level.padEnd(5)} ${line.message}${fields}`),
        );
      }
    }
    return EXIT.ok;
  },
};
