/**
 * The `work` command: reads its flags into work options, then either
 * supervises a worker process or, with `--no-supervise`, is the worker.
 *
 * @module
 * @internal
 */
import { databaseOptions } from "../config.ts";
import { Queue } from "../queue.ts";
import { moduleUrl } from "../registry.ts";
import type { QueueWorker } from "../runner/runner.ts";
import type { ExecutorKind, WorkOptions } from "../runner/work_options.ts";
import {
  expectPositionals,
  type ParsedArgs,
  readDb,
  readInteger,
  readNumber,
  readQueueNames,
  readString,
  readSwitch,
  UsageError,
} from "./args.ts";
import { resolve } from "node:path";
import { isRedisUrl, isServerUrl, redactPassword } from "../stores/database_url.ts";
import { shown } from "../shown.ts";
import { childDenoFlags, filePath, withFolder } from "./deno_flags.ts";
import { OutdatedCodeError, QueueLostError, QueueMovedError } from "../errors.ts";
import { type Command, EXIT } from "./command.ts";
import { JsonLog } from "./job_log.ts";
import { StatusLine } from "./status_line.ts";
import { onSignals, WORK_STOP_SIGNALS } from "./stop_signals.ts";
import { CLI_URL, supervise, SUPERVISOR_PID_ENV } from "./supervise.ts";
import type { StopCause } from "./stop_signals.ts";
import { openStore } from "../store_options.ts";

const MAX_MS = 2_147_483_647;

const EXECUTORS: readonly ExecutorKind[] = ["workers", "isolate"];

/** Everything `work` needs, read from its flags. */
interface WorkSettings {
  readonly db: string;
  readonly jobs: string;
  readonly supervise: boolean;
  /** `--deno-flags`, split on spaces: the supervised child's Deno flags, instead of the discovered ones. */
  readonly denoFlags: readonly string[] | undefined;
  readonly options: WorkOptions;
}

/** What a worker process shows while it runs: a status line or JSON lines. */
interface WorkReport {
  started(worker: QueueWorker): void;
  stopping(cause: StopCause, graceMs: number): void;
  stopped(worker: QueueWorker): Promise<void>;
}

function readSettings(args: ParsedArgs): WorkSettings {
  expectPositionals(args, 0, 0, "");
  const jobs = readString(args, "jobs");
  if (jobs === undefined) {
    throw new UsageError(
      args.command,
      "--jobs is required: the jobs module, e.g. --jobs ./jobs.ts",
    );
  }
  const once = readSwitch(args, "once");
  const maxJobs = readInteger(args, "max-jobs", 1);
  if (once && maxJobs !== undefined) {
    throw new UsageError(args.command, "--once is --max-jobs 1: give one of them");
  }
  const executorFlag = readString(args, "executor");
  const executor = EXECUTORS.find((kind) => kind === executorFlag);
  if (executorFlag !== undefined && executor === undefined) {
    throw new UsageError(
      args.command,
      `--executor must be workers or isolate: got ${shown(executorFlag)}`,
    );
  }
  const maxTime = readNumber(args, "max-time", true);
  if (maxTime !== undefined && maxTime * 1000 > MAX_MS) {
    throw new UsageError(
      args.command,
      `--max-time must be a number of seconds > 0 and at most ${MAX_MS / 1000}: got ${
        shown(readString(args, "max-time"))
      }`,
    );
  }
  const options = given<WorkOptions>({
    queues: readQueueNames(args, "queue"),
    concurrency: readInteger(args, "concurrency", 1, 10_000),
    workers: readInteger(args, "workers", 1, 10_000),
    executor,
    stopWhenEmpty: readSwitch(args, "stop-when-empty"),
    maxJobs: once ? 1 : maxJobs,
    maxTimeMs: maxTime === undefined ? undefined : maxTime * 1000,
    pollMs: readInteger(args, "sleep-ms", 1, MAX_MS),
    leaseMs: readInteger(args, "lease-ms", 100, MAX_MS),
    graceMs: readInteger(args, "grace-ms", 0, MAX_MS),
    schedules: readSwitch(args, "no-schedules") ? false : undefined,
  });
  const denoFlags = readString(args, "deno-flags")?.trim().split(/\s+/);
  return {
    db: readDb(args),
    jobs: moduleUrl(jobs),
    supervise: !readSwitch(args, "no-supervise"),
    denoFlags,
    options,
  };
}

