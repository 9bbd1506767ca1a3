/**
 * The options of {@linkcode Queue.work}, and the one place their defaults are
 * resolved and checked.
 *
 * @internal
 * @module
 */
import { optionBag, optionNames } from "../option_bags.ts";
import { shown } from "../shown.ts";
import { assertQueueName } from "../names.ts";

/** Options for {@linkcode Queue.work}. */
export interface WorkOptions {
  /**
   * Queues to take jobs from, in order: every due job of the first before any of the second.
   * @default {the queues of the registered jobs, "default" first}
   */
  queues?: readonly string[];
  /**
   * Jobs run at once, across all Web Workers.
   * @default {1}
   */
  concurrency?: number;
  /**
   * Where handlers run: `"workers"` in a pool of Web Workers (hard timeouts,
   * CPU-bound jobs in parallel; needs the jobs module as a URL), or
   * `"isolate"` in this isolate (for hosts without `Worker`).
   * @default {"workers" where `Worker` exists and the jobs came from a module URL, else "isolate"}
   */
  executor?: ExecutorKind;
  /**
   * Web Workers in the pool, each running many jobs; only with `executor: "workers"`.
   * @default {the smaller of concurrency and the machine's cores}
   */
  workers?: number;
  /**
   * How long a claimed job stays leased without renewal; renewed every third of it (at most
   * 10 s apart, the worker's heartbeat riding on the same timer).
   * A job whose worker died comes back after this.
   * @default {30_000}
   */
  leaseMs?: number;
  /**
   * On stop, how long running jobs may finish before they are aborted and released.
   * @default {10_000}
   */
  graceMs?: number;
  /**
   * How often an idle worker looks for due jobs.
   * @default {1_000}
   */
  pollMs?: number;
  /**
   * Stop once nothing is due now (delayed jobs do not keep the worker alive).
   * On PostgreSQL a claim skips a job whose row another transaction holds
   * for a moment (a `dispatchAndWait()` marking it awaited): such a job
   * keeps the worker claiming until it is taken.
   * @default {false}
   */
  stopWhenEmpty?: boolean;
  /**
   * Stop claiming after this many jobs, and stop once they settle.
   * @default {Infinity}
   */
  maxJobs?: number;
  /**
   * Stop claiming after this long, and stop once running jobs settle.
   * @default {Infinity}
   */
  maxTimeMs?: number;
  /**
   * Fire the schedules' due slots in this worker's ticks. Turn it off for
   * workers that should only run jobs (`work --no-schedules`); any one
   * worker with it on fires every slot, once.
   * @default {true}
   */
  schedules?: boolean;
  /**
   * In Web Workers, also write what a running handler prints with
   * `console.log`/`info`/`warn`/`error`/`debug` into its job's log (it is
   * still printed). Not in the isolate executor, whose console is the app's.
   * @default {false}
   */
  captureConsole?: boolean;
  /**
   * The most a job's log keeps, in bytes (the lines of all its attempts
   * together): past it the oldest lines are dropped, and one line says how many.
   * @default {65_536}
   */
  maxLogBytes?: number;
}

/** Where handlers run. */
export type ExecutorKind = "workers" | "isolate";

/** {@linkcode WorkOptions} with every default filled in. */
export type ResolvedWorkOptions = {
  readonly [K in keyof WorkOptions]-?: NonNullable<WorkOptions[K]>;
};

