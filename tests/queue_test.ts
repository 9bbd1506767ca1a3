/**
 * The queue's API: dispatch and its checks, transactions, close, the failed
 * jobs, clear and counts, on every store.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import {
  defineJob,
  type JobContext,
  PermanentError,
  Queue,
  QueueClosedError,
  type QueueEventMap,
  ValidationError,
} from "../mod.ts";
import { workUntilEmpty } from "../src/testing.ts";
import { ManualClock, nextEvent, storedCounts, tempDir } from "./_helpers.ts";
import { type StoreContext, storeTest } from "./_stores.ts";
import { runAdminChildren } from "./fixtures/queue/child.ts";
import { alwaysFails } from "./fixtures/queue/jobs.ts";

const order = defineJob({
  name: "send-receipt",
  schema: z.object({ orderId: z.number().int() }),
  handle() {},
});
const boom = defineJob({
  name: "boom",
  schema: z.number(),
  handle(n) {
    throw new PermanentError(`boom ${n}`);
  },
});
const JOBS = [order, boom];

function openQueue(db: StoreContext, clock?: ManualClock): Promise<Queue> {
  return db.open({ jobs: JOBS, ...(clock && { clock }) });
}

/** An app's trigger that refuses every insert into the queue's jobs table, as statements per engine. */
const REFUSE_INSERTS_SQL = {
  sqlite: [
    "CREATE TRIGGER refuse_jobs BEFORE INSERT ON jobs BEGIN SELECT RAISE(ABORT, 'refused by the app'); END",
  ],
  postgres: [
    "CREATE FUNCTION refuse_jobs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the app'; END $$",
    "CREATE TRIGGER refuse_jobs BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_jobs()",
  ],
};

/** A table of the app's own, with an id the database assigns. */
const ORDERS_SQL = {
  sqlite: "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)",
  postgres: "CREATE TABLE orders (id serial PRIMARY KEY, total integer)",
};

/** Dispatches `count` jobs that fail for good and works them; returns their ids. */
async function makeFailed(queue: Queue, count: number, first = 1): Promise<number[]> {
  const ids = await queue.dispatchMany(boom, Array.from({ length: count }, (_, i) => first + i));
  assert.equal((await workUntilEmpty(queue, { concurrency: 8 })).failed, count);
  return ids;
}

/** The ids in each table, read through the app-SQL door of a transaction. */
/** The ids of the unfinished jobs and of the failed jobs, each in id order (up to 1000 of each). */
async function tables(queue: Queue): Promise<{ jobs: number[]; failed: number[] }> {
  const { jobs } = await queue.jobs({ limit: 1000 });
  const failed = await queue.failed({ limit: 1000 });
  return {
    jobs: jobs.map((job) => job.id),
    failed: failed.map((job) => job.id).sort((a, b) => a - b),
  };
}

function queuedEvents(queue: Queue): QueueEventMap["job:queued"][] {
  const seen: QueueEventMap["job:queued"][] = [];
  queue.addEventListener("job:queued", (event) => seen.push(event.detail));
  return seen;
}

storeTest("Queue.dispatch() stores the job and returns its id", async (db) => {
  await using queue = await openQueue(db);
  const first = await queue.dispatch(order, { orderId: 7 });
  const second = await queue.dispatch(order, { orderId: 8 });
  assert.ok(Number.isSafeInteger(first) && first > 0);
  assert.ok(second > first);
  assert.deepEqual(await queue.counts(), {
    default: { pending: 2, delayed: 0, reserved: 0, failed: 0, running: [] },
  });
});

storeTest("Queue.dispatch() with delayMs stores the job as delayed until then", async (db) => {
  const clock = new ManualClock();
  await using queue = await openQueue(db, clock);
  const seen = queuedEvents(queue);
  await queue.dispatch(order, { orderId: 1 }, { delayMs: 5_000 });
  assert.equal(seen[0]?.availableAt, clock.now() + 5_000);
  assert.deepEqual((await queue.counts()).default, {
    pending: 0,
    delayed: 1,
    reserved: 0,
    failed: 0,
    running: [],
  });
  clock.advance(5_000);
  assert.equal((await queue.counts()).default?.pending, 1);
});

storeTest("Queue.dispatch() with a queue option puts the job on that queue", async (db) => {
  await using queue = await openQueue(db);
  await queue.dispatch(order, { orderId: 1 }, { queue: "high" });
  await queue.dispatch(order, { orderId: 2 });
  assert.deepEqual(Object.keys(await queue.counts()), ["default", "high"]);
  assert.equal((await queue.counts()).high?.pending, 1);
  assert.equal(
    (await workUntilEmpty(queue)).completed,
    1,
    "a worker takes only the queues it is given",
  );
  assert.equal((await workUntilEmpty(queue, { queues: ["high"] })).completed, 1);
});

