/**
 * The SQLite store: the first part of the store contract, on a file and on
 * `:memory:` (the others in store_part2_test.ts and store_part3_test.ts, one
 * file per part, so that `deno test --parallel` runs them side by side), and
 * what only SQLite has: its pragmas, schema steps and file.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync, type SQLInputValue } from "node:sqlite";
import { OutdatedCodeError, QueueClosedError, QueueMovedError } from "../../../src/errors.ts";
import type { Migration } from "../../../migrations/migration.ts";
import { migrations, STEPS_RECORD } from "../../../migrations/sqlite/mod.ts";
import { openConnection } from "../../../src/stores/sqlite/connection.ts";
import { type Durability, SqliteStore } from "../../../src/stores/sqlite/mod.ts";
import { Queue } from "../../../mod.ts";
import { ChildScript } from "../../_child.ts";
import { tempDir, within } from "../../_helpers.ts";
import { claim, LEASE_MS, newJob, T0 } from "../contract/mod.ts";
import { stuckTransaction } from "../contract/fixtures.ts";
import { sqliteContract } from "./_contract.ts";

sqliteContract(0);

/** Runs one statement on a second connection to `path`, closed afterwards; returns its rows. */
function queryFile(path: string, sql: string, ...params: SQLInputValue[]) {
  const db = new DatabaseSync(path);
  try {
    return db.prepare(sql).all(...params).map((row) => ({ ...row }));
  } finally {
    db.close();
  }
}

/** The single value of a one-row, one-column result. */
function only(rows: readonly Record<string, unknown>[]): unknown {
  assert.equal(rows.length, 1);
  return Object.values(rows[0]!)[0];
}

/** Reads a pragma on the store's own connection, through an app transaction (its table-valued form: tx.query refuses PRAGMA). */
async function storePragma(store: SqliteStore, name: string): Promise<unknown> {
  return only(await store.transaction((tx) => tx.query(`SELECT * FROM pragma_${name}`)));
}

/** A fixture script under tests/fixtures/store/. */
class Child extends ChildScript {
  constructor(script: string, args: readonly string[]) {
    super(new URL(`../../fixtures/store/${script}`, import.meta.url), args);
  }
}

Deno.test("SqliteStore: its connection uses WAL, synchronous NORMAL, foreign keys and a short busy wait", async () => {
  await using dir = await tempDir();
  await using store = await SqliteStore.open(dir.dbPath);
  assert.equal(await storePragma(store, "journal_mode"), "wal");
  assert.equal(await storePragma(store, "synchronous"), 1, "NORMAL");
  assert.equal(await storePragma(store, "foreign_keys"), 1);
  const busyTimeout = Number(await storePragma(store, "busy_timeout"));
  assert.ok(busyTimeout > 0 && busyTimeout <= 50, `one blocking wait stays short: ${busyTimeout}`);
  assert.equal(
    only(queryFile(dir.dbPath, "PRAGMA journal_mode")),
    "wal",
    "WAL is kept in the file",
  );
});

Deno.test('SqliteStore: durability "full" sets synchronous FULL', async () => {
  await using dir = await tempDir();
  await using store = await SqliteStore.open(dir.dbPath, { durability: "full" });
  assert.equal(await storePragma(store, "synchronous"), 2, "FULL");
});

Deno.test("openConnection() sets the pragmas on every connection it opens", async () => {
  await using dir = await tempDir();
  for (const [durability, synchronous] of [["normal", 1], ["full", 2]] as const) {
    const db = await openConnection(dir.dbPath, durability, 1_000);
    try {
      const pragma = (name: string) => only(db.prepare(`PRAGMA ${name}`).all());
      assert.deepEqual(
        [pragma("journal_mode"), pragma("synchronous"), pragma("foreign_keys")],
        ["wal", synchronous, 1],
        durability,
      );
    } finally {
      db.close();
    }
  }
});

