/**
 * The store's own rules in SQL alone: every statement a c32 isolate drain
 * ran, recorded from the store's `node:sqlite` connection as it ran them
 * (the claim with its columns and lease writes, the start confirmations,
 * the copy into the finished jobs kept by default, the delete, the metrics,
 * the begin marks), then replayed with plain `node:sqlite` on a copy of the
 * database as it was before the drain: the same statements, parameters and
 * transactions, with no worker and none of the queue's JavaScript. The
 * statements are the store's own, read as it prepares them, so this row
 * follows the store whenever its SQL changes. Read beside the drain
 * ceilings, it says how much of a drain's gap to them is the rules' SQL and
 * how much the JavaScript around it.
 *
 * @module
 */
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import { Queue } from "../mod.ts";
import { BENCH_JOBS_URL, noop } from "./jobs.ts";
import { type Measurement, measureRate } from "./measurement.ts";
import { withTempDatabase } from "./temp_database.ts";

/** One call the store made on its connection. */
type Call =
  | { readonly kind: "exec"; readonly sql: string }
  | {
    readonly kind: "run" | "all" | "get";
    readonly sql: string;
    readonly params: readonly SQLInputValue[];
  };

/** What a recorded drain ran, and where its drain began. */
export interface RecordedDrain {
  /** Every call, in order: opening the queue's connection, then the drain. */
  readonly calls: readonly Call[];
  /** The rows each call changed or returned, to check that a replay did the same work. */
  readonly counts: readonly number[];
  /** The index of the drain's first call (those before it opened the queue). */
  readonly drainFrom: number;
  /** Write transactions the drain committed. */
  readonly transactions: number;
}

/** The busy wait the store's connection is opened with (`connection.ts`), in ms. */
const STEP_WAIT_MS = 50;

/** The rows a call's result says it changed or returned. */
function countOf(kind: "run" | "all" | "get", result: unknown): number {
  if (kind === "run") return Number((result as { changes: number | bigint }).changes);
  if (kind === "all") return (result as unknown[]).length;
  return result === undefined ? 0 : 1;
}

/**
 * Runs `work` while every `node:sqlite` call of this process is recorded
 * (statements by their text and bound values, `exec` by its text). The bench
 * runs one thing at a time, so what it records is the store's connection.
 */
async function recording(
  work: (recorded: () => number) => Promise<void>,
): Promise<{ calls: Call[]; counts: number[] }> {
  const calls: Call[] = [];
  const counts: number[] = [];
  const probe = new DatabaseSync(":memory:");
  const statementProto = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Record<
    "run" | "all" | "get",
    (this: StatementSync, ...params: SQLInputValue[]) => unknown
  >;
  probe.close();
  const databaseProto = DatabaseSync.prototype;
  const originals = {
    run: statementProto.run,
    all: statementProto.all,
    get: statementProto.get,
    exec: databaseProto.exec,
  };
  for (const kind of ["run", "all", "get"] as const) {
    const original = originals[kind];
    statementProto[kind] = function (this: StatementSync, ...params: SQLInputValue[]) {
      const result = original.apply(this, params);
      calls.push({ kind, sql: this.sourceSQL, params });
      counts.push(countOf(kind, result));
      return result;
    };
  }
  databaseProto.exec = function (this: DatabaseSync, sql: string) {
    originals.exec.call(this, sql);
    calls.push({ kind: "exec", sql });
    counts.push(0);
  };
  try {
    await work(() => calls.length);
  } finally {
    statementProto.run = originals.run;
    statementProto.all = originals.all;
    statementProto.get = originals.get;
    databaseProto.exec = originals.exec;
  }
  return { calls, counts };
}

/**
 * Dispatches `jobs` no-op jobs to a queue at `path`, closes it, copies the
 * file to `copy` (the database the replay starts from), then reopens the
 * queue and drains it at `concurrency` with the isolate executor, recording
 * every call from the reopening on. The queue's close checkpoints the WAL
 * into the file, so the copy is the whole database.
 */