storeTest("Queue.dispatch() with a priority runs the job before lower ones", async (db) => {
  const ran: string[] = [];
  const job = defineJob({
    name: "ranked",
    schema: z.string(),
    priority: 1,
    handle: (label) => void ran.push(label),
  });
  await using queue = await db.open({ jobs: [job] });
  await queue.dispatch(job, "low", { priority: -5 });
  await queue.dispatch(job, "default");
  await queue.dispatch(job, "urgent", { priority: 10 });
  await workUntilEmpty(queue, { concurrency: 1 });
  assert.deepEqual(ran, ["urgent", "default", "low"]);
});

storeTest(
  "Queue.dispatch() of jobs one by one for the same `at` runs them in dispatch order, on the database's clock too",
  async (db) => {
    const ran: number[] = [];
    const job = defineJob({
      name: "same-time",
      schema: z.number(),
      handle: (i) => void ran.push(i),
    });
    await using queue = await db.open({ jobs: [job] });
    // Due already: each dispatch's times move onto the store's clock by a shift read in its call.
    const at = new Date(Date.now() - 60_000);
    const count = 40;
    for (let i = 0; i < count; i++) await queue.dispatch(job, i, { at });
    await workUntilEmpty(queue, { concurrency: 1 });
    assert.deepEqual(ran, Array.from({ length: count }, (_, i) => i));
  },
);

storeTest(
  "Queue.dispatchMany() stores every job in one go and returns the ids in order",
  async (db) => {
    await using queue = await openQueue(db);
    const ids = await queue.dispatchMany(
      order,
      Array.from({ length: 100 }, (_, i) => ({ orderId: i })),
    );
    assert.equal(ids.length, 100);
    assert.deepEqual(ids, ids.toSorted((a, b) => a - b));
    assert.equal(new Set(ids).size, 100);
    assert.equal((await queue.counts()).default?.pending, 100);
  },
);

storeTest("Queue.dispatchMany() stores nothing when one payload among 100 is bad", async (db) => {
  await using queue = await openQueue(db);
  await queue.dispatch(order, { orderId: 0 });
  const before = await queue.counts();
  const payloads = Array.from({ length: 100 }, (_, i) => ({ orderId: i }));
  payloads[63] = { orderId: 6.3 };
  await assert.rejects(
    queue.dispatchMany(order, payloads),
    (error: unknown) => error instanceof ValidationError && /payload\.orderId/.test(error.message),
  );
  assert.deepEqual(await queue.counts(), before);
});

storeTest("Queue.dispatchMany() with no payloads returns [] and stores nothing", async (db) => {
  await using queue = await openQueue(db);
  assert.deepEqual(await queue.dispatchMany(order, []), []);
  assert.deepEqual(await storedCounts(queue), {});
});

storeTest("Queue sends job:queued with the stored job's details", async (db) => {
  const clock = new ManualClock();
  await using queue = await openQueue(db, clock);
  const event = nextEvent<QueueEventMap["job:queued"]>(queue, "job:queued");
  const id = await queue.dispatch(order, { orderId: 3 }, { queue: "mail", delayMs: 250 });
  assert.deepEqual(await event, {
    id,
    name: "send-receipt",
    queue: "mail",
    attempt: 0,
    availableAt: clock.now() + 250,
  });
});

storeTest("Queue.dispatch() refuses a job not registered with this queue", async (db) => {
  const stranger = defineJob({ name: "stranger", schema: z.null(), handle() {} });
  const twin = defineJob({ name: "send-receipt", schema: order.schema, handle() {} });
  await using queue = await openQueue(db);
  for (const [job, name] of [[stranger, "stranger"], [twin, "send-receipt"]] as const) {
    await assert.rejects(queue.dispatch(job, { orderId: 1 } as never), (error: unknown) => {
      assert.ok(error instanceof TypeError);
      assert.equal(
        error.message,
        `Cannot dispatch "${name}": it is not a job registered with this queue (export it from the jobs module)`,
      );
      return true;
    });
  }
  await assert.rejects(queue.dispatchSync(twin, { orderId: 1 }), TypeError);
  await assert.rejects(queue.transaction((tx) => tx.dispatch(stranger, null)), TypeError);
  assert.deepEqual(await storedCounts(queue), {});
});

storeTest("Queue.dispatch() refuses something that is not a job with a clear error", async (db) => {
  await using queue = await openQueue(db);
  for (const notAJob of [null, undefined, "send-receipt", { ...order }]) {
    await assert.rejects(
      queue.dispatch(notAJob as typeof order, { orderId: 1 }),
      (error: unknown) =>
        error instanceof TypeError && /not a job registered with this queue/.test(error.message),
      `refusing ${String(notAJob)}`,
    );
  }
  assert.deepEqual(await storedCounts(queue), {});
});

