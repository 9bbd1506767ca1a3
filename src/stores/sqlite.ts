/**
 * The default store: every job in one SQLite file, through `node:sqlite`.
 *
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";
import { migrations } from "../../migrations/sqlite/mod.ts";
import { type Durability, openConnection, retryWhileBusy } from "./_sqlite_connection.ts";
import { FileWatch } from "./_file_watch.ts";
import { SqliteComposition } from "./_sqlite_composition.ts";
import {
  type ClaimRow,
  type FailedRow,
  type JobLinks,
  type RunningRow,
  toClaimedJobs,
  toFailedJobRow,
  toRunningJobRow,
} from "./_rows.ts";
import { SqliteGuards } from "./_sqlite_guards.ts";
import { SqliteStats } from "./_sqlite_stats.ts";
import type { SettledJobRow } from "./_stats_rows.ts";
import { QueueClosedError } from "../errors.ts";
import type {
  BatchRow,
  ClaimedJob,
  ClaimRequest,
  FailedJobRow,
  GuardRequest,
  JobFilter,
  JobListing,
  KeyedJobRow,
  KeyedPush,
  Lease,
  MetricsRow,
  NewBatchRow,
  NewChainRow,
  NewJobRow,
  Page,
  PushedBatch,
  QueueCountsRow,
  RunningJobRow,
  Settlement,
  SettleResult,
  Store,
  StoreTransaction,
  WorkerRow,
} from "./store.ts";

export type { Durability } from "./_sqlite_connection.ts";

/** A settled job as the settle statements return it: its links, queue, name and wait. */
type SettledJob = JobLinks & Omit<SettledJobRow, "id">;

/** Options for {@linkcode SqliteStore.open}. */
export interface SqliteStoreOptions {
  /**
   * `"normal"` survives a process crash and may lose the last commits on
   * power loss; `"full"` syncs every commit.
   * @default {"normal"}
   */
  durability?: Durability;
  /**
   * How long to wait for another connection's write lock before failing.
   * @default {30_000}
   */
  busyTimeoutMs?: number;
}

/** The marker a claim writes when it takes over an expired lease. */
const DIED = "worker died during attempt ";

const INSERT =
  `INSERT INTO jobs (queue, name, payload, priority, available_at, retry_until, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`;
const LINKS = "batch_id, batch_member, chain_id";
/** What a settle statement returns of its job: its links, and what the metrics rollup needs. */
const SETTLED = `${LINKS}, queue, name, waited_ms`;
const COMPLETE = `DELETE FROM jobs WHERE id = ? AND token = ? RETURNING ${SETTLED}`;
const PROGRESS = "UPDATE jobs SET progress = ? WHERE id = ? AND token = ?";
const RELEASE = `UPDATE jobs SET token = NULL, available_at = ?, last_error = ?,
    attempts = attempts - ?, crashes = crashes + ?
  WHERE id = ? AND token = ? RETURNING ${SETTLED}`;
const COPY_TO_FAILED = `INSERT OR REPLACE INTO failed_jobs
  (id, queue, name, payload, priority, error, stack, attempts, crashes, created_at, failed_at,
    ${LINKS})
  SELECT id, queue, name, payload, priority, ?, ?, ?, crashes + ?, created_at, ?, ${LINKS}
  FROM jobs WHERE id = ? AND token = ?`;
const RENEW = "UPDATE jobs SET available_at = ? WHERE id = ? AND token = ?";
const COUNTS = `SELECT queue,
    SUM(available_at <= ?1) AS pending,
    SUM(token IS NULL AND available_at > ?1) AS delayed,
    SUM(token IS NOT NULL AND available_at > ?1) AS reserved
  FROM jobs GROUP BY queue`;
const FAILED_COUNTS = "SELECT queue, COUNT(*) AS failed FROM failed_jobs GROUP BY queue";
const FAILED_COLUMNS =
  "id, queue, name, payload, error, stack, attempts, crashes, created_at, failed_at, batch_id, chain_id";
const FAILED_PAGE =
  `SELECT ${FAILED_COLUMNS} FROM failed_jobs ORDER BY failed_at DESC, id DESC LIMIT ? OFFSET ?`;
const FAILED_ONE = `SELECT ${FAILED_COLUMNS} FROM failed_jobs WHERE id = ?`;
const RETRY_COPY = `INSERT INTO jobs
  (id, queue, name, payload, priority, available_at, created_at, ${LINKS})
  SELECT id, queue, name, payload, priority, ?, created_at, ${LINKS} FROM failed_jobs`;
