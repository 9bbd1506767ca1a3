/**
 * The command-line flags of `deno task bench`, parsed and checked.
 *
 * @module
 */
import { CEILING_BATCH_SIZE } from "./ceiling.ts";
import { CPU_JOB_MS, CPU_JOBS } from "./cpu.ts";
import {
  DEFAULT_SCALE_CHUNK,
  DEFAULT_SCALE_JOBS,
  SCALE_CONCURRENCY,
  type ScaleOptions,
} from "./scale.ts";
import { FAN_OUT } from "./flow_fan_in.ts";
import { type Group, GROUPS, isGroup, POSTGRES_GROUPS, REDIS_GROUPS } from "./groups.ts";
import {
  IDLE_POLL_MS,
  IN_PROCESS_JOBS,
  PICKUP_JOBS,
  POLL_ONLY_JOBS,
  POLL_ONLY_MS,
} from "./pickup.ts";
import {
  DRAIN_PROCESSES,
  MAX_POSTGRES_COMMIT_JOBS,
  MAX_POSTGRES_JOBS,
  MAX_POSTGRES_PROCESS_DRAIN_JOBS,
  POSTGRES_DRAIN_CONCURRENCIES,
  POSTGRES_PICKUP_JOBS,
  POSTGRES_PROCESS_DRAIN_CONCURRENCIES,
} from "./postgres_sizes.ts";
import { DELAYED_BESIDE } from "./queue.ts";
import {
  MAX_REDIS_JOBS,
  MAX_REDIS_PROCESS_DRAIN_JOBS,
  REDIS_PICKUP_JOBS,
  REDIS_PROCESS_CONCURRENCY,
} from "./redis_sizes.ts";
import { DEFAULT_REDIS_URL } from "./redis_url.ts";
import { DEFAULT_POSTGRES_URL, isPostgresUrl, redactPostgresUrl } from "./postgres_url.ts";

/** The stores the bench can measure. */
export const STORES = ["sqlite", "postgres", "redis"] as const;

/** One store the bench can measure. */
export type StoreName = typeof STORES[number];

/** What the flags ask for, defaults filled in. */
export interface BenchFlags {
  /** The store measured. */
  readonly store: StoreName;
  /** `--postgres-url`, or null when not given (the environment then decides). */
  readonly postgresUrl: string | null;
  /** Runs per measurement; every figure is the median of them. */
  readonly runs: number;
  /** Jobs per run of each measurement whose size is not fixed. */
  readonly jobs: number;
  /** The groups of measurements to run (their baselines run too). */
  readonly only: ReadonlySet<Group>;
  /** Also print the results as JSON. */
  readonly json: boolean;
  /** Also measure the peers (other queues) on the same workloads. */
  readonly peers: boolean;
  /** Print the usage and do nothing else. */
  readonly help: boolean;
  /** `--only soak`: run the soak (and nothing else) for this many minutes; null otherwise. */
  readonly soakMinutes: number | null;
  /** `--only scale`: how to run the scale bench (and nothing else); null otherwise. */
  readonly scale: ScaleOptions | null;
}

