/**
 * Waiting for results at scale: 10,000 waiters in one process, on every
 * store. Here rather than in tests/await_result_test.ts because it takes tens
 * of seconds on PostgreSQL on a busy machine (13–26 s at load 4–5 since
 * dispatches wake other processes after commit, 21–36 s before; 3–4 s on
 * SQLite and Redis).
 *
 * @module
 */
import assert from "node:assert/strict";
import { storeTest } from "../_stores.ts";
import { add } from "../fixtures/job_control/jobs.ts";

storeTest(
  "dispatchAndWait() resolves 10,000 waiters in one process, the worker beside them",
  async (db) => {
    const queue = await db.open({ jobs: [add] });
    const worker = queue.work({ executor: "isolate", concurrency: 8 });
    const count = 10_000;
    // A generous deadline for each wait: 10,000 dispatches and their drain take tens of seconds
    // on PostgreSQL on a busy machine. That the waiters share one read of the store (10,000 of
    // them each reading for itself took 35 s on SQLite) is checked by counting reads in tests/await_result_test.ts.
    const outcomes = await Promise.all(
      Array.from(
        { length: count },
        (_, n) =>
          queue.dispatchAndWait(add, { a: n, b: 0 }, { timeoutMs: 180_000 }).then(
            ({ sum }) => sum === n ? "resolved" : `wrong sum ${sum} for ${n}`,
            (error: Error) => error.name,
          ),
      ),
    );
    const tally: Record<string, number> = {};
    for (const outcome of outcomes) tally[outcome] = (tally[outcome] ?? 0) + 1;
    assert.deepEqual(tally, { resolved: count });
    await worker.stop();
  },
);
