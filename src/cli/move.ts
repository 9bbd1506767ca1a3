/**
 * The `move` command: moves a queue from one store to another
 * (`moveQueue()`, docs/moving.md) and prints both stores' counts per table
 * side by side; `--abort` lifts the fence of a move given up.
 *
 * @module
 * @internal
 */
import { abortMove, mismatchError, moveQueueReport } from "../move_queue.ts";
import type { MoveReport } from "../moving/move_stores.ts";
import {
  expectPositionals,
  readDatabase,
  readInteger,
  readString,
  readSwitch,
  UsageError,
} from "./args.ts";
import { type Command, EXIT } from "./command.ts";
import { formatTable } from "./table.ts";

/** `move --from <db> --to <db>`. */
export const moveCommand: Command = {
  name: "move",
  operands: "",
  summary: "move a queue to another store (SQLite to PostgreSQL, any store to any other)",
  description:
    "Copies everything the queue in --from holds to --to (a SQLite file, a postgres:// or a redis:// URL;\ncreated and migrated if need be): jobs pending, delayed and running (copied as pending, attempts kept),\nfailed jobs, kept history, batches, chains, flows, keys, live locks and rate windows, schedules,\npauses, logs, steps and signals, metrics, with their ids; encrypted payloads stay encrypted.\nIt refuses a --from that holds no queue, while workers of --from run (stop them first, or --wait\nfor them), and while --to holds anything but what an earlier run of this same move copied. It\nfirst fences --from: from then on --from refuses every write, naming --to. Stopped halfway, run\nit again: it finishes without duplicates. Then it prints both stores' counts per table and fails\n(exit 1) if they differ. After a move, point the app and its workers at --to. --abort lifts\nthe fence of a move given up (--from only); see docs/moving.md.",
  flags: {
    from: { type: "string", value: "DB", help: "the store the queue is in now" },
    to: { type: "string", value: "DB", help: "the store to move it to" },
    wait: {
      type: "string",
      value: "MS",
      help: "wait up to MS ms for the workers of --from to stop (default: refuse at once)",
    },
    abort: {
      type: "boolean",
      help: "lift the fence a move left on --from, for a move given up (writes nothing else)",
    },
  },
  async run(args) {
    expectPositionals(args, 0, 0, "");
    if (readString(args, "db") !== undefined) {
      throw new UsageError(args.command, "name the stores with --from and --to, not --db");
    }
    const from = readDatabase(args, "from");
    if (from === undefined) throw new UsageError(args.command, "missing --from <db>");
    if (readSwitch(args, "abort")) {
      if (args.values.to !== undefined || args.values.wait !== undefined) {
        throw new UsageError(args.command, "--abort takes --from only");
      }
      const fence = await abortMove(from);
      console.log(
        fence === null
          ? "No move fenced it: nothing to lift"
          : `Lifted the fence of the move to ${fence.to} (fenced at ${
            new Date(fence.at).toISOString()
          }): it takes writes again`,
      );
      return EXIT.ok;
    }
    const to = readDatabase(args, "to");
    if (to === undefined) throw new UsageError(args.command, "missing --to <db>");
    const waitMs = readInteger(args, "wait", 0) ?? 0;
    const report = await moveQueueReport(from, to, { waitMs });
    console.log(formatReport(report));
    if (report.mismatched.length > 0) {
      console.error(`queue move: ${mismatchError(report).message}`);
      return EXIT.failure;
    }
    return EXIT.ok;
  },
};

/** The report as the command prints it: one line per table, then the time taken. */
function formatReport(report: MoveReport): string {
  const rows = report.tables.map(({ table, source, leftBehind, destination }) => [
    table,
    String(source),
    leftBehind === 0 ? "" : String(leftBehind),
    String(destination),
    report.mismatched.includes(table) ? "DIFFERS" : "ok",
  ]);
  return [
    `${report.resumed ? "Finished the move" : "Moved"} ${report.from} to ${report.to}`,
    "",
    formatTable(["table", "source", "left behind", "destination", ""], rows, [
      "left",
      "right",
      "right",
      "right",
    ]),
    "",
    `${
      report.mismatched.length === 0 ? "Done" : "Counts differ"
    } in ${report.ms} ms; ${report.from} stays fenced: point the app and its workers at ${report.to}`,
  ].join("\n");
}