export async function recordDrain(
  path: string,
  copy: string,
  jobs: number,
  concurrency: number,
): Promise<RecordedDrain> {
  {
    await using queue = await Queue.open({ path, jobs: BENCH_JOBS_URL });
    await queue.dispatchMany(noop, Array.from({ length: jobs }, (_, n) => ({ n })));
  }
  if (await exists(`${path}-wal`)) throw new Error("The closed queue left its WAL file");
  await Deno.copyFile(path, copy);
  let drainFrom = 0;
  const { calls, counts } = await recording(async (recorded) => {
    await using queue = await Queue.open({ path, jobs: BENCH_JOBS_URL });
    drainFrom = recorded();
    const worker = queue.work({ executor: "isolate", concurrency, stopWhenEmpty: true });
    await worker.done;
    if (worker.stats.completed !== jobs) {
      throw new Error(`The recorded drain ran ${worker.stats.completed} of ${jobs} jobs`);
    }
  });
  const transactions = calls.slice(drainFrom)
    .filter((call) => call.kind === "exec" && call.sql === "COMMIT").length;
  return { calls, counts, drainFrom, transactions };
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/**
 * Replays `recorded` on `path` (the copy taken before the drain) with one
 * plain connection: each statement prepared once, its rows read as arrays
 * (the cheapest read), the calls before the drain untimed; the drain's jobs
 * per second. Each call must change or return the rows it did in the store,
 * or the replay did other work than the drain and is refused.
 */
export async function replayDrain(
  path: string,
  recorded: RecordedDrain,
  jobs: number,
): Promise<number> {
  const db = new DatabaseSync(path, { timeout: STEP_WAIT_MS });
  try {
    const prepared = new Map<string, StatementSync>();
    for (const call of recorded.calls) {
      if (call.kind === "exec" || prepared.has(call.sql)) continue;
      const statement = db.prepare(call.sql);
      if (statement.columns().length > 0) statement.setReturnArrays(true);
      prepared.set(call.sql, statement);
    }
    const { calls } = recorded;
    const counts = new Array<number>(calls.length);
    const replay = (from: number, to: number) => {
      for (let index = from; index < to; index++) {
        const call = calls[index]!;
        if (call.kind === "exec") {
          db.exec(call.sql);
          counts[index] = 0;
        } else {
          const statement = prepared.get(call.sql)!;
          counts[index] = countOf(call.kind, statement[call.kind](...call.params));
        }
      }
    };
    replay(0, recorded.drainFrom);
    const rate = await measureRate(jobs, () => replay(recorded.drainFrom, calls.length));
    const differs = counts.findIndex((count, index) => count !== recorded.counts[index]);
    if (differs >= 0) {
      throw new Error(
        `The replay's call ${differs} changed or returned ${
          counts[differs]
        } rows where the store's did ${recorded.counts[differs]}: ${calls[differs]!.sql}`,
      );
    }
    const left = Number(db.prepare("SELECT COUNT(*) AS n FROM jobs").get()!.n);
    if (left !== 0) throw new Error(`The replay left ${left} jobs in the table`);
    return rate;
  } finally {
    db.close();
  }
}

/** The concurrency of the drain whose statements are replayed. */
export const REPLAYED_CONCURRENCY = 32;

/**
 * The store's rules in SQL alone: the statements of an isolate drain at
 * {@linkcode REPLAYED_CONCURRENCY}, replayed with no worker, read against the
 * minimal table's drain ceiling and the same ceiling on the store's schema.
 */
export function storeRulesMeasurement(): Measurement {
  return {
    id: "raw-drain-store-rules",
    name: "store's rules in SQL alone",
    label:
      `raw SQLite: the statements and transactions of a c${REPLAYED_CONCURRENCY} isolate drain (claim, holds ahead, start confirmations, finished-job copy, delete, metrics), recorded from the store and replayed with no worker`,
    baseline: "raw-drain-batched-minimal",
    alsoComparedWith: ["raw-drain-batched"],
    run: (jobs) => storeRulesRate(jobs, REPLAYED_CONCURRENCY),
  };
}

/**
 * Records a drain of `jobs` no-op jobs at `concurrency` on a fresh database
 * and replays its statements on a copy of it; the replay's jobs per second.
 */
export function storeRulesRate(jobs: number, concurrency: number): Promise<number> {
  return withTempDatabase(async (path) => {
    const copy = `${path}.before-drain`;
    const recorded = await recordDrain(path, copy, jobs, concurrency);
    return await replayDrain(copy, recorded, jobs);
  });
}
