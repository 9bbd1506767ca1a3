/**
 * `Queue.transaction()`: transactions SQLite ended on its own, queue calls
 * made inside a transaction's callback or started there, and dispatches the
 * callback started without awaiting them (on every store).
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, Queue, type QueueTransaction, ValidationError } from "../../mod.ts";
import { tempDir, within } from "../_helpers.ts";
import { storeTest } from "../_stores.ts";
import { CLOSE_WAITS_MS } from "../../src/stores/close_wait.ts";
import { gate, readRows } from "../fixtures/runner/harness.ts";

const note = defineJob({ name: "note", schema: z.object({ n: z.number() }), handle() {} });

/** The `note` jobs stored in the file, read through a connection of its own. */
function storedNotes(path: string): number[] {
  return readRows<{ payload: string }>(path, "SELECT payload FROM jobs ORDER BY id")
    .map((row) => (JSON.parse(row.payload) as { n: number }).n);
}

Deno.test("Queue.transaction() that SQLite rolled back on its own rejects with SQLite's error, and the queue keeps working", async () => {
  await using dir = await tempDir();
  const queue = await Queue.open({ path: dir.dbPath, jobs: [note] });
  try {
    await queue.transaction((tx) => tx.query("CREATE TABLE t (x UNIQUE ON CONFLICT ROLLBACK)"));
    const failing = queue.transaction(async (tx) => {
      await tx.dispatch(note, { n: 1 });
      await tx.query("INSERT INTO t VALUES (1)");
      await tx.query("INSERT INTO t VALUES (1)"); // SQLite rolls the whole transaction back here
    });
    await assert.rejects(
      within(failing, 2_000, "the transaction"),
      /UNIQUE constraint failed: t\.x/,
    );
    await within(queue.dispatch(note, { n: 2 }), 2_000, "a dispatch after the rollback");
    assert.deepEqual(await within(queue.counts(), 2_000, "counts() after the rollback"), {
      default: { pending: 1, delayed: 0, reserved: 0, failed: 0, running: [] },
    });
    const [row] = await within(
      queue.transaction((tx) => tx.query<{ rows: number }>("SELECT COUNT(*) AS rows FROM t")),
      2_000,
      "a transaction after the rollback",
    );
    assert.equal(row?.rows, 0);
    assert.deepEqual(storedNotes(dir.dbPath), [2]);
  } finally {
    await within(queue.close(), 2_000, "close()");
  }
});

Deno.test("Queue.transaction(): what a callback does after SQLite rolled back on its own is not kept either", async () => {
  await using dir = await tempDir();
  const queue = await Queue.open({ path: dir.dbPath, jobs: [note] });
  try {
    await queue.transaction((tx) => tx.query("CREATE TABLE t (x UNIQUE ON CONFLICT ROLLBACK)"));
    const failing = queue.transaction(async (tx) => {
      await tx.dispatch(note, { n: 1 });
      await tx.query("INSERT INTO t VALUES (1)");
      await tx.query("INSERT INTO t VALUES (1)").catch(() => {}); // the app carries on
      await tx.dispatch(note, { n: 2 }); // outside any transaction, were it allowed
      await tx.query("INSERT INTO t VALUES (2)");
    });
    await assert.rejects(within(failing, 2_000, "the transaction"));
    // All or nothing: the transaction rejected, so neither its jobs nor its rows may be kept.
    assert.deepEqual(storedNotes(dir.dbPath), []);
    assert.deepEqual(readRows(dir.dbPath, "SELECT x FROM t").length, 0);
  } finally {
    await within(queue.close(), 2_000, "close()");
  }
});

