/**
 * The PostgreSQL store: the same queue across many machines. Claims take due
 * jobs in one statement with `FOR UPDATE SKIP LOCKED`, each worker tick
 * settles in one transaction, leases are measured on the database's clock,
 * and idle workers wake on `LISTEN/NOTIFY` (polling stays as the fallback).
 *
 * This module is the only one that imports the `postgres` driver, from the
 * `@renox/queue/postgres` entry point: SQLite users never download it.
 *
 * @example Open a queue on PostgreSQL
 * ```ts ignore
 * import { Queue } from "@renox/queue";
 * import { PostgresStore } from "@renox/queue/postgres";
 *
 * const store = await PostgresStore.open("postgres://postgres@127.0.0.1:5432/app");
 * const queue = await Queue.open({ store, jobs: import.meta.resolve("./jobs.ts") });
 * ```
 *
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";
import postgres from "postgres";
import { migrations } from "../../migrations/postgres/mod.ts";
import { QueueClosedError } from "../errors.ts";
import { PostgresComposition } from "./_postgres_composition.ts";
import { isPostgresUrl, redactPassword } from "./database_url.ts";
import {
  type FailedRow,
  type JobLinks,
  type RunningRow,
  toFailedJobRow,
  toRunningJobRow,
} from "./_rows.ts";
import { PostgresGuards } from "./_postgres_guards.ts";
import { PostgresStats } from "./_postgres_stats.ts";
import { DB_NOW, PostgresTick } from "./_postgres_tick.ts";
import { MetricsPruning } from "./_stats_rows.ts";
import type { Rows, Run } from "./_postgres_run.ts";
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

/** Options for {@linkcode PostgresStore.open}. */
export interface PostgresStoreOptions {
  /**
   * The schema the queue's tables live in, created if missing; a name of
   * letters, digits and underscores.
   * @default {"public"}
   */
  schema?: string;
  /**
   * Whose clock claims and lease renewals go by: `"database"` (`now()` on
   * the server, so hosts whose clocks disagree still agree on leases) or
   * `"caller"` (the times the queue passes in, e.g. a test's clock).
   * @default {"database"}
   */
  clock?: "database" | "caller";
  /**
   * Connections in the pool, one more is opened for `LISTEN`.
   * @default {4}
   */
  maxConnections?: number;
}

/** The advisory lock that lets one process at a time migrate a schema. */
const MIGRATION_LOCK = 7_204_310;

const LINKS = "batch_id, batch_member, chain_id";
/** Rows come as one array per column; ids follow the rows' order, as the sequence does. */
const INSERT =
  `INSERT INTO jobs (queue, name, payload, priority, available_at, retry_until, created_at)
  SELECT queue, name, payload, priority, available_at, retry_until, created_at
  FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::bigint[],
    $7::bigint[]) WITH ORDINALITY
    AS row(queue, name, payload, priority, available_at, retry_until, created_at, position)
  ORDER BY position
  RETURNING id`;
/** Inserts jobs and notifies the watchers, in one statement (its own transaction). */
const INSERT_AND_NOTIFY = `WITH inserted AS (INSERT INTO jobs
    (queue, name, payload, priority, available_at, retry_until, created_at)
    SELECT queue, name, payload, priority, available_at, retry_until, created_at
    FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::bigint[],
      $7::bigint[]) WITH ORDINALITY
      AS row(queue, name, payload, priority, available_at, retry_until, created_at, position)
    ORDER BY position
    RETURNING id)
  SELECT inserted.id FROM inserted CROSS JOIN (SELECT pg_notify($8, '')) AS notified`;
/**
 * Returns the leases still held, and renews them to `$1` ms after now (on the
 * database's clock when `$2` is null, else after `$2`), each fenced by its
 * token. A row a settle holds right now is skipped (`SKIP LOCKED`): it is
 * being settled, or it gets its renewal next time, within its lease; waiting
 * for it could deadlock with that settle.
 */
