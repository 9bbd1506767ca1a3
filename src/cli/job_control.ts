/**
 * The job-control commands: `cancel <id>`, `pause <queue>`, `resume
 * <queue>`, `paused`, and `pause-group <job> <key>`, `resume-group <job>
 * <key>` and `paused-groups`. Like the other admin commands they open the queue with no
 * jobs registered.
 *
 * @module
 * @internal
 */
import {
  expectPositionals,
  type ParsedArgs,
  readInteger,
  readQueueOperand,
  readString,
  readSwitch,
  readText,
  readTime,
  UsageError,
} from "./args.ts";
import { MAX_PAUSE_MS } from "../admin/job_control.ts";
import { groupTarget } from "../dispatch/group_key.ts";
import { openAdminQueue, readIds } from "./admin.ts";
import type { Command } from "./command.ts";
import { firstLine, formatTable, printable, shortName, tableTime } from "./table.ts";
import type { Queue } from "../queue.ts";

/** The units `--for` takes: `500ms`, `30s`, `10m`, `2h`, `1d`. */
const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `--for 10m` in ms; throws a usage error naming the flag and its limits otherwise. @internal */
export function readDurationMs(command: string, text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text.trim());
  const ms = match === null ? NaN : Number(match[1]) * UNIT_MS[match[2]!]!;
  if (!(ms > 0 && ms <= MAX_PAUSE_MS)) {
    throw new UsageError(
      command,
      `--for must be a duration from 1ms to ${
        Math.floor(MAX_PAUSE_MS / UNIT_MS.d!)
      }d (about 69 years), such as 90s, 10m, 2h or 1d: got ${JSON.stringify(text)}`,
    );
  }
  return ms;
}

const cancel: Command = {
  name: "cancel",
  operands: "<id>",
  summary: "cancel a job: remove it if it waits, stop it if it runs",
  description:
    "Cancels one job. A job that waits (pending or delayed) is removed and kept as cancelled; a\nrunning job is asked to stop: its worker aborts it within about a second and it is not\nretried. Exits 1 if there is no such job or it has already ended (completed, failed or cancelled).",
  flags: {
    reason: {
      type: "string",
      value: "TEXT",
      help: "why, kept with the job (default cancelled; at most 255 characters)",
    },
  },
  async run(args) {
    expectPositionals(args, 1, 1, "the job id");
    const [id] = readIds(args);
    const reason = readText(args, "reason");
    await using queue = await openAdminQueue(args);
    const outcome = await queue.cancel(id!, reason === undefined ? {} : { reason });
    switch (outcome) {
      case "cancelled":
        console.log(`Cancelled job ${id}`);
        return 0;
      case "cancelling":
        console.log(`Job ${id} is running: its worker was asked to stop it`);
        return 0;
      case "finished":
        console.error(`queue cancel: job ${id} has already ended (completed, failed or cancelled)`);
        return 1;
      case "not-found":
        console.error(`queue cancel: no job ${id}`);
        return 1;
    }
  },
};

const pause: Command = {
  name: "pause",
  operands: "<queue>",
  summary: "pause a queue: workers everywhere stop claiming its jobs",
  description:
    "Pauses a queue for every worker on this database: its jobs are still stored but none is\nclaimed until resume, or until --for has passed. Running jobs finish.",
  flags: {
    for: {
      type: "string",
      value: "DURATION",
      help: "resume on its own after 90s, 10m, 2h, 1d (at most 25451d)",
    },
    reason: {
      type: "string",
      value: "TEXT",
      help: "why, shown by paused and the dashboard (at most 255 characters)",
    },
  },
  async run(args) {
    expectPositionals(args, 1, 1, "the queue name");
    const name = readQueueOperand(args, 0);
    const forText = readString(args, "for");
    const forMs = forText === undefined ? undefined : readDurationMs(args.command, forText);
    const reason = readText(args, "reason");
    await using queue = await openAdminQueue(args);
    await queue.pause(name, {
      ...(forMs !== undefined && { forMs }),
      ...(reason !== undefined && { reason }),
    });
    console.log(
      `Paused queue ${name}${forText === undefined ? "" : ` for ${forText}`}`,
    );
    return 0;
  },
};

const resume: Command = {
  name: "resume",
  operands: "<queue>",
  summary: "resume a paused queue",
  description:
    "Resumes a paused queue; idle workers look at it at once. Exits 1 if it was not paused.",
  flags: {},
  async run(args) {
    expectPositionals(args, 1, 1, "the queue name");
    const name = readQueueOperand(args, 0);
    await using queue = await openAdminQueue(args);
    if (!await queue.resume(name)) {
      console.error(`queue resume: queue ${name} is not paused`);
      return 1;
    }
    console.log(`Resumed queue ${name}`);
    return 0;
  },
};

const paused: Command = {
  name: "paused",
  operands: "",
  summary: "list the paused queues",
  description: "Lists the paused queues: since when, until when, and why.",
  flags: { json: { type: "boolean", help: "print a JSON array" } },
  async run(args) {
    expectPositionals(args, 0, 0, "");
    const json = readSwitch(args, "json");
    await using queue = await openAdminQueue(args);
    const list = await queue.paused();
    if (json) console.log(JSON.stringify(list, null, 2));
    else if (list.length === 0) console.log("No paused queues");
    else {
      console.log(formatTable(
        ["queue", "paused at", "until", "reason"],
        list.map((row) => [
          shortName(row.queue, 64),
          tableTime(row.pausedAt),
          row.until === null ? "resumed by hand" : tableTime(row.until),
          row.reason === null ? "" : firstLine(row.reason, 60),
        ]),
        ["left", "left", "left", "left"],
      ));
    }
    return 0;
  },
};