Deno.test("SqliteStore.open() and Queue.open() refuse a bad durability, or a busyTimeoutMs that is not a whole number of ms >= 0, naming it", async () => {
  await assert.rejects(
    SqliteStore.open(":memory:", { durability: "fast" as Durability }),
    (error) => error instanceof TypeError && /durability/.test(error.message),
  );
  for (const busyTimeoutMs of [1.5, -1, Number.NaN, Infinity]) {
    const message = new RegExp(
      `^RangeError: busyTimeoutMs must be a whole number of ms >= 0: got ${busyTimeoutMs}$`,
    );
    await assert.rejects(SqliteStore.open(":memory:", { busyTimeoutMs }), message);
    await assert.rejects(Queue.open({ path: ":memory:", jobs: [], busyTimeoutMs }), message);
  }
});

// The store builds its claim in claimSql() (private to src/stores/sqlite.ts):
// an UPDATE whose WHERE picks ids with this SELECT once per queue, joined with
// UNION ALL. The SELECTs are copied here; keep them in step with claimSql().
/** A claim's pick as the store writes it: its index holds jobs without a group only. */
const CLAIM_PICK =
  "SELECT id FROM jobs WHERE queue = ? AND group_key IS NULL AND available_at <= ? ORDER BY priority DESC, available_at LIMIT ?";
const TWO_QUEUE_PICK =
  `SELECT id FROM (${CLAIM_PICK}) UNION ALL SELECT id FROM (${CLAIM_PICK}) LIMIT ?`;

Deno.test("SqliteStore: the claim walks jobs_claim_order in claim order, with no temp B-tree", async () => {
  await using dir = await tempDir();
  await using store = await SqliteStore.open(dir.dbPath);
  await store.insertJobs(Array.from({ length: 600 }, (_, n) =>
    newJob({
      queue: ["high", "default", "low"][n % 3]!,
      priority: n % 4,
      availableAt: T0 + (n % 7) * 1_000 - 3_000,
    })));
  const db = new DatabaseSync(dir.dbPath);
  try {
    for (const stats of ["without statistics", "after ANALYZE"]) {
      if (stats === "after ANALYZE") db.exec("ANALYZE");
      const plans = [
        db.prepare(`EXPLAIN QUERY PLAN ${CLAIM_PICK}`).all("default", T0, 10),
        db.prepare(`EXPLAIN QUERY PLAN ${TWO_QUEUE_PICK}`).all("high", T0, 10, "low", T0, 10, 10),
      ];
      for (const plan of plans) {
        const details = plan.map((row) => String(row.detail));
        assert.ok(!details.some((d) => d.includes("USE TEMP B-TREE")), `${stats}: ${details}`);
        assert.ok(details.some((d) => d.includes("jobs_claim_order")), `${stats}: ${details}`);
      }
    }
  } finally {
    db.close();
  }
});

Deno.test("SqliteStore: migrations are recorded in queue_migrations and reopening changes nothing", async () => {
  await using dir = await tempDir();
  const first = await SqliteStore.open(dir.dbPath);
  const [id] = await first.insertJobs([newJob()]);
  await first.close();
  const recorded = () =>
    queryFile(dir.dbPath, "SELECT version, applied_at FROM queue_migrations ORDER BY version");
  const schema = () =>
    queryFile(dir.dbPath, "SELECT type, name, sql FROM sqlite_schema ORDER BY name");
  const [versionsBefore, schemaBefore] = [recorded(), schema()];
  assert.deepEqual(versionsBefore.map((row) => row.version), migrations.map((m) => m.version));

  await using again = await SqliteStore.open(dir.dbPath);
  await again.migrate();
  assert.deepEqual(recorded(), versionsBefore);
  assert.deepEqual(schema(), schemaBefore);
  assert.deepEqual((await claim(again)).map((job) => job.id), [id], "the job is still there");
});

