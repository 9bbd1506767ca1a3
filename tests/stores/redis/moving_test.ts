/**
 * The Redis store's side of moving a queue (`MoveStore`, docs/moving.md),
 * exercised on its own: rows of every table (and the id counters) from
 * SQLite imported into Redis and exported back equal, a Redis prefix copied to another, the jobs of an
 * import worked, retried and read there, imports run twice, bad rows, and
 * the fence. Runs when `QUEUE_TEST_REDIS_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { QueueMovedError } from "../../../src/errors.ts";
import { SqliteStore } from "../../../src/stores/sqlite/mod.ts";
import type { RedisStore } from "../../../src/stores/redis/mod.ts";
import type { Store } from "../../../src/stores/store.ts";
import { TRANSFER_COLUMNS } from "../../../src/stores/rows/transfer_columns.ts";
import {
  SCHEMA_TABLES,
  type SchemaTable,
  TRANSFER_TABLES,
  type TransferRow,
  type TransferTable,
} from "../../../src/stores/rows/transfer.ts";
import { TABLE_LAYOUTS } from "../../../src/stores/sql/transfer.ts";
import { openTestRedisStore, redisTestUrl } from "../../_redis.ts";
import { LEASE_MS, newJob, T0 } from "../contract/fixtures.ts";
import { buildState, type BuiltState, STATE_QUEUES } from "./_move_state.ts";

const url = redisTestUrl();

/** Each table's primary key (job_locks has none: its columns), the order rows are compared in. */
const ORDER: Record<SchemaTable, string> = {
  batches: "id",
  flows: "id",
  flow_nodes: "flow_id, position",
  flow_edges: "flow_id, parent, child",
  waiting_jobs: "id",
  jobs: "id",
  failed_jobs: "id",
  completed_jobs: "id",
  job_keys: "key",
  job_locks: "key, job_id, token",
  rate_windows: "key",
  schedules: "name",
  schedule_runs: "job_id",
  queue_pauses: "queue",
  group_pauses: "name, group_key",
  job_groups: "queue, name, group_key",
  // The Redis store keeps these per job: its export goes by job, then by their own key.
  job_steps: "job_id, seq",
  job_signals: "job_id, id",
  job_logs: "job_id, id",
  job_metrics: "minute, queue, name, shard",
};