/** `options` without its undefined entries, which here stand for "the default". */
function given<T extends object>(options: { [K in keyof T]: T[K] | undefined }): T {
  return Object.fromEntries(
    Object.entries(options).filter(([, value]) => value !== undefined),
  ) as T;
}

/**
 * Runs the worker in this process until it stops: a first signal stops it
 * gracefully, a second at once. Resolves with the exit code: 3 when it
 * stopped stuck, 75 when a contract schema step newer than this code was
 * applied (it claimed nothing more and let its running jobs finish), 1 when the queue
 * was moved to another store (docs/moving.md) or its store lost its data
 * (docs/redis.md: a supervisor starts another, on the empty store), else 0.
 */
async function runWorker(settings: WorkSettings, early: EarlyStop): Promise<number> {
  const queue = await Queue.open({ ...databaseOptions(settings.db), jobs: settings.jobs });
  let stuck = false;
  try {
    if (early.stopped()) return EXIT.ok;
    // Listening before the worker starts: it may claim a job within `queue.work()`.
    const shown = shownDb(settings.db);
    const report: WorkReport = Deno.stdout.isTerminal()
      ? new StatusLine(queue, shown)
      : new JsonLog(queue, shown);
    const started: { worker?: QueueWorker } = {};
    using _signals = onSignals((signal, count) => {
      const { worker } = started;
      if (worker === undefined) return; // cannot be: no await between listening and starting
      const graceMs = count === 1 ? worker.options.graceMs : 0;
      report.stopping(signal, graceMs);
      void worker.stop({ graceMs });
    }, WORK_STOP_SIGNALS);
    early[Symbol.dispose]();
    let outdated: OutdatedCodeError | null = null;
    let gone: QueueMovedError | QueueLostError | null = null;
    queue.addEventListener("queue:error", ({ detail }) => {
      if (detail.error instanceof OutdatedCodeError) outdated = detail.error;
      if (detail.error instanceof QueueMovedError || detail.error instanceof QueueLostError) {
        gone = detail.error;
      }
    });
    const worker = started.worker = queue.work(settings.options);
    report.started(worker);
    using _orphaned = whenSupervisorGone(() => {
      report.stopping("supervisor gone", worker.options.graceMs);
      void worker.stop({ graceMs: worker.options.graceMs });
    });
    await worker.done;
    await report.stopped(worker);
    stuck = worker.stopReason === "stuck";
    if (worker.stopReason === "outdated") {
      console.error(
        `queue work: stopped: ${
          (outdated as OutdatedCodeError | null)?.message ??
            "a contract schema step is newer than this code"
        } (its running jobs finished; exit code ${EXIT.outdated})`,
      );
      return EXIT.outdated;
    }
    if (worker.stopReason === "moved" || worker.stopReason === "lost") {
      const fallback = worker.stopReason === "moved"
        ? "the queue was moved to another store"
        : "the store lost its data";
      console.error(
        `queue work: stopped: ${
          (gone as QueueMovedError | QueueLostError | null)?.message ?? fallback
        } (exit code ${EXIT.failure})`,
      );
      return EXIT.failure;
    }
    return stuck ? EXIT.stuck : EXIT.ok;
  } finally {
    // A Web Worker stuck in synchronous code may never answer; the process exits regardless.
    await (stuck ? closeWithin(queue, 2_000) : queue.close());
  }
}

/** The exit code of a process its signal ended: 128 + the signal's number, as shells report it. */
const SIGNAL_EXIT: Partial<Record<Deno.Signal, number>> = {
  SIGHUP: 129,
  SIGINT: 130,
  SIGTERM: 143,
  SIGBREAK: 149,
};

/**
 * A stop signal that came while `work` was starting (loading the jobs module,
 * opening the queue), before the worker or the supervisor listened: the
 * signal's default action would end the process with 143 (SIGTERM) or 130
 * (SIGINT). The first such signal lets the start finish and then ends the
 * command with 0, having claimed nothing; a second ends a start that hangs
 * at once, with the code the signal's default action gives (not 0: nothing
 * finished).
 */
class EarlyStop implements Disposable {
  #signal: Deno.Signal | null = null;
  #listening: Disposable | null = onSignals((signal, count) => {
    this.#signal ??= signal;
    if (count > 1) Deno.exit(SIGNAL_EXIT[signal] ?? EXIT.failure);
  }, WORK_STOP_SIGNALS);

  /** Whether a stop signal came; if so, says so on stderr. */
  stopped(): boolean {
    if (this.#signal === null) return false;
    console.error(`queue work: stopped by ${this.#signal} before the worker started`);
    return true;
  }

  /** Stops listening (once the worker or the supervisor listens itself); again, does nothing. */
  [Symbol.dispose](): void {
    this.#listening?.[Symbol.dispose]();
    this.#listening = null;
  }
}

