/**
 * The contract of a store's side of a move (`MoveStore`, docs/moving.md):
 * pages of rows in the SQL schema's layout in the order of each table's key,
 * rows stored once each whatever how often they are given, a row that does
 * not fit refused whole, the id counters carried as rows of `id_counters`
 * (the highest id each handed out, raised on import, never lowered) and
 * moved past what was imported, and the
 * fence: once up, every write is refused with a `QueueMovedError` naming the
 * destination, reads go on, and lifting it lets writes through again.
 *
 * The rows are taken from the store itself (a job dispatched, then
 * exported), so the cases hold for any store that speaks the layout.
 *
 * @module
 */
import assert from "node:assert/strict";
import { QueueMovedError } from "../../../src/errors.ts";
import type { MoveStore, NewBatchRow, Store, TransferRow } from "../../../src/stores/store.ts";
import {
  claim,
  complete,
  type ContractArea,
  type ContractTest,
  newJob,
  plain,
  schedule,
  T0,
} from "./fixtures.ts";

/** Moving a queue between stores. */
export const moving: ContractArea = {
  covers: [
    "fenceForMove",
    "moveFence",
    "liftMoveFence",
    "exportRows",
    "importRows",
    "countRows",
    "finishImport",
  ],
  register,
};

/** The store as the move sees it (every store implements `MoveStore`). */
const movable = (store: Store) => store as Store & MoveStore;

/** Every row of `table`, read in pages of `limit` rows (and `maxBytes`); the pages' sizes too. */
async function allRows(
  store: Store & MoveStore,
  table: Parameters<MoveStore["exportRows"]>[0],
  limit: number,
  maxBytes?: number,
): Promise<{ rows: TransferRow[]; sizes: number[] }> {
  const rows: TransferRow[] = [];
  const sizes: number[] = [];
  let after: string | null = null;
  do {
    const page: Awaited<ReturnType<MoveStore["exportRows"]>> = await store.exportRows(
      table,
      after,
      limit,
      maxBytes,
    );
    rows.push(...plain(page.rows));
    sizes.push(page.rows.length);
    after = page.after;
  } while (after !== null);
  return { rows, sizes };
}

/** A batch of one job, its callbacks none. */
function oneJobBatch(): NewBatchRow {
  return {
    name: "b",
    allowFailures: false,
    createdAt: T0,
    jobs: [newJob()],
    then: [],
    catch: [],
    finally: [],
  };
}

