/**
 * Runs a feature test once per store: on SQLite (a temp file), when
 * `QUEUE_TEST_POSTGRES_URL` is set on PostgreSQL (a schema of its own, as a
 * fresh migration leaves it: one another test handed back emptied, or a
 * new one; see tests/_schema_pool.ts), and when `QUEUE_TEST_REDIS_URL` is
 * set on Redis (a fresh prefix, its keys deleted afterwards). Without a
 * variable its variants are not registered: each test file that uses this
 * says once why, and lists one ignored test that names the variable.
 *
 * A test that reads the database with SQL (`db.query`, `db.count`,
 * `db.sql`, `db.pick`) is registered with {@linkcode storeTest.sql}: it runs
 * on the SQL stores only, and its Redis variant is listed as ignored, saying
 * why, rather than left out in silence. Prefer reading what the public API
 * shows (`queue.counts()`, `queue.jobs()`, `queue.result()`,
 * `queue.failed()`): such a test runs on every store. What every store keeps
 * but no public read shows has a reader of its own here, written per store:
 * unique and debounce keys ({@linkcode StoreContext.jobKeys}), overlap locks
 * ({@linkcode StoreContext.jobLocks}), one column of a job as stored, a
 * payload at rest or a kept job's `keep_until` ({@linkcode StoreContext.stored},
 * changed with {@linkcode StoreContext.setStored}), the rows through the
 * {@linkcode Store} interface ({@linkcode StoreContext.store}), the slots a
 * schedule fired ({@linkcode StoreContext.scheduleSlots}), and the jobs
 * waiting for their chain or batch ({@linkcode StoreContext.waitingJobs}).
 *
 * ```ts ignore
 * storeTest("Queue.dispatch() stores the job", async (db) => {
 *   await using queue = await db.open({ jobs: [job] });
 *   await queue.dispatch(job, null);
 *   assert.equal((await queue.counts()).queues[0]?.waiting, 1);
 * });
 * storeTest.sql("Queue.dispatch() writes one row", async (db) => {
 *   await using queue = await db.open({ jobs: [job] });
 *   await queue.dispatch(job, null);
 *   assert.equal(await db.count("jobs"), 1);
 * });
 * ```
 *
 * @module
 */
import { join } from "node:path";
import { Queue, type QueueOptions } from "../src/queue.ts";
import { PostgresStore } from "../src/stores/postgres/mod.ts";
import { RedisStore } from "../src/stores/redis/mod.ts";
import { SqliteStore } from "../src/stores/sqlite/mod.ts";
import type { Store } from "../src/stores/store.ts";
import { tempDir } from "./_helpers.ts";
import { openTestPostgresStore, postgresTestUrl } from "./_postgres.ts";
import {
  deletePrefix,
  freshPrefix,
  hashField,
  hashFieldNames,
  prefixJobKeys,
  prefixLockCount,
  prefixWaitingJobs,
  type RedisKeyRow,
  redisTestUrl,
  type RedisWaitingRow,
  setHashField,
} from "./_redis.ts";

/**
 * The tables whose rows {@linkcode StoreContext.stored} reads by id: jobs
 * not yet finished, kept finished jobs, failed jobs. On Redis each row is a
 * hash of fields named as the columns (`job:<id>`, `done:<id>`, `failed:<id>`).
 */
export type StoredTable = "jobs" | "completed_jobs" | "failed_jobs";

const REDIS_ROW_KEYS: Record<StoredTable, string> = {
  jobs: "job",
  completed_jobs: "done",
  failed_jobs: "failed",
};

/** The database a variant of a test runs on. */
export type StoreKind = "sqlite" | "postgres" | "redis";

/** What a test may pass to {@linkcode StoreContext.open}: everything but where the jobs live. */
export type TestQueueOptions = Omit<
  QueueOptions,
  "path" | "url" | "store" | "durability" | "busyTimeoutMs"
>;