Deno.test("Queue calls inside the queue's own transaction callback reject at once, saying to use the tx handle", async () => {
  await using dir = await tempDir();
  const queue = await Queue.open({ path: dir.dbPath, jobs: [note] });
  try {
    const useTx = /use (the|its) tx handle/;
    await within(
      queue.transaction(async (tx) => {
        await tx.dispatch(note, { n: 1 });
        await assert.rejects(within(queue.counts(), 1_000, "counts() inside"), useTx);
        await assert.rejects(within(queue.dispatch(note, { n: 2 }), 1_000, "dispatch()"), useTx);
        await assert.rejects(within(queue.transaction(() => {}), 1_000, "a nested one"), useTx);
        await tx.dispatch(note, { n: 3 });
      }),
      5_000,
      "the outer transaction",
    );
    assert.deepEqual(storedNotes(dir.dbPath), [1, 3], "the outer transaction committed");

    const rolledBack = queue.transaction(async (tx) => {
      await tx.dispatch(note, { n: 4 });
      await assert.rejects(within(queue.dispatchMany(note, [{ n: 5 }]), 1_000, "inside"), useTx);
      throw new Error("changed my mind");
    });
    await assert.rejects(within(rolledBack, 5_000, "the outer transaction"), /changed my mind/);
    assert.deepEqual(storedNotes(dir.dbPath), [1, 3], "the outer transaction rolled back");
    assert.equal((await within(queue.counts(), 1_000, "counts() after")).default?.pending, 2);
  } finally {
    await within(queue.close(), 2_000, "close()");
  }
});

Deno.test("Queue calls that merely started inside an earlier transaction's callback wait their turn", async () => {
  // A continuation set up inside the callback runs later, while another transaction is open:
  // it is not inside that transaction and must wait for it, not be refused.
  await using dir = await tempDir();
  const queue = await Queue.open({ path: dir.dbPath, jobs: [note] });
  try {
    const go = gate();
    let later!: Promise<unknown>;
    await queue.transaction(() => {
      later = go.promise.then(() => queue.counts());
    });
    const ran = Promise.withResolvers<void>();
    const other = queue.transaction(async (tx) => {
      go.resolve();
      await ran.promise;
      await tx.dispatch(note, { n: 1 });
    });
    const outcome = later.then(() => "counted", (error: Error) => error.message);
    await go.promise;
    await Promise.resolve();
    ran.resolve();
    await within(other, 2_000, "the other transaction");
    assert.equal(await within(outcome, 2_000, "the later call"), "counted");
  } finally {
    await within(queue.close(), 2_000, "close()");
  }
});

/** The ids of the `job:queued` events `queue` sends from now on. */
function queuedIds(queue: Queue): number[] {
  const ids: number[] = [];
  queue.addEventListener("job:queued", (event) => ids.push(event.detail.id));
  return ids;
}

storeTest(
  "Queue.transaction() with dispatches its callback did not await stores them with its commit and sends their job:queued",
  async (db) => {
    await using queue = await db.open({ jobs: [note] });
    const queued = queuedIds(queue);
    let dispatched!: Promise<number>;
    let chained!: Promise<number>;
    await queue.transaction((tx) => {
      dispatched = tx.dispatch(note, { n: 1 });
      chained = tx.chain().then(note, { n: 2 }).then(note, { n: 3 }).dispatch();
    });
    const ids = [await dispatched, await chained];
    assert.deepEqual(queued.sort(), ids.sort(), "job:queued for both, the chain's first job");
    assert.deepEqual((await queue.jobs()).jobs.map((job) => job.id).sort(), ids.sort());
  },
);

storeTest(
  "Queue.transaction() that rolls back rejects the dispatches its callback did not await, and keeps none of them",
  async (db) => {
    await using queue = await db.open({ jobs: [note] });
    const queued = queuedIds(queue);
    const failure = new Error("app failed");
    let dispatched!: Promise<number>;
    await assert.rejects(
      queue.transaction((tx) => {
        dispatched = tx.dispatch(note, { n: 1 });
        throw failure;
      }),
      (error) => error === failure,
    );
    await assert.rejects(dispatched, (error: Error) => {
      assert.match(error.message, /transaction rolled back, and this dispatch with it: app failed/);
      assert.equal(error.cause, failure);
      return true;
    });
    let fromAsync!: Promise<number>;
    await assert.rejects(
      // deno-lint-ignore require-await
      queue.transaction(async (tx) => {
        fromAsync = tx.dispatch(note, { n: 2 });
        throw failure;
      }),
      (error) => error === failure,
    );
    await assert.rejects(fromAsync, /rolled back/);
    assert.deepEqual((await queue.jobs()).jobs, []);
    assert.deepEqual(queued, [], "no job:queued for a rolled-back dispatch");
  },
);