/** A SQLite queue file with {@linkcode buildState}'s state, and what it stored. */
async function sqliteState(): Promise<{ file: string; built: BuiltState } & AsyncDisposable> {
  const dir = await Deno.makeTempDir();
  const file = `${dir}/queue.db`;
  const store = await SqliteStore.open(file);
  let built: BuiltState;
  try {
    built = await buildState(store);
  } finally {
    await store.close();
  }
  return {
    file,
    built,
    async [Symbol.asyncDispose]() {
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** Every row of `table` in the SQLite file, in the compared order, as plain rows. */
function sqliteRows(file: string, table: SchemaTable): TransferRow[] {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    // Without the columns a move leaves for the destination to rebuild (a group's ids).
    const rebuilt = TABLE_LAYOUTS[table].rebuilt ?? [];
    return db.prepare(`SELECT * FROM ${table} ORDER BY ${ORDER[table]}`).all()
      .map((row) =>
        Object.fromEntries(
          Object.entries(row).filter(([column]) => !rebuilt.includes(column)),
        ) as TransferRow
      );
  } finally {
    db.close();
  }
}

/** Every row of `table` in the SQLite file: a table's as {@linkcode sqliteRows}, the id counters as the store exports them. */
async function sqliteSource(file: string, table: TransferTable): Promise<TransferRow[]> {
  if (table !== "id_counters") return sqliteRows(file, table);
  await using store = await SqliteStore.open(file);
  return [...(await store.exportRows(table, null, 100)).rows];
}

/** Every row `store` exports of `table`, `limit` a page, checking each page's size. */
async function exportAll(store: RedisStore, table: TransferTable, limit = 1000) {
  const rows: TransferRow[] = [];
  let after: string | null = null;
  let pages = 0;
  do {
    const page: { rows: readonly TransferRow[]; after: string | null } = await store.exportRows(
      table,
      after,
      limit,
    );
    assert.ok(page.rows.length <= limit, `${table}: a page of ${page.rows.length} > ${limit}`);
    rows.push(...page.rows);
    after = page.after;
    assert.ok(++pages < 10_000, `${table}: the pages never end`);
  } while (after !== null);
  return rows;
}

/** Imports `tables` of the SQLite file (every one) into `store`, in copy order, `limit` rows a call. */
async function importSqlite(
  store: RedisStore,
  file: string,
  limit = 1000,
  tables: readonly TransferTable[] = TRANSFER_TABLES,
): Promise<number[]> {
  const stored: number[] = [];
  for (const table of tables) {
    const rows = await sqliteSource(file, table);
    let count = 0;
    for (let start = 0; start < rows.length; start += limit) {
      count += await store.importRows(table, rows.slice(start, start + limit));
    }
    stored.push(count);
  }
  await store.finishImport();
  return stored;
}

/** SQL's own bookkeeping that Redis does not keep: a group's version. */
function withoutSqlOnly(table: TransferTable, rows: readonly TransferRow[]): TransferRow[] {
  return table === "job_groups" ? rows.map((row) => ({ ...row, version: 0 })) : [...rows];
}

/** The jobs a worker runs after {@linkcode buildState} and the failed job's retry, by name. */
const DRAINED = [
  "b",
  "b-catch",
  "b-finally",
  "b3",
  "c",
  "c2",
  "c3",
  "contract-job",
  "contract-job",
  "d",
  "g-job",
  "g-job",
  "g-job",
  "g-job",
  "tick",
  "tick",
  "u",
  "w-fail",
  "w-run",
  "w-step",
].sort();

/**
 * Works every queue of the state as a worker would, well after every lease
 * ran out, completing each job: the jobs it ran by id (each at most once).
 */
async function drain(store: Store): Promise<Map<number, string>> {
  const seen = new Map<number, string>();
  let token = 100;
  for (let round = 0; round < 50; round++) {
    const now = T0 + 10_000_000 + round;
    const claimed = await store.claim({
      queues: STATE_QUEUES,
      limit: 50,
      now,
      leaseMs: LEASE_MS,
      token: ++token,
    });
    if (claimed.length === 0) return seen;
    for (const job of claimed) {
      assert.ok(!seen.has(job.id), `job ${job.id} (${job.name}) claimed twice`);
      seen.set(job.id, job.name);
    }
    const settled = await store.settle(
      claimed.map((job) => ({ kind: "complete" as const, id: job.id, token, at: now })),
    );
    assert.ok(settled.applied.every(Boolean));
  }
  throw new Error("the queues never ran dry");
}

Deno.test({
  name: "The Redis store's move columns are SQLite's tables at the current schema step",
  async fn() {
    await using state = await sqliteState();
    const db = new DatabaseSync(state.file, { readOnly: true });
    try {
      assert.deepEqual(
        TRANSFER_COLUMNS.id_counters.map((c) => c.name),
        TABLE_LAYOUTS.id_counters.columns,
      );
      for (const table of SCHEMA_TABLES) {
        const info = db.prepare(`PRAGMA table_info(${table})`).all() as {
          name: string;
          type: string;
          notnull: number;
          pk: number;
        }[];
        const rebuilt = TABLE_LAYOUTS[table].rebuilt ?? [];
        assert.deepEqual(
          TRANSFER_COLUMNS[table].map((c) => [c.name, c.type.toUpperCase(), c.nullable]),
          info.filter((c) => !rebuilt.includes(c.name))
            .map((c) => [c.name, c.type, c.notnull === 0 && c.pk === 0]),
          table,
        );
      }
    } finally {
      db.close();
    }
  },
});

Deno.test({
  name:
    "RedisStore imports every table of a SQLite queue and exports it back equal, table by table, page by page",
  ignore: url === null,
  async fn() {
    await using state = await sqliteState();
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store } = opened;
    const stored = await importSqlite(store, state.file, 2);
    for (const [index, table] of TRANSFER_TABLES.entries()) {
      const source = withoutSqlOnly(table, await sqliteSource(state.file, table));
      assert.ok(source.length > 0, `the state has no ${table}`);
      assert.equal(stored[index], source.length, `${table}: rows stored`);
      assert.deepEqual(await exportAll(store, table, 2), source, table);
      assert.equal(await store.countRows(table), source.length, `${table}: countRows`);
    }
  },
});

Deno.test({
  name:
    "RedisStore copies a queue to another prefix: the rows exported there equal the source's, and an import run twice stores nothing twice",
  ignore: url === null,
  async fn() {
    await using source = await openTestRedisStore(url!, { clock: "caller" });
    await using target = await openTestRedisStore(url!, { clock: "caller" });
    await buildState(source.store);
    for (const table of TRANSFER_TABLES) {
      const rows = await exportAll(source.store, table, 3);
      assert.ok(rows.length > 0, `the state has no ${table}`);
      assert.equal(await target.store.importRows(table, rows), rows.length, table);
    }
    await target.store.finishImport();
    for (const table of SCHEMA_TABLES) {
      const rows = await exportAll(source.store, table);
      assert.deepEqual(await exportAll(target.store, table, 4), rows, table);
      assert.equal(await target.store.importRows(table, rows), 0, `${table}: imported again`);
      assert.deepEqual(
        await exportAll(target.store, table),
        rows,
        `${table} after a second import`,
      );
      assert.equal(await target.store.countRows(table), await source.store.countRows(table), table);
    }
    // Counters are at least the source's: the target numbered the held rows the source's export
    // gave ids (the source hands waiting ids out only as it exports them).
    const counters = await exportAll(source.store, "id_counters");
    const reached = new Map(
      (await exportAll(target.store, "id_counters")).map((row) => [row.name, row.value]),
    );
    for (const { name, value } of counters) {
      assert.ok(Number(reached.get(name)) >= Number(value), `id counter ${name}`);
    }
    assert.equal(await target.store.importRows("id_counters", counters), 0, "counters again");
    const counts = (store: RedisStore) => store.counts(T0 + 100);
    assert.deepEqual(await counts(target.store), await counts(source.store));
  },
});

Deno.test({
  name:
    "After an import from SQLite a worker runs every Redis job once, the failed job retries, history and schedules read as before, batch counters stay exact",
  ignore: url === null,
  async fn() {
    await using state = await sqliteState();
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store } = opened;
    await importSqlite(store, state.file);
    const { built } = state;
    const sqlite = await SqliteStore.open(state.file);
    try {
      assert.deepEqual(await store.batch(built.batchId), await sqlite.batch(built.batchId));
      assert.deepEqual(await store.flow(built.flowId), await sqlite.flow(built.flowId));
      assert.deepEqual(await store.schedules(), await sqlite.schedules());
      assert.deepEqual(await store.paused(T0 + 100), await sqlite.paused(T0 + 100));
      assert.deepEqual(
        await store.failed({ limit: 10, offset: 0 }),
        await sqlite.failed({ limit: 10, offset: 0 }),
      );
      assert.deepEqual(await store.logs(built.keptId), await sqlite.logs(built.keptId));
      assert.deepEqual(
        await store.jobSteps(built.steppedId),
        await sqlite.jobSteps(built.steppedId),
      );
      assert.deepEqual(await store.counts(T0 + 100), await sqlite.counts(T0 + 100));
    } finally {
      await sqlite.close();
    }

    const kept = await store.result(built.keptId, T0 + 100);
    assert.equal(kept?.state, "completed");
    assert.equal(kept?.output, '"ok"');

    // The slot already fired stays fired; the next one fires.
    assert.deepEqual(
      await store.runSchedule("every-minute", [{
        slot: T0,
        manual: false,
        row: newJob({ queue: "sched", name: "tick" }),
      }], T0 + 200),
      [null],
    );

    const retried = await store.retry([built.failedId], T0 + 300);
    assert.deepEqual(retried, [built.failedId]);

    const seen = await drain(store);
    assert.deepEqual([...seen.values()].sort(), DRAINED);
    assert.ok(seen.has(built.failedId) && seen.has(built.runningId) && seen.has(built.firedId));
    const batch = await store.batch(built.batchId);
    assert.deepEqual(
      [batch?.total, batch?.pending, batch?.failed, batch?.skipped, batch?.finishedAt !== null],
      [3, 0, 1, 0, true],
    );
    // Every follow-up that was to fire fired once; a then after a failed member and the catch
    // of a flow that did not fail still wait, as they do on SQLite.
    assert.deepEqual(
      (await exportAll(store, "waiting_jobs")).map((row) => [row.role, row.name]),
      [["then", "b-then"], ["flow-catch", "f-catch"]],
    );
    const left = (await store.counts(T0 + 20_000_000))
      .filter((row) => row.pending + row.delayed + row.reserved > 0);
    assert.deepEqual(left, []);
  },
});