/** One variant's database, handed to the test body by {@linkcode storeTest}. */
export interface StoreContext {
  /** Which store this variant runs on. */
  readonly kind: StoreKind;
  /** A temp folder of the test's own, removed afterwards: for files the test or its jobs write. */
  readonly dir: string;
  /** The SQLite file of this test's database; null on PostgreSQL and Redis. */
  readonly file: string | null;
  /**
   * Where a child process finds this test's database, as arguments for
   * `openChildQueue()` (tests/_child_queue.ts) in the child: the database as `QUEUE_DB` and
   * `--db` take it, i.e. the SQLite file, or on Redis the server's URL naming
   * the test's prefix (`redis://…?prefix=t_…`); on PostgreSQL the server's
   * URL and then the test's schema, which a URL cannot name. A child on
   * these arguments sees what the test's queues see.
   */
  childArgs(): Promise<string[]>;
  /**
   * Opens a queue on this test's database: every call of one test opens
   * another queue (another connection) on the same database. On PostgreSQL
   * and Redis the store goes by the caller's clock when `options.clock` is
   * given, else by the database's. Queues left open are closed when the test ends.
   */
  open(options: TestQueueOptions): Promise<Queue>;
  /**
   * `text` with its `?` and `?N` placeholders in this store's syntax (`$n` on
   * PostgreSQL). SQL stores only: on Redis it throws (see {@linkcode storeTest.sql}).
   */
  sql(text: string): string;
  /**
   * Runs one statement (`?` or `?N` placeholders) in a transaction of a
   * store of its own on this test's database, like a second connection, and
   * returns its rows as plain objects. SQL stores only: on Redis it throws.
   */
  query<Row = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<Row[]>;
  /**
   * Rows of `table` matching `where` (placeholders as in {@linkcode StoreContext.query}).
   * SQL stores only: on Redis it throws.
   */
  count(table: string, where?: string, params?: readonly unknown[]): Promise<number>;
  /**
   * The choice for this store, for statements whose syntax differs (DDL,
   * triggers). SQL stores only: on Redis it throws.
   */
  pick<T>(choices: { readonly sqlite: T; readonly postgres: T }): T;
  /**
   * The unique and debounce keys the store keeps, expired or not, by key:
   * the `job_keys` rows on SQL, the `{prefix}:key:*` hashes on Redis. On
   * every store: for tests of what a key holds, and that none is left behind.
   */
  jobKeys(): Promise<JobKeyRow[]>;
  /**
   * How many overlap locks (`withoutOverlapping`) the store keeps, expired
   * or not: `job_locks` rows on SQL, members of `{prefix}:lock:*` on Redis.
   * On every store: for tests that no lock is left behind.
   */
  jobLocks(): Promise<number>;
  /**
   * One column of row `id` of `table` as stored, on every store: text as
   * written (a payload still encrypted), a number as its decimal text; null
   * when the row or the value is absent. For what no API shows.
   */
  stored(table: StoredTable, id: number, column: string): Promise<string | null>;
  /**
   * Sets one column of row `id` of `table`, on every store, as a writer with
   * access to the database would (a changed payload, a cancel asked by a
   * process that then died). Rejects when there is no such row.
   */
  setStored(table: StoredTable, id: number, column: string, value: string): Promise<void>;
  /**
   * A store of the test's own on this test's database, opened on first call
   * and closed when the test ends: for reads through the {@linkcode Store}
   * interface of what the queue gives back only decoded (a log line as
   * stored, still sealed), on every store.
   */
  store(): Promise<Store>;
  /**
   * The slots schedule `name` fired, oldest first: its slot runs, not its
   * triggers (what a slot that must not fire twice is checked against), on
   * every store. On Redis the fields of the schedule's `sched:<name>:runs` hash.
   */
  scheduleSlots(name: string): Promise<number[]>;
  /**
   * Changes the rule of stored schedule `name` as an older version of the
   * app may have stored it (a cron now refused), on every store. On Redis
   * the schedule's JSON in the `sched` hash. Rejects when it is not stored.
   */
  setScheduleRule(
    name: string,
    rule: { cron: string | null; everyMs: number | null },
  ): Promise<void>;
  /**
   * Stored schedule `name` as the store keeps it, for checks of what the
   * database holds: its `schedules` row as JSON on SQL, its JSON in the
   * `sched` hash on Redis; null when it is not stored.
   */
  storedSchedule(name: string): Promise<string | null>;
  /**
   * The jobs that wait for their chain (next links, catches) or batch
   * (then, catch, finally callbacks): `waiting_jobs` rows on SQL, the
   * `{prefix}:held:*` lists on Redis. By chain or batch (chains first), each's
   * in the order dispatched. On every store: no public read shows them.
   */
  waitingJobs(): Promise<WaitingJobRow[]>;
}

/** The error of {@linkcode StoreContext.setStored} on a row that is not there. */
function noRow(table: StoredTable, id: number): Error {
  return new Error(`setStored: no row ${id} in ${table}`);
}

