/**
 * The admin commands on a queue's database: `failed`, `retry`, `forget`,
 * `flush`, `prune-failed`, `clear` and `migrate`. Each opens the queue with
 * no jobs registered: they read and move rows, they never run a handler.
 *
 * @module
 * @internal
 */
import { resolve } from "node:path";
import { type DatabaseOptions, databaseOptions } from "../config.ts";
import { PayloadCipher } from "../encryption.ts";
import { Queue } from "../queue.ts";
import { type QueueOptions, readAppKeys } from "../queue_options.ts";
import {
  expectPositionals,
  type ParsedArgs,
  readDb,
  readInteger,
  readNumber,
  readQueueNames,
  readSwitch,
  UsageError,
} from "./args.ts";
import { isRedisUrl, redactPassword } from "../stores/database_url.ts";
import { shown } from "../shown.ts";
import { missingQueue, openStore } from "../store_options.ts";
import {
  describeWorker,
  LIVE_WORKER_WINDOW_MS,
  type PlannedStep,
  type StepNoun,
} from "../stores/schema_steps.ts";
import type { Command } from "./command.ts";
import { firstLine, formatTable, tableTime } from "./table.ts";

/** How an admin command opens its queue. */
export interface AdminQueueOptions {
  /** Create a missing SQLite file (migrate). @default {false} */
  readonly create?: boolean;
  /**
   * Refuse a set `APP_KEY` or `APP_PREVIOUS_KEYS` entry that is not a key
   * (not the base64 of 32 bytes), naming it as set (`APP_PREVIOUS_KEYS[2]`),
   * for a command that opens or seals with them: a queue with no encrypted
   * job leaves such a value unused, and with it the well-formed keys beside
   * it. The queue then reads the keys itself, under their names.
   * @default {false}
   */
  readonly keys?: boolean;
  /**
   * The jobs module's URL, or the definitions (a schedule and its job),
   * opened with `mode: "external"` (this process stores jobs, for instance
   * a schedule run now, and never runs one).
   * @default {no jobs registered}
   */
  readonly jobs?: QueueOptions["jobs"];
}

/**
 * Opens the queue on the command's database, migrating it, with no jobs
 * registered unless `jobs` names a module. The queue must exist, unless
 * `create` (migrate): a mistyped `--db` (a SQLite file, a PostgreSQL
 * schema, a Redis prefix) is an error, not a new empty queue.
 */
export async function openAdminQueue(
  args: ParsedArgs,
  { create = false, keys = false, jobs }: AdminQueueOptions = {},
): Promise<Queue> {
  const db = readDb(args);
  const options = databaseOptions(db);
  if (!create) {
    if ("path" in options) assertDatabaseFile(options.path);
    await assertQueueAt(db, options);
  }
  const queueOptions: QueueOptions = {
    ...options,
    ...(jobs === undefined ? { jobs: [] } : { jobs, mode: "external" }),
  };
  if (keys) {
    // The keys the queue will read, imported as a queue with an encrypted job imports them.
    const appKeys = readAppKeys(queueOptions, []);
    if (appKeys !== null) await PayloadCipher.fromKeys(appKeys);
  }
  return await Queue.open(queueOptions);
}

/** Whether nothing is at the SQLite file `path` (never for `:memory:` and `file:` URIs). */
function isMissingFile(path: string): boolean {
  if (path === ":memory:" || path.startsWith("file:")) return false;
  try {
    Deno.statSync(path);
    return false;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    return true;
  }
}

/**
 * Throws unless the SQLite file `path` (or the file a `file:` URI names)
 * exists: opening one that is not there would make it. `:memory:` never
 * holds a queue: each command opens a new, empty one.
 */