const RENEW = `WITH held AS (
    SELECT j.id, j.token FROM jobs j JOIN unnest($3::bigint[], $4::bigint[]) AS lease(id, token)
      ON j.id = lease.id AND j.token = lease.token),
  renewable AS (SELECT j.id FROM jobs j JOIN held ON j.id = held.id AND j.token = held.token
    ORDER BY j.id FOR UPDATE OF j SKIP LOCKED),
  renewed AS (UPDATE jobs j SET available_at = COALESCE($2::bigint, ${DB_NOW}) + $1::bigint
    FROM renewable WHERE j.id = renewable.id)
  SELECT id, token FROM held`;
const COUNTS = `SELECT queue,
    COUNT(*) FILTER (WHERE available_at <= $1) AS pending,
    COUNT(*) FILTER (WHERE token IS NULL AND available_at > $1) AS delayed,
    COUNT(*) FILTER (WHERE token IS NOT NULL AND available_at > $1) AS reserved
  FROM jobs GROUP BY queue`;
const FAILED_COUNTS = "SELECT queue, COUNT(*) AS failed FROM failed_jobs GROUP BY queue";
const FAILED_COLUMNS =
  "id, queue, name, payload, error, stack, attempts, crashes, created_at, failed_at, batch_id, chain_id";
const FAILED_PAGE =
  `SELECT ${FAILED_COLUMNS} FROM failed_jobs ORDER BY failed_at DESC, id DESC LIMIT $1 OFFSET $2`;
const FAILED_ONE = `SELECT ${FAILED_COLUMNS} FROM failed_jobs WHERE id = $1`;
/**
 * Moves failed jobs back in one statement: the delete locks each row, so a
 * concurrent retry or forget of the same job finds it gone and moves nothing.
 * The selection (`WHERE …`) is appended to the delete.
 */
function retryStatement(where: string): string {
  return `WITH moved AS (DELETE FROM failed_jobs ${where}
      RETURNING id, queue, name, payload, priority, created_at, ${LINKS})
    INSERT INTO jobs (id, queue, name, payload, priority, available_at, created_at, ${LINKS})
    SELECT id, queue, name, payload, priority, $1, created_at, ${LINKS} FROM moved ORDER BY id
    RETURNING id, ${LINKS}`;
}
const RETRY_ONE = retryStatement("WHERE id = $2");
const RETRY_ALL = retryStatement("");
const RETRY_BATCH = retryStatement("WHERE batch_id = $2 AND batch_member = 1");
const FORGET = "DELETE FROM failed_jobs WHERE id = $1";
const FLUSH = "DELETE FROM failed_jobs";
const PRUNE = "DELETE FROM failed_jobs WHERE failed_at < $1";
const CLEAR_ONE = `DELETE FROM jobs WHERE queue = $1 RETURNING id, ${LINKS}`;
const CLEAR_ALL = `DELETE FROM jobs RETURNING id, ${LINKS}`;
const RUNNING = `SELECT id, queue, name, attempts, progress, available_at, batch_id FROM jobs
  WHERE token IS NOT NULL AND available_at > $1 ORDER BY id`;
const NOTIFY = "SELECT pg_notify($1, '')";

type Sql = postgres.Sql<Record<string, never>>;
type Connection = postgres.TransactionSql<Record<string, never>> | Sql;

/**
 * Jobs in a PostgreSQL database, shared by any number of processes on any
 * number of machines. Each operation takes a pooled connection; every write
 * that may add or free jobs notifies the other processes' watchers.
 */
export class PostgresStore implements Store {
  readonly #sql: Sql;
  readonly #channel: string;
  readonly #dbClock: boolean;
  readonly #listeners = new Set<() => void>();
  readonly #pruning = new MetricsPruning();
  /** Set inside a transaction's callback, to refuse work that would escape the transaction. */
  readonly #insideTransaction = new AsyncLocalStorage<boolean>();
  #listening: Promise<{ unlisten(): Promise<void> } | null> | null = null;
  #closed = false;

  private constructor(sql: Sql, channel: string, dbClock: boolean) {
    this.#sql = sql;
    this.#channel = channel;
    this.#dbClock = dbClock;
  }