/** A job waiting for its chain or batch, as {@linkcode StoreContext.waitingJobs} reads it on every store. */
export type WaitingJobRow = RedisWaitingRow;

/** A unique or debounce key, as {@linkcode StoreContext.jobKeys} reads it on every store. */
export type JobKeyRow = RedisKeyRow;

const STORE_NAMES: Record<StoreKind, string> = {
  sqlite: "SQLite",
  postgres: "PostgreSQL",
  redis: "Redis",
};

/** What the test files of this process have said once: a skipped store, SQL tests not on Redis. */
const noted = new Set<"postgres" | "redis" | "sql">();

/** Says `message` once per test file, with an ignored test of the same name in the report. */
function noteOnce(what: "postgres" | "redis" | "sql", message: string): void {
  if (noted.has(what)) return;
  noted.add(what);
  console.log(message);
  Deno.test({ name: message, ignore: true, fn() {} });
}

/**
 * Registers `fn` as one test per store, named `"SQLite: <name>"`,
 * `"PostgreSQL: <name>"` and `"Redis: <name>"`. Each run gets a database
 * as fresh (on PostgreSQL maybe a schema another test emptied and handed
 * back, which no test can tell from a fresh one), removed or handed back
 * when the test ends after every queue it opened is closed. `fn` reads the
 * database only through the queue and the store, never with SQL: a test
 * that does is registered with {@linkcode storeTest.sql}.
 */
export function storeTest(name: string, fn: (db: StoreContext) => Promise<void>): void {
  register(name, fn, true);
}

/**
 * Registers `fn`, a test that reads the database with SQL, on the SQL
 * stores only (SQLite, and PostgreSQL when its URL is set). Its Redis
 * variant is listed as an ignored test that says why; the file says once
 * how many of its tests read SQL.
 */
storeTest.sql = function storeTestSql(
  name: string,
  fn: (db: StoreContext) => Promise<void>,
): void {
  register(name, fn, false);
};

function register(name: string, fn: (db: StoreContext) => Promise<void>, onRedis: boolean): void {
  const postgresUrl = postgresTestUrl();
  const redisUrl = redisTestUrl();
  if (postgresUrl === null) {
    noteOnce(
      "postgres",
      "PostgreSQL: feature tests skipped, QUEUE_TEST_POSTGRES_URL is not set",
    );
  }
  if (redisUrl === null) {
    noteOnce("redis", "Redis: feature tests skipped, QUEUE_TEST_REDIS_URL is not set");
  } else if (!onRedis) {
    noteOnce(
      "sql",
      "Redis: the tests of this file registered with storeTest.sql() read SQL, so they run on " +
        "the SQL stores only (each is listed as ignored)",
    );
    Deno.test({ name: `Redis: ${name} (reads SQL: SQL stores only)`, ignore: true, fn() {} });
  }
  const kinds: StoreKind[] = [
    "sqlite",
    ...(postgresUrl === null ? [] : ["postgres" as const]),
    ...(redisUrl === null || !onRedis ? [] : ["redis" as const]),
  ];
  for (const kind of kinds) {
    Deno.test(`${STORE_NAMES[kind]}: ${name}`, async () => {
      await using db = kind === "redis"
        ? await openRedisContext(redisUrl!)
        : await openContext(kind, postgresUrl);
      await fn(db);
    });
  }
}

/**
 * Settles as `work` does, but rejects with the error of the first
 * `queue:error` of `queue` before then. For tests that expect none: a store
 * that fails on every tick would otherwise keep a worker looping until the
 * test's deadline.
 */
export function orQueueError<T>(queue: EventTarget, work: Promise<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    const listener = (event: Event) => {
      const { error, during } = (event as CustomEvent<{ error: Error; during: string }>).detail;
      reject(new Error(`queue:error during ${during}: ${error}`, { cause: error }));
    };
    queue.addEventListener("queue:error", listener);
    work.then(resolve, reject).finally(() => queue.removeEventListener("queue:error", listener));
  });
}

/** A queue on `store`, which it closes with itself; the store is closed here when opening fails. */
async function openOnStore(options: TestQueueOptions, store: Store): Promise<Queue> {
  try {
    return await Queue.open({ ...options, store });
  } catch (error) {
    await store.close();
    throw error;
  }
}