Deno.test({
  name: "RedisStore.finishImport() moves the id counters past the highest ids imported",
  ignore: url === null,
  async fn() {
    await using state = await sqliteState();
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store } = opened;
    // Without the source's counters: finishImport() alone moves them past what was imported.
    await importSqlite(store, state.file, 1000, SCHEMA_TABLES);
    const highest = (table: SchemaTable, column = "id") =>
      Math.max(...sqliteRows(state.file, table).map((row) => Number(row[column])));
    const jobsTop = Math.max(highest("jobs"), highest("failed_jobs"), highest("completed_jobs"));
    const [id] = await store.insertJobs([newJob()]);
    assert.ok(id! > jobsTop, `job ${id} after ${jobsTop}`);
    const batch = await store.insertBatch({
      name: "new",
      allowFailures: false,
      createdAt: T0,
      jobs: [newJob()],
      then: [],
      catch: [],
      finally: [],
    });
    assert.ok(batch.id > highest("batches"));
    assert.ok(batch.jobIds[0]! > id!);
  },
});

Deno.test({
  name:
    "RedisStore.importRows() refuses a row that does not fit, naming the table and the column, and stores none of the call's rows",
  ignore: url === null,
  async fn() {
    await using state = await sqliteState();
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store } = opened;
    const jobs = sqliteRows(state.file, "jobs");
    const bad: [TransferTable, TransferRow[], RegExp][] = [
      ["jobs", [jobs[0]!, { ...jobs[1]!, payload: 5 }], /row 1 of jobs: payload: expected text/],
      ["jobs", [{ ...jobs[0]!, queue: null }], /jobs: queue: null/],
      ["jobs", [{ ...jobs[0]!, attempts: 1.5 }], /jobs: attempts: expected an integer/],
      ["jobs", [{ ...jobs[0]!, colour: "red" }], /jobs: colour: no such column/],
      [
        "jobs",
        [Object.fromEntries(Object.entries(jobs[0]!).filter(([k]) => k !== "token"))],
        /jobs: token: missing/,
      ],
      ["flow_nodes", sqliteRows(state.file, "flow_nodes"), /flow_nodes: flow_id: no flow/],
      [
        "waiting_jobs",
        [{ ...sqliteRows(state.file, "waiting_jobs")[0]!, role: "later" }],
        /waiting_jobs: role: "later"/,
      ],
    ];
    for (const [table, rows, message] of bad) {
      await assert.rejects(store.importRows(table, rows), message);
      assert.deepEqual(await exportAll(store, table), [], `${table}: nothing stored`);
    }
    await assert.rejects(
      store.importRows("nope" as TransferTable, []),
      /No table "nope"/,
    );
    await assert.rejects(store.exportRows("jobs", "x", 10), /after must be .* of jobs/);
  },
});