Deno.test("SqliteStore.open() refuses a database with a schema step newer than it knows whose kind is not recorded (it counts as a contract step)", async () => {
  await using dir = await tempDir();
  await (await SqliteStore.open(dir.dbPath)).close();
  const newest = migrations.at(-1)!.version;
  queryFile(
    dir.dbPath,
    "INSERT INTO queue_migrations (version, applied_at) VALUES (?, ?)",
    newest + 1,
    0,
  );
  await assert.rejects(SqliteStore.open(dir.dbPath), (error) => {
    assert.ok(error instanceof Error);
    assert.ok(error instanceof OutdatedCodeError);
    assert.match(error.message, new RegExp(`contract schema step ${newest + 1} .*newer than`));
    assert.match(error.message, /@renox\/queue/);
    return true;
  });
  assert.equal(
    only(queryFile(dir.dbPath, "SELECT MAX(version) FROM queue_migrations")),
    newest + 1,
  );
});

Deno.test("SqliteStore.open(): processes opening the same fresh file at once all succeed", async () => {
  await using dir = await tempDir();
  const children = Array.from({ length: 4 }, () => new Child("open_store.ts", [dir.dbPath]));
  try {
    await Promise.all(children.map((child) => child.line("ready", 30_000)));
    await Promise.all(children.map((child) => child.send("go\n")));
    for (const child of children) {
      const status = await child.status;
      assert.equal(status.code, 0, child.stderr);
      await child.line("opened");
    }
  } finally {
    await Promise.all(children.map((child) => child[Symbol.asyncDispose]()));
  }
  assert.deepEqual(
    queryFile(dir.dbPath, "SELECT version FROM queue_migrations ORDER BY version")
      .map((row) => row.version),
    migrations.map((m) => m.version),
  );
  assert.equal(only(queryFile(dir.dbPath, "SELECT COUNT(*) FROM jobs")), 4);
});

Deno.test("SqliteStore: push, claim and settle wait out another process's 2 s write lock (R15)", async () => {
  await using dir = await tempDir();
  await using store = await SqliteStore.open(dir.dbPath);
  const [settled] = await store.insertJobs([newJob()]);
  const [claimable] = await store.insertJobs([newJob({ availableAt: T0 + 1 })]);
  assert.deepEqual((await claim(store, { token: 1 })).map((job) => job.id), [settled]);

  await using child = new Child("hold_lock.ts", [dir.dbPath, "2000"]);
  await child.line("locked");
  const started = Date.now();
  const timed = <T>(call: Promise<T>) => call.then((value) => ({ value, at: Date.now() }));
  const results = await Promise.allSettled([
    timed(store.insertJobs([newJob({ availableAt: T0 + 10 * LEASE_MS })])),
    timed(claim(store, { now: T0 + 1, token: 2 })),
    timed(store.settle([{ kind: "complete", id: settled!, token: 1, at: T0 }])),
  ]);
  const releasedAt = Number((await child.line("released")).split(" ")[1]);
  const busy = results.filter((result) => result.status === "rejected");
  console.log(`R15: BUSY surfaced ${busy.length}`);
  assert.deepEqual(busy, [], "no call failed while the lock was held");
  const done = results.map((result) => (result as PromiseFulfilledResult<{ at: number }>).value.at);
  const [push, claimed, settle] = results.map((result) =>
    (result as PromiseFulfilledResult<{ value: unknown }>).value.value
  );
  for (const [index, at] of done.entries()) {
    const call = ["push", "claim", "settle"][index];
    console.log(`R15: ${call} waited ${at - started} ms, done ${at - releasedAt} ms after release`);
    assert.ok(at >= releasedAt - 5, "it could not finish while the lock was held");
  }
  assert.equal((push as number[]).length, 1);
  assert.deepEqual((claimed as { id: number }[]).map((job) => job.id), [claimable]);
  assert.deepEqual(settle, { applied: [true], claimed: [], started: [] });
  assert.equal((await child.status).code, 0, child.stderr);
});