  /** Connects to `url` (`postgres://…`), creates the schema if missing and migrates it. */
  static async open(url: string, options: PostgresStoreOptions = {}): Promise<PostgresStore> {
    const schema = options.schema ?? "public";
    // Lower case only (the unquoted name in search_path is folded to lower case), and short
    // enough that "renox_queue_" + schema is a valid NOTIFY channel (63 bytes).
    if (!/^[a-z_][a-z0-9_]{0,50}$/.test(schema)) {
      throw new TypeError(
        `schema must be 1 to 51 lower-case letters, digits and underscores, not starting with a digit: got ${
          JSON.stringify(schema)
        }`,
      );
    }
    const clock = options.clock ?? "database";
    if (clock !== "database" && clock !== "caller") {
      throw new TypeError(`clock must be "database" or "caller": got ${String(clock)}`);
    }
    const maxConnections = options.maxConnections ?? 4;
    if (!Number.isSafeInteger(maxConnections) || maxConnections < 1) {
      throw new RangeError(`maxConnections must be a whole number >= 1: got ${maxConnections}`);
    }
    if (!isPostgresUrl(url)) {
      throw new TypeError(
        `url must start with postgres:// or postgresql://: got ${redactPassword(url)}`,
      );
    }
    const sql = postgres(url, {
      max: maxConnections,
      onnotice: () => {},
      connection: { search_path: schema, application_name: "@renox/queue" },
      // Ids, tokens and times are bigint columns that fit a JavaScript number exactly.
      types: {
        bigint: { to: 20, from: [20], serialize: String, parse: safeInteger },
      },
    }) as unknown as Sql;
    const store = new PostgresStore(sql, `renox_queue_${schema}`, clock === "database");
    try {
      await store.#migrate(schema);
    } catch (error) {
      await sql.end({ timeout: 1 });
      throw error;
    }
    return store;
  }

  /** Applies the schema steps the database lacks, under an advisory lock: safe from several processes at once. */
  migrate(): Promise<void> {
    return this.#migrate(null);
  }