storeTest(
  "Queue.dispatch() and dispatchMany() given something else than a job say briefly what it was",
  async (db) => {
    await using queue = await openQueue(db);
    const given = async (call: () => Promise<unknown>) =>
      await call().then(() => "stored", (error: Error) => `${error.name}: ${error.message}`);
    const refusal = (what: string) =>
      `TypeError: Cannot dispatch ${what}: it is not a job registered with this queue (export it from the jobs module)`;
    const entry = { job: order, payload: { orderId: 1 } };
    assert.deepEqual(
      [
        await given(() => queue.dispatch(entry as unknown as typeof order, { orderId: 1 })),
        await given(() =>
          queue.dispatch([entry, entry] as unknown as typeof order, { orderId: 1 })
        ),
        await given(() => queue.dispatch(42 as unknown as typeof order, { orderId: 1 })),
        await given(() =>
          queue.dispatchMany(
            Array.from({ length: 1_000 }, () => entry) as unknown as typeof order,
            [],
          )
        ),
      ],
      [
        refusal("an object with keys job, payload"),
        refusal("an array of 2"),
        refusal("42"),
        refusal("an array of 1000"),
      ],
    );
    assert.deepEqual(await storedCounts(queue), {});
  },
);

storeTest(
  "Queue.dispatch() refuses queue names outside [A-Za-z0-9_.:-]{1,64} (S07)",
  async (db) => {
    await using queue = await openQueue(db);
    const bad = [
      "default'); DROP TABLE jobs;--",
      "",
      "q".repeat(65),
      "ünïcödé",
      "😀",
      "has space",
      "line\nbreak",
      "semi;colon",
    ];
    for (const name of bad) {
      await assert.rejects(
        queue.dispatch(order, { orderId: 1 }, { queue: name }),
        (error: unknown) => {
          assert.ok(error instanceof TypeError);
          assert.ok(error.message.startsWith('Cannot dispatch "send-receipt": queue name '));
          assert.match(error.message, /is invalid: use 1 to 64 of A-Z a-z 0-9 _ \. : -$/);
          return true;
        },
      );
      await assert.rejects(queue.dispatchMany(order, [{ orderId: 1 }], { queue: name }), TypeError);
      await assert.rejects(queue.clear(name), TypeError);
      assert.throws(() => queue.work({ queues: [name] }), TypeError);
      assert.deepEqual(await storedCounts(queue), {});
    }
    const longest = "Aa0_.:-".padEnd(64, "z");
    await queue.dispatch(order, { orderId: 1 }, { queue: longest });
    assert.deepEqual(Object.keys(await storedCounts(queue)), [longest]);
    assert.equal((await workUntilEmpty(queue, { queues: [longest] })).completed, 1);
  },
);

storeTest("Queue.dispatch() refuses a negative, NaN or infinite delayMs", async (db) => {
  await using queue = await openQueue(db);
  for (const delayMs of [-1, -0.5, NaN, Infinity, -Infinity]) {
    await assert.rejects(queue.dispatch(order, { orderId: 1 }, { delayMs }), (error: unknown) => {
      assert.ok(error instanceof RangeError);
      assert.match(
        error.message,
        /^Cannot dispatch "send-receipt": delayMs must be a number of ms from 0 to 3153600000000: got /,
      );
      return true;
    });
  }
  assert.deepEqual(await storedCounts(queue), {});
});

storeTest(
  "Queue.dispatch() refuses an at more than 100 years ahead, as it does such a delayMs",
  async (db) => {
    await using queue = await openQueue(db);
    const chain = (at: Date) =>
      queue.chain().then(order, { orderId: 1 }).then(order, { orderId: 2 }, { at }).dispatch();
    for (const at of [new Date(8.64e15), new Date(Date.now() + 3153600000000 + 60_000)]) {
      for (
        const attempt of [
          () => queue.dispatch(order, { orderId: 1 }, { at }),
          () => queue.dispatchMany(order, [{ orderId: 1 }], { at }),
          () => chain(at),
        ]
      ) {
        await assert.rejects(attempt(), (error: unknown) => {
          assert.ok(error instanceof RangeError);
          assert.match(
            error.message,
            /^Cannot dispatch "send-receipt".*: at must be at most 3153600000000 ms \(about 100 years\) from now: got [+\d]/,
          );
          return true;
        });
      }
    }
    assert.deepEqual(await storedCounts(queue), {});
    const inNinetyYears = new Date(Date.now() + 90 * 365 * 24 * 60 * 60 * 1_000);
    await queue.dispatch(order, { orderId: 1 }, { at: inNinetyYears });
    // On PostgreSQL and Redis the store goes by the database's clock: times move by the clocks' skew.
    const [job] = (await queue.jobs()).jobs;
    assert.ok(Math.abs(job!.availableAt.getTime() - inNinetyYears.getTime()) < 60_000);
  },
);

storeTest("Queue.dispatch() refuses a non-integer priority", async (db) => {
  await using queue = await openQueue(db);
  for (const priority of [0.5, NaN, Infinity, 2 ** 53]) {
    await assert.rejects(
      queue.dispatch(order, { orderId: 1 }, { priority }),
      (error: unknown) =>
        error instanceof RangeError && /priority must be an integer/.test(error.message),
    );
  }
  assert.deepEqual(await storedCounts(queue), {});
});