/** Fills in defaults and refuses bad values with an error naming the option. */
export function resolveWorkOptions(
  given: WorkOptions | undefined,
  defaultQueues: readonly string[],
  canUseWorkers: boolean,
): ResolvedWorkOptions {
  const options = optionBag(given, "work", WORK_OPTIONS) ?? {};
  const queues = options.queues ?? defaultQueues;
  if (!Array.isArray(queues) || queues.length === 0) {
    throw new TypeError("work: queues must be a non-empty array of queue names");
  }
  for (const queue of queues) assertQueueName(queue, "work");
  if (new Set(queues).size !== queues.length) {
    throw new TypeError(`work: queues lists a queue twice: ${queues.join(",")}`);
  }
  const concurrency = count("concurrency", options.concurrency ?? 1);
  const executor = options.executor ?? (canUseWorkers ? "workers" : "isolate");
  if (executor !== "workers" && executor !== "isolate") {
    throw new TypeError(`work: executor must be "workers" or "isolate": got ${shown(executor)}`);
  }
  if (executor === "workers" && !canUseWorkers) {
    throw new TypeError(
      'work: executor "workers" needs Web Workers and the jobs given as a module URL (Queue.open({ jobs: import.meta.resolve("./jobs.ts") }))',
    );
  }
  const cores = Math.max(1, navigator.hardwareConcurrency ?? 1);
  // Checked whatever the executor: a bad value is refused, not left for a change of executor.
  const workers = options.workers === undefined ? undefined : count("workers", options.workers);
  return {
    queues: [...queues],
    concurrency,
    executor,
    workers: executor === "isolate" ? 0 : Math.min(workers ?? cores, concurrency),
    leaseMs: duration("leaseMs", options.leaseMs ?? 30_000, 100),
    graceMs: duration("graceMs", options.graceMs ?? 10_000, 0),
    pollMs: duration("pollMs", options.pollMs ?? 1_000, 1),
    stopWhenEmpty: flag("stopWhenEmpty", options.stopWhenEmpty ?? false),
    maxJobs: options.maxJobs === undefined || options.maxJobs === Infinity
      ? Infinity
      : jobCount("maxJobs", options.maxJobs),
    maxTimeMs: options.maxTimeMs === undefined
      ? Infinity
      : timeLimitMs("maxTimeMs", options.maxTimeMs),
    schedules: flag("schedules", options.schedules ?? true),
    captureConsole: flag("captureConsole", options.captureConsole ?? false),
    maxLogBytes: logBytes(options.maxLogBytes ?? 65_536),
  };
}

/** Every option of {@linkcode Queue.work}. */
const WORK_OPTIONS = optionNames<WorkOptions>()([
  "queues",
  "concurrency",
  "executor",
  "workers",
  "leaseMs",
  "graceMs",
  "pollMs",
  "stopWhenEmpty",
  "maxJobs",
  "maxTimeMs",
  "schedules",
  "captureConsole",
  "maxLogBytes",
]);

function flag(name: string, value: boolean): boolean {
  if (typeof value !== "boolean") {
    throw new TypeError(`work: ${name} must be true or false: got ${shown(value)}`);
  }
  return value;
}

function logBytes(value: number): number {
  if (!Number.isSafeInteger(value) || value < 1_024 || value > 16_777_216) {
    throw new RangeError(
      `work: maxLogBytes must be an integer number of bytes from 1024 to 16777216: got ${
        shown(value)
      }`,
    );
  }
  return value;
}

/** A number of jobs: a whole number a double holds exactly (up to 2^53 - 1), or Infinity. */
function jobCount(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(
      `work: ${name} must be an integer from 1 to 2^53 - 1, or Infinity: got ${shown(value)}`,
    );
  }
  return value;
}

function count(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1 || value > 10_000) {
    throw new RangeError(`work: ${name} must be an integer from 1 to 10000: got ${shown(value)}`);
  }
  return value;
}

/**
 * A time limit, checked as `work({ maxTimeMs })` checks it: `Infinity` for
 * none, else a number of ms from 0 to 2147483647 (the longest a timer
 * waits); `where` starts the error (`workUntilEmpty` checks its own limit
 * with it). @internal
 */
export function timeLimitMs(name: string, value: number, where = "work"): number {
  return value === Infinity ? Infinity : duration(name, value, 0, where);
}

function duration(name: string, value: number, min: number, where = "work"): number {
  if (!Number.isFinite(value) || value < min || value > 2_147_483_647) {
    throw new RangeError(
      `${where}: ${name} must be a number of ms from ${min} to 2147483647: got ${shown(value)}`,
    );
  }
  return value;
}