Deno.test({
  name:
    "A fenced Redis store refuses a dispatch, a claim and an admin write with QueueMovedError naming where the queue went; reads go on; the fence is kept once and lifts",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store } = opened;
    const [id] = await store.insertJobs([newJob()]);
    assert.equal(await store.moveFence(), null);
    const to = "postgres://app:***@db.example:5432/queue";
    const fence = await store.fenceForMove(to, T0 + 1);
    assert.deepEqual(fence, { to, at: T0 + 1 });
    assert.deepEqual(await store.fenceForMove("redis://elsewhere", T0 + 2), fence, "kept once");
    assert.deepEqual(await store.moveFence(), fence);

    const refused = (error: unknown) =>
      error instanceof QueueMovedError && error.to === to && error.fencedAt === T0 + 1 &&
      error.message.includes(to);
    await assert.rejects(store.insertJobs([newJob()]), refused);
    await assert.rejects(
      store.claim({ queues: ["default"], limit: 1, now: T0, leaseMs: 1, token: 1 }),
      refused,
    );
    await assert.rejects(store.pause("default", T0, null, null), refused);
    await assert.rejects(store.cancel({ id: id!, reason: "no", now: T0, keepUntil: T0 }), refused);

    assert.deepEqual((await store.counts(T0)).map((row) => [row.queue, row.pending]), [[
      "default",
      1,
    ]]);
    assert.equal((await store.exportRows("jobs", null, 10)).rows.length, 1);
    assert.equal(await store.countRows("jobs"), 1);

    assert.equal(await store.liftMoveFence(), true);
    assert.equal(await store.liftMoveFence(), false);
    assert.equal(await store.moveFence(), null);
    assert.equal((await store.insertJobs([newJob()])).length, 1);
  },
});