storeTest(
  "Queue.dispatch() refuses bad input with the error class docs/dispatching.md names for it: ValidationError for the payload, TypeError for the call, RangeError for a number out of range",
  async (db) => {
    const big = defineJob({ name: "big", schema: z.string(), handle() {} });
    const stranger = defineJob({ name: "stranger", schema: z.null(), handle() {} });
    await using queue = await db.open({ jobs: [...JOBS, big], maxPayloadBytes: 64 });
    const cases: [string, () => Promise<unknown>, ErrorConstructor | typeof ValidationError][] = [
      ["fails its schema", () => queue.dispatch(order, { orderId: "7" } as never), ValidationError],
      ["over the cap", () => queue.dispatch(big, "x".repeat(100)), ValidationError],
      ["not JSON", () => queue.dispatch(big, 1n as never), ValidationError],
      ["unregistered", () => queue.dispatch(stranger, null), TypeError],
      ["unknown name", () => queue.dispatchByName("nope", {}), TypeError],
      ["bad queue", () => queue.dispatch(order, { orderId: 1 }, { queue: "a b" }), TypeError],
      [
        "delayMs and at",
        () => queue.dispatch(order, { orderId: 1 }, { delayMs: 1, at: new Date() }),
        TypeError,
      ],
      ["negative delay", () => queue.dispatch(order, { orderId: 1 }, { delayMs: -1 }), RangeError],
      [
        "delay over 100 years",
        () => queue.dispatch(order, { orderId: 1 }, { delayMs: 3_153_600_000_001 }),
        RangeError,
      ],
      [
        "priority 2^31",
        () => queue.dispatch(order, { orderId: 1 }, { priority: 2 ** 31 }),
        RangeError,
      ],
    ];
    for (const [what, attempt, kind] of cases) {
      await assert.rejects(attempt(), (error: unknown) => {
        assert.equal((error as Error).constructor, kind, `${what}: ${error}`);
        return true;
      });
    }
    // The sample message the guide quotes, word for word.
    await assert.rejects(queue.dispatch(order, { orderId: "7" } as never), {
      message:
        'Cannot dispatch "send-receipt": payload.orderId: Invalid input: expected number, received string',
    });
    // The ends of the priority range the guide gives are accepted.
    await queue.dispatch(order, { orderId: 1 }, { priority: 2147483647 });
    await queue.dispatch(order, { orderId: 2 }, { priority: -2147483647 });
    assert.equal((await queue.counts()).default?.pending, 2);
  },
);

storeTest(
  "reads in flight when close() is called finish, or reject with QueueClosedError: never with an error that says the server is down",
  async (db) => {
    const queue = await openQueue(db);
    await queue.dispatchMany(order, Array.from({ length: 50 }, (_, n) => ({ orderId: n })));
    for (let round = 0; round < 3; round++) {
      const reads = [
        queue.counts(),
        queue.jobs(),
        queue.failed(),
        queue.metrics(),
        queue.schedules(),
      ]
        .map((read) => read.then(() => null, (error: unknown) => error));
      if (round === 2) await queue.close();
      for (const error of await Promise.all(reads)) {
        if (error !== null) assert.ok(error instanceof QueueClosedError, String(error));
      }
    }
  },
);

storeTest("Queue refuses every use after close() with QueueClosedError", async (db) => {
  const queue = await openQueue(db);
  await queue.close();
  const uses: [string, () => Promise<unknown>][] = [
    ["dispatch", () => queue.dispatch(order, { orderId: 1 })],
    ["dispatchMany", () => queue.dispatchMany(order, [])],
    ["dispatchSync", () => queue.dispatchSync(order, { orderId: 1 })],
    ["transaction", () => queue.transaction(() => {})],
    ["work", () => Promise.resolve().then(() => queue.work())],
    ["counts", () => queue.counts()],
    ["failed", () => queue.failed()],
    ["retry", () => queue.retry(1)],
    ["clear", () => queue.clear()],
  ];
  for (const [what, use] of uses) {
    await assert.rejects(use(), QueueClosedError, what);
  }
  await assert.rejects(queue.dispatch(order, { orderId: 1 }), {
    name: "QueueClosedError",
    message: "Cannot dispatch: the queue is closed",
  });
});

storeTest(
  "a wait for a result still pending when the queue closes rejects with QueueClosedError",
  async (db) => {
    const queue = await openQueue(db);
    const waiting = queue.dispatchAndWait(order, { orderId: 1 }, { timeoutMs: 60_000 });
    const outcome = waiting.then(() => null, (error: unknown) => error);
    // The wait has read the job once and is waiting for the next look when close() comes.
    await new Promise((resolve) => setTimeout(resolve, 200));
    await queue.close();
    const error = await outcome;
    assert.ok(error instanceof QueueClosedError, String(error));
  },
);

storeTest(
  "Queue.close() is idempotent, stops workers, and await using closes the queue",
  async (db) => {
    let kept: Queue;
    let worker;
    {
      await using queue = await openQueue(db);
      kept = queue;
      worker = queue.work({ pollMs: 5 });
    }
    await worker.done;
    await kept.close();
    await Promise.all([kept.close(), kept.close()]);
    await assert.rejects(kept.dispatch(order, { orderId: 1 }), QueueClosedError);
  },
);