/** The job name and group key operands of `pause-group` and `resume-group`, checked. */
function readGroupOperands(args: Parameters<Command["run"]>[0]): [string, string] {
  expectPositionals(args, 2, 2, "the job name and the group key");
  try {
    return groupTarget(args.positionals[0]!, args.positionals[1]!, args.command);
  } catch (error) {
    throw new UsageError(args.command, (error as Error).message.replace(/^[\w-]+: /, ""));
  }
}

/**
 * `--until 2026-12-05T10:00:00Z` as a time after `now`, or undefined when
 * absent; throws a usage error naming the flag otherwise. @internal
 */
export function readUntil(args: ParsedArgs, now: number): Date | undefined {
  const until = readTime(args, "until");
  if (until !== undefined && (until.getTime() <= now || until.getTime() - now > MAX_PAUSE_MS)) {
    throw new UsageError(
      args.command,
      `--until must be after now and within ${
        Math.floor(MAX_PAUSE_MS / UNIT_MS.d!)
      }d: got ${until.toISOString()}`,
    );
  }
  return until;
}

const pauseGroup: Command = {
  name: "pause-group",
  operands: "<job> <key>",
  summary: "pause one group of a job: workers everywhere stop claiming its jobs",
  description:
    "Pauses group <key> of job <job> (in every queue) for every worker on this database: its jobs\nare still stored but none is claimed until resume-group, or until --for has passed or --until\ncomes (a hold). Running jobs finish. A pause in force is never shortened: a held group paused\nwithout an end stays paused until resume-group, and of two holds the later end wins.",
  flags: {
    for: {
      type: "string",
      value: "DURATION",
      help: "resume on its own after 90s, 10m, 2h, 1d (at most 25451d)",
    },
    until: {
      type: "string",
      value: "TIME",
      help: "resume on its own at this ISO 8601 time, such as 2026-12-05T10:00:00Z",
    },
  },
  async run(args) {
    const [name, key] = readGroupOperands(args);
    const forText = readString(args, "for");
    if (forText !== undefined && args.values["until"] !== undefined) {
      throw new UsageError(args.command, "give --for or --until, not both");
    }
    const forMs = forText === undefined ? undefined : readDurationMs(args.command, forText);
    const until = readUntil(args, Date.now());
    await using queue = await openAdminQueue(args);
    await queue.pauseGroup(name, key, {
      ...(forMs !== undefined && { forMs }),
      ...(until !== undefined && { until }),
    });
    // A pause in force is never shortened: say the end the group has now, not the one asked for.
    const end = await groupPauseEnd(queue, name, key);
    const told = end === undefined
      ? ", a hold that has already ended"
      : end === null
      ? " until resumed"
      : ` until ${end.toISOString()}`;
    console.log(`Paused group ${JSON.stringify(key)} of ${printable(name)}${told}`);
    return 0;
  },
};

const resumeGroup: Command = {
  name: "resume-group",
  operands: "<job> <key>",
  summary: "resume a paused group of a job",
  description:
    "Resumes a paused group; idle workers look at it at once. Exits 1 if it was not paused.",
  flags: {},
  async run(args) {
    const [name, key] = readGroupOperands(args);
    await using queue = await openAdminQueue(args);
    if (!await queue.resumeGroup(name, key)) {
      console.error(
        `queue resume-group: group ${JSON.stringify(key)} of ${printable(name)} is not paused`,
      );
      return 1;
    }
    console.log(`Resumed group ${JSON.stringify(key)} of ${printable(name)}`);
    return 0;
  },
};

const pausedGroups: Command = {
  name: "paused-groups",
  operands: "",
  summary: "list the paused and held groups of jobs",
  description:
    "Lists the groups paused (pause-group) or held (pause-group --for/--until, a handler's\nctx.rateLimitGroup) now, by job name then key: since when and until when. A hold that has\nended is not listed.",
  flags: {
    limit: { type: "string", value: "N", help: "show at most N groups, 1 to 1000 (default 100)" },
    json: { type: "boolean", help: "print a JSON array" },
  },
  async run(args) {
    expectPositionals(args, 0, 0, "");
    const json = readSwitch(args, "json");
    const limit = readInteger(args, "limit", 1, 1000) ?? 100;
    await using queue = await openAdminQueue(args);
    const list = await queue.pausedGroups({ limit });
    if (json) console.log(JSON.stringify(list, null, 2));
    else if (list.length === 0) console.log("No paused groups");
    else {
      console.log(formatTable(
        ["job", "key", "paused at", "until"],
        list.map((row) => [
          row.name,
          row.key,
          tableTime(row.pausedAt),
          row.until === null ? "resumed by hand" : tableTime(row.until),
        ]),
        ["left", "left", "left", "left"],
      ));
    }
    return 0;
  },
};

/** The job-control commands, in the order the help lists them. */
export const JOB_CONTROL_COMMANDS: readonly Command[] = [
  cancel,
  pause,
  resume,
  paused,
  pauseGroup,
  resumeGroup,
  pausedGroups,
];

/**
 * When group `key` of job `name` resumes on its own: null for a pause until
 * resumed, undefined when it is not paused (a hold that has ended).
 */
async function groupPauseEnd(
  queue: Queue,
  name: string,
  key: string,
): Promise<Date | null | undefined> {
  const PAGE = 1000;
  for (let offset = 0;; offset += PAGE) {
    const page = await queue.pausedGroups({ limit: PAGE, offset });
    const found = page.find((group) => group.name === name && group.key === key);
    if (found !== undefined) return found.until;
    if (page.length < PAGE) return undefined;
  }
}