/** `?N` becomes `$N` and each bare `?` the next `$n`; quoted text is left alone. */
function toDollarPlaceholders(text: string): string {
  let next = 0;
  return text.replace(/'(?:[^']|'')*'|\?(\d*)/g, (match, number: string | undefined) => {
    if (match.startsWith("'")) return match;
    return number ? `$${number}` : `$${++next}`;
  });
}

/** The error of a SQL read in a test's Redis variant. */
function readsSql(what: string): Error {
  return new Error(
    `db.${what}() on Redis: this test reads SQL, which the Redis store has none of; register it ` +
      "with storeTest.sql(), or read through the public API (queue.counts(), queue.jobs(), " +
      "queue.result(), queue.failed())",
  );
}

/** A Redis variant's database: a fresh prefix, its keys deleted when the test ends. */
async function openRedisContext(url: string): Promise<StoreContext & AsyncDisposable> {
  const dir = await tempDir();
  const prefix = freshPrefix();
  const queues: Queue[] = [];
  let reader: Promise<RedisStore> | null = null;
  return {
    kind: "redis",
    dir: dir.dir,
    file: null,
    childArgs() {
      const target = new URL(url);
      target.searchParams.set("prefix", prefix);
      return Promise.resolve([target.href]);
    },
    async open(options) {
      const clock = options.clock === undefined ? "database" : "caller";
      const queue = await openOnStore(options, await RedisStore.open(url, { prefix, clock }));
      queues.push(queue);
      return queue;
    },
    sql() {
      throw readsSql("sql");
    },
    query() {
      return Promise.reject(readsSql("query"));
    },
    count() {
      return Promise.reject(readsSql("count"));
    },
    pick() {
      throw readsSql("pick");
    },
    jobKeys: () => prefixJobKeys(url, prefix),
    jobLocks: () => prefixLockCount(url, prefix),
    waitingJobs: () => prefixWaitingJobs(url, prefix),
    stored: (table, id, column) =>
      hashField(url, `{${prefix}}:${REDIS_ROW_KEYS[table]}:${id}`, column),
    async setStored(table, id, column, value) {
      const key = `{${prefix}}:${REDIS_ROW_KEYS[table]}:${id}`;
      if (!await setHashField(url, key, column, value)) throw noRow(table, id);
    },
    store: () => reader ??= RedisStore.open(url, { prefix }),
    async scheduleSlots(name) {
      const slots = await hashFieldNames(url, `{${prefix}}:sched:${name}:runs`);
      return slots.map(Number).sort((a, b) => a - b);
    },
    async setScheduleRule(name, rule) {
      const key = `{${prefix}}:sched`;
      const stored = await hashField(url, key, name);
      if (stored === null) throw new Error(`setScheduleRule: no schedule ${name}`);
      await setHashField(url, key, name, JSON.stringify({ ...JSON.parse(stored), ...rule }));
    },
    storedSchedule: (name) => hashField(url, `{${prefix}}:sched`, name),
    async [Symbol.asyncDispose]() {
      try {
        await Promise.all(queues.map((queue) => queue.close()));
        if (reader !== null) await (await reader).close();
        await deletePrefix(url, prefix);
      } finally {
        await dir[Symbol.asyncDispose]();
      }
    },
  };
}