  /** Migrates; first creates `schema` when given, under the same lock (creating it races otherwise). */
  #migrate(schema: string | null): Promise<void> {
    return this.#begin(async (run) => {
      await run("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
      if (schema !== null) await run(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
      await run(`CREATE TABLE IF NOT EXISTS queue_migrations (
        version integer PRIMARY KEY, applied_at bigint NOT NULL)`);
      const rows = await run<{ version: number }>("SELECT version FROM queue_migrations");
      const applied = new Set(rows.map((row) => row.version));
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
        await run(migration.sql);
        await run("INSERT INTO queue_migrations (version, applied_at) VALUES ($1, $2)", [
          migration.version,
          Date.now(),
        ]);
      }
    });
  }

  /** Inserts jobs and wakes the watchers in one statement: one round trip. */
  async push(rows: readonly NewJobRow[]): Promise<number[]> {
    this.#assertUsable();
    if (rows.length === 0) return [];
    const inserted = await runOn(this.#sql)<{ id: number }>(INSERT_AND_NOTIFY, [
      ...columnsOf(rows),
      this.#channel,
    ]);
    return inserted.map((row) => row.id).sort((a, b) => a - b);
  }

  /** Inserts unique or debounced jobs in one transaction, each unless its key is held. */
  pushKeyed(rows: readonly KeyedJobRow[]): Promise<KeyedPush[]> {
    return this.#begin(async (run) => {
      const pushed = await new PostgresGuards(run).pushKeyed(rows, (batch) => insert(run, batch));
      await this.#notify(run);
      return pushed;
    });
  }

  /** Checks claimed jobs' middleware in one transaction. */
  acquire(requests: readonly GuardRequest[], now: number): Promise<(number | null)[]> {
    return this.#begin((run) => new PostgresGuards(run).acquire(requests, now));
  }

  /** Inserts a chain's first link and its waiting links in one transaction. */
  pushChain(chain: NewChainRow): Promise<number> {
    return this.#begin(async (run) => {
      const id = await new PostgresComposition(run).insertChain(chain, (rows) => insert(run, rows));
      await this.#notify(run);
      return id;
    });
  }

  /** Inserts a batch with its jobs and callbacks in one transaction. */
  pushBatch(batch: NewBatchRow): Promise<PushedBatch> {
    return this.#begin(async (run) => {
      const pushed = await new PostgresComposition(run).insertBatch(batch);
      await this.#notify(run);
      return pushed;
    });
  }

  /** Adds counted jobs to a batch that is still running. */
  addToBatch(batchId: number, rows: readonly NewJobRow[]): Promise<number[]> {
    return this.#begin(async (run) => {
      const ids = await new PostgresComposition(run).addToBatch(batchId, rows);
      await this.#notify(run);
      return ids;
    });
  }

  /** One batch, or null. */
  batch(id: number): Promise<BatchRow | null> {
    return this.#begin((run) => new PostgresComposition(run).batch(id));
  }

  /** Batches, newest first. */
  batches(page: Page): Promise<BatchRow[]> {
    return this.#begin((run) => new PostgresComposition(run).batches(page));
  }

  /** Cancels a running batch, skipping its waiting jobs. */
  cancelBatch(id: number, now: number): Promise<boolean> {
    return this.#begin(async (run) => {
      const cancelled = await new PostgresComposition(run).cancel(id, now);
      if (cancelled) await this.#notify(run);
      return cancelled;
    });
  }

  /** Deletes batches finished or cancelled before `before`. */
  pruneBatches(before: number): Promise<number> {
    return this.#begin((run) => new PostgresComposition(run).prune(before));
  }

  /** Jobs leased now, with their progress. */
  running(now: number): Promise<RunningJobRow[]> {
    return this.#begin(async (run) => (await run<RunningRow>(RUNNING, [now])).map(toRunningJobRow));
  }

  /** Runs `fn` in one transaction: its pushes and queries commit or roll back together. */
  transaction<T>(fn: (tx: StoreTransaction) => T | Promise<T>): Promise<T> {
    return this.#begin(async (run) => {
      let open = true;
      const check = () => {
        if (!open) throw new Error("This transaction has ended: use it only inside its callback");
      };
      const handle: StoreTransaction = {
        push: async (rows) => (check(), await insert(run, rows)),
        pushKeyed: async (
          rows,
        ) => (check(),
          await new PostgresGuards(run).pushKeyed(rows, (batch) => insert(run, batch))),
        pushChain: async (
          chain,
        ) => (check(),
          await new PostgresComposition(run).insertChain(chain, (rows) => insert(run, rows))),
        pushBatch: async (
          batch,
        ) => (check(), await new PostgresComposition(run).insertBatch(batch)),
        query: async <Row>(text: string, params: readonly unknown[] = []) => {
          check();
          return [...await run<Row>(text, params)];
        },
      };
      try {
        const result = await this.#insideTransaction.run(true, () => fn(handle));
        await this.#notify(run);
        return result;
      } finally {
        open = false;
      }
    });
  }

  /** Leases due jobs in one statement with `FOR UPDATE SKIP LOCKED`. */
  claim(request: ClaimRequest): Promise<ClaimedJob[]> {
    return this.#begin((run) => this.#tick(run).claim(request));
  }

  /**
   * Applies settlements, each fenced by its token, then claims, all in one
   * transaction (see `_postgres_tick.ts` for the order rows are locked in).
   */
  settle(settlements: readonly Settlement[], then?: ClaimRequest): Promise<SettleResult> {
    return this.#begin((run) => this.#tick(run).settle(settlements, then));
  }

  /** A tick's work on the connection `run` is bound to. */
  #tick(run: Run): PostgresTick {
    return new PostgresTick(run, {
      dbClock: this.#dbClock,
      pruning: this.#pruning,
      notify: () => this.#notify(run),
    });
  }

  /** Extends leases in one statement; returns the ids whose lease was lost. */
  renew(leases: readonly Lease[], until: number): Promise<number[]> {
    if (leases.length === 0) return Promise.resolve([]);
    return this.#begin(async (run) => {
      // On the database's clock, the lease length asked for, from the database's now.
      const [base, length] = this.#dbClock ? [null, until - Date.now()] : [until, 0];
      const renewed = await run<{ id: number; token: number }>(RENEW, [
        length,
        base,
        leases.map((lease) => lease.id),
        leases.map((lease) => lease.token),
      ]);
      const kept = new Set(renewed.map((row) => `${row.id}:${row.token}`));
      return leases.filter((lease) => !kept.has(`${lease.id}:${lease.token}`)).map(({ id }) => id);
    });
  }

  /** Jobs per queue by state, failed jobs included. */
  counts(now: number): Promise<QueueCountsRow[]> {
    return this.#begin(async (run) => {
      const byQueue = new Map<string, QueueCountsRow>();
      for (const row of await run<Record<string, string | number>>(COUNTS, [now])) {
        const queue = String(row.queue);
        byQueue.set(queue, {
          queue,
          pending: Number(row.pending),
          delayed: Number(row.delayed),
          reserved: Number(row.reserved),
          failed: 0,
        });
      }
      for (const row of await run<{ queue: string; failed: number }>(FAILED_COUNTS)) {
        const counts = byQueue.get(row.queue) ??
          { queue: row.queue, pending: 0, delayed: 0, reserved: 0 };
        byQueue.set(row.queue, { ...counts, failed: Number(row.failed) });
      }
      return [...byQueue.values()].sort((a, b) => a.queue < b.queue ? -1 : 1);
    });
  }

  /** A page of the jobs not yet finished that match `filter`, and how many match. */
  jobs(filter: JobFilter, page: Page, now: number): Promise<JobListing> {
    return this.#begin((run) => new PostgresStats(run, this.#pruning).jobs(filter, page, now));
  }

  /** The metrics rollup's rows with `since <= minute < until`. */
  metrics(since: number, until: number): Promise<MetricsRow[]> {
    return this.#begin((run) => new PostgresStats(run, this.#pruning).metrics(since, until));
  }

  /** Writes a worker's row and drops those of workers not seen since `staleBefore`. */
  heartbeat(worker: WorkerRow, staleBefore: number): Promise<void> {
    return this.#begin((run) =>
      new PostgresStats(run, this.#pruning).heartbeat(worker, staleBefore)
    );
  }

  /** Deletes a worker's row; whether it was there. */
  removeWorker(id: string): Promise<boolean> {
    return this.#begin((run) => new PostgresStats(run, this.#pruning).removeWorker(id));
  }

  /** Workers last seen at or after `seenSince`. */
  workers(seenSince: number): Promise<WorkerRow[]> {
    return this.#begin((run) => new PostgresStats(run, this.#pruning).workers(seenSince));
  }

  /** Failed jobs, newest first. */
  failed(page: Page): Promise<FailedJobRow[]> {
    return this.#begin(async (run) =>
      (await run<FailedRow>(FAILED_PAGE, [page.limit, page.offset])).map(toFailedJobRow)
    );
  }

  /** One failed job, or null. */
  failedJob(id: number): Promise<FailedJobRow | null> {
    return this.#begin(async (run) => {
      const [row] = await run<FailedRow>(FAILED_ONE, [id]);
      return row === undefined ? null : toFailedJobRow(row);
    });
  }

  /** Moves failed jobs back in one transaction; a job is in exactly one table throughout. */
  retry(
    ids: readonly number[] | "all" | { readonly batchId: number },
    now: number,
  ): Promise<number[]> {
    return this.#begin(async (run) => {
      let moved: (JobLinks & { id: number })[];
      if (ids === "all") {
        moved = [...await run<JobLinks & { id: number }>(RETRY_ALL, [now])];
      } else if (!Array.isArray(ids)) {
        const { batchId } = ids as { readonly batchId: number };
        moved = [...await run<JobLinks & { id: number }>(RETRY_BATCH, [now, batchId])];
      } else {
        moved = [];
        for (const id of ids as readonly number[]) {
          moved.push(...await run<JobLinks & { id: number }>(RETRY_ONE, [now, id]));
        }
      }
      await new PostgresComposition(run).retried(moved);
      if (moved.length > 0) await this.#notify(run);
      return moved.map((row) => row.id);
    });
  }

  /** Deletes one failed job, and the waiting links of its chain. */
  async forget(id: number): Promise<boolean> {
    return await this.#deleteFailed(FORGET, [id]) === 1;
  }

  /** Deletes every failed job. */
  flushFailed(): Promise<number> {
    return this.#deleteFailed(FLUSH, []);
  }

  /** Deletes failed jobs older than `before`. */
  pruneFailed(before: number): Promise<number> {
    return this.#deleteFailed(PRUNE, [before]);
  }

  /** Deletes waiting and leased jobs of one queue, or of all; batch jobs count as skipped. */
  clear(queue: string | undefined, now: number): Promise<number> {
    return this.#begin(async (run) => {
      const deleted = queue === undefined
        ? await run<JobLinks & { id: number }>(CLEAR_ALL)
        : await run<JobLinks & { id: number }>(CLEAR_ONE, [queue]);
      await new PostgresComposition(run).cleared(deleted, now);
      const ids = deleted.map((row) => row.id);
      await new PostgresGuards(run).removed(ids);
      await this.#notify(run);
      return deleted.length;
    });
  }

  /**
   * Calls `listener` when any process commits a write that may add or free
   * jobs (`LISTEN` on the schema's channel). The first watcher opens the
   * listening connection; a failure to listen only leaves workers polling.
   */
  watch(listener: () => void): Disposable {
    this.#listeners.add(listener);
    this.#listening ??= this.#sql.listen(this.#channel, () => {
      for (const each of [...this.#listeners]) each();
    }).catch(() => null);
    return {
      [Symbol.dispose]: () => {
        this.#listeners.delete(listener);
      },
    };
  }

  /** Closes every connection; later calls fail. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const listening = await this.#listening;
    await listening?.unlisten().catch(() => {});
    await this.#sql.end({ timeout: 5 });
  }

  /** Same as {@linkcode PostgresStore.close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** Runs `step` in one transaction with a {@linkcode Run} bound to it. */
  async #begin<T>(step: (run: Run) => Promise<T>): Promise<T> {
    this.#assertUsable();
    const result = await this.#sql.begin((tx) => step(runOn(tx)));
    return result as T;
  }

  /**
   * Refuses use after close, and use from inside this store's own
   * transaction callback: that work would run on another connection, outside
   * the transaction, and could wait for a lock the transaction holds.
   */
  #assertUsable(): void {
    if (this.#closed) throw new QueueClosedError("use the PostgreSQL store");
    if (this.#insideTransaction.getStore() === true) {
      throw new Error(
        "Cannot use the queue inside its own transaction callback: it would run outside the transaction; use the tx handle (tx.dispatch, tx.query)",
      );
    }
  }

  async #deleteFailed(text: string, params: readonly unknown[]): Promise<number> {
    return await this.#begin(async (run) => {
      const deleted = (await run(text, params)).count;
      if (deleted > 0) await new PostgresComposition(run).dropOrphanLinks();
      return deleted;
    });
  }

  /** Tells every watcher, once the transaction commits, that jobs may have been added or freed. */
  async #notify(run: Run): Promise<void> {
    await run(NOTIFY, [this.#channel]);
  }
}

