/**
 * The schedule commands: `schedules` (a table, or `--json`),
 * `schedule:pause`, `schedule:resume`, `schedule:run`, `schedule:backfill`
 * and `schedule:forget`. Listing, pausing, resuming and forgetting open the
 * queue with no jobs registered (they read and change the stored
 * schedules); running and backfilling need the jobs module (`--jobs`),
 * which builds the payloads, and take from it the named schedule and its
 * job only.
 *
 * @module
 * @internal
 */
import { assertName } from "../names.ts";
import type { Queue } from "../queue.ts";
import { JobRegistry, moduleUrl } from "../registry.ts";
import type { ScheduleInfo } from "../schedules/views.ts";
import {
  expectPositionals,
  type ParsedArgs,
  readString,
  readSwitch,
  readTime,
  UsageError,
} from "./args.ts";
import { openAdminQueue, plural } from "./admin.ts";
import type { Command } from "./command.ts";
import { firstLine, formatTable, shortName, tableTime } from "./table.ts";

function time(date: Date | null): string {
  return date === null ? "-" : tableTime(date);
}

/** The rule of a schedule in a few words: its cron and zone, or its interval. */
function rule(schedule: ScheduleInfo): string {
  return schedule.cron === null
    ? `every ${schedule.everyMs! / 1000} s`
    : `${schedule.cron} (${schedule.timezone})`;
}

/** The one positional: the schedule's name. */
function readName(args: ParsedArgs): string {
  expectPositionals(args, 1, 1, "NAME");
  const name = args.positionals[0]!;
  try {
    return assertName(name, args.command, "NAME");
  } catch {
    throw new UsageError(
      args.command,
      `NAME must be 1 to 255 characters without NUL or lone surrogates: got ${
        JSON.stringify(name.slice(0, 64))
      }`,
    );
  }
}

/**
 * Opens the queue with schedule `name` of the jobs module of `--jobs` (which
 * builds its payloads) and its job only: the other schedules stored stay as
 * they are, and `APP_KEY` is needed only when that job is encrypted. The
 * queue must exist, as for every admin command.
 */
async function openWithSchedule(args: ParsedArgs, name: string): Promise<Queue> {
  const jobs = readString(args, "jobs");
  if (jobs === undefined) {
    throw new UsageError(
      args.command,
      "--jobs is required: the jobs module that defines the schedule, e.g. --jobs ./jobs.ts",
    );
  }
  const registry = await JobRegistry.load(moduleUrl(jobs));
  const schedule = registry.schedules().find((each) => each.name === name);
  if (schedule === undefined) {
    throw new Error(
      `no schedule named ${JSON.stringify(name)} is defined in the jobs module ${jobs}`,
    );
  }
  // Like every admin command's, it opens an existing queue only: a mistyped --db is no new queue.
  return await openAdminQueue(args, { jobs: [schedule.job, schedule] });
}

/** A required ISO 8601 time flag (`--from`, `--to`). */
function readRequiredTime(args: ParsedArgs, name: string): Date {
  const time = readTime(args, name);
  if (time === undefined) {
    throw new UsageError(
      args.command,
      `--${name} is required: an ISO 8601 time such as 2026-12-05T10:00:00Z`,
    );
  }
  return time;
}

const JOBS_FLAG = {
  jobs: {
    type: "string",
    value: "PATH",
    help: "the jobs module that defines the schedule (required), a path or a URL",
  },
} as const;

const schedules: Command = {
  name: "schedules",
  operands: "",
  summary: "list the schedules, with their next and last runs",
  description:
    "Lists the stored schedules by name: rule (cron and time zone, or interval), paused or active,\nthe next slot, the last slot fired and its job, and the missed and overlap policies.",
  flags: { json: { type: "boolean", help: "print a JSON array, with the next 5 runs of each" } },
  async run(args) {
    expectPositionals(args, 0, 0, "");
    const json = readSwitch(args, "json");
    await using queue = await openAdminQueue(args);
    const list = await queue.schedules();
    if (json) {
      console.log(JSON.stringify(list, null, 2));
    } else if (list.length === 0) {
      console.log("No schedules");
    } else {
      console.log(formatTable(
        ["name", "job", "rule", "state", "next", "last slot", "last job", "missed", "overlap"],
        list.map((schedule) => [
          shortName(schedule.name, 40),
          shortName(schedule.job, 40),
          firstLine(rule(schedule), 40),
          schedule.paused ? "paused" : "active",
          time(schedule.paused ? null : schedule.nextRuns[0] ?? null),
          time(schedule.lastSlot),
          schedule.lastJobId === null ? "-" : String(schedule.lastJobId),
          schedule.missed,
          schedule.overlap,
        ]),
        ["left", "left", "left", "left", "left", "left", "right", "left", "left"],
      ));
    }
    return 0;
  },
};