const RETRY_ONE = `${RETRY_COPY} WHERE id = ? RETURNING id, ${LINKS}`;
const RETRY_ALL = `${RETRY_COPY} ORDER BY id RETURNING id, ${LINKS}`;
const RETRY_BATCH =
  `${RETRY_COPY} WHERE batch_id = ? AND batch_member = 1 ORDER BY id RETURNING id, ${LINKS}`;
const FORGET_BATCH = "DELETE FROM failed_jobs WHERE batch_id = ? AND batch_member = 1";
const FORGET = "DELETE FROM failed_jobs WHERE id = ?";
const FLUSH = "DELETE FROM failed_jobs";
const PRUNE = "DELETE FROM failed_jobs WHERE failed_at < ?";
const CLEAR_ONE = `DELETE FROM jobs WHERE queue = ? RETURNING id, ${LINKS}`;
const CLEAR_ALL = `DELETE FROM jobs RETURNING id, ${LINKS}`;
const RUNNING = `SELECT id, queue, name, attempts, progress, available_at, batch_id FROM jobs
  WHERE token IS NOT NULL AND available_at > ? ORDER BY id`;

const claimStatements = new Map<number, string>();

/** The claim statement for `queueCount` queues, looked at in the given order. */
function claimSql(queueCount: number): string {
  let sql = claimStatements.get(queueCount);
  if (sql === undefined) claimStatements.set(queueCount, sql = buildClaimSql(queueCount));
  return sql;
}

function buildClaimSql(queueCount: number): string {
  const perQueue = `SELECT id FROM (SELECT id FROM jobs WHERE queue = ? AND available_at <= ?
    ORDER BY priority DESC, available_at LIMIT ?)`;
  return `UPDATE jobs SET token = ?, available_at = ?, waited_ms = ? - available_at,
      attempts = attempts + 1, progress = NULL,
      crashes = crashes + (token IS NOT NULL),
      last_error = CASE WHEN token IS NULL THEN last_error ELSE '${DIED}' || attempts END
    WHERE id IN (${Array(queueCount).fill(perQueue).join(" UNION ALL ")} LIMIT ?)
    RETURNING id, queue, name, payload, priority, attempts, crashes, retry_until, last_error,
      created_at, batch_id, last_error IS NOT NULL AND last_error = '${DIED}' || (attempts - 1) AS recovered`;
}

/**
 * Jobs in one SQLite file. One connection per store; its operations run one
 * at a time, and an app transaction holds the others back until it ends.
 *
 * @example Opening a store directly
 * ```ts
 * import { SqliteStore } from "@renox/queue";
 * await using store = await SqliteStore.open(":memory:");
 * console.log(await store.counts(Date.now()));
 * ```
 */
export class SqliteStore implements Store {
  readonly #db: DatabaseSync;
  readonly #busyTimeoutMs: number;
  readonly #changes: FileWatch;
  readonly #statements = new Map<string, StatementSync>();
  readonly #composition = new SqliteComposition((sql) => this.#prepare(sql));
  readonly #guards = new SqliteGuards((sql) => this.#prepare(sql));
  readonly #stats = new SqliteStats((sql) => this.#prepare(sql));
  /** Settles when the app transaction now running ends; null when none runs. */
  #transaction: Promise<void> | null = null;
  /** Set inside a transaction's callback, to refuse calls that would wait for it forever. */
  readonly #insideTransaction = new AsyncLocalStorage<Promise<void>>();
  #closed = false;