Deno.test({
  name:
    "Rows a Redis queue exports fit SQLite's tables: stored there, the SQLite store reads the queue as Redis did and a worker runs each job once",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store } = opened;
    const built = await buildState(store);
    const dir = await Deno.makeTempDir();
    try {
      const file = `${dir}/queue.db`;
      await (await SqliteStore.open(file)).close();
      // The SQL stores' own import is theirs; plain INSERTs stand for it here.
      const db = new DatabaseSync(file);
      try {
        for (const table of SCHEMA_TABLES) {
          const columns = TRANSFER_COLUMNS[table].map((column) => column.name);
          const insert = db.prepare(
            `INSERT INTO ${table} (${columns.map((c) => `"${c}"`).join(", ")}) VALUES (${
              columns.map(() => "?").join(", ")
            })`,
          );
          for (const row of await exportAll(store, table)) {
            insert.run(...columns.map((column) => row[column] ?? null));
          }
        }
      } finally {
        db.close();
      }
      const sqlite = await SqliteStore.open(file);
      try {
        const now = T0 + 100;
        assert.deepEqual(await sqlite.batch(built.batchId), await store.batch(built.batchId));
        assert.deepEqual(await sqlite.flow(built.flowId), await store.flow(built.flowId));
        assert.deepEqual(await sqlite.schedules(), await store.schedules());
        assert.deepEqual(await sqlite.paused(now), await store.paused(now));
        assert.deepEqual(
          await sqlite.failed({ limit: 10, offset: 0 }),
          await store.failed({ limit: 10, offset: 0 }),
        );
        assert.deepEqual(await sqlite.logs(built.keptId), await store.logs(built.keptId));
        assert.deepEqual(
          await sqlite.jobSteps(built.steppedId),
          await store.jobSteps(built.steppedId),
        );
        assert.deepEqual(
          await sqlite.result(built.keptId, now),
          await store.result(built.keptId, now),
        );
        assert.deepEqual(await sqlite.counts(now), await store.counts(now));
        assert.deepEqual(
          await sqlite.metrics(T0 - 60_000, T0 + 60_000),
          await store.metrics(T0 - 60_000, T0 + 60_000),
        );
        // The slot fired on Redis stays fired on SQLite.
        assert.deepEqual(
          await sqlite.runSchedule("every-minute", [{
            slot: T0,
            manual: false,
            row: newJob({ queue: "sched", name: "tick" }),
          }], now),
          [null],
        );
        assert.deepEqual(await sqlite.retry([built.failedId], now + 1), [built.failedId]);
        assert.deepEqual([...(await drain(sqlite)).values()].sort(), DRAINED);
      } finally {
        await sqlite.close();
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