storeTest.sql("Queue.transaction() commits app rows and dispatched jobs together", async (db) => {
  await using queue = await openQueue(db);
  const seen = queuedEvents(queue);
  const jobId = await queue.transaction(async (tx) => {
    await tx.query(db.pick(ORDERS_SQL));
    const [row] = await tx.query<{ id: number }>(
      db.sql("INSERT INTO orders (total) VALUES (?) RETURNING id"),
      [42],
    );
    const id = await tx.dispatch(order, { orderId: row!.id });
    assert.equal(seen.length, 0, "job:queued waits for the commit");
    return id;
  });
  assert.deepEqual(seen.map(({ id }) => id), [jobId]);
  assert.equal((await queue.counts()).default?.pending, 1);
  const orders = await queue.transaction((tx) => tx.query("SELECT id, total FROM orders"));
  assert.deepEqual(orders.map((row) => ({ ...row })), [{ id: 1, total: 42 }]);
});

storeTest.sql(
  "Queue.transaction() keeps neither the app row nor the job when its callback throws",
  async (db) => {
    await using queue = await openQueue(db);
    await queue.transaction((tx) => tx.query(db.pick(ORDERS_SQL)));
    const seen = queuedEvents(queue);
    await assert.rejects(
      queue.transaction(async (tx) => {
        await tx.query("INSERT INTO orders DEFAULT VALUES");
        await tx.dispatch(order, { orderId: 1 });
        await tx.dispatchMany(order, [{ orderId: 2 }, { orderId: 3 }]);
        throw new Error("payment declined");
      }),
      /payment declined/,
    );
    assert.deepEqual(await storedCounts(queue), {});
    assert.deepEqual(await queue.transaction((tx) => tx.query("SELECT * FROM orders")), []);
    assert.equal(seen.length, 0, "no job:queued for a rolled-back dispatch");
    await queue.dispatch(order, { orderId: 4 });
    assert.equal(seen.length, 1, "the queue works after a rollback");
  },
);

storeTest.sql(
  "Queue.transaction(): a tx.query() that fails ends the transaction though the callback catches it; later calls on tx reject, and it rolls back with that error",
  async (db) => {
    await using queue = await openQueue(db);
    await queue.transaction((tx) => tx.query(db.pick(ORDERS_SQL)));
    await queue.transaction((tx) => tx.query("INSERT INTO orders (id, total) VALUES (1, 1)"));
    let later: unknown = null;
    await assert.rejects(
      queue.transaction(async (tx) => {
        await tx.query("INSERT INTO orders (id, total) VALUES (1, 2)").catch(() => {});
        later = await tx.dispatch(order, { orderId: 2 }).catch((error: Error) => error);
        await tx.query("INSERT INTO orders (id, total) VALUES (3, 3)").catch(() => {});
      }),
      /UNIQUE|unique|duplicate/,
    );
    assert.match(
      (later as Error | null)?.message ?? "no error",
      /current transaction is aborted/,
      "a dispatch after the failed statement is refused",
    );
    assert.deepEqual(await storedCounts(queue), {});
    const rows = await queue.transaction((tx) => tx.query("SELECT id FROM orders ORDER BY id"));
    assert.deepEqual(rows.map((row) => ({ ...row })), [{ id: 1 }]);
  },
);

storeTest.sql(
  "Queue.transaction(): a tx.dispatch() whose statement fails ends the transaction though the callback catches it, as a failed tx.query() does",
  async (db) => {
    await using queue = await openQueue(db);
    await queue.dispatch(order, { orderId: 1 });
    let later: unknown = null;
    await assert.rejects(
      queue.transaction(async (tx) => {
        for (const statement of db.pick(REFUSE_INSERTS_SQL)) await tx.query(statement);
        await tx.dispatch(order, { orderId: 2 }).catch(() => {});
        later = await tx.dispatch(order, { orderId: 3 }).catch((error: Error) => error);
      }),
      /refused by the app/,
    );
    assert.match(
      (later as Error | null)?.message ?? "no error",
      /current transaction is aborted/,
      "a dispatch after the failed one is refused",
    );
    assert.equal((await queue.counts()).default?.pending, 1);
    await queue.dispatch(order, { orderId: 4 });
    assert.equal((await queue.counts()).default?.pending, 2, "the app's trigger rolled back too");
  },
);

storeTest(
  "Queue.transaction() keeps none of the jobs tx.dispatch pushed when its callback throws, or a payload is bad",
  async (db) => {
    await using queue = await openQueue(db);
    const seen = queuedEvents(queue);
    await assert.rejects(
      queue.transaction(async (tx) => {
        await tx.dispatch(order, { orderId: 1 });
        await tx.dispatchMany(order, [{ orderId: 2 }, { orderId: 3 }]);
        throw new Error("payment declined");
      }),
      /payment declined/,
    );
    await assert.rejects(
      queue.transaction(async (tx) => {
        await tx.dispatch(order, { orderId: 1 });
        await tx.dispatch(order, { orderId: "two" } as never);
      }),
      ValidationError,
    );
    assert.deepEqual(await tables(queue), { jobs: [], failed: [] });
    assert.equal(seen.length, 0, "no job:queued for a rolled-back dispatch");
    const id = await queue.transaction((tx) => tx.dispatch(order, { orderId: 4 }));
    assert.deepEqual(await tables(queue), { jobs: [id], failed: [] }, "the queue works after");
  },
);