function assertDatabaseFile(path: string): void {
  const file = path.startsWith("file:") ? uriFile(path) : path;
  if (file === ":memory:") {
    throw new Error(
      `no queue at ${path}: an in-memory database is new and empty for each command; check --db or QUEUE_DB`,
    );
  }
  try {
    if (Deno.statSync(file).isFile) return;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  throw new Error(
    `no database at ${
      shownPath(path)
    }: check --db or QUEUE_DB (the work and migrate commands create it)`,
  );
}

/**
 * The file a SQLite `file:` URI names, as SQLite reads it: after an empty
 * or `localhost` authority, up to its query, percent-decoded (relative
 * when it does not start with `/`); `:memory:` for an in-memory database.
 */
function uriFile(uri: string): string {
  let rest = uri.slice("file:".length).split(/[?#]/)[0]!;
  if (rest.startsWith("//")) rest = rest.slice(2).replace(/^(localhost)?(?=\/)/, "");
  const file = decodeURIComponent(rest);
  return file === ":memory:" || /[?&]mode=memory(&|$)/.test(uri) ? ":memory:" : file;
}

/** A SQLite path as messages show it: a URI as given, a path resolved. */
function shownPath(path: string): string {
  return path.startsWith("file:") ? path : resolve(path);
}

/**
 * Throws unless the database `db` names holds a queue: the SQLite file (the
 * PostgreSQL schema, the Redis key prefix) has a schema step (a key layout)
 * applied. Reads only, so no table or key is created: another app's
 * SQLite file is refused, not made a queue, and its settings are left
 * alone.
 */
async function assertQueueAt(db: string, options: DatabaseOptions): Promise<void> {
  const missing = await missingQueue(options);
  if (missing === null) return;
  const create = "(the work and migrate commands create it)";
  if ("path" in options) {
    throw new Error(
      `no queue at ${shownPath(options.path)}: ${missing}; check --db or QUEUE_DB ${create}`,
    );
  }
  throw new Error(
    `no queue at ${
      redactPassword(db)
    }: ${missing}; check --db or QUEUE_DB, and its schema or prefix ${create}`,
  );
}

/** Reads the positional ids (of jobs, or of what `noun` names), each a positive whole number, each once. */
export function readIds(args: ParsedArgs, noun = "job"): number[] {
  // An id given twice is acted on once (a second retry or forget of it would say it is gone).
  return [...new Set(args.positionals.map((text) => readIdText(args, text, noun)))];
}

/** Reads the positional id at `index` (of a job, or of what `noun` names): a positive whole number. */
export function readId(args: ParsedArgs, index: number, noun = "job"): number {
  return readIdText(args, args.positionals[index] ?? "", noun);
}

function readIdText(args: ParsedArgs, text: string, noun: string): number {
  const id = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!(id >= 1 && Number.isSafeInteger(id))) {
    throw new UsageError(
      args.command,
      `a ${noun} id must be a positive whole number: got ${shown(text)}`,
    );
  }
  return id;
}

/** Whether job `id` is there: waiting, running, failed, or finished and kept. */
export async function jobKnown(queue: Queue, id: number): Promise<boolean> {
  // A job whose output cannot be opened here (encrypted, no key) is known all the same.
  return await queue.result(id).then((result) => result !== null, () => true);
}

/** What a command says of a job id that {@linkcode jobKnown} does not know. */
export function noSuchJob(id: number): string {
  return `no job ${id} (it never was, or it ended and its history is no longer kept)`;
}

/** `count` and `noun`, in its plural form (`nouns` by default) unless the count is 1. */
export function plural(count: number, noun: string, nouns = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : nouns}`;
}

const failed: Command = {
  name: "failed",
  operands: "",
  summary: "list failed jobs, newest first",
  description:
    "Lists the jobs that failed for good, newest first: id, queue, name, attempts, when it failed\nand the first line of its error.",
  flags: {
    limit: { type: "string", value: "N", help: "show at most N jobs, 1 to 1000 (default 100)" },
    json: { type: "boolean", help: "print a JSON array, with payloads and stacks" },
  },
  async run(args) {
    expectPositionals(args, 0, 0, "");
    const limit = readInteger(args, "limit", 1, 1000) ?? 100;
    const json = readSwitch(args, "json");
    await using queue = await openAdminQueue(args);
    const jobs = await queue.failed({ limit });
    if (json) {
      console.log(JSON.stringify(jobs, null, 2));
    } else if (jobs.length === 0) {
      console.log("No failed jobs");
    } else {
      console.log(formatTable(
        ["id", "queue", "name", "attempts", "failed at", "error"],
        jobs.map((job) => [
          String(job.id),
          job.queue,
          job.name,
          String(job.attempts),
          tableTime(job.failedAt),
          firstLine(job.error, 100),
        ]),
        ["right", "left", "left", "right"],
      ));
    }
    return 0;
  },
};

const retry: Command = {
  name: "retry",
  operands: "<id…|all>",
  summary: "put failed jobs back on their queues",
  description:
    "Puts failed jobs back on their queues, due now, with fresh attempts: the ones named by id, or\nevery one with `all`. Exits 1 if an id is not a failed job (the others are retried).",
  flags: {},
  async run(args) {
    expectPositionals(args, 1, Infinity, "job ids, or all");
    if (args.positionals.includes("all")) {
      if (args.positionals.length > 1) {
        throw new UsageError(args.command, "give job ids or all, not both");
      }
      await using queue = await openAdminQueue(args);
      console.log(`Retried ${plural(await queue.retryAll(), "failed job")}`);
      return 0;
    }
    const ids = readIds(args);
    await using queue = await openAdminQueue(args);
    let missing = 0;
    for (const id of ids) {
      if (await queue.retry(id)) {
        console.log(`Retried job ${id}`);
      } else {
        missing++;
        console.error(`queue retry: no failed job ${id}`);
      }
    }
    return missing === 0 ? 0 : 1;
  },
};

const forget: Command = {
  name: "forget",
  operands: "<id>",
  summary: "delete one failed job",
  description: "Deletes one failed job for good. Exits 1 if it is not a failed job.",
  flags: {},
  async run(args) {
    expectPositionals(args, 1, 1, "the job id");
    const [id] = readIds(args);
    await using queue = await openAdminQueue(args);
    if (!await queue.forget(id!)) {
      console.error(`queue forget: no failed job ${id}`);
      return 1;
    }
    console.log(`Forgot failed job ${id}`);
    return 0;
  },
};

const flush: Command = {
  name: "flush",
  operands: "",
  summary: "delete every failed job",
  description: "Deletes every failed job for good.",
  flags: {},
  async run(args) {
    expectPositionals(args, 0, 0, "");
    await using queue = await openAdminQueue(args);
    console.log(`Deleted ${plural(await queue.flushFailed(), "failed job")}`);
    return 0;
  },
};

/** The `--hours` flag of the prune commands. */
export const HOURS_FLAG = {
  hours: {
    type: "string",
    value: "N",
    help: "age in hours, >= 0, decimals allowed (required)",
  },
} as const;

/** Reads the required `--hours` flag. */
export function readHours(args: ParsedArgs): number {
  const hours = readNumber(args, "hours", false);
  if (hours === undefined) throw new UsageError(args.command, "--hours is required");
  return hours;
}

const pruneFailed: Command = {
  name: "prune-failed",
  operands: "",
  summary: "delete failed jobs older than some hours",
  description: "Deletes the failed jobs that failed more than --hours ago.",
  flags: HOURS_FLAG,
  async run(args) {
    expectPositionals(args, 0, 0, "");
    const hours = readHours(args);
    await using queue = await openAdminQueue(args);
    const count = await queue.pruneFailed({ olderThanMs: hours * 3_600_000 });
    console.log(
      `Deleted ${plural(count, "failed job")} that failed more than ${plural(hours, "hour")} ago`,
    );
    return 0;
  },
};

const clear: Command = {
  name: "clear",
  operands: "",
  summary: "delete the jobs waiting in a queue (or in every queue)",
  description:
    "Deletes the jobs of one queue, or of every queue without --queue, that are not running:\npending, delayed, held ahead by a worker, and those whose worker died. Running jobs finish\n(cancel stops one); failed jobs stay (see flush).",
  flags: { queue: { type: "string", value: "NAME", help: "only this queue" } },
  async run(args) {
    expectPositionals(args, 0, 0, "");
    const queueName = readQueueNames(args, "queue");
    if (queueName !== undefined && queueName.length !== 1) {
      throw new UsageError(
        args.command,
        `--queue takes one queue: got ${shown(args.values.queue)}`,
      );
    }
    await using queue = await openAdminQueue(args);
    const count = await queue.clear(queueName?.[0]);
    const where = queueName === undefined ? "every queue" : `queue ${queueName[0]}`;
    console.log(`Deleted ${plural(count, "job")} from ${where}`);
    return 0;
  },
};

const migrate: Command = {
  name: "migrate",
  operands: "",
  summary: "bring the database's schema up to date (--plan: show what would run)",
  description:
    `Creates the database if missing and applies the schema steps it lacks (opening a queue does the
same), then prints each step it applied with its kind and the schema version it is at (on Redis:
checks the server, and the key layout stands for the schema).

An expand step (new tables, new nullable columns, new indexes) is applied while workers of older
code run: they keep working on it. A contract step is refused while workers of older code were
seen within the last ${
      LIVE_WORKER_WINDOW_MS / 1000
    } s, naming each (host, pid, the schema step its code was built for):
stop them, then run migrate again (or start the new version, which applies it), or apply it
anyway with --force (those workers then stop claiming and exit 75 at their next heartbeat).
--plan prints the steps that would run, each one's kind and the live workers that block it, and
changes nothing (a database that does not exist yet is planned from step 0, and not created). See
docs/upgrading.md.`,
  flags: {
    plan: { type: "boolean", help: "print what would run and what blocks it; change nothing" },
    force: {
      type: "boolean",
      help: "apply a contract step even while workers of older code run",
    },
    "wait-ms": {
      type: "string",
      value: "N",
      help: "wait up to N ms for the workers that block a contract step to go (default 0)",
    },
  },
  async run(args) {
    expectPositionals(args, 0, 0, "");
    // Every flag is read before anything is opened: a bad one creates no database.
    const db = readDb(args);
    const plan = readSwitch(args, "plan");
    const force = readSwitch(args, "force");
    const waitMs = readInteger(args, "wait-ms", 0, 2_147_483_647) ?? 0;
    const shownDb = redactPassword(db);
    const noun: StepNoun = isRedisUrl(db) ? "key layout" : "schema step";
    const options = databaseOptions(db);
    if (plan) {
      // A SQLite file that does not exist yet is planned from step 0, as an empty schema or
      // prefix is, and is not created: an empty database in memory has the same plan.
      const planned = "path" in options && isMissingFile(options.path)
        ? { path: ":memory:" }
        : options;
      await using store = await openStore(planned, false);
      const { databaseStep, codeStep, steps } = await store.migrationPlan();
      console.log(`${shownDb} is at ${noun} ${databaseStep}; this code knows ${codeStep}`);
      if (steps.length === 0) console.log("Nothing to apply");
      for (const step of steps) console.log(`Would apply ${describeStep(noun, step)}`);
      return 0;
    }
    await using store = await openStore(options, false);
    const applied = await store.migrate({ force, waitMs });
    for (const step of applied.steps) console.log(`Applied ${describeStep(noun, step)}`);
    const now = Math.max(applied.databaseStep, ...applied.steps.map((step) => step.version));
    const version = isRedisUrl(db) ? "Redis key layout version" : "schema version";
    console.log(`${shownDb} is at ${version} ${now}`);
    return 0;
  },
};

/** A planned step as `migrate` prints it: its number, kind and the workers that block it. */
function describeStep(noun: StepNoun, step: PlannedStep): string {
  const blockers = step.blockedBy.length === 0
    ? ""
    : `, blocked by ${plural(step.blockedBy.length, "live worker")} of older code: ${
      step.blockedBy.map((worker) => describeWorker(worker, noun)).join("; ")
    }`;
  return `${noun} ${step.version} (${step.kind}${blockers})`;
}

/** The admin commands, in the order the help lists them. */
export const ADMIN_COMMANDS: readonly Command[] = [
  failed,
  retry,
  forget,
  flush,
  pruneFailed,
  clear,
  migrate,
];