storeTest(
  "Queue.transaction() rolls back when a dispatch its callback did not await fails, rejecting with its error",
  async (db) => {
    await using queue = await db.open({ jobs: [note] });
    let good!: Promise<number>;
    let bad!: Promise<number>;
    await assert.rejects(
      queue.transaction((tx) => {
        good = tx.dispatch(note, { n: 1 });
        bad = tx.dispatch(note, { n: "two" } as never);
      }),
      ValidationError,
    );
    await assert.rejects(bad, ValidationError);
    await assert.rejects(good, /rolled back/);
    assert.deepEqual((await queue.jobs()).jobs, []);
  },
);

/**
 * The rejections the runtime reports as unhandled while `body` runs and
 * until it had a turn to report those of its last microtasks; reported
 * ones do not end the test run.
 */
async function unhandledDuring(body: () => Promise<void>): Promise<unknown[]> {
  const reported: unknown[] = [];
  const listener = (event: PromiseRejectionEvent) => {
    event.preventDefault();
    reported.push(event.reason);
  };
  globalThis.addEventListener("unhandledrejection", listener);
  try {
    await body();
    // The runtime reports a rejection once the microtasks ran: a timer's turn comes after.
    for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setTimeout(resolve, 0));
  } finally {
    globalThis.removeEventListener("unhandledrejection", listener);
  }
  return reported;
}

storeTest(
  "Queue.transaction() that rolls back leaves no unhandled rejection for the dispatches its callback did not await and the app never looks at",
  async (db) => {
    await using queue = await db.open({ jobs: [note] });
    const failure = new Error("app failed");
    /** Starts every kind of dispatch and leaves each promise alone. */
    const dispatchAll = (tx: QueueTransaction) => {
      tx.dispatch(note, { n: 1 });
      tx.dispatchMany(note, [{ n: 2 }, { n: 3 }]);
      tx.chain().then(note, { n: 4 }).then(note, { n: 5 }).dispatch();
      tx.batch("b").push(note, { n: 6 }).dispatch();
      const flow = tx.flow("f");
      flow.add(note, { n: 7 });
      flow.dispatch();
    };
    const unhandled = await unhandledDuring(async () => {
      await assert.rejects(
        queue.transaction((tx) => {
          dispatchAll(tx);
          throw failure;
        }),
        (error) => error === failure,
      );
      await assert.rejects(
        // deno-lint-ignore require-await
        queue.transaction(async (tx) => {
          dispatchAll(tx);
          throw failure;
        }),
        (error) => error === failure,
      );
    });
    assert.deepEqual(unhandled, []);
    assert.deepEqual((await queue.jobs()).jobs, []);
  },
);

storeTest(
  "Queue.transaction() rolls back with the error of a dispatch its callback did not await that failed while the callback still ran, and leaves no unhandled rejection",
  async (db) => {
    await using queue = await db.open({ jobs: [note] });
    let bad!: Promise<number>;
    const unhandled = await unhandledDuring(async () => {
      await assert.rejects(
        queue.transaction(async (tx) => {
          bad = tx.dispatch(note, { n: "one" } as never);
          tx.chain().then(note, { n: "two" } as never).dispatch();
          await tx.dispatch(note, { n: 3 }); // a store round trip: both have failed by now
          await tx.dispatch(note, { n: 4 });
        }),
        (error) => error instanceof ValidationError && /"note"/.test(error.message),
      );
    });
    assert.deepEqual(unhandled, []);
    await assert.rejects(bad, ValidationError, "its own error, for an app that looks later");
    assert.deepEqual((await queue.jobs()).jobs, [], "nothing of the transaction is kept");
  },
);

