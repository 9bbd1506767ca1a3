/**
 * What every area of the store contract builds its cases from: the opened
 * store a case gets, the shape of an area, and the times, job rows and
 * claims the cases share. Times are passed in, never read from a clock.
 *
 * @module
 */
import assert from "node:assert/strict";
import type {
  ClaimedJob,
  ClaimRequest,
  NewJobRow,
  ScheduleRow,
  Settlement,
  Store,
  StoredError,
} from "../../../src/stores/store.ts";

/** A fresh, empty store; disposing it closes the store and drops its data. */
export interface OpenedStore extends AsyncDisposable {
  /** The store under test. */
  readonly store: Store;
  /**
   * Opens another store on the same database (another connection, as
   * another process would), for the case to close. Absent where the
   * database has one connection only (SQLite's `:memory:`).
   */
  readonly another?: () => Promise<Store>;
  /**
   * Whether the store runs the app's SQL in its transactions (`tx.query`):
   * false for a store that is not a SQL database (Redis), whose
   * `tx.query` refuses. Cases that need SQL run only where this is true;
   * the cases for a store without SQL only where it is false.
   * @default {true}
   */
  readonly sql?: boolean;
  /**
   * Whether two transactions can be open at once, each holding what it
   * wrote: false for a store with one writer (SQLite), where a transaction
   * waits for the open one to end, so that none ever waits for another in
   * a cycle (a deadlock). Cases about deadlocks run only where this is true.
   * @default {true}
   */
  readonly concurrentTransactions?: boolean;
}

/**
 * Which stores a case is for, by whether they run SQL and whether their
 * transactions can be open together; every store when absent.
 */
export interface ContractCaseOptions {
  /**
   * `true`: the case needs `tx.query` (stores that run SQL); `false`: the
   * case states what a store without SQL does instead.
   */
  readonly sql?: boolean;
  /** `true`: the case needs two transactions open at once (see `OpenedStore.concurrentTransactions`). */
  readonly concurrentTransactions?: true;
}

/** A method of the `Store` interface. */
export type StoreMethod = Exclude<keyof Store, symbol>;

/**
 * Registers one case: `fn` runs on a fresh store, disposed afterwards. A
 * case for the other kind of store (see {@linkcode ContractCaseOptions})
 * shows as an ignored step that says why, and its body does not run.
 */
export type ContractTest = (
  what: string,
  fn: (store: Store, opened: OpenedStore) => Promise<void>,
  options?: ContractCaseOptions,
) => void;

/** A file of the contract: the `Store` methods its cases hold to their contract, and the cases. */
export interface ContractArea {
  /** The methods this area states the contract of (what each returns, changes and refuses). */
  readonly covers: readonly StoreMethod[];
  /** Registers the area's cases through `test`. */
  readonly register: (test: ContractTest) => void;
}

/** The time every case counts from. */
export const T0 = Date.UTC(2026, 0, 1);
/** The lease every claim takes unless a case says otherwise. */
export const LEASE_MS = 30_000;

/** A job row due at `T0` in "default", with `overrides` applied. */
export function newJob(overrides: Partial<NewJobRow> = {}): NewJobRow {
  const what = { queue: "default", name: "contract-job", payload: '{"n":0}', priority: 0 };
  return { ...what, availableAt: T0, retryUntil: null, createdAt: T0, ...overrides };
}

/** Claims with defaults: queue "default", limit 10, at `T0`, lease `LEASE_MS`, token 1. */
export function claim(store: Store, request: Partial<ClaimRequest> = {}): Promise<ClaimedJob[]> {
  const defaults = { queues: ["default"], limit: 10, now: T0, leaseMs: LEASE_MS, token: 1 };
  return store.claim({ ...defaults, ...request });
}

/**
 * Records, as a worker's tick does (`TickRecords.begun`), that the handlers
 * of jobs `ids`, which claim `token` holds, began: a worker death from then
 * on charges them a crash.
 */
export async function begin(store: Store, token: number, ...ids: number[]): Promise<void> {
  await store.settle([], undefined, { begun: ids.map((id) => ({ id, token })) });
}

/** The ids of `jobs`, in their order. */
export const ids = (jobs: readonly { id: number }[]): number[] => jobs.map((job) => job.id);

/** `numbers` in ascending order (a copy). */
export const sorted = (numbers: readonly number[]): number[] => [...numbers].sort((a, b) => a - b);

/** Rows as plain objects (drivers may hand out objects with a null prototype). */
export const plain = <R extends object>(rows: readonly R[]): R[] => rows.map((row) => ({ ...row }));

/** Counts by queue as `[pending, delayed, reserved, failed]`. */
export async function countsAt(store: Store, now: number): Promise<Record<string, number[]>> {
  return Object.fromEntries(
    (await store.counts(now)).map((c) => [c.queue, [c.pending, c.delayed, c.reserved, c.failed]]),
  );
}

/** The error the cases' failed attempts end with. */
export const BOOM: StoredError = {
  message: "Error: boom",
  stack: "Error: boom\n    at handle (a.ts:1:1)",
};

/** A success of the attempt `token` holds on job `id`. */
export const complete = (id: number, token: number, at = T0): Settlement => ({
  kind: "complete",
  id,
  token,
  at,
});

/** A put-back of the attempt `token` holds on job `id`, due again at `availableAt`. */
export const release = (
  id: number,
  token: number,
  availableAt: number,
  error: string | null = null,
) => ({ kind: "release", id, token, at: T0, availableAt, error, refundAttempt: false }) as const;

/** A failure for good of the attempt `token` holds on job `id`. */
export const fail = (id: number, token: number, at = T0, attempts = 1, error = BOOM) =>
  ({ kind: "fail", id, token, error, attempts, at }) as const;

/** Pushes one job per `failedAt`, claims each and fails it then; returns the ids. */
export async function failedJobs(
  store: Store,
  failedAts: number[],
  job: Partial<NewJobRow> = {},
): Promise<number[]> {
  const failed: number[] = [];
  for (const failedAt of failedAts) {
    const [id] = await store.insertJobs([newJob(job)]);
    const [claimed] = await claim(store, { queues: [job.queue ?? "default"], limit: 1, token: 77 });
    assert.equal(claimed?.id, id);
    assert.deepEqual((await store.settle([fail(id!, 77, failedAt)])).applied, [true]);
    failed.push(id!);
  }
  return failed;
}

/**
 * Opens a transaction on `store` that writes one job and then never ends:
 * resolves once it wrote, with what the transaction settled with (null
 * when it committed, else its error), once that comes.
 */
export async function stuckTransaction(
  store: Pick<Store, "transaction">,
): Promise<{ readonly outcome: Promise<Error | null> }> {
  const entered = Promise.withResolvers<void>();
  const outcome = store.transaction(async (tx) => {
    await tx.insertJobs([newJob()]);
    entered.resolve();
    await new Promise(() => {}); // never settles
  }).then(() => null, (error: Error) => error);
  await entered.promise;
  return { outcome };
}

/** A schedule of job "tick" every minute in "default", with `overrides` (its definition follows them). */
export function schedule(name: string, overrides: Partial<ScheduleRow> = {}): ScheduleRow {
  const row = {
    name,
    job: "tick",
    queue: "default",
    cron: null,
    everyMs: 60_000,
    timezone: "UTC",
    missed: "once",
    maxCatchUp: 1,
    overlap: "allow",
    jitterMs: 0,
    ...overrides,
  };
  return { ...row, definition: JSON.stringify(row) };
}
