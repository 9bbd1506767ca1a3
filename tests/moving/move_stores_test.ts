/**
 * The pages of a move (`moveStores`, docs/moving.md): each within a number
 * of rows and a number of bytes of text, read and stored alike, so a queue
 * whose payloads are megabytes moves from any store to any other (a page
 * of 500 such jobs would be one string of a gigabyte, which V8 refuses).
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { z } from "zod";
import { defineJob, moveQueue, Queue } from "../../mod.ts";
import { systemClock } from "../../src/clock.ts";
import { moveStores } from "../../src/moving/move_stores.ts";
import { PostgresStore } from "../../src/stores/postgres/mod.ts";
import { RedisStore } from "../../src/stores/redis/mod.ts";
import { rowText } from "../../src/stores/rows/transfer.ts";
import { SqliteStore } from "../../src/stores/sqlite/mod.ts";
import type { MoveStore, Store, TransferRow, TransferTable } from "../../src/stores/store.ts";
import { tempDir } from "../_helpers.ts";
import { postgresTestUrl } from "../_postgres.ts";
import { deletePrefix, freshPrefix, redisTestUrl } from "../_redis.ts";
import { freshDatabase } from "../fixtures/deploy/serve_process.ts";

const pgUrl = postgresTestUrl();
const redisUrl = redisTestUrl();

/** A payload of `length` characters, marked by `mark`. */
const text = (length: number, mark: string) => JSON.stringify({ s: mark.repeat(length - 8) });

Deno.test("a move stores each page in imports of at most its bytes of text, a bigger row alone: a page of big payloads is never one string", async () => {
  await using dir = await tempDir();
  await using source = await SqliteStore.open(join(dir.dir, "source.db"));
  await using destination = await SqliteStore.open(join(dir.dir, "moved.db"));
  const lengths = [4_000, 4_000, 4_000, 25_000, 4_000, 4_000];
  const payloads = lengths.map((length, index) => text(length, String.fromCharCode(97 + index)));
  await source.insertJobs(payloads.map((payload) => ({
    queue: "default",
    name: "big",
    payload,
    priority: 0,
    availableAt: 0,
    retryUntil: null,
    createdAt: 0,
  })));
  // The destination as it is, each import it is given written down.
  const imports: { table: TransferTable; rows: readonly TransferRow[] }[] = [];
  const recorded = new Proxy(destination, {
    get(target, name) {
      const value = Reflect.get(target, name, target);
      if (name === "importRows") {
        return (table: TransferTable, rows: readonly TransferRow[]) => {
          imports.push({ table, rows });
          return target.importRows(table, rows);
        };
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const report = await moveStores(source, recorded, {
    from: "source.db",
    to: "moved.db",
    waitMs: 0,
    pageSize: 500,
    pageBytes: 10_000,
    clock: systemClock,
  });
  assert.deepEqual(report.mismatched, []);
  const jobs = imports.filter(({ table }) => table === "jobs");
  assert.deepEqual(jobs.map(({ rows }) => rows.length), [2, 1, 1, 2]);
  for (const { table, rows } of imports) {
    const bytes = rows.reduce((sum, row) => sum + rowText(row), 0);
    assert.ok(rows.length === 1 || bytes <= 10_000, `an import of ${table}: ${bytes} bytes`);
  }
  const moved = (await destination.exportRows("jobs", null, 500)).rows;
  assert.deepEqual(moved.map((row) => row.payload), payloads);
});

/** A fresh, empty store a move reads from or writes to: its URL (or path), and how to open it. */
interface Place extends AsyncDisposable {
  readonly url: string;
  open(): Promise<Store & MoveStore>;
}

const PLACES: [string, (dir: string, name: string) => Promise<Place>, boolean][] = [
  ["SQLite", (dir, name) => {
    const path = join(dir, `${name}.db`);
    return Promise.resolve({
      url: path,
      open: () => SqliteStore.open(path),
      [Symbol.asyncDispose]: () => Promise.resolve(),
    });
  }, true],
  ["PostgreSQL", async () => {
    const database = await freshDatabase(pgUrl!);
    return {
      url: database.url,
      open: () => PostgresStore.open(database.url),
      [Symbol.asyncDispose]: () => database[Symbol.asyncDispose](),
    };
  }, pgUrl !== null],
  ["Redis", () => {
    const prefix = freshPrefix();
    const url = `${redisUrl}/0?prefix=${prefix}`;
    return Promise.resolve({
      url,
      open: () => RedisStore.open(url),
      [Symbol.asyncDispose]: () => deletePrefix(redisUrl!, prefix),
    });
  }, redisUrl !== null],
];

/** Every row of `table` in `store`. */
async function allRows(store: MoveStore, table: TransferTable): Promise<TransferRow[]> {
  const rows: TransferRow[] = [];
  let after: string | null = null;
  do {
    const page: Awaited<ReturnType<MoveStore["exportRows"]>> = await store.exportRows(
      table,
      after,
      500,
    );
    rows.push(...page.rows);
    after = page.after;
  } while (after !== null);
  return rows;
}

const big = defineJob({ name: "big", schema: z.object({ s: z.string() }), handle() {} });

for (const [fromName, from, fromThere] of PLACES) {
  for (const [toName, to, toThere] of PLACES) {
    Deno.test({
      name:
        `moveQueue() from ${fromName} to ${toName} moves jobs and chain links of 3 MB payloads, each whole`,
      ignore: !fromThere || !toThere,
      async fn() {
        await using dir = await tempDir();
        await using origin = await from(dir.dir, "source");
        await using destination = await to(dir.dir, "moved");
        const payload = (mark: string) => ({ s: mark.repeat(3_000_000) });
        await using queue = await Queue.open({
          store: await origin.open(),
          jobs: [big],
          maxPayloadBytes: 3_100_000,
        });
        await queue.dispatchMany(big, [payload("a"), payload("b")]);
        await queue.chain().then(big, payload("c")).then(big, payload("d")).dispatch();
        await queue.dispatch(big, { s: "small" });

        const report = await moveQueue(origin.url, destination.url);
        assert.deepEqual(report.mismatched, []);
        await using source = await origin.open();
        await using moved = await destination.open();
        for (const table of ["jobs", "waiting_jobs"] as const) {
          const original = (await allRows(source, table)).map((row) => row.payload);
          const copied = (await allRows(moved, table)).map((row) => row.payload);
          assert.equal(copied.length, table === "jobs" ? 4 : 1, table);
          assert.ok(
            copied.length === original.length &&
              copied.every((payload, index) => payload === original[index]),
            `${table}: every payload whole`,
          );
        }
      },
    });
  }
}