  private constructor(db: DatabaseSync, busyTimeoutMs: number, path: string) {
    this.#db = db;
    this.#busyTimeoutMs = busyTimeoutMs;
    // Every commit in WAL mode writes the -wal file: a change there may be new jobs.
    this.#changes = new FileWatch(
      path === ":memory:" || path.startsWith("file:") ? null : `${path}-wal`,
    );
  }

  /** Opens (creating if needed) the file at `path`, or `":memory:"`, and migrates it. */
  static async open(path: string, options: SqliteStoreOptions = {}): Promise<SqliteStore> {
    const durability = options.durability ?? "normal";
    if (durability !== "normal" && durability !== "full") {
      throw new TypeError(`durability must be "normal" or "full": got ${String(durability)}`);
    }
    const busyTimeoutMs = options.busyTimeoutMs ?? 30_000;
    if (!(Number.isFinite(busyTimeoutMs) && busyTimeoutMs >= 0)) {
      throw new RangeError(`busyTimeoutMs must be a finite number >= 0: got ${busyTimeoutMs}`);
    }
    const db = await openConnection(path, durability, busyTimeoutMs);
    const store = new SqliteStore(db, busyTimeoutMs, path);
    try {
      await store.migrate();
    } catch (error) {
      db.close();
      throw error;
    }
    return store;
  }

  /** Applies the schema steps this file lacks, in one write transaction. */
  migrate(): Promise<void> {
    return this.#write(() => {
      this.#db.exec(`CREATE TABLE IF NOT EXISTS queue_migrations (
        version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`);
      const rows = this.#db.prepare("SELECT version FROM queue_migrations").all();
      const applied = new Set(rows.map((row) => Number(row.version)));
      const newest = migrations.at(-1)?.version ?? 0;
      const ahead = [...applied].filter((version) => version > newest);
      if (ahead.length > 0) {
        throw new Error(
          `Cannot open the queue database: it has schema step ${
            Math.max(...ahead)
          }, newer than this version of @renox/queue knows (${newest})`,
        );
      }
      for (const migration of migrations) {
        if (applied.has(migration.version)) continue;
        this.#db.exec(migration.sql);
        this.#db.prepare("INSERT INTO queue_migrations (version, applied_at) VALUES (?, ?)")
          .run(migration.version, Date.now());
      }
    });
  }

  /** Inserts jobs in one transaction. */
  push(rows: readonly NewJobRow[]): Promise<number[]> {
    if (rows.length === 1) return this.#run(() => this.#insert(rows));
    return this.#write(() => this.#insert(rows));
  }

  /** Inserts unique or debounced jobs in one transaction, each unless its key is held. */
  pushKeyed(rows: readonly KeyedJobRow[]): Promise<KeyedPush[]> {
    return this.#write(() => this.#guards.pushKeyed(rows, (batch) => this.#insert(batch)));
  }

  /** Checks claimed jobs' middleware in one transaction. */
  acquire(requests: readonly GuardRequest[], now: number): Promise<(number | null)[]> {
    return this.#write(() => this.#guards.acquire(requests, now));
  }

  /** Inserts a chain's first link and its waiting links in one transaction. */
  pushChain(chain: NewChainRow): Promise<number> {
    return this.#write(() => this.#composition.insertChain(chain, (rows) => this.#insert(rows)));
  }

  /** Inserts a batch with its jobs and callbacks in one transaction. */
  pushBatch(batch: NewBatchRow): Promise<PushedBatch> {
    return this.#write(() => this.#composition.insertBatch(batch));
  }

  /** Adds counted jobs to a batch that is still running. */
  addToBatch(batchId: number, rows: readonly NewJobRow[]): Promise<number[]> {
    return this.#write(() => this.#composition.addToBatch(batchId, rows));
  }

  /** One batch, or null. */
  batch(id: number): Promise<BatchRow | null> {
    return this.#run(() => this.#composition.batch(id));
  }

  /** Batches, newest first. */
  batches(page: Page): Promise<BatchRow[]> {
    return this.#run(() => this.#composition.batches(page));
  }

  /** Cancels a running batch, skipping its waiting jobs. */
  cancelBatch(id: number, now: number): Promise<boolean> {
    return this.#write(() => this.#composition.cancel(id, now));
  }

  /** Deletes batches finished or cancelled before `before`. */
  pruneBatches(before: number): Promise<number> {
    return this.#write(() => this.#composition.prune(before));
  }

  /** Jobs leased now, with their progress. */
  running(now: number): Promise<RunningJobRow[]> {
    return this.#run(() =>
      (this.#prepare(RUNNING).all(now) as unknown as RunningRow[]).map(toRunningJobRow)
    );
  }

  /** Runs `fn` inside `BEGIN IMMEDIATE` … `COMMIT`, rolling back if it throws. */
  async transaction<T>(fn: (tx: StoreTransaction) => T | Promise<T>): Promise<T> {
    let end!: () => void;
    const ended = new Promise<void>((resolve) => end = resolve);
    // Take the lane in the same tick the previous holder is seen gone, so no one slips in.
    if (this.#transaction !== null && this.#insideTransaction.getStore() === this.#transaction) {
      throw new Error(
        "Cannot start a transaction inside another on the same queue: use its tx handle",
      );
    }
    while (this.#transaction !== null) await this.#transaction;
    if (this.#closed) throw new QueueClosedError("start a transaction");
    this.#transaction = ended;
    let open = false;
    try {
      await retryWhileBusy(() => this.#db.exec("BEGIN IMMEDIATE"), this.#busyTimeoutMs);
      open = true;
      const tx = this.#transactionHandle(() => open);
      const result = await this.#insideTransaction.run(ended, () => fn(tx));
      this.#assertStillOpen();
      this.#db.exec("COMMIT");
      open = false;
      return result;
    } finally {
      try {
        // SQLite may already have rolled back on its own (ON CONFLICT ROLLBACK, I/O error).
        if (open && this.#db.isTransaction) this.#db.exec("ROLLBACK");
      } finally {
        open = false;
        this.#transaction = null;
        end();
      }
    }
  }

  /** Leases due jobs in one `UPDATE … RETURNING`. */
  claim(request: ClaimRequest): Promise<ClaimedJob[]> {
    // One transaction: the claim and the keys it releases commit together, and a busy retry
    // cannot claim twice.
    return this.#write(() => this.#claim(request));
  }

  /** Applies settlements, each fenced by its token, then claims, all in one transaction. */
  settle(settlements: readonly Settlement[], then?: ClaimRequest): Promise<SettleResult> {
    return this.#write(() => {
      const settled: SettledJobRow[] = [];
      const applied = settlements.map((settlement) => {
        const job = this.#apply(settlement);
        if (job !== null && job !== "lost") settled.push({ ...job, id: settlement.id });
        return job !== "lost";
      });
      this.#stats.record(settlements, applied, settled);
      const ended: number[] = [];
      const attempts: Lease[] = [];
      settlements.forEach(({ kind, id, token }, index) => {
        if (!applied[index] || kind === "progress") return;
        attempts.push({ id, token });
        if (kind !== "release") ended.push(id);
      });
      this.#guards.released(ended, attempts);
      return { applied, claimed: then === undefined ? [] : this.#claim(then) };
    });
  }

  /** Extends leases in one transaction; returns the ids whose lease was lost. */
  renew(leases: readonly Lease[], until: number): Promise<number[]> {
    return this.#write(() => {
      const statement = this.#prepare(RENEW);
      return leases.filter(({ id, token }) => statement.run(until, id, token).changes === 0)
        .map(({ id }) => id);
    });
  }

  /** Jobs per queue by state, failed jobs included. */
  counts(now: number): Promise<QueueCountsRow[]> {
    return this.#run(() => {
      const byQueue = new Map<string, QueueCountsRow>();
      for (const row of this.#prepare(COUNTS).all(now)) {
        byQueue.set(String(row.queue), {
          queue: String(row.queue),
          pending: Number(row.pending),
          delayed: Number(row.delayed),
          reserved: Number(row.reserved),
          failed: 0,
        });
      }
      for (const row of this.#prepare(FAILED_COUNTS).all()) {
        const queue = String(row.queue);
        const counts = byQueue.get(queue) ?? { queue, pending: 0, delayed: 0, reserved: 0 };
        byQueue.set(queue, { ...counts, failed: Number(row.failed) });
      }
      return [...byQueue.values()].sort((a, b) => a.queue < b.queue ? -1 : 1);
    });
  }

  /** A page of the jobs not yet finished that match `filter`, and how many match. */
  jobs(filter: JobFilter, page: Page, now: number): Promise<JobListing> {
    return this.#run(() => this.#stats.jobs(filter, page, now));
  }

  /** The metrics rollup's rows with `since <= minute < until`. */
  metrics(since: number, until: number): Promise<MetricsRow[]> {
    return this.#run(() => this.#stats.metrics(since, until));
  }

  /** Writes a worker's row and drops those of workers not seen since `staleBefore`. */
  heartbeat(worker: WorkerRow, staleBefore: number): Promise<void> {
    return this.#write(() => this.#stats.heartbeat(worker, staleBefore));
  }

  /** Deletes a worker's row; whether it was there. */
  removeWorker(id: string): Promise<boolean> {
    return this.#run(() => this.#stats.removeWorker(id));
  }

  /** Workers last seen at or after `seenSince`. */
  workers(seenSince: number): Promise<WorkerRow[]> {
    return this.#run(() => this.#stats.workers(seenSince));
  }

  /** Failed jobs, newest first. */
  failed(page: Page): Promise<FailedJobRow[]> {
    return this.#run(() =>
      (this.#prepare(FAILED_PAGE).all(page.limit, page.offset) as unknown as FailedRow[])
        .map(toFailedJobRow)
    );
  }

  /** One failed job, or null. */
  failedJob(id: number): Promise<FailedJobRow | null> {
    return this.#run(() => {
      const row = this.#prepare(FAILED_ONE).get(id) as unknown as FailedRow | undefined;
      return row ? toFailedJobRow(row) : null;
    });
  }

  /** Moves failed jobs back in one transaction; a job is in exactly one table throughout. */
  retry(
    ids: readonly number[] | "all" | { readonly batchId: number },
    now: number,
  ): Promise<number[]> {
    return this.#write(() => {
      let moved: (JobLinks & { id: number })[];
      if (ids === "all") {
        moved = this.#prepare(RETRY_ALL).all(now) as unknown as typeof moved;
        this.#prepare(FLUSH).run();
      } else if (!Array.isArray(ids)) {
        const { batchId } = ids as { readonly batchId: number };
        moved = this.#prepare(RETRY_BATCH).all(now, batchId) as unknown as typeof moved;
        this.#prepare(FORGET_BATCH).run(batchId);
      } else {
        moved = [];
        for (const id of ids as readonly number[]) {
          const row = this.#prepare(RETRY_ONE).get(now, id) as (typeof moved)[number] | undefined;
          if (row === undefined) continue;
          this.#prepare(FORGET).run(id);
          moved.push(row);
        }
      }
      this.#composition.retried(moved);
      return moved.map((row) => Number(row.id));
    });
  }

  /** Deletes one failed job, and the waiting links of its chain. */
  forget(id: number): Promise<boolean> {
    return this.#deleteFailed(() => this.#prepare(FORGET).run(id).changes).then((n) => n === 1);
  }

  /** Deletes every failed job. */
  flushFailed(): Promise<number> {
    return this.#deleteFailed(() => this.#prepare(FLUSH).run().changes);
  }

  /** Deletes failed jobs older than `before`. */
  pruneFailed(before: number): Promise<number> {
    return this.#deleteFailed(() => this.#prepare(PRUNE).run(before).changes);
  }

  /** Deletes waiting and leased jobs of one queue, or of all; batch jobs count as skipped. */
  clear(queue: string | undefined, now: number): Promise<number> {
    return this.#write(() => {
      const deleted = (queue === undefined
        ? this.#prepare(CLEAR_ALL).all()
        : this.#prepare(CLEAR_ONE).all(queue)) as unknown as (JobLinks & { id: number })[];
      this.#composition.cleared(deleted, now);
      const ids = deleted.map((row) =>
        row.id
      );
      this.#guards.removed(ids);
      return deleted.length;
    });
  }

  /** Calls `listener` when the database's WAL file changes (any process's commit). */
  watch(listener: () => void): Disposable {
    return this.#changes.add(listener);
  }

  /** Closes the connection once the running transaction, if any, has ended. */
  async close(): Promise<void> {
    while (!this.#closed && this.#transaction !== null) await this.#transaction;
    if (this.#closed) return;
    this.#closed = true;
    this.#changes.close();
    this.#db.close();
  }

  /** Same as {@linkcode SqliteStore.close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** Deletes failed jobs with `remove`, then the chain links that can never run now. */
  #deleteFailed(remove: () => number | bigint): Promise<number> {
    return this.#write(() => {
      const deleted = Number(remove());
      if (deleted > 0) this.#composition.dropOrphanLinks();
      return deleted;
    });
  }

  #claim(request: ClaimRequest): ClaimedJob[] {
    const { queues, limit, now, leaseMs, token } = request;
    const params: SQLInputValue[] = [token, now + leaseMs, now];
    for (const queue of queues) params.push(queue, now, limit);
    params.push(limit);
    const rows = this.#prepare(claimSql(queues.length)).all(...params) as unknown as ClaimRow[];
    this.#guards.started(rows.map((row) => row.id));
    return toClaimedJobs(rows, queues, token);
  }

  /**
   * Applies one settlement and moves its chain or batch: `"lost"` when its
   * lease was lost, else the settled job's row (null for a progress write).
   */
  #apply(settlement: Settlement): SettledJob | null | "lost" {
    const { id, token } = settlement;
    switch (settlement.kind) {
      case "complete": {
        const job = this.#prepare(COMPLETE).get(id, token) as SettledJob | undefined;
        if (job === undefined) return "lost";
        this.#composition.settled(job, "complete", settlement.at);
        return job;
      }
      case "progress":
        return this.#prepare(PROGRESS).run(settlement.percent, id, token).changes === 1
          ? null
          : "lost";
      case "release": {
        const job = this.#prepare(RELEASE).get(
          settlement.availableAt,
          settlement.error,
          settlement.refundAttempt ? 1 : 0,
          settlement.crashed ? 1 : 0,
          id,
          token,
        ) as SettledJob | undefined;
        if (job === undefined) return "lost";
        // A job put back in a batch cancelled meanwhile is skipped, not run again.
        if (this.#composition.putBack(id, job, settlement.at)) this.#guards.removed([id]);
        return job;
      }
      case "fail": {
        const { error } = settlement;
        const copied = this.#prepare(COPY_TO_FAILED).run(
          error.message,
          error.stack,
          settlement.attempts,
          settlement.crashed ? 1 : 0,
          settlement.at,
          id,
          token,
        ).changes === 1;
        if (!copied) return "lost";
        const job = this.#prepare(COMPLETE).get(id, token) as unknown as SettledJob;
        this.#composition.settled(job, "fail", settlement.at);
        return job;
      }
    }
  }

  #insert(rows: readonly NewJobRow[]): number[] {
    const statement = this.#prepare(INSERT);
    return rows.map((row) =>
      Number(
        statement.get(
          row.queue,
          row.name,
          row.payload,
          row.priority,
          row.availableAt,
          row.retryUntil,
          row.createdAt,
        )!.id,
      )
    );
  }

  #transactionHandle(isOpen: () => boolean): StoreTransaction {
    const check = () => {
      if (!isOpen()) throw new Error("This transaction has ended: use it only inside its callback");
      this.#assertStillOpen();
    };
    return {
      // deno-lint-ignore require-await
      push: async (rows) => {
        check();
        return this.#insert(rows);
      },
      // deno-lint-ignore require-await
      pushKeyed: async (rows) => {
        check();
        return this.#guards.pushKeyed(rows, (batch) => this.#insert(batch));
      },
      // deno-lint-ignore require-await
      pushChain: async (chain) => {
        check();
        return this.#composition.insertChain(chain, (rows) => this.#insert(rows));
      },
      // deno-lint-ignore require-await
      pushBatch: async (batch) => {
        check();
        return this.#composition.insertBatch(batch);
      },
      // deno-lint-ignore require-await
      query: async <Row>(sql: string, params: readonly unknown[] = []) => {
        check();
        return this.#db.prepare(sql).all(...params as SQLInputValue[]) as unknown as Row[];
      },
    };
  }

  /** SQLite rolls back on its own after some errors; going on would write outside the transaction. */
  #assertStillOpen(): void {
    if (!this.#db.isTransaction) {
      throw new Error(
        "Cannot go on with this transaction: SQLite rolled it back after a statement failed",
      );
    }
  }

  #prepare(sql: string): StatementSync {
    let statement = this.#statements.get(sql);
    if (statement === undefined) {
      statement = this.#db.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  async #idle(): Promise<void> {
    while (this.#transaction !== null) await this.#transaction;
    if (this.#closed) throw new QueueClosedError("use the SQLite store");
  }

  /** Runs one statement (its own transaction), after any app transaction. */
  #run<T>(step: () => T): Promise<T> {
    return retryWhileBusy(step, this.#busyTimeoutMs, this.#waitTurn);
  }

  /** Holds a statement back while an app transaction runs or after close. */
  readonly #waitTurn = (): Promise<void> | undefined => {
    if (this.#transaction === null && !this.#closed) return undefined;
    // Only the transaction's own callback: work it merely started may wait its turn later.
    if (this.#transaction !== null && this.#insideTransaction.getStore() === this.#transaction) {
      return Promise.reject(
        new Error(
          "Cannot use the queue inside its own transaction callback: it would wait for itself; use the tx handle (tx.dispatch, tx.query)",
        ),
      );
    }
    return this.#idle();
  };

  /** Runs `step` inside `BEGIN IMMEDIATE` … `COMMIT`, rolling back if it throws. */
  #write<T>(step: () => T): Promise<T> {
    return this.#run(() => {
      this.#db.exec("BEGIN IMMEDIATE");
      try {
        const result = step();
        this.#db.exec("COMMIT");
        return result;
      } catch (error) {
        if (this.#db.isTransaction) this.#db.exec("ROLLBACK");
        throw error;
      }
    });
  }
}