Deno.test("SqliteStore: with busyTimeoutMs 200, a call against a 2 s lock rejects saying another connection held the lock", async () => {
  await using dir = await tempDir();
  await using store = await SqliteStore.open(dir.dbPath, { busyTimeoutMs: 200 });
  const [id] = await store.insertJobs([newJob()]);
  await claim(store, { token: 1 });
  await using child = new Child("hold_lock.ts", [dir.dbPath, "2000"]);
  await child.line("locked");
  const locked = /another connection held its lock for over 200 ms/;
  const started = Date.now();
  await assert.rejects(store.insertJobs([newJob()]), locked);
  const waited = Date.now() - started;
  console.log(`busyTimeoutMs 200: push gave up after ${waited} ms`);
  assert.ok(waited >= 150, `gave up after ${waited} ms`);
  await assert.rejects(claim(store, { now: T0 + LEASE_MS, token: 2 }), locked);
  await assert.rejects(store.settle([{ kind: "complete", id: id!, token: 1, at: T0 }]), locked);
  await assert.rejects(SqliteStore.open(dir.dbPath, { busyTimeoutMs: 200 }), locked);
  await child.closeStdin();
  await child.line("released");
  assert.deepEqual(
    (await store.settle([{ kind: "complete", id: id!, token: 1, at: T0 }])).applied,
    [true],
  );
});

Deno.test("SqliteStore: an app transaction holds back other operations until it commits", async () => {
  await using dir = await tempDir();
  await using store = await SqliteStore.open(dir.dbPath);
  let openGate!: () => void;
  const gate = new Promise<void>((resolve) => openGate = resolve);
  let started!: () => void;
  const inside = new Promise<void>((resolve) => started = resolve);
  let insideId = 0;
  const transaction = store.transaction(async (tx) => {
    [insideId] = (await tx.insertJobs([newJob()])) as [number];
    started();
    await gate;
  });
  await inside;
  const visible = () => Number(only(queryFile(dir.dbPath, "SELECT COUNT(*) FROM jobs")));
  let outsideDone = false;
  let committedFirst: boolean | undefined;
  const outside = store.insertJobs([newJob()]).then(([id]) => {
    outsideDone = true;
    committedFirst = Number(
      only(queryFile(dir.dbPath, "SELECT COUNT(*) FROM jobs WHERE id = ?", insideId)),
    ) === 1;
    return id!;
  });
  for (let turn = 0; turn < 10; turn++) await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(outsideDone, false, "the push waits while the transaction is open");
  assert.equal(visible(), 0, "nothing is committed yet");
  openGate();
  await transaction;
  const outsideId = await outside;
  assert.equal(committedFirst, true, "the push resolved only after the transaction committed");
  assert.ok(insideId < outsideId, `inside ${insideId} < outside ${outsideId}`);
  assert.equal(visible(), 2);
});

Deno.test("SqliteStore: close() lets transactions started before it finish", async () => {
  await using dir = await tempDir();
  const store = await SqliteStore.open(dir.dbPath);
  let openGate!: () => void;
  const gate = new Promise<void>((resolve) => openGate = resolve);
  let started!: () => void;
  const firstStarted = new Promise<void>((resolve) => started = resolve);
  const first = store.transaction(async (tx) => {
    await tx.insertJobs([newJob()]);
    started();
    await gate;
  });
  await firstStarted;
  const second = store.transaction((tx) => tx.insertJobs([newJob()]));
  const closing = store.close();
  openGate();
  const results = await Promise.allSettled([first, second, closing]);
  await store.close();
  assert.deepEqual(
    results.map((result) => result.status === "rejected" ? String(result.reason) : "ok"),
    ["ok", "ok", "ok"],
  );
  assert.equal(only(queryFile(dir.dbPath, "SELECT COUNT(*) FROM jobs")), 2);
});

Deno.test("SqliteStore: a transaction asked for before close() whose turn comes after close() stopped waiting is refused before its callback runs", async () => {
  await using dir = await tempDir();
  const store = await SqliteStore.open(dir.dbPath);
  const entered = Promise.withResolvers<void>();
  const released = Promise.withResolvers<void>();
  const stuck = store.transaction(async (tx) => {
    await tx.insertJobs([newJob()]);
    entered.resolve();
    await released.promise;
  }).then(() => null, (error: Error) => error);
  await entered.promise;
  let calledBack = false;
  const queued = store.transaction(async (tx) => {
    calledBack = true;
    await tx.insertJobs([newJob()]);
  }).then(() => null, (error: Error) => error);
  await store.close();
  released.resolve();
  const [first, second] = await Promise.all([stuck, queued]);
  assert.match(String(first), /close\(\) stopped waiting for it to end and rolled it back/);
  assert.ok(second instanceof QueueClosedError, `refused as closed: ${second}`);
  assert.doesNotMatch(second.message, /waited/, "it was not waited for: it had not begun");
  assert.equal(calledBack, false, "its callback never ran");
  assert.equal(only(queryFile(dir.dbPath, "SELECT COUNT(*) FROM jobs")), 0);
});

