/**
 * The contract of a store's side of a move (`MoveStore`, docs/moving.md):
 * pages of rows in the SQL schema's layout in the order of each table's key,
 * rows stored once each whatever how often they are given, a row that does
 * not fit refused whole, id counters moved past what was imported, and the
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
import type { MoveStore, Store, TransferRow } from "../../../src/stores/store.ts";
import { claim, type ContractArea, type ContractTest, newJob, plain, T0 } from "./fixtures.ts";

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

/** Every row of `table`, read in pages of `limit`; the pages' sizes too. */
async function allRows(
  store: Store & MoveStore,
  table: Parameters<MoveStore["exportRows"]>[0],
  limit: number,
): Promise<{ rows: TransferRow[]; sizes: number[] }> {
  const rows: TransferRow[] = [];
  const sizes: number[] = [];
  let after: string | null = null;
  do {
    const page: Awaited<ReturnType<MoveStore["exportRows"]>> = await store.exportRows(
      table,
      after,
      limit,
    );
    rows.push(...plain(page.rows));
    sizes.push(page.rows.length);
    after = page.after;
  } while (after !== null);
  return { rows, sizes };
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

  test("importRows() refuses a row that does not fit the table, naming the table and the column, and stores none of the rows", async (any) => {
    const store = movable(any);
    const good = { key: "k", window_start: T0, starts: 1 };
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

  test("fenceForMove() refuses every write from then on with a QueueMovedError naming the destination; reads go on; liftMoveFence() lets writes through again", async (any) => {
    const store = movable(any);
    await store.insertJobs([newJob()]);
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