storeTest(
  "Queue.transaction() commits when its callback caught the error of a dispatch it awaited",
  async (db) => {
    await using queue = await db.open({ jobs: [note] });
    const id = await queue.transaction(async (tx) => {
      await assert.rejects(tx.dispatch(note, { n: "one" } as never), ValidationError);
      const handled = tx.dispatch(note, { n: "two" } as never).catch(() => 0);
      const stored = await tx.dispatch(note, { n: 3 });
      assert.equal(await handled, 0);
      return stored;
    });
    assert.deepEqual((await queue.jobs()).jobs.map((job) => job.id), [id]);
  },
);

const uniqueNote = defineJob({
  name: "unique-note",
  schema: z.object({ n: z.number() }),
  uniqueForMs: 60_000,
  uniqueId: (payload) => String(payload.n),
  handle() {},
});

storeTest(
  "Queue calls inside the queue's own transaction callback reject at once, a dispatch of a unique key the transaction holds too, saying to use the tx handle",
  async (db) => {
    await using queue = await db.open({ jobs: [note, uniqueNote] });
    const useTx = /inside its own transaction callback.*use the tx handle/;
    const id = await within(
      queue.transaction(async (tx) => {
        const stored = await tx.dispatch(uniqueNote, { n: 1 });
        await assert.rejects(
          within(queue.dispatch(uniqueNote, { n: 1 }), 5_000, "the unique dispatch inside"),
          useTx,
        );
        await assert.rejects(within(queue.counts(), 5_000, "counts() inside"), useTx);
        return stored;
      }),
      10_000,
      "the transaction",
    );
    assert.equal(await queue.dispatch(uniqueNote, { n: 1 }), id, "a duplicate once it committed");
    assert.deepEqual((await queue.jobs()).jobs.map((job) => job.id), [id]);
  },
);

storeTest.sql(
  "Queue.transaction(): tx.query refuses fewer params than its statement's placeholders, naming both counts, and the transaction keeps nothing",
  async (db) => {
    await using queue = await db.open({ jobs: [note] });
    const cases = [
      { text: "SELECT CAST(? AS INTEGER) AS a, CAST(? AS INTEGER) AS b", params: [1], takes: 2 },
      { text: "SELECT CAST(? AS INTEGER) AS a", params: [], takes: 1 },
    ];
    for (const { text, params, takes } of cases) {
      const refused = await queue.transaction(async (tx) => {
        await tx.dispatch(note, { n: 1 });
        await tx.query(db.sql(text), params);
      }).then(() => null, (error: Error) => error);
      const counts = db.kind === "sqlite"
        ? new RegExp(`takes ${takes} params?\\b.*: got ${params.length}\\b`)
        : new RegExp(`supplies ${params.length} parameters, but .* requires ${takes}\\b`);
      assert.match(String(refused), counts, `${text} with ${params.length}`);
    }
    assert.deepEqual((await queue.jobs()).jobs, [], "every transaction rolled back");
    const rows = await queue.transaction((tx) =>
      tx.query(db.sql("SELECT CAST(? AS INTEGER) AS a, CAST(?2 AS INTEGER) AS b"), [1, 2])
    );
    assert.deepEqual(rows.map((row) => ({ ...row })), [{ a: 1, b: 2 }]);
  },
);

Deno.test("SQLite: tx.query refuses more params than its statement takes, counting a ?NNN placeholder up to its number and a repeated one once", async () => {
  await using dir = await tempDir();
  await using queue = await Queue.open({ path: dir.dbPath, jobs: [note] });
  const cases = [
    { text: "SELECT ? AS a", params: [1, 2], takes: 1 },
    { text: "SELECT 1 AS a", params: [1], takes: 0 },
    { text: "SELECT ?3 AS a", params: [1, 2], takes: 3 },
    { text: "SELECT ?1 AS a, ?1 AS b", params: [1, 2], takes: 1 },
  ];
  for (const { text, params, takes } of cases) {
    await assert.rejects(
      queue.transaction((tx) => tx.query(text, params)),
      (error: Error) =>
        error instanceof TypeError &&
        error.message.includes(`takes ${takes} param`) &&
        error.message.includes(`: got ${params.length} in "${text}"`),
      text,
    );
  }
  const [row] = await queue.transaction((tx) => tx.query("SELECT ?3 AS a", [1, 2, 3]));
  assert.equal(row?.a, 3);
});