function pauseCommand(paused: boolean): Command {
  const verb = paused ? "pause" : "resume";
  return {
    name: `schedule:${verb}`,
    operands: "NAME",
    summary: paused
      ? "pause a schedule: no slot fires until it is resumed"
      : "resume a paused schedule (missed slots fire by its missed policy)",
    description: paused
      ? "Pauses the schedule NAME in every process: no slot fires until schedule:resume. The pause\nis stored: it survives restarts and the sync of the jobs module."
      : "Resumes the schedule NAME. The slots it missed while paused fire by its missed policy:\nskip fires none, once the latest, all the latest maxCatchUp.",
    flags: {},
    async run(args) {
      const name = readName(args);
      await using queue = await openAdminQueue(args);
      const changed = paused ? await queue.pauseSchedule(name) : await queue.resumeSchedule(name);
      if (!changed) throw new Error(`no schedule named ${JSON.stringify(name)}`);
      console.log(`${paused ? "Paused" : "Resumed"} schedule ${JSON.stringify(name)}`);
      return 0;
    },
  };
}

const run: Command = {
  name: "schedule:run",
  operands: "NAME",
  summary: "run a schedule's job now, outside its slots",
  description:
    "Stores one job of the schedule NAME now, outside its slot sequence (the next slot still fires),\neven while it is paused. Its ctx.scheduled.slot is now.",
  flags: JOBS_FLAG,
  async run(args) {
    const name = readName(args);
    await using queue = await openWithSchedule(args, name);
    const id = await queue.triggerSchedule(name);
    console.log(
      id === null
        ? `Schedule ${JSON.stringify(name)}: its job is unique and one is already queued`
        : `Queued job ${id} of schedule ${JSON.stringify(name)}`,
    );
    return 0;
  },
};

const backfill: Command = {
  name: "schedule:backfill",
  operands: "NAME",
  summary: "fire every slot of a past range once",
  description:
    "Stores one job, due now, for every slot of the schedule NAME from --from to --to (both\nincluded, ISO 8601), oldest first; a slot fired already is skipped. A range of more slots than\nthe schedule's maxCatchUp is refused.",
  flags: {
    ...JOBS_FLAG,
    from: { type: "string", value: "ISO", help: "the first time of the range (required)" },
    to: {
      type: "string",
      value: "ISO",
      help: "the last time of the range, at most now (required)",
    },
  },
  async run(args) {
    const name = readName(args);
    const from = readRequiredTime(args, "from");
    const to = readRequiredTime(args, "to");
    await using queue = await openWithSchedule(args, name);
    const { jobIds, skipped } = await queue.backfillSchedule(name, { from, to });
    console.log(
      `Queued ${plural(jobIds.length, "job")} for schedule ${JSON.stringify(name)}${
        skipped > 0 ? `; skipped ${plural(skipped, "slot")} fired already` : ""
      }`,
    );
    return 0;
  },
};

const forget: Command = {
  name: "schedule:forget",
  operands: "NAME",
  summary: "remove a stored schedule that no jobs module defines any more",
  description:
    "Removes the schedule NAME from the database, with its paused state and the record of the\nslots it fired; the jobs it stored stay. Opening a queue never removes a schedule it does not\ndefine: remove it from the jobs module first, or the next process that defines it stores it\nagain.",
  flags: {},
  async run(args) {
    const name = readName(args);
    await using queue = await openAdminQueue(args);
    if (!await queue.forgetSchedule(name)) {
      throw new Error(`no schedule named ${JSON.stringify(name)}`);
    }
    console.log(`Forgot schedule ${JSON.stringify(name)}`);
    return 0;
  },
};

/** Every schedule command, in the order help lists them. */
export const SCHEDULE_COMMANDS: readonly Command[] = [
  schedules,
  pauseCommand(true),
  pauseCommand(false),
  run,
  backfill,
  forget,
];