function register(test: ContractTest): void {
  test("exportRows() gives a table's rows in pages, in the order of its key, with every column", async (any) => {
    const store = movable(any);
    const ids = await store.insertJobs(
      [1, 2, 3, 4, 5].map((n) => newJob({ payload: `{"n":${n}}` })),
    );
    const { rows, sizes } = await allRows(store, "jobs", 2);
    assert.deepEqual(rows.map((row) => row.id), ids);
    assert.deepEqual(sizes.slice(0, 2), [2, 2]);
    assert.equal(sizes.reduce((sum, size) => sum + size, 0), 5);
    assert.deepEqual(rows.map((row) => row.payload), [1, 2, 3, 4, 5].map((n) => `{"n":${n}}`));
    const first = rows[0]!;
    for (const column of ["queue", "name", "available_at", "token", "attempts", "crashes"]) {
      assert.ok(column in first, `column ${column} of jobs`);
    }
    assert.equal(first.token, null);
    assert.equal(await store.countRows("jobs"), 5);
    assert.deepEqual(await store.exportRows("batches", null, 10), { rows: [], after: null });
  });

  test("exportRows() ends a page once its rows' text would pass maxBytes, a bigger row alone in its page", async (any) => {
    const store = movable(any);
    // Text of 4,000 bytes a row (and a little more: the queue, the name), one of 25,000: under a
    // bound of 10,000 two rows fill a page, and the big one goes alone.
    const text = (length: number, mark: string) => JSON.stringify({ s: mark.repeat(length - 8) });
    const lengths = [4_000, 4_000, 4_000, 25_000, 4_000, 4_000];
    const payloads = lengths.map((length, index) => text(length, String.fromCharCode(97 + index)));
    const ids = await store.insertJobs(payloads.map((payload) => newJob({ payload })));
    const paged = await allRows(store, "jobs", 500, 10_000);
    assert.deepEqual(paged.sizes, [2, 1, 1, 2]);
    assert.deepEqual(paged.rows.map((row) => row.id), ids);
    assert.deepEqual(paged.rows.map((row) => row.payload), payloads);
    // (A full page may be followed by an empty one.)
    const nonEmpty = async (limit: number, maxBytes?: number) =>
      (await allRows(store, "jobs", limit, maxBytes)).sizes.filter((size) => size > 0);
    assert.deepEqual(await nonEmpty(1, 10_000), [1, 1, 1, 1, 1, 1], "the row limit holds too");
    assert.deepEqual(await nonEmpty(500), [6], "4 MiB by default");
    // The links of a chain waiting for their turn, kept apart from the jobs on some stores.
    await store.insertChain({
      first: newJob(),
      next: payloads.map((payload) => ({
        queue: "default",
        name: "link",
        payload,
        priority: 0,
        delayMs: 0,
        retryForMs: null,
      })),
      onFailure: [],
    });
    const waiting = await allRows(store, "waiting_jobs", 500, 10_000);
    assert.deepEqual(waiting.sizes, [2, 1, 1, 2]);
    assert.deepEqual(waiting.rows.map((row) => row.payload), payloads);
    await assert.rejects(store.exportRows("jobs", null, 10, 0), RangeError);
  });

  test("importRows() stores each row once, however often it is given, and resolves with how many were new", async (any) => {
    const store = movable(any);
    const [id] = await store.insertJobs([newJob()]);
    const [row] = (await store.exportRows("jobs", null, 1)).rows;
    const copies = [1, 2, 3].map((n) => ({ ...row!, id: id! + 100 * n, payload: `{"copy":${n}}` }));
    assert.equal(await store.importRows("jobs", copies.slice(0, 2)), 2);
    assert.equal(await store.importRows("jobs", copies), 1);
    assert.equal(await store.importRows("jobs", copies), 0);
    assert.equal(await store.countRows("jobs"), 4);
    const { rows } = await allRows(store, "jobs", 10);
    assert.deepEqual(rows.slice(1), copies);
    // A copied job is a job: it is claimed as any other.
    assert.deepEqual(
      (await claim(store, { limit: 10 })).map((job) => job.id).sort((a, b) => a - b),
      [id!, ...copies.map((copy) => copy.id as number)],
    );
  });

  test("importRows() stores an overlap lock once, though locks have no primary key", async (any) => {
    const store = movable(any);
    const lock = { key: "order:7", job_id: 12, token: 3, expires_at: T0 + 60_000 };
    assert.equal(await store.importRows("job_locks", [lock]), 1);
    assert.equal(await store.importRows("job_locks", [lock, { ...lock, token: 4 }]), 1);
    assert.equal(await store.countRows("job_locks"), 2);
    assert.deepEqual((await allRows(store, "job_locks", 1)).rows, [lock, { ...lock, token: 4 }]);
  });

  test("importRows() and exportRows() keep each job name of a metrics row whole, the unit separator (U+001F) included", async (any) => {
    const store = movable(any);
    const names = ["a\x1fb", "a", "\x1f", "b\x1f"];
    const rows: TransferRow[] = names.toSorted().map((name, index) => ({
      minute: T0,
      queue: "default",
      name,
      shard: 1,
      completed: index + 1,
      failed: 0,
      retried: 0,
      runtime_ms: 0,
      wait_ms: 0,
      ...Object.fromEntries(Array.from({ length: 17 }, (_, bucket) => [`runtime_b${bucket}`, 0])),
      expired: 0,
    }));
    assert.equal(await store.importRows("job_metrics", rows), names.length);
    // By name in code units: the order of text is the engine's (its collation on PostgreSQL).
    const byName = (a: { name?: unknown }, b: { name?: unknown }) =>
      String(a.name) < String(b.name) ? -1 : String(a.name) > String(b.name) ? 1 : 0;
    assert.deepEqual((await allRows(store, "job_metrics", 10)).rows.toSorted(byName), rows);
    assert.deepEqual(
      (await store.metrics(T0, T0 + 1)).toSorted(byName).map((row) => [row.name, row.completed]),
      rows.map((row) => [row.name, row.completed]),
    );
  });

  test("exportRows() gives back the runtimes of a metrics row, imported or counted, to the last digit of their doubles", async (any) => {
    const store = movable(any);
    const row: TransferRow = {
      minute: T0,
      queue: "default",
      name: "contract-job",
      shard: 1,
      completed: 2,
      failed: 0,
      retried: 0,
      runtime_ms: 1234.5678901234567,
      wait_ms: 0.1 + 0.2,
      ...Object.fromEntries(Array.from({ length: 17 }, (_, bucket) => [`runtime_b${bucket}`, 0])),
      expired: 0,
      runtime_b3: 2,
    };
    assert.equal(await store.importRows("job_metrics", [row]), 1);
    assert.deepEqual((await allRows(store, "job_metrics", 10)).rows, [row]);
    // And the runtimes the store counted itself.
    await store.insertJobs([newJob({ name: "timed" })]);
    const [job] = await claim(store);
    const settled = await store.settle([{
      kind: "complete",
      id: job!.id,
      token: job!.token,
      at: T0 + 1,
      durationMs: 0.1 + 0.2,
    }]);
    assert.deepEqual(settled.applied, [true]);
    const { rows } = await allRows(store, "job_metrics", 10);
    assert.deepEqual(rows.filter((r) => r.name === "timed").map((r) => r.runtime_ms), [0.1 + 0.2]);
  });

  test("importRows() refuses a row that does not fit the table, naming the table and the column, and stores none of the rows", async (any) => {
    const store = movable(any);
    const good = { key: "k", window_start: T0, starts: 1, per_ms: 60_000 };
    await assert.rejects(
      store.importRows("rate_windows", [good, { key: "j", window_start: T0 }]),
      /rate_windows.*starts/,
    );
    await assert.rejects(
      store.importRows("rate_windows", [{ ...good, key: "j", colour: "red" }]),
      /rate_windows.*colour/,
    );
    await assert.rejects(store.importRows("no_such_table" as "jobs", [good]), /no_such_table/);
    assert.equal(await store.countRows("rate_windows"), 0);
  });

  test("importRows() refuses a value of the wrong type for its column, naming the table, the row, the column and the value, and stores none of the rows", async (any) => {
    const store = movable(any);
    const good = { key: "k", window_start: T0, starts: 1, per_ms: 60_000 };
    const bad: [TransferRow, RegExp][] = [
      // SQLite took text in an INTEGER column before every store checked the rows alike.
      [{ ...good, starts: "many" }, /row 1 of rate_windows: starts: expected a number, got "many"/],
      [{ ...good, starts: 1.5 }, /row 1 of rate_windows: starts: expected an integer, got 1\.5/],
      [{ ...good, key: 7 }, /row 1 of rate_windows: key: expected text, got 7/],
      [{ ...good, key: null }, /row 1 of rate_windows: key: null in a column that is never null/],
    ];
    for (const [row, message] of bad) {
      await assert.rejects(store.importRows("rate_windows", [good, row]), message);
    }
    assert.equal(await store.countRows("rate_windows"), 0);
  });

  test("finishImport() moves the id counters past the highest id imported: the next job gets a newer id", async (any) => {
    const store = movable(any);
    const [id] = await store.insertJobs([newJob()]);
    const [row] = (await store.exportRows("jobs", null, 1)).rows;
    await store.importRows("jobs", [{ ...row!, id: id! + 500 }]);
    await store.finishImport();
    const [next] = await store.insertJobs([newJob()]);
    assert.ok(next! > id! + 500, `job id ${next} after an imported ${id! + 500}`);
    await store.finishImport(); // never moves a counter back
    const [later] = await store.insertJobs([newJob()]);
    assert.ok(later! > next!);
  });

  test("exportRows() gives the id counters as id_counters rows: the highest id each handed out, though the rows that held it are gone", async (any) => {
    const store = movable(any);
    assert.equal(await store.countRows("id_counters"), 0);
    const batch = await store.insertBatch(oneJobBatch());
    const ids = await store.insertJobs([newJob(), newJob()]);
    const leases = await claim(store, { limit: 10 });
    assert.equal(leases.length, 3);
    // Completed with no history kept, then the finished batch pruned: no row keeps an id.
    assert.ok(
      (await store.settle(leases.map((job) => complete(job.id, 1)))).applied.every(Boolean),
    );
    assert.equal(await store.pruneBatches(T0 + 1, T0 + 1), 1);
    assert.equal(await store.countRows("jobs"), 0);
    assert.equal(await store.countRows("batches"), 0);
    const counters = [{ name: "batches", value: batch.id }, { name: "jobs", value: ids.at(-1)! }];
    const { rows, sizes } = await allRows(store, "id_counters", 1);
    assert.deepEqual(rows, counters);
    assert.deepEqual(sizes.slice(0, 2), [1, 1]);
    assert.equal(await store.countRows("id_counters"), 2);
  });

  test("importRows() raises each id counter to at least a row's value, never lowers one, and counts a counter already there as not new", async (any) => {
    const store = movable(any);
    const [id] = await store.insertJobs([newJob()]);
    const counters = [{ name: "batches", value: 40 }, { name: "jobs", value: id! + 1000 }];
    assert.equal(await store.importRows("id_counters", counters), 2);
    assert.equal(await store.importRows("id_counters", counters), 0);
    assert.equal(await store.importRows("id_counters", [{ name: "jobs", value: 1 }]), 0);
    assert.deepEqual((await allRows(store, "id_counters", 10)).rows, counters);
    const [next] = await store.insertJobs([newJob()]);
    assert.ok(next! > id! + 1000, `job id ${next} after a counter raised to ${id! + 1000}`);
    const batch = await store.insertBatch(oneJobBatch());
    assert.ok(batch.id > 40, `batch id ${batch.id} after a counter raised to 40`);
  });

  test("importRows() refuses an id_counters row naming no counter, or with a value that is not a whole number >= 0, raising none", async (any) => {
    const store = movable(any);
    const jobs = { name: "jobs", value: 50 };
    await assert.rejects(
      store.importRows("id_counters", [jobs, { name: "chains", value: 3 }]),
      /row 1 of id_counters: name: "chains"/,
    );
    await assert.rejects(
      store.importRows("id_counters", [{ name: "jobs", value: -1 }]),
      /id_counters: value/,
    );
    await assert.rejects(
      store.importRows("id_counters", [{ name: "jobs", value: 2.5 }]),
      /id_counters: value/,
    );
    await assert.rejects(store.importRows("id_counters", [{ ...jobs, colour: "red" }]), /colour/);
    assert.equal(await store.countRows("id_counters"), 0);
    const [id] = await store.insertJobs([newJob()]);
    assert.ok(id! < 50, `job id ${id}: no counter was raised`);
  });

  test("fenceForMove() refuses every write from then on with a QueueMovedError naming the destination; reads go on; liftMoveFence() lets writes through again", async (any) => {
    const store = movable(any);
    await store.insertJobs([newJob()]);
    const every = schedule("every");
    await store.syncSchedules([every], T0);
    assert.equal(await store.moveFence(), null);
    const fence = await store.fenceForMove("postgres://db.example/app", T0);
    assert.deepEqual({ ...fence }, { to: "postgres://db.example/app", at: T0 });
    assert.deepEqual({ ...await store.fenceForMove("postgres://elsewhere/app", T0 + 1) }, {
      ...fence,
    });
    assert.deepEqual({ ...await store.moveFence() }, { ...fence });
    await assert.rejects(store.insertJobs([newJob()]), (error) => {
      assert.ok(error instanceof QueueMovedError, String(error));
      assert.equal(error.to, "postgres://db.example/app");
      assert.equal(error.fencedAt, T0);
      assert.match(error.message, /moved to postgres:\/\/db\.example\/app/);
      return true;
    });
    await assert.rejects(claim(store), QueueMovedError);
    await assert.rejects(store.pause("default", T0, null, null), QueueMovedError);
    await assert.rejects(
      store.heartbeat({
        id: "w1",
        host: "h",
        pid: 1,
        queues: ["default"],
        concurrency: 1,
        startedAt: T0,
        lastSeenAt: T0,
        running: 0,
        names: [],
      }, T0 - 60_000),
      QueueMovedError,
    );
    // An app opening the moved store with its jobs module syncs schedules that did not change: no
    // write, so it opens and reads; a new or changed one is a write.
    await store.syncSchedules([every], T0 + 2);
    await assert.rejects(store.syncSchedules([every, schedule("new")], T0 + 2), QueueMovedError);
    await assert.rejects(
      store.syncSchedules([schedule("every", { everyMs: 5_000 })], T0 + 2),
      QueueMovedError,
    );
    assert.deepEqual((await store.schedules()).map((row) => [row.name, row.everyMs]), [[
      "every",
      60_000,
    ]]);
    assert.equal(await store.countRows("jobs"), 1);
    assert.equal((await store.exportRows("jobs", null, 10)).rows.length, 1);
    assert.equal((await store.counts(T0))[0]?.pending, 1);
    assert.equal(await store.liftMoveFence(), true);
    assert.equal(await store.liftMoveFence(), false);
    assert.equal(await store.moveFence(), null);
    await store.insertJobs([newJob()]);
    assert.equal((await claim(store)).length, 2);
  });
}