Deno.test("SqliteStore: after startClosing(), a write waiting behind a transaction whose callback never settles goes through once the wait ran out, before close() is called", async () => {
  await using dir = await tempDir();
  const store = await SqliteStore.open(dir.dbPath);
  try {
    const stuck = await stuckTransaction(store);
    store.startClosing(1_000);
    // A worker's settle would wait here the same way.
    const ids = await within(store.insertJobs([newJob()]), 60_000, "the waiting write");
    assert.equal(ids.length, 1);
    assert.match(
      String(await stuck.outcome),
      /close\(\) stopped waiting for it to end and rolled it back/,
    );
    assert.equal(
      only(queryFile(dir.dbPath, "SELECT COUNT(*) FROM jobs")),
      1,
      "the write's job only",
    );
  } finally {
    await store.close();
  }
});

Deno.test("SqliteStore: two stores on one file never claim the same job", async () => {
  await using dir = await tempDir();
  await using one = await SqliteStore.open(dir.dbPath);
  await using two = await SqliteStore.open(dir.dbPath);
  const pushed = await one.insertJobs(Array.from({ length: 50 }, () => newJob()));
  const claimed: number[] = [];
  for (let token = 1;; token += 2) {
    const [a, b] = await Promise.all([
      claim(one, { limit: 7, token }),
      claim(two, { limit: 7, token: token + 1 }),
    ]);
    if (a.length + b.length === 0) break;
    claimed.push(...a.map((job) => job.id), ...b.map((job) => job.id));
  }
  assert.equal(new Set(claimed).size, claimed.length, "no job claimed twice");
  assert.deepEqual([...claimed].sort((x, y) => x - y), pushed);
});

Deno.test("SqliteStore: a write SQLite rolled back on its own rejects with SQLite's error, and the store goes on", async () => {
  await using store = await SqliteStore.open(":memory:");
  // RAISE(ROLLBACK) ends the whole transaction inside SQLite, before the store's own ROLLBACK.
  await store.transaction((tx) =>
    tx.query(`CREATE TRIGGER refuse_poison BEFORE INSERT ON jobs WHEN NEW.name = 'poison'
      BEGIN SELECT RAISE(ROLLBACK, 'poison job refused'); END`)
  );
  await assert.rejects(
    store.insertJobs([newJob(), newJob({ name: "poison" })]),
    /poison job refused/,
  );
  assert.deepEqual(await store.counts(T0), [], "nothing of the refused batch was kept");
  await assert.rejects(
    store.transaction((tx) => tx.insertJobs([newJob(), newJob({ name: "poison" })])),
    /poison job refused/,
  );
  assert.equal((await store.insertJobs([newJob(), newJob()])).length, 2);
  assert.equal((await store.counts(T0))[0]?.pending, 2);
});

