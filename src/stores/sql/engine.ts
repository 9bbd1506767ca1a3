/**
 * What a SQL store needs from its database, whatever the engine: running a
 * script on one connection (in a write transaction, or statement by
 * statement) and sending the wake-ups it asks for after its commit, an app
 * transaction, noticing other processes' writes, and closing. An engine
 * knows nothing of jobs; the rules are the store's.
 *
 * @internal
 * @module
 */
import type { Migration } from "../../../migrations/migration.ts";
import type { BackupResult } from "../store.ts";
import {
  type AppliedStep,
  LIVE_WORKER_WINDOW_MS,
  type MigrateOptions,
  type MigrationPlan,
  planSteps,
} from "../schema_steps.ts";
import type { Script } from "./script.ts";

/**
 * How a script runs:
 * - `"write"`: in one write transaction (all or nothing, tried again whole
 *   while another process holds the lock).
 * - `"unflushed statements"`: statement by statement where the engine can
 *   make each statement its own commit that need not wait for the disk
 *   (PostgreSQL: autocommit on a session with `synchronous_commit` off);
 *   SQLite runs it as a write, in one transaction with the connection's
 *   durability. For a script each of whose statements, once committed,
 *   leaves the rows whole if the statements after it are lost (each later
 *   statement only finishes what a worker's death before it would leave
 *   for a later claim to finish; a crash of the database server loses a
 *   suffix of such commits at most, as commits are flushed in order), and
 *   that can be run again whole after it failed partway.
 * - `"statement"`: one statement at a time, each its own commit, for a
 *   script that reads or writes with a single statement.
 */
export type RunMode = "write" | "unflushed statements" | "statement";

/** An app transaction as the store uses it. */
export interface EngineTransaction {
  /** Runs a script inside the transaction. */
  run<T>(script: Script<T>): Promise<T>;
  /** Runs the app's own statement (the engine's placeholders) and returns its rows. */
  query<Row>(text: string, params: readonly unknown[]): Promise<Row[]>;
}

/** A database connection (or pool) that runs scripts. */
export interface Engine {
  /**
   * Runs the script `start` makes; `start` is called again for each retry.
   * When the script asked for a wake-up (`wakeAfterCommit`), other
   * processes' watchers are told after its writes commit, never when they
   * roll back, nor when a script run statement by statement fails midway
   * (the statements before the failure stay committed). The call resolves
   * at the commit, without waiting for the wake-up, which `close()` waits
   * for (best effort: a wake-up that fails is dropped, watchers also poll).
   * Engines whose watchers notice commits by themselves send nothing.
   */
  run<T>(start: () => Script<T>, mode: RunMode): Promise<T>;
  /**
   * Runs `fn` in one transaction: what it runs through its handle commits or
   * rolls back together, and the wake-ups its scripts asked for are sent
   * after the commit as for {@linkcode Engine.run}, none after a rollback.
   * Calls of the store from inside `fn` other than through the handle are
   * refused.
   */
  transaction<T>(fn: (tx: EngineTransaction) => Promise<T>): Promise<T>;
  /**
   * Applies the steps the database lacks, safe from several processes at
   * once, with `around`'s writes before and after them in their transaction
   * (only when a step is applied), and resolves with the plan: the steps it applied, or, while live
   * older workers block a contract step and `options.force` is not set, the
   * steps it did not apply (none is, then; see `../schema_steps.ts`). With
   * `apply` false, writes nothing and resolves with what it would do.
   */
  migrate(
    migrations: readonly Migration[],
    options: MigrateOptions,
    apply: boolean,
    around?: AroundSteps,
  ): Promise<MigrationPlan>;
  /** Calls `listener` soon after another connection may have added or freed jobs; best effort. */
  watch(listener: () => void): Disposable;
  /**
   * Copies the database to the new file `file` as of one commit, or
   * rejects naming the server's own tools (see `Store.backup`).
   */
  backup(file: string): Promise<BackupResult>;
  /** See {@linkcode Store.startClosing}. */
  startClosing?(waitMs: number): void;
  /** Closes the connection once running work has ended; later calls fail. */
  close(): Promise<void>;
}

/**
 * The step from which `queue_migrations` records each step's kind and
 * `workers` each worker's schema step (step 18, rolling upgrades).
 */
const KINDS_RECORDED_FROM = 18;
/** The step that made the `workers` table (step 4). */
const WORKERS_FROM = 4;

/** A statement with `$n` parameters, for the engine to run and answer with its rows. */
export interface MigrationQuery {
  /** The statement. */
  readonly text: string;
  /** Its parameters. */
  readonly params: readonly unknown[];
}

/** A plan being read: yields statements, receives each one's rows. */
export type PlanReading = Generator<MigrationQuery, MigrationPlan, Record<string, unknown>[]>;

/**
 * The store's own writes a migration makes in its transaction around the
 * steps it applies, only when it applies one: a moved store's fence is
 * lifted before them (its triggers would refuse a step's writes) and set
 * again after them, so no other write ever finds the store unfenced.
 */
export interface AroundSteps {
  /** Before the first step. */
  before(): Script<unknown>;
  /** After the last step. */
  after(): Script<unknown>;
}

/**
 * Reads what migrating the database would do: the steps it has (with their
 * kinds once step 18 records them) and the workers seen within the heartbeat
 * window, from `queue_migrations` (which must exist) and `workers`.
 * `nowSql` is the engine's expression for now in ms, on the clock the
 * heartbeats were stamped with.
 */
export function* readPlan(migrations: readonly Migration[], nowSql: string): PlanReading {
  const query = (text: string, ...params: unknown[]) => ({ text, params });
  const versions = (yield query("SELECT version FROM queue_migrations")).map((row) =>
    Number(row.version)
  );
  const recorded = versions.includes(KINDS_RECORDED_FROM);
  const applied = recorded
    ? (yield query("SELECT version, kind FROM queue_migrations")).map((row): AppliedStep => ({
      version: Number(row.version),
      kind: row.kind === "expand" || row.kind === "contract" ? row.kind : null,
    }))
    : versions.map((version): AppliedStep => ({ version, kind: null }));
  const live = versions.includes(WORKERS_FROM)
    ? yield query(
      `SELECT host, pid, ${recorded ? "schema_step" : "NULL AS schema_step"}, last_seen_at
      FROM workers WHERE last_seen_at >= ${nowSql} - $1 ORDER BY started_at, id`,
      LIVE_WORKER_WINDOW_MS,
    )
    : [];
  return planSteps(
    migrations,
    applied,
    live.map((row) => ({
      host: String(row.host),
      pid: Number(row.pid),
      schemaStep: row.schema_step === null ? null : Number(row.schema_step),
      lastSeenAt: new Date(Number(row.last_seen_at)),
    })),
  );
}

/**
 * The statements to run once every step of `plan` was applied: each step's
 * kind, once the database has step 18's column (the steps applied now, and
 * those applied before kinds were recorded; each `UPDATE … WHERE kind IS
 * NULL` changes a row once). None when nothing was applied.
 */
export function kindUpdates(
  migrations: readonly Migration[],
  plan: MigrationPlan,
): MigrationQuery[] {
  const recorded = plan.databaseStep >= KINDS_RECORDED_FROM ||
    plan.steps.some((step) => step.version === KINDS_RECORDED_FROM);
  if (plan.steps.length === 0 || !recorded) return [];
  return migrations.map((step) => ({
    text: "UPDATE queue_migrations SET kind = $1 WHERE version = $2 AND kind IS NULL",
    params: [step.kind, step.version],
  }));
}
