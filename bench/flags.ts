/**
 * The command-line flags of `deno task bench`, parsed and checked.
 *
 * @module
 */
import { CPU_JOB_MS, CPU_JOBS } from "./cpu.ts";
import { type Group, GROUPS, isGroup } from "./groups.ts";
import {
  IDLE_POLL_MS,
  IN_PROCESS_JOBS,
  PICKUP_JOBS,
  POLL_ONLY_JOBS,
  POLL_ONLY_MS,
} from "./pickup.ts";

/** What the flags ask for, defaults filled in. */
export interface BenchFlags {
  /** Runs per measurement; every figure is the median of them. */
  readonly runs: number;
  /** Jobs per run of each measurement whose size is not fixed. */
  readonly jobs: number;
  /** The groups of measurements to run (their baselines run too). */
  readonly only: ReadonlySet<Group>;
  /** Also print the results as JSON. */
  readonly json: boolean;
  /** Print the usage and do nothing else. */
  readonly help: boolean;
}

/** A flag the bench does not know, or a bad value: the caller prints it and exits 2. */
export class UsageError extends Error {
  /** `message` says which flag and why. */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** Most jobs per run of a Web Worker drain (`--jobs` lowers it, never raises it). */
export const MAX_WORKER_DRAIN_JOBS = 3_000;

/** The usage text. */
export const USAGE = `Usage: deno task bench [--runs N] [--jobs N] [--only GROUP,...] [--json]

  --runs N         runs of each measurement; every figure is their median (default 5)
  --jobs N         jobs per run of the ceiling, dispatch and isolate drain measurements
                   (default 20000); the Web Worker drains run min(N, ${MAX_WORKER_DRAIN_JOBS})
  --only GROUP,... run only these groups (default: all), plus the baselines their rows
                   are compared with:
                     ceiling   raw node:sqlite insert and insert + claim + delete
                     dispatch  queue.dispatch() and queue.dispatchMany()
                     drain     queue.work() drains of no-op jobs, isolate executor,
                               concurrency 1, 8, 32
                     workers   the same drains in Web Workers (runs drain and ceiling too)
                     cpu       ${CPU_JOBS} CPU-bound jobs of ~${CPU_JOB_MS} ms each per run (fixed),
                               concurrency 2: isolate executor, 1 Web Worker, 2 Web Workers,
                               and the same work in 1 and 2 plain Web Workers (no queue)
                     pickup    pick-up latency (p50/p99) of serial jobs, fixed counts:
                               ${PICKUP_JOBS} per run for a worker process woken by its WAL watch
                               (pollMs ${IDLE_POLL_MS}); ${IN_PROCESS_JOBS} for a worker in this process;
                               ${POLL_ONLY_JOBS} for the baseline, a worker process polling every
                               ${POLL_ONLY_MS} ms with no watch
  --json           also print the results as JSON, after the tables
  --help           print this and exit`;

const DEFAULT_RUNS = 5;
const DEFAULT_JOBS = 20_000;
const MAX_RUNS = 101;
const MAX_JOBS = 10_000_000;

/**
 * Parses `args` (`Deno.args`). Accepts `--runs N` and `--runs=N` alike;
 * throws a {@linkcode UsageError} for an unknown flag, a positional argument,
 * an unknown group, or a value that is not a whole number in range.
 */
export function parseBenchFlags(args: readonly string[]): BenchFlags {
  let runs = DEFAULT_RUNS;
  let jobs = DEFAULT_JOBS;
  let only: Set<Group> | null = null;
  let json = false;
  let help = false;
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    const equals = arg.indexOf("=");
    const name = arg.startsWith("--") && equals > 0 ? arg.slice(0, equals) : arg;
    const inline = name === arg ? undefined : arg.slice(equals + 1);
    switch (name) {
      case "--json":
      case "--help":
      case "-h":
        if (inline !== undefined) throw new UsageError(`${name} takes no value: got ${arg}`);
        if (name === "--json") json = true;
        else help = true;
        break;
      case "--runs":
      case "--jobs": {
        const value = inline ?? args[++index];
        if (value === undefined) throw new UsageError(`${name} needs a number: got nothing`);
        if (name === "--runs") runs = wholeNumber(name, value, MAX_RUNS);
        else jobs = wholeNumber(name, value, MAX_JOBS);
        break;
      }
      case "--only": {
        const value = inline ?? args[++index];
        if (value === undefined) throw new UsageError("--only needs a list of groups: got nothing");
        only ??= new Set();
        for (const group of groups(value)) only.add(group);
        break;
      }
      default:
        throw new UsageError(
          arg.startsWith("-") ? `unknown flag: ${arg}` : `unexpected argument: ${arg}`,
        );
    }
  }
  return { runs, jobs, only: only ?? new Set(GROUPS), json, help };
}

function wholeNumber(name: string, value: string, max: number): number {
  const number = /^[0-9]+$/.test(value) ? Number(value) : NaN;
  if (!(number >= 1 && number <= max)) {
    throw new UsageError(`${name} must be a whole number from 1 to ${max}: got ${value}`);
  }
  return number;
}

function groups(value: string): Group[] {
  const names = value.split(",").map((name) => name.trim());
  if (names.some((name) => name === "")) {
    throw new UsageError(`--only needs group names separated by commas: got "${value}"`);
  }
  for (const name of names) {
    if (!isGroup(name)) {
      throw new UsageError(`--only: unknown group "${name}": choose from ${GROUPS.join(", ")}`);
    }
  }
  return names as Group[];
}