Deno.test("SqliteStore: schema step 24 keeps every job and its indexes, and never hands out an id the sequence had handed out", async () => {
  await using dir = await tempDir();
  const db = new DatabaseSync(dir.dbPath);
  try {
    db.exec(STEPS_RECORD);
    for (const step of migrations.filter(({ version }) => version < 24)) {
      db.exec(step.sql);
      db.prepare("INSERT INTO queue_migrations (version, applied_at) VALUES (?, ?)")
        .run(step.version, T0);
    }
    const insert = db.prepare(
      `INSERT INTO jobs (queue, name, payload, available_at, created_at, group_key)
      VALUES ('default', 'kept', ?, ?, ?, ?) RETURNING id`,
    );
    for (const n of [1, 2, 3]) insert.get(`{"n":${n}}`, T0, T0, null);
    const newest = Number(insert.get('{"n":4}', T0, T0, null)!.id);
    db.prepare("DELETE FROM jobs WHERE id = ?").run(newest);
  } finally {
    db.close();
  }
  await using store = await SqliteStore.open(dir.dbPath);
  const indexes = queryFile(
    dir.dbPath,
    "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'jobs' AND sql IS NOT NULL ORDER BY name",
  ).map((row) => row.name);
  assert.deepEqual(indexes, [
    "jobs_batch",
    "jobs_chain",
    "jobs_claim_order",
    "jobs_group_due",
    "jobs_group_key", // step 25's, applied on top
    "jobs_group_order",
    "jobs_group_unnumbered", // step 26's
  ]);
  assert.deepEqual(
    queryFile(dir.dbPath, "SELECT name FROM sqlite_sequence WHERE name = 'jobs'"),
    [],
    "jobs no longer counts its ids in sqlite_sequence",
  );
  const claimed = await claim(store, { now: T0 + 1 });
  assert.deepEqual(claimed.map((job) => job.payload), ['{"n":1}', '{"n":2}', '{"n":3}']);
  const [next] = await store.insertJobs([newJob()]);
  assert.equal(next, 5, "after 4, which the sequence handed out before the step and was deleted");
});

Deno.test("SqliteStore: schema step 25 numbers the groups in key order and gives each grouped job its group's id; a grouped job inserted as code of step 24 does (its group listed after it) gets one too, and the claim takes it in its turn", async () => {
  await using dir = await tempDir();
  // What code of step 24 writes for a grouped job: the job, then its group's listing.
  const insertAsStep24 = (db: DatabaseSync, key: string, n: number) => {
    db.prepare(
      `INSERT INTO jobs (id, queue, name, payload, available_at, created_at, group_key)
      VALUES ((SELECT max(ifnull(max(id), 0), (SELECT floor FROM job_id_floor)) FROM jobs) + 1,
        'default', 'contract-job', ?, ?, ?, ?)`,
    ).run(`{"n":${n}}`, T0, T0, key);
    db.prepare(
      `INSERT INTO job_groups (queue, name, group_key, group_limit, group_ordered, version)
      VALUES ('default', 'contract-job', ?, NULL, 0, 0)
      ON CONFLICT (queue, name, group_key) DO UPDATE SET version = job_groups.version + 1`,
    ).run(key);
  };
  let db = new DatabaseSync(dir.dbPath);
  try {
    db.exec(STEPS_RECORD);
    for (const step of migrations.filter(({ version }) => version < 25)) {
      db.exec(step.sql);
      db.prepare("INSERT INTO queue_migrations (version, applied_at) VALUES (?, ?)")
        .run(step.version, T0);
    }
    insertAsStep24(db, "b", 1);
    insertAsStep24(db, "a", 2);
    insertAsStep24(db, "b", 3);
  } finally {
    db.close();
  }
  await using store = await SqliteStore.open(dir.dbPath);
  assert.deepEqual(
    queryFile(dir.dbPath, "SELECT group_key, id FROM job_groups ORDER BY id"),
    [{ group_key: "a", id: 1 }, { group_key: "b", id: 2 }],
  );
  assert.deepEqual(
    queryFile(dir.dbPath, "SELECT payload, group_id FROM jobs ORDER BY id"),
    [
      { payload: '{"n":1}', group_id: 2 },
      { payload: '{"n":2}', group_id: 1 },
      { payload: '{"n":3}', group_id: 2 },
    ],
  );
  // An older worker beside this code: a job of a new group, and one of a group listed already.
  db = new DatabaseSync(dir.dbPath);
  try {
    insertAsStep24(db, "c", 4);
    insertAsStep24(db, "a", 5);
  } finally {
    db.close();
  }
  assert.deepEqual(
    queryFile(dir.dbPath, "SELECT payload, group_id FROM jobs WHERE id > 3 ORDER BY id"),
    [{ payload: '{"n":4}', group_id: 3 }, { payload: '{"n":5}', group_id: 1 }],
  );
  const taken = await claim(store, { limit: 3 });
  assert.deepEqual(taken.map((job) => job.payload).sort(), ['{"n":1}', '{"n":2}', '{"n":4}']);
  const rest = await claim(store, { limit: 3, token: 2 });
  assert.deepEqual(rest.map((job) => job.payload).sort(), ['{"n":3}', '{"n":5}']);
});