storeTest(
  "a dispatch or a tx.query() the callback starts without awaiting it after close() rolled its transaction back is refused, never reported as unhandled",
  async (db) => {
    const queue = await db.open({ jobs: [note] });
    const entered = Promise.withResolvers<void>();
    const released = Promise.withResolvers<void>();
    let late!: Promise<unknown>;
    let lateQuery!: Promise<unknown>;
    const abandoned = queue.transaction(async (tx) => {
      await tx.dispatch(note, { n: 1 });
      entered.resolve();
      await released.promise;
      // Neither awaited: the callback goes on and returns.
      late = tx.dispatch(note, { n: 2 });
      lateQuery = tx.query("SELECT 1 AS one");
    }).then(() => null, (error: Error) => error);
    await entered.promise;
    await queue.close();
    assert.match(
      String(await abandoned),
      /close\(\) stopped waiting for it to end and rolled it back/,
    );
    released.resolve();
    await released.promise; // the callback's continuation runs before this test's
    // Deno fails a test that leaves a rejection unhandled: this one must have been taken.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await assert.rejects(late, /the queue is closed/);
    await assert.rejects(lateQuery); // closed, or on Redis: no SQL
  },
);

storeTest(
  "queue.close() with a worker running ends, rolling back a transaction whose callback never settles",
  async (db) => {
    const queue = await db.open({ jobs: [note] });
    const worker = queue.work({ pollMs: 50 });
    const entered = Promise.withResolvers<void>();
    const stuck = queue.transaction(async (tx) => {
      await tx.dispatch(note, { n: 1 });
      entered.resolve();
      await new Promise(() => {}); // never settles
    }).then(() => null, (error: Error) => error);
    await entered.promise;
    // Generous: the close waits 5 s for the transaction, and the worker its grace period.
    await within(queue.close(), 60_000, "queue.close()");
    await worker.done;
    assert.match(
      String(await stuck),
      /close\(\) stopped waiting for it to end and rolled it back/,
    );
    const again = await db.open({ jobs: [note] });
    assert.equal((await again.jobs()).total, 0, "nothing it dispatched is stored");
  },
);

Deno.test("SQLite: queue.close() lets a job's transaction that ends within its worker's grace period commit, though past the 5 s close gives a transaction", async () => {
  await using dir = await tempDir();
  const began = Promise.withResolvers<void>();
  const released = Promise.withResolvers<void>();
  // The handler's own queue, known once it is open.
  const opened = Promise.withResolvers<Queue>();
  const slow = defineJob({
    name: "slow",
    schema: z.object({}),
    async handle() {
      await (await opened.promise).transaction(async (tx) => {
        await tx.dispatch(note, { n: 1 });
        began.resolve();
        await released.promise;
      });
    },
  });
  const queue = await Queue.open({ path: dir.dbPath, jobs: [note, slow] });
  opened.resolve(queue);
  await queue.dispatch(slow, {});
  queue.work({ executor: "isolate", graceMs: 60_000 });
  await began.promise;
  const closed = queue.close();
  // Past the 5 s: the transaction must still be open for the handler to end it.
  await new Promise((resolve) => setTimeout(resolve, CLOSE_WAITS_MS + 1_000));
  released.resolve();
  await within(closed, 60_000, "queue.close()");
  assert.deepEqual(storedNotes(dir.dbPath), [1], "the transaction committed");
  const completed = readRows<{ name: string }>(dir.dbPath, "SELECT name FROM completed_jobs");
  assert.deepEqual(completed.map((row) => row.name), ["slow"], "its job completed");
});