storeTest(
  "Queue.transaction() keeps none of the jobs tx.dispatch pushed when a failed tx.query is thrown on (on Redis: refused, saying why)",
  async (db) => {
    await using queue = await openQueue(db);
    await assert.rejects(
      queue.transaction(async (tx) => {
        await tx.dispatch(order, { orderId: 1 });
        await tx.query("INSERT INTO no_such_table DEFAULT VALUES");
      }),
      (error: unknown) => {
        if (db.kind !== "redis") return true; // the SQL stores ran it: no such table
        assert.ok(error instanceof TypeError, String(error));
        assert.match(error.message, /^queue\.transaction\(\) on the Redis store cannot run SQL/);
        assert.match(error.message, /tx\.dispatch\(\)/, "it names the way out");
        return true;
      },
    );
    assert.deepEqual(await tables(queue), { jobs: [], failed: [] });
  },
);

storeTest.sql(
  "Queue.transaction() rolls back everything when tx.dispatch gets a bad payload",
  async (db) => {
    await using queue = await openQueue(db);
    await queue.transaction((tx) => tx.query(db.pick(ORDERS_SQL)));
    await assert.rejects(
      queue.transaction(async (tx) => {
        await tx.query("INSERT INTO orders DEFAULT VALUES");
        await tx.dispatch(order, { orderId: 1 });
        await tx.dispatch(order, { orderId: "two" } as never);
      }),
      ValidationError,
    );
    assert.deepEqual(await storedCounts(queue), {});
    assert.deepEqual(await queue.transaction((tx) => tx.query("SELECT * FROM orders")), []);
  },
);

storeTest(
  "Queue.transaction() refuses its handle once the transaction has ended",
  async (db) => {
    await using queue = await openQueue(db);
    let leaked: Parameters<Parameters<Queue["transaction"]>[0]>[0] | undefined;
    await queue.transaction((tx) => void (leaked = tx));
    await assert.rejects(leaked!.dispatch(order, { orderId: 1 }), /This transaction has ended/);
    await assert.rejects(async () => await leaked!.query("SELECT 1"), /This transaction has ended/);
    assert.deepEqual(await storedCounts(queue), {});
  },
);

storeTest(
  "QueueTransaction.query() reports failures as rejections, not synchronous throws (on Redis, its refusal too)",
  async (db) => {
    await using queue = await openQueue(db);
    let outcomes: string[] = [];
    const transaction = queue.transaction(async (tx) => {
      const settle = (run: () => Promise<unknown>) => {
        try {
          return run().then(() => "resolved", () => "rejected");
        } catch {
          return "threw synchronously";
        }
      };
      outcomes = await Promise.all([
        settle(() => tx.query("SELECT 1")),
        settle(() => tx.query("SELEC nonsense")),
      ]);
    });
    if (db.kind !== "redis") {
      // A failed statement ends the transaction, caught or not: it cannot commit.
      await assert.rejects(transaction, /syntax error/);
    } else {
      await transaction;
    }
    // Redis runs no SQL: it refuses every statement, with a rejection too.
    assert.deepEqual(
      outcomes,
      db.kind === "redis" ? ["rejected", "rejected"] : ["resolved", "rejected"],
    );
  },
);

storeTest("Queue.dispatchSync() runs the handler now, attempt 1, storing nothing", async (db) => {
  const calls: [unknown, number, string][] = [];
  const job = defineJob({
    name: "sync",
    schema: z.object({ n: z.number() }),
    queue: "reports",
    handle(payload, ctx: JobContext) {
      calls.push([payload, ctx.attempt, ctx.queueName]);
    },
  });
  await using queue = await db.open({ jobs: [job] });
  const seen = queuedEvents(queue);
  assert.equal(await queue.dispatchSync(job, { n: 1 }), undefined);
  assert.deepEqual(calls, [[{ n: 1 }, 1, "reports"]]);
  assert.deepEqual(await storedCounts(queue), {});
  assert.equal(seen.length, 0);
});

storeTest(
  "Queue.dispatchSync() rejects with the handler's own error and stores nothing",
  async (db) => {
    const failure = new Error("card declined");
    const job = defineJob({
      name: "charge",
      schema: z.null(),
      handle() {
        throw failure;
      },
    });
    await using queue = await db.open({ jobs: [job] });
    await assert.rejects(queue.dispatchSync(job, null), (error) => error === failure);
    assert.deepEqual(await storedCounts(queue), {});
    assert.deepEqual(await queue.failed(), []);
  },
);

storeTest("Queue.dispatchSync() validates the payload before running anything", async (db) => {
  let ran = false;
  const job = defineJob({ name: "checked", schema: z.number(), handle: () => void (ran = true) });
  await using queue = await db.open({ jobs: [job] });
  await assert.rejects(queue.dispatchSync(job, "1" as never), ValidationError);
  assert.equal(ran, false);
});