/**
 * Calls `onGone` once, when this process was started by a supervisor
 * ({@linkcode SUPERVISOR_PID_ENV}) that is no longer its parent: a
 * supervisor killed with SIGKILL leaves its worker to the init process,
 * where a restarted supervisor would run a second one. Looked at every
 * second; nothing for a worker that no supervisor started.
 */
function whenSupervisorGone(onGone: () => void): Disposable {
  let supervisor = NaN;
  try {
    supervisor = Number(Deno.env.get(SUPERVISOR_PID_ENV));
  } catch {
    // Not granted: a supervisor grants it (childNeeds), so no supervisor started this process.
  }
  if (supervisor !== Deno.ppid) return { [Symbol.dispose]() {} };
  const timer = setInterval(() => {
    if (Deno.ppid === supervisor) return;
    clearInterval(timer);
    onGone();
  }, 1_000);
  Deno.unrefTimer(timer);
  return { [Symbol.dispose]: () => clearInterval(timer) };
}

/**
 * The error naming where a move took the queue `db` names, or null when no
 * move fenced it: a worker there would stop at once (docs/moving.md).
 */
async function movedAway(db: string): Promise<QueueMovedError | null> {
  await using store = await openStore(databaseOptions(db), false);
  const fence = await store.moveFence();
  return fence === null ? null : new QueueMovedError(fence.to, fence.at);
}

/**
 * The database as `work` shows it: a URL without its password, a SQLite file
 * as the absolute path it resolves to (the default depends on the current folder).
 */
function shownDb(db: string): string {
  if (isServerUrl(db)) return redactPassword(db);
  return db === ":memory:" || db.startsWith("file:") ? db : resolve(db);
}

/** What the supervised child must reach, for a partial grant of permissions to keep. */
function childNeeds(settings: WorkSettings): Parameters<typeof childDenoFlags>[1] {
  const files = [filePath(CLI_URL), filePath(settings.jobs)].filter((path) => path !== null);
  const sqlite = isServerUrl(settings.db) || settings.db === ":memory:"
    ? []
    : withFolder(resolve(settings.db));
  const host = isServerUrl(settings.db) ? URL.parse(settings.db) : null;
  return {
    read: [Deno.cwd(), ...files.flatMap((path) => withFolder(path)), ...sqlite],
    write: sqlite,
    net: host === null ? [] : [host.host],
    env: [
      "QUEUE_DB",
      "QUEUE_WORKERS",
      "DATABASE_URL",
      "APP_KEY",
      "APP_PREVIOUS_KEYS",
      "NO_COLOR",
      SUPERVISOR_PID_ENV,
    ],
  };
}

/** Whether a limit flag explains a worker's exit 0. */
function mayFinish(options: WorkOptions): boolean {
  return options.stopWhenEmpty === true || options.maxJobs !== undefined ||
    options.maxTimeMs !== undefined;
}

async function closeWithin(queue: Queue, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([queue.close(), new Promise((resolve) => timer = setTimeout(resolve, ms))]);
  clearTimeout(timer);
}