async function openContext(
  kind: "sqlite" | "postgres",
  url: string | null,
): Promise<StoreContext & AsyncDisposable> {
  const dir = await tempDir();
  const dbPath = join(dir.dir, "queue.db");
  const queues: Queue[] = [];
  /**
   * The store `query` reads through, opened on first use and closed last. On
   * PostgreSQL it takes the test's schema, and hands it back (or drops it)
   * when disposed.
   */
  let reader:
    | Promise<{ store: Store; schema: string; sharedOutside(): void } & AsyncDisposable>
    | null = null;
  const openReader = () =>
    reader ??= kind === "sqlite"
      ? SqliteStore.open(dbPath).then((store) => ({
        store,
        schema: "",
        sharedOutside() {},
        [Symbol.asyncDispose]: () => store.close(),
      }))
      : openTestPostgresStore(url!, { maxConnections: 2 });
  const sql = (text: string) => kind === "sqlite" ? text : toDollarPlaceholders(text);
  const query = async <Row>(text: string, params: readonly unknown[] = []): Promise<Row[]> => {
    const { store } = await openReader();
    const rows = await store.transaction((tx) => tx.query<Row & object>(sql(text), params));
    return rows.map((row) => ({ ...row }));
  };
  return {
    kind,
    dir: dir.dir,
    file: kind === "sqlite" ? dbPath : null,
    async childArgs() {
      if (kind === "sqlite") return [dbPath];
      const opened = await openReader();
      // A child's connections may outlive the test's sight of them: no other test gets the schema.
      opened.sharedOutside();
      return [url!, opened.schema];
    },
    async open(options) {
      let queue: Queue;
      if (kind === "sqlite") {
        queue = await Queue.open({ ...options, path: dbPath });
      } else {
        // The schema is taken (and later handed back or dropped) by the reader's store.
        const { schema } = await openReader();
        const clock = options.clock === undefined ? "database" : "caller";
        queue = await openOnStore(options, await PostgresStore.open(url!, { schema, clock }));
      }
      queues.push(queue);
      return queue;
    },
    sql,
    query,
    async count(table, where = "TRUE", params = []) {
      const [row] = await query<{ n: number }>(
        `SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`,
        params,
      );
      return Number(row!.n);
    },
    pick: (choices) => choices[kind],
    async jobKeys() {
      // As hex: node:sqlite reads TEXT only up to its first NUL, and keys may hold one.
      const keyHex = kind === "sqlite"
        ? "hex(key)"
        : "upper(encode(convert_to(key, 'UTF8'), 'hex'))";
      const rows = await query<
        { key: string; kind: string; job_id: number; expires_at: number | null }
      >(
        `SELECT ${keyHex} AS key, kind, job_id, expires_at FROM job_keys ORDER BY key`,
      );
      return rows.map((row) => ({
        key: new TextDecoder().decode(
          Uint8Array.from(row.key.match(/../g) ?? [], (byte) => parseInt(byte, 16)),
        ),
        kind: row.kind,
        jobId: Number(row.job_id),
        expiresAt: row.expires_at === null ? null : Number(row.expires_at),
      }));
    },
    async jobLocks() {
      const [row] = await query<{ n: number }>("SELECT COUNT(*) AS n FROM job_locks");
      return Number(row!.n);
    },
    async stored(table, id, column) {
      const [row] = await query<Record<string, unknown>>(
        `SELECT ${column} AS value FROM ${table} WHERE id = ?`,
        [id],
      );
      return row?.value === undefined || row.value === null ? null : String(row.value);
    },
    async setStored(table, id, column, value) {
      const changed = await query(`UPDATE ${table} SET ${column} = ? WHERE id = ? RETURNING id`, [
        value,
        id,
      ]);
      if (changed.length !== 1) throw noRow(table, id);
    },
    store: async () => (await openReader()).store,
    async scheduleSlots(name) {
      const rows = await query<{ slot: number }>(
        "SELECT slot FROM schedule_runs WHERE schedule = ? AND manual = 0 ORDER BY slot",
        [name],
      );
      return rows.map((row) => Number(row.slot));
    },
    async setScheduleRule(name, { cron, everyMs }) {
      const changed = await query(
        "UPDATE schedules SET cron = ?, every_ms = ? WHERE name = ? RETURNING name",
        [cron, everyMs, name],
      );
      if (changed.length !== 1) throw new Error(`setScheduleRule: no schedule ${name}`);
    },
    async storedSchedule(name) {
      const [row] = await query("SELECT * FROM schedules WHERE name = ?", [name]);
      return row === undefined ? null : JSON.stringify(row);
    },
    async waitingJobs() {
      const rows = await query<{
        role: string;
        chain_id: number | null;
        batch_id: number | null;
        queue: string;
        name: string;
        payload: string;
        delay_ms: number;
      }>(
        `SELECT role, chain_id, batch_id, queue, name, payload, delay_ms FROM waiting_jobs
          ORDER BY batch_id IS NOT NULL, COALESCE(chain_id, batch_id), id`,
      );
      return rows.map((row) => ({
        role: row.role,
        chainId: row.chain_id === null ? null : Number(row.chain_id),
        batchId: row.batch_id === null ? null : Number(row.batch_id),
        queue: row.queue,
        name: row.name,
        payload: row.payload,
        delayMs: Number(row.delay_ms),
      }));
    },
    async [Symbol.asyncDispose]() {
      try {
        await Promise.all(queues.map((queue) => queue.close()));
        if (reader !== null) await (await reader)[Symbol.asyncDispose]();
      } finally {
        await dir[Symbol.asyncDispose]();
      }
    },
  };
}