storeTest("Queue.failed() lists failed jobs newest first, by page", async (db) => {
  const clock = new ManualClock();
  await using queue = await openQueue(db, clock);
  const ids: number[] = [];
  for (let n = 1; n <= 3; n++) {
    ids.push(...await makeFailed(queue, 1, n));
    clock.advance(1_000);
  }
  const newestFirst = ids.toReversed();
  assert.deepEqual((await queue.failed()).map(({ id }) => id), newestFirst);
  assert.deepEqual((await queue.failed({ limit: 2 })).map(({ id }) => id), newestFirst.slice(0, 2));
  assert.deepEqual((await queue.failed({ limit: 1, offset: 1 })).map(({ id }) => id), [ids[1]]);
  assert.deepEqual(await queue.failed({ offset: 3 }), []);
  for (const limit of [0, -1, 1.5, 1001, NaN]) {
    await assert.rejects(queue.failed({ limit }), RangeError, `limit ${limit}`);
  }
  for (const offset of [-1, 0.5, NaN]) {
    await assert.rejects(queue.failed({ offset }), RangeError, `offset ${offset}`);
  }
});

storeTest("Queue.failedJob() returns one failed job with why it failed", async (db) => {
  const clock = new ManualClock();
  await using queue = await openQueue(db, clock);
  const [id] = await makeFailed(queue, 1, 7);
  const failed = await queue.failedJob(id!);
  assert.ok(failed !== null);
  const { stack, ...rest } = failed;
  assert.deepEqual(rest, {
    id: id!,
    queue: "default",
    name: "boom",
    payload: "7",
    error: "PermanentError: boom 7",
    attempts: 1,
    crashes: 0,
    createdAt: new Date(clock.now()),
    failedAt: new Date(clock.now()),
    batchId: null,
    chainId: null,
  });
  assert.match(stack ?? "", /PermanentError: boom 7/);
  assert.equal(await queue.failedJob(id! + 1000), null);
  await assert.rejects(queue.failedJob(0), RangeError);
});

storeTest("Queue.retry() puts a failed job back under its id with fresh attempts", async (db) => {
  let fail = true;
  const attempts: [number, number][] = [];
  const flaky = defineJob({
    name: "flaky",
    schema: z.null(),
    handle(_payload, ctx) {
      attempts.push([ctx.id, ctx.attempt]);
      if (fail) throw new PermanentError("not yet");
    },
  });
  await using queue = await db.open({ jobs: [flaky] });
  const id = await queue.dispatch(flaky, null);
  await workUntilEmpty(queue);
  assert.equal((await queue.counts()).default?.failed, 1);
  assert.equal(await queue.retry(id), true);
  assert.deepEqual(await queue.counts(), {
    default: { pending: 1, delayed: 0, reserved: 0, failed: 0, running: [] },
  });
  assert.equal(await queue.failedJob(id), null);
  fail = false;
  assert.equal((await workUntilEmpty(queue)).completed, 1);
  assert.deepEqual(attempts, [[id, 1], [id, 1]]);
  assert.equal(await queue.retry(id), false, "no longer failed");
  assert.equal(await queue.retry(999_999), false, "unknown id");
  for (const bad of [0, -1, 1.5, NaN]) await assert.rejects(queue.retry(bad), RangeError);
});

storeTest("Queue.retryAll() puts every failed job back and returns how many", async (db) => {
  await using queue = await openQueue(db);
  const ids = await makeFailed(queue, 5);
  assert.equal(await queue.retryAll(), 5);
  assert.deepEqual(await tables(queue), { jobs: ids, failed: [] });
  assert.equal(await queue.retryAll(), 0);
});

storeTest("Queue.forget() and flushFailed() delete failed jobs", async (db) => {
  await using queue = await openQueue(db);
  const ids = await makeFailed(queue, 4);
  assert.equal(await queue.forget(ids[0]!), true);
  assert.equal(await queue.forget(ids[0]!), false);
  assert.equal(await queue.failedJob(ids[0]!), null);
  assert.equal((await queue.counts()).default?.failed, 3);
  assert.equal(await queue.flushFailed(), 3);
  assert.equal(await queue.flushFailed(), 0);
  assert.deepEqual(await storedCounts(queue), {});
  await assert.rejects(queue.forget(-3), RangeError);
});

storeTest(
  "Queue.pruneFailed() deletes only jobs that failed longer ago than olderThanMs",
  async (db) => {
    const clock = new ManualClock();
    await using queue = await openQueue(db, clock);
    const old = await makeFailed(queue, 2, 1);
    clock.advance(10_000);
    const recent = await makeFailed(queue, 1, 3);
    clock.advance(1_000);
    assert.equal(await queue.pruneFailed({ olderThanMs: 60_000 }), 0);
    assert.equal(await queue.pruneFailed({ olderThanMs: 5_000 }), old.length);
    assert.deepEqual((await queue.failed()).map(({ id }) => id), recent);
    assert.equal(await queue.pruneFailed({ olderThanMs: 0 }), 1);
    for (const olderThanMs of [-1, NaN, Infinity]) {
      await assert.rejects(queue.pruneFailed({ olderThanMs }), RangeError);
    }
  },
);