/** A {@linkcode Run} on one connection or transaction: prepared statements, `$n` parameters. */
function runOn(connection: Connection): Run {
  return <Row>(text: string, params: readonly unknown[] = []) =>
    connection.unsafe(text, params as never[], { prepare: true }) as unknown as Promise<Rows<Row>>;
}

/** Inserts jobs in one statement; returns their ids in order. */
async function insert(run: Run, rows: readonly NewJobRow[]): Promise<number[]> {
  if (rows.length === 0) return [];
  const inserted = await run<{ id: number }>(INSERT, columnsOf(rows));
  return inserted.map((row) => row.id).sort((a, b) => a - b);
}

/** New job rows as one array per column, the parameters of the insert statements. */
function columnsOf(rows: readonly NewJobRow[]): unknown[][] {
  const column = <T>(pick: (row: NewJobRow) => T) => rows.map(pick);
  return [
    column((row) => row.queue),
    column((row) => row.name),
    column((row) => row.payload),
    column((row) => row.priority),
    column((row) => row.availableAt),
    column((row) => row.retryUntil),
    column((row) => row.createdAt),
  ];
}

/** An int8 column's text as a number, refusing one a JavaScript number cannot hold exactly. */
function safeInteger(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) {
    throw new RangeError(
      `A bigint value ${text} is beyond JavaScript's safe integers: cast it to text in the query`,
    );
  }
  return value;
}