Deno.test("SqliteStore: schema step 26 leaves no trigger on the inserts into jobs; a group listed again gives its id to its jobs without one through the partial index of those jobs", async () => {
  await using dir = await tempDir();
  await using store = await SqliteStore.open(dir.dbPath);
  // A trigger on a table's inserts, whatever its WHEN, makes SQLite journal every insert inside a
  // transaction (docs/performance.md): no plain dispatch may pay for one.
  assert.deepEqual(
    queryFile(
      dir.dbPath,
      "SELECT name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'jobs' AND sql LIKE '%INSERT ON jobs%'",
    ),
    [],
  );
  const [listed] = await store.insertJobs([
    newJob({ group: { key: "a", limit: null, ordered: false } }),
  ]);
  const db = new DatabaseSync(dir.dbPath);
  try {
    // A retry's copy as the store makes it: the key, no group id; then the group listed again.
    db.prepare(
      `INSERT INTO jobs (id, queue, name, payload, available_at, created_at, group_key)
      VALUES (100, 'default', 'contract-job', '{}', ?, ?, 'a')`,
    ).run(T0, T0);
    const plan = db.prepare(
      `EXPLAIN QUERY PLAN UPDATE jobs SET group_id = 1 WHERE queue = 'default'
      AND name = 'contract-job' AND group_key = 'a' AND group_key IS NOT NULL AND group_id IS NULL`,
    ).all().map((row) => String(row.detail));
    assert.ok(plan.some((detail) => detail.includes("jobs_group_unnumbered")), plan.join("; "));
    db.prepare(
      `INSERT INTO job_groups (queue, name, group_key, group_limit, group_ordered, version)
      VALUES ('default', 'contract-job', 'a', NULL, 0, 0)
      ON CONFLICT (queue, name, group_key) DO UPDATE SET version = job_groups.version + 1`,
    ).run();
  } finally {
    db.close();
  }
  assert.deepEqual(
    queryFile(dir.dbPath, "SELECT id, group_id FROM jobs ORDER BY id"),
    [{ id: listed, group_id: 1 }, { id: 100, group_id: 1 }],
  );
});

Deno.test("SqliteStore: schema step 27 never hands out a dropped group's id again: the floor starts at the highest id listed or named by a cursor, and a group listed anew, by this code or as code of step 24 lists it, takes one past it", async () => {
  await using dir = await tempDir();
  const db = new DatabaseSync(dir.dbPath);
  try {
    db.exec(STEPS_RECORD);
    for (const step of migrations.filter(({ version }) => version < 27)) {
      db.exec(step.sql);
      db.prepare("INSERT INTO queue_migrations (version, applied_at) VALUES (?, ?)")
        .run(step.version, T0);
    }
    // Groups 1 to 3 listed, and the cursor naming group 5, dropped since.
    for (const [key, id] of [["a", 1], ["b", 2], ["c", 3]] as const) {
      db.prepare(
        `INSERT INTO job_groups (queue, name, group_key, group_limit, group_ordered, version, id)
        VALUES ('default', 'contract-job', ?, NULL, 0, 0, ?)`,
      ).run(key, id);
    }
    db.prepare(
      `INSERT INTO group_cursors (queue, name, group_key, group_id)
      VALUES ('default', 'contract-job', 'e', 5)`,
    ).run();
  } finally {
    db.close();
  }
  await using store = await SqliteStore.open(dir.dbPath);
  assert.equal(only(queryFile(dir.dbPath, "SELECT floor FROM group_id_floor")), 5);
  const groupId = (key: string) =>
    only(queryFile(dir.dbPath, "SELECT id FROM job_groups WHERE group_key = ?", key));
  const [job] = await store.insertJobs([
    newJob({ group: { key: "f", limit: null, ordered: false } }),
  ]);
  assert.equal(groupId("f"), 6);
  assert.deepEqual((await claim(store)).map((claimed) => claimed.id), [job]);
  await store.settle([{ kind: "complete", id: job!, token: 1, at: T0 }]);
  assert.deepEqual(await claim(store, { token: 2 }), [], "f, the newest group, is dropped empty");
  assert.deepEqual(queryFile(dir.dbPath, "SELECT id FROM job_groups"), []);
  await store.insertJobs([newJob({ group: { key: "g", limit: null, ordered: false } })]);
  assert.equal(groupId("g"), 7, "not 6 again");
  // As code of step 24 (or a retry from the failed jobs) lists a group: after its job, no id.
  const older = new DatabaseSync(dir.dbPath);
  try {
    older.prepare(
      `INSERT INTO job_groups (queue, name, group_key, group_limit, group_ordered, version)
      VALUES ('default', 'contract-job', 'h', NULL, 0, 0)`,
    ).run();
  } finally {
    older.close();
  }
  assert.equal(groupId("h"), 8);
});