/** A flag the bench does not know, or a bad value: the caller prints it and exits 2. */
export class UsageError extends Error {
  /** `message` says which flag and why. */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** How long the soak dispatches, in minutes, without `--soak-minutes`. */
const DEFAULT_SOAK_MINUTES = 10;

const PG_CONCURRENCIES = POSTGRES_DRAIN_CONCURRENCIES.join(", ");
const PG_PROCESS_CONCURRENCIES = POSTGRES_PROCESS_DRAIN_CONCURRENCIES.join(" and ");
const DELAYED = DELAYED_BESIDE.toLocaleString("en-US");
const SCALE_JOBS_TEXT = DEFAULT_SCALE_JOBS.toLocaleString("en-US");
const SCALE_CHUNK_TEXT = DEFAULT_SCALE_CHUNK.toLocaleString("en-US");

/** The usage text. */
export const USAGE =
  `Usage: deno task bench [--store sqlite|postgres|redis] [--postgres-url URL] [--runs N]
                       [--jobs N] [--only GROUP,...] [--peers] [--json]

  --store NAME     the store to measure: sqlite (default), postgres, or redis (the server
                   of QUEUE_BENCH_REDIS_URL, else ${DEFAULT_REDIS_URL}; every run on a fresh
                   key prefix, deleted afterwards)
  --postgres-url URL
                   the server of --store postgres (default: QUEUE_TEST_POSTGRES_URL, else
                   DATABASE_URL when it is a postgres:// URL, else
                   ${DEFAULT_POSTGRES_URL}); every run gets a fresh schema,
                   dropped afterwards
  --runs N         runs of each measurement; every figure is their median (default 5)
  --jobs N         jobs per run of the ceiling, dispatch and drain measurements (isolate
                   and Web Workers; default 20000); on PostgreSQL every row runs
                   min(N, ${MAX_POSTGRES_JOBS}), those that commit once per job min(N, ${MAX_POSTGRES_COMMIT_JOBS})
  --only GROUP,... run only these groups (default: all of the store's), plus the baselines
                   their rows are compared with. SQLite:
                     ceiling   raw node:sqlite insert and insert + claim + delete
                     dispatch  queue.dispatch() and queue.dispatchMany()
                     drain     queue.work() drains of no-op jobs, isolate executor,
                               concurrency 1, 8, 32; at 32 of jobs dispatched in a
                               span that each write one ctx.log() line; at 32 keeping
                               no finished job (keepFinishedMs: 0), as the ceiling
                     workers   the same drains in Web Workers (runs drain and ceiling too),
                               a raw round trip to a bare Web Worker, one at a time, and
                               the own-loop drains: Web Workers that each drain on their own
                               connection (the other shape for the executor, unsupervised)
                     cpu       ${CPU_JOBS} CPU-bound jobs of ~${CPU_JOB_MS} ms each per run (fixed),
                               concurrency 2: isolate executor, 1 Web Worker, 2 Web Workers,
                               and the same work in 1 and 2 plain Web Workers (no queue)
                     steps     durable steps, isolate c32: jobs of one ctx.step against the
                               no-op drain (one checkpoint's cost), and jobs of ten steps in
                               steps per second against plain jobs (runs drain too)
                     fair      isolate c32 drain of no-op jobs in 1,000 groups (fair
                               scheduling) against the plain drain (runs drain too)
                     peers     the same as --peers
                     pickup    pick-up latency (p50/p99) of serial jobs, fixed counts:
                               ${PICKUP_JOBS} per run for a worker process woken by its WAL watch
                               (pollMs ${IDLE_POLL_MS}); ${IN_PROCESS_JOBS} for a worker in this process;
                               ${POLL_ONLY_JOBS} for the baseline, a worker process polling every
                               ${POLL_ONLY_MS} ms with no watch
                     flows     a flow of 1 → ${FAN_OUT} → 1 no-op jobs: the last parent's
                               handler ends → the join's handler starts (3 flows per run)
                   PostgreSQL (--store postgres):
                     ceiling   raw postgres driver, server's durability settings: autocommit
                               INSERT, all rows in one INSERT … unnest, and insert + claim
                               (FOR UPDATE SKIP LOCKED) + delete, ${CEILING_BATCH_SIZE} per transaction
                     dispatch  queue.dispatch() and queue.dispatchMany()
                     drain     isolate drains of no-op jobs: 1 worker in this process at concurrency
                               ${PG_CONCURRENCIES}, and at 32 beside ${DELAYED} delayed priority-5 jobs;
                               1 and ${DRAIN_PROCESSES} worker processes on one schema at ${PG_PROCESS_CONCURRENCIES}
                               each (${
    MAX_POSTGRES_PROCESS_DRAIN_JOBS.toLocaleString("en-US")
  } jobs per run)
                     pickup    pick-up latency (p50/p99) of serial jobs in a worker process:
                               ${POSTGRES_PICKUP_JOBS} per run woken by LISTEN/NOTIFY (pollMs ${IDLE_POLL_MS}); ${POLL_ONLY_JOBS} for
                               the baseline, polling every ${POLL_ONLY_MS} ms without LISTEN
                     steps     the SQLite steps rows, in this process on the server
                     peers     the same as --peers
                   Redis (--store redis), each row beside BullMQ's (its defaults) on the same
                   server, BullMQ's the baseline (target: ours 1.5× BullMQ's):
                     dispatch  queue.dispatch() against queue.add(); queue.dispatchMany() against
                               queue.addBulk() (min(N, ${MAX_REDIS_JOBS}) jobs)
                     drain     isolate drains in this process at concurrency 1, 8, 32 against
                               BullMQ's Worker (min(N, ${MAX_REDIS_JOBS}) jobs); ${DRAIN_PROCESSES} worker processes ×
                               concurrency ${REDIS_PROCESS_CONCURRENCY} against as many BullMQ worker processes
                               (min(N, ${MAX_REDIS_PROCESS_DRAIN_JOBS}) jobs)
                     pickup    pick-up latency (p50/p99) of ${REDIS_PICKUP_JOBS} serial jobs: a worker process
                               woken by the wake-up channel, against BullMQ's idle Worker
                     steps     the SQLite steps rows on the server, against our own drain at
                               concurrency 32 (BullMQ has no durable steps)
                   soak      (only alone, SQLite) ${DEFAULT_SOAK_MINUTES} minutes of mixed dispatch (ok, failing,
                               delayed, unique) drained by 2 worker processes: worker RSS at
                               1, 5 and 10 min, open files, jobs/s, counters against rows
                   scale     (only alone, SQLite) ${SCALE_JOBS_TEXT} no-op jobs stored by a process with
                               dispatchMany (${SCALE_CHUNK_TEXT} per call), then drained by a worker process
                               at concurrency ${SCALE_CONCURRENCY}; the same on --jobs jobs before and after,
                               as the baseline: drain rate of the first --jobs jobs of the big
                               queue against the small one's, rate per tenth, peak RSS of both
                               processes (from /proc), largest WAL; 70 s at load 2
  --soak-minutes N how long the soak dispatches (default ${DEFAULT_SOAK_MINUTES})
  --scale-jobs N   jobs of the scale bench's big queue (default ${SCALE_JOBS_TEXT})
  --scale-chunk N  jobs per dispatchMany call in the scale bench (default ${SCALE_CHUNK_TEXT})
  --scale-v8-flags FLAGS
                   run the scale bench's child processes with --v8-flags=FLAGS (e.g.
                   --max-semi-space-size=2), to see what V8's heap sizing does to their RSS
  --peers          also measure other queues on the same workloads, each row beside ours with
                   its ratio to ours. SQLite: Deno KV queues (a child process with
                   --unstable-kv) and BullMQ when Redis answers at 127.0.0.1:6379, fixed
                   job counts; plainjob (in this process on node:sqlite, --jobs jobs).
                   PostgreSQL: pg-boss and Graphile Worker, each run in a fresh database,
                   dropped afterwards
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
  let store: StoreName = "sqlite";
  let postgresUrl: string | null = null;
  let runs = DEFAULT_RUNS;
  let jobs = DEFAULT_JOBS;
  let only: Set<Group> | null = null;
  let json = false;
  let peers = false;
  let help = false;
  let soak = false;
  let soakMinutes = DEFAULT_SOAK_MINUTES;
  let scale = false;
  let scaleJobs = DEFAULT_SCALE_JOBS;
  let scaleChunk = DEFAULT_SCALE_CHUNK;
  let scaleV8Flags: string | null = null;
  const scaleFlags: string[] = [];
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    const equals = arg.indexOf("=");
    const name = arg.startsWith("--") && equals > 0 ? arg.slice(0, equals) : arg;
    const inline = name === arg ? undefined : arg.slice(equals + 1);
    switch (name) {
      case "--json":
      case "--peers":
      case "--help":
      case "-h":
        if (inline !== undefined) throw new UsageError(`${name} takes no value: got ${arg}`);
        if (name === "--json") json = true;
        else if (name === "--peers") peers = true;
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
      case "--store": {
        const value = inline ?? args[++index];
        if (!(STORES as readonly (string | undefined)[]).includes(value)) {
          throw new UsageError(`--store must be ${STORES.join(" or ")}: got ${value ?? "nothing"}`);
        }
        store = value as StoreName;
        break;
      }
      case "--postgres-url": {
        const value = inline ?? args[++index];
        if (value === undefined || !isPostgresUrl(value)) {
          throw new UsageError(
            `--postgres-url needs a postgres:// or postgresql:// URL: got ${
              value === undefined ? "nothing" : redactPostgresUrl(value)
            }`,
          );
        }
        postgresUrl = value;
        break;
      }
      case "--soak-minutes": {
        const value = inline ?? args[++index];
        if (value === undefined) throw new UsageError("--soak-minutes needs a number: got nothing");
        soakMinutes = wholeNumber(name, value, 24 * 60);
        break;
      }
      case "--scale-jobs":
      case "--scale-chunk": {
        const value = inline ?? args[++index];
        if (value === undefined) throw new UsageError(`${name} needs a number: got nothing`);
        scaleFlags.push(name);
        if (name === "--scale-jobs") scaleJobs = wholeNumber(name, value, MAX_JOBS);
        else scaleChunk = wholeNumber(name, value, MAX_JOBS);
        break;
      }
      case "--scale-v8-flags": {
        const value = inline ?? args[++index];
        if (value === undefined || !/^--[a-z0-9_=.,-]+$/i.test(value)) {
          throw new UsageError(
            `--scale-v8-flags needs V8 flags such as --max-semi-space-size=2: got ${
              value ?? "nothing"
            }`,
          );
        }
        scaleFlags.push(name);
        scaleV8Flags = value;
        break;
      }
      case "--only": {
        const value = inline ?? args[++index];
        if (value === undefined) throw new UsageError("--only needs a list of groups: got nothing");
        if (value.trim() === "soak") {
          soak = true;
          break;
        }
        if (value.trim() === "scale") {
          scale = true;
          break;
        }
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
  if (postgresUrl !== null && store !== "postgres") {
    throw new UsageError("--postgres-url needs --store postgres");
  }
  const storeGroups: readonly Group[] = store === "postgres"
    ? POSTGRES_GROUPS
    : store === "redis"
    ? REDIS_GROUPS
    : GROUPS;
  const unmeasured = [...only ?? []].filter((group) => !storeGroups.includes(group));
  if (unmeasured.length > 0) {
    throw new UsageError(
      `--only: --store ${store} does not measure ${unmeasured.join(", ")}: choose from ${
        storeGroups.join(", ")
      }`,
    );
  }
  if (soak && (only !== null || store !== "sqlite" || peers)) {
    throw new UsageError(
      "--only soak runs alone, on SQLite: drop the other groups, --peers and --store",
    );
  }
  if (scale && (only !== null || soak || store !== "sqlite" || peers)) {
    throw new UsageError(
      "--only scale runs alone, on SQLite: drop the other groups, --peers and --store",
    );
  }
  if (!scale && scaleFlags.length > 0) {
    throw new UsageError(`${scaleFlags.join(", ")}: only with --only scale`);
  }
  if (store === "redis" && peers) {
    throw new UsageError("--store redis measures BullMQ beside every row: drop --peers");
  }
  if (only?.has("peers")) peers = true;
  const chosen = only ?? new Set(storeGroups.filter((group) => group !== "peers"));
  if (peers) chosen.add("peers");
  return {
    store,
    postgresUrl,
    runs,
    jobs,
    only: chosen,
    json,
    peers,
    help,
    soakMinutes: soak ? soakMinutes : null,
    scale: scale ? { jobs: scaleJobs, chunk: scaleChunk, v8Flags: scaleV8Flags } : null,
  };
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