storeTest(
  "Queue.clear() deletes waiting jobs of one queue or of all, never failed ones",
  async (db) => {
    await using queue = await openQueue(db);
    await makeFailed(queue, 1);
    await queue.dispatchMany(order, [{ orderId: 1 }, { orderId: 2 }], { queue: "a" });
    await queue.dispatch(order, { orderId: 3 }, { queue: "b", delayMs: 60_000 });
    await queue.dispatch(order, { orderId: 4 });
    assert.equal(await queue.clear("a"), 2);
    assert.equal(await queue.clear("nothing-here"), 0);
    assert.deepEqual(Object.keys(await storedCounts(queue)).sort(), ["b", "default"]);
    assert.equal(await queue.clear(), 2);
    assert.deepEqual(await queue.counts(), {
      default: { pending: 0, delayed: 0, reserved: 0, failed: 1, running: [] },
    });
  },
);

storeTest("Queue.counts() reports pending, delayed, reserved and failed per queue", async (db) => {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => release = resolve);
  const slow = defineJob({ name: "slow", schema: z.null(), handle: () => gate });
  await using queue = await db.open({ jobs: [slow, boom] });
  await makeFailed(queue, 2);
  const [firstSlow] = await queue.dispatchMany(slow, [null, null]);
  await queue.dispatch(slow, null, { delayMs: 60_000 });
  await queue.dispatch(slow, null, { queue: "other" });
  const started = nextEvent(queue, "job:start");
  const claimedFrom = Date.now();
  const worker = queue.work({ queues: ["default"], pollMs: 5 });
  await started;
  const counts = await queue.counts();
  const countedBy = Date.now();
  const [running] = counts.default?.running ?? [];
  assert.ok(running !== undefined, "the started job is listed as running");
  const { leasedUntil, ...rest } = running;
  assert.ok(
    leasedUntil.getTime() >= claimedFrom + 30_000 && leasedUntil.getTime() <= countedBy + 30_000,
    `leasedUntil ${leasedUntil.toISOString()} is not now + the default 30 s lease`,
  );
  assert.deepEqual(rest, {
    id: firstSlow!,
    name: "slow",
    attempt: 1,
    progress: null,
    batchId: null,
  });
  assert.deepEqual(counts, {
    default: { pending: 1, delayed: 1, reserved: 1, failed: 2, running: [running] },
    other: { pending: 1, delayed: 0, reserved: 0, failed: 0, running: [] },
  });
  release();
  await worker.stop();
});

storeTest(
  "Two queues retrying the same failed jobs at once bring each back exactly once (R10)",
  async (db) => {
    await using a = await openQueue(db);
    await using b = await openQueue(db);
    const ids = await makeFailed(a, 30);
    for (const id of ids) {
      const results = await Promise.all([a.retry(id), b.retry(id)]);
      assert.equal(results.filter(Boolean).length, 1, `job ${id}: ${results}`);
    }
    assert.deepEqual(await tables(b), { jobs: ids, failed: [] });
  },
);

storeTest(
  "Retry and forget racing on one failed job leave it in exactly one place or gone (R10)",
  async (db) => {
    await using a = await openQueue(db);
    await using b = await openQueue(db);
    const ids = await makeFailed(a, 30);
    const retried: number[] = [];
    for (const [index, id] of ids.entries()) {
      const [retriedIt, forgotIt] = index % 2 === 0
        ? await Promise.all([a.retry(id), b.forget(id)])
        : (await Promise.all([b.forget(id), a.retry(id)])).toReversed();
      assert.equal(Number(retriedIt) + Number(forgotIt), 1, `job ${id}`);
      if (retriedIt) retried.push(id);
    }
    assert.deepEqual(await tables(a), { jobs: retried, failed: [] });
  },
);

// SQLite only: the child processes open the queue's SQLite file (fixtures/queue/admin_child.ts).
// On PostgreSQL the two-queue R10 tests above race two connection pools on one schema.
Deno.test("Two processes retrying, or retrying and forgetting, the same jobs never double them (R10)", async () => {
  await using dir = await tempDir();
  await using queue = await Queue.open({ path: dir.dbPath, jobs: [alwaysFails] });
  const ids = await queue.dispatchMany(alwaysFails, Array.from({ length: 40 }, (_, n) => ({ n })));
  assert.equal((await workUntilEmpty(queue, { concurrency: 8 })).failed, 40);
  const [both, retryOnly] = [ids.slice(0, 20), ids.slice(20)];

  const [first, second] = await runAdminChildren(dir.dbPath, [["retry", both], ["retry", both]]);
  both.forEach((id, i) => assert.equal(Number(first![i]) + Number(second![i]), 1, `job ${id}`));

  const [retries, forgets] = await runAdminChildren(dir.dbPath, [
    ["retry", retryOnly],
    ["forget", retryOnly],
  ]);
  retryOnly.forEach((id, i) => assert.equal(Number(retries![i]) + Number(forgets![i]), 1, `${id}`));

  const back = [...both, ...retryOnly.filter((_, i) => retries![i])];
  assert.deepEqual(await tables(queue), { jobs: back.toSorted((x, y) => x - y), failed: [] });
});