Deno.test("SqliteStore: a group's rate window is a rate_windows row under a U+0001 key, dropped by a settle once the window is over", async () => {
  await using dir = await tempDir();
  await using store = await SqliteStore.open(dir.dbPath);
  const groupRates = { "contract-job": { max: 1, perMs: 1_000 } };
  const request = (token: number, now: number) => ({
    queues: ["default"],
    limit: 10,
    now,
    leaseMs: LEASE_MS,
    token,
    groupRates,
  });
  const [id] = await store.insertJobs([
    newJob({ group: { key: "tenant-é", limit: null, ordered: false } }),
  ]);
  assert.equal((await claim(store, { groupRates })).length, 1);
  const windows = () => queryFile(dir.dbPath, "SELECT key, window_start, starts FROM rate_windows");
  const key = "\u00017:default:12:contract-job:tenant-é";
  assert.deepEqual(windows(), [{ key, window_start: T0, starts: 1 }]);
  await store.settle([{ kind: "complete", id: id!, token: 1, at: T0 + 999 }], request(2, T0 + 999));
  assert.deepEqual(windows(), [{ key, window_start: T0, starts: 1 }], "kept while its window runs");
  const [other] = await store.insertJobs([
    newJob({ group: { key: "other", limit: null, ordered: false } }),
  ]);
  // The next prune of this store is due a minute of settles later.
  const later = T0 + 61_000;
  const { claimed } = await store.settle([], request(3, later));
  assert.deepEqual(claimed.map((job) => job.id), [other]);
  assert.deepEqual(
    windows(),
    [{ key: "\u00017:default:12:contract-job:other", window_start: later, starts: 1 }],
    "the ended window is gone; the one just counted is kept",
  );
});

Deno.test("SqliteStore: a moved store goes on refusing writes after a schema step that builds a fenced table anew", async () => {
  await using dir = await tempDir();
  {
    await using store = await SqliteStore.open(dir.dbPath);
    await store.fenceForMove("postgres://elsewhere/app", T0);
  }
  const rebuild: Migration = {
    version: 9003,
    kind: "expand",
    sql: `CREATE TABLE queue_pauses_anew (
        queue TEXT PRIMARY KEY, paused_at INTEGER NOT NULL, until INTEGER, reason TEXT);
      INSERT INTO queue_pauses_anew SELECT * FROM queue_pauses;
      DROP TABLE queue_pauses;
      ALTER TABLE queue_pauses_anew RENAME TO queue_pauses;`,
  };
  await using store = await SqliteStore.openWithSteps(dir.dbPath, {}, [...migrations, rebuild]);
  await assert.rejects(store.pause("default", T0, null, null), QueueMovedError);
  await assert.rejects(store.insertJobs([newJob()]), QueueMovedError);
});