/** `work --jobs ./jobs.ts [flags]`. */
export const work: Command = {
  name: "work",
  operands: "--jobs PATH",
  summary: "run jobs until stopped (in a supervised child process by default)",
  description: `Runs the jobs of the jobs module (--jobs) from the database until stopped.

Supervised by default: this process runs the worker as a child process and starts a new one
(after 0.5 s, doubling up to 30 s; back to 0.5 s once a child ran a minute) when it crashes or
exits with code 3. A child that exits 0 because of a limit (--stop-when-empty, --once, --max-jobs,
--max-time) ends it with 0; an exit 0 no limit explains (a job called Deno.exit) is restarted.
SIGINT and SIGTERM are passed to the child, and it exits with the child's code; after a second
signal a child still running 2 s later (stuck in synchronous code) is killed with SIGKILL. Before
the first child it opens the queue once, so a jobs module that cannot load fails at once (exit 1).
A child whose supervisor is gone (killed with SIGKILL) stops gracefully within a second.
--no-supervise runs the worker in this process (--db :memory: needs it).

Rolling upgrades: a worker whose code is older than the database keeps working while every newer
schema step is an expand step. Once its heartbeat finds a newer contract step, it claims nothing
more, lets its running jobs finish, and exits with code 75 (the supervisor passes that on rather
than starting the same code again), so the service manager restarts it on the new version
(docs/upgrading.md).

The child runs with this process's Deno flags: its permissions as Deno.permissions reports them
(a kind granted whole, else the paths, hosts and variables the worker needs that are granted),
and, on Linux, its other flags (--config, --import-map, --unstable-*, --no-lock, ...) read from
/proc/self/cmdline. Where those cannot be read, give them with --deno-flags="...".

SIGINT or SIGTERM stops the worker gracefully: it claims nothing more, lets running jobs finish
within --grace-ms, then puts the rest back on their queues. A second signal stops it at once. A
signal while it starts (the jobs module loading) ends it with 0 once the start is done (a second,
at once, with the signal's own code).

In a terminal it shows a status line; otherwise it prints one JSON line per job outcome
({"event":"job:complete","id":…,"name":…,"queue":…,"attempt":…,"durationMs":…}, job:retry,
job:failed, job:cancelled with its reason) and for worker:start, worker:stopping and worker:stop
(with the counts completed, failed, retried and cancelled).`,
  flags: {
    jobs: { type: "string", value: "PATH", help: "the jobs module (required), a path or a URL" },
    queue: {
      type: "string",
      value: "A,B",
      help: "queues to take jobs from, first one first (default: the jobs' queues)",
    },
    concurrency: { type: "string", value: "N", help: "jobs run at once (default 1)" },
    workers: {
      type: "string",
      value: "N",
      help: "Web Workers in the pool (default: min(concurrency, cores))",
    },
    executor: {
      type: "string",
      value: "KIND",
      help: "where handlers run: workers or isolate (default: workers where possible)",
    },
    once: { type: "boolean", help: "run one job, then exit (--max-jobs 1)" },
    "stop-when-empty": { type: "boolean", help: "exit once nothing is due now" },
    "max-jobs": {
      type: "string",
      value: "N",
      help: "exit after claiming N jobs and settling them",
    },
    "max-time": {
      type: "string",
      value: "S",
      help:
        "stop claiming S seconds after the worker started (in each process the supervisor starts), exit once running jobs settle",
    },
    "sleep-ms": {
      type: "string",
      value: "N",
      help: "how often an idle worker looks (default 1000)",
    },
    "lease-ms": {
      type: "string",
      value: "N",
      help: "lease of a claimed job, renewed while it runs (default 30000)",
    },
    "grace-ms": {
      type: "string",
      value: "N",
      help: "on stop, how long running jobs may finish (default 10000)",
    },
    "no-supervise": { type: "boolean", help: "run the worker in this process" },
    "no-schedules": {
      type: "boolean",
      help: "fire no schedule slots here, only run jobs (another worker fires them)",
    },
    "deno-flags": {
      type: "string",
      value: "FLAGS",
      help: 'the supervised worker\'s Deno flags, e.g. --deno-flags="--config=app.json -R -W" ' +
        "(default: this process's own, see above)",
    },
  },
  async run(args) {
    const settings = readSettings(args);
    using early = new EarlyStop();
    if (!settings.supervise) return await runWorker(settings, early);
    if (settings.db === ":memory:") {
      throw new UsageError(
        "work",
        "--db :memory: is a database of one process, and a supervised worker runs in a child process of its own: add --no-supervise",
      );
    }
    // Fail fast on what every child would fail on: a jobs module that cannot load, a bad database,
    // a queue moved to another store. What the store only warns about (a Redis server without an
    // append-only file) each child says when it opens the queue: said here as well, it was twice.
    if (isRedisUrl(settings.db)) {
      (await import("../stores/redis/migrate.ts")).stopPersistenceWarnings();
    }
    await (await Queue.open({ ...databaseOptions(settings.db), jobs: settings.jobs })).close();
    const moved = await movedAway(settings.db);
    if (moved !== null) throw moved;
    if (early.stopped()) return EXIT.ok;
    const supervising = supervise(["work", "--no-supervise", ...args.raw], {
      denoFlags: childDenoFlags(settings.denoFlags, childNeeds(settings)),
      mayFinish: mayFinish(settings.options),
      movedAway: async () => (await movedAway(settings.db)) !== null,
    });
    early[Symbol.dispose](); // the supervisor listens from its first line
    return await supervising;
  },
};
