/**
 * Job control across processes: a job dispatched here and run by a worker
 * in another process is awaited, cancelled while it runs, and held back by
 * a pause, on every store. The cancel test prints the time from `cancel()`
 * to the handler's abort in the other process (p50 and p99); it asserts no
 * duration.
 *
 * @module
 */
import assert from "node:assert/strict";
import { ChildScript } from "../_child.ts";
import { failedCount, nextEvent, unfinishedCount, within } from "../_helpers.ts";
import { type StoreContext, storeTest } from "../_stores.ts";
import { add, broken, slow, step } from "../fixtures/job_control/jobs.ts";
import type { Queue } from "../../mod.ts";

const CHILD = new URL("../fixtures/job_control/worker_child.ts", import.meta.url);
const JOBS = new URL("../fixtures/job_control/jobs.ts", import.meta.url).href;

/** A worker process on this test's database, working once it said `ready`. */
async function workerProcess(db: StoreContext): Promise<ChildScript> {
  const args = await db.childArgs();
  const child = new ChildScript(CHILD, args, { JOB_CONTROL_CHILD: "1" });
  await child.line("ready", 60_000);
  return child;
}

async function openHere(db: StoreContext): Promise<Queue> {
  return await db.open({ jobs: JOBS });
}

storeTest("dispatchAndWait() gets the output of a job another process ran", async (db) => {
  const queue = await openHere(db);
  await using child = await workerProcess(db);
  const output = await within(
    queue.dispatchAndWait(add, { a: 40, b: 2 }),
    60_000,
    "the output from the other process",
  );
  assert.deepEqual(output, { sum: 42 });
  await assert.rejects(
    within(queue.dispatchAndWait(broken, null), 60_000, "the failure"),
    /broken on purpose/,
  );
  await child.exit(30_000);
});

storeTest(
  "cancel() stops a job running in another process; the figure is printed",
  async (db) => {
    const queue = await openHere(db);
    await using child = await workerProcess(db);
    const latencies: number[] = [];
    for (let round = 0; round < 12; round++) {
      const id = await queue.dispatch(slow, null);
      await child.line(`started ${id}`, 60_000);
      const cancelledAt = Date.now();
      assert.equal(await queue.cancel(id, { reason: `round ${round}` }), "cancelling");
      const line = await child.line(`aborted ${id} `, 60_000);
      const [, , at, reasonName] = line.split(" ");
      assert.equal(reasonName, "JobCancelledError");
      latencies.push(Number(at) - cancelledAt);
      const result = await waitForState(queue, id, "cancelled");
      assert.deepEqual(result, { state: "cancelled", attempts: 1, error: `round ${round}` });
    }
    assert.equal(await unfinishedCount(queue), 0);
    assert.equal(await failedCount(queue), 0);
    latencies.sort((a, b) => a - b);
    const at = (q: number) =>
      latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
    console.log(
      `[figure] ${db.kind}: cancel() to the handler's abort in another process over ${latencies.length} jobs: p50 ${
        at(0.5)
      } ms, p99 ${at(0.99)} ms (max ${latencies.at(-1)} ms)`,
    );
    await child.exit(30_000);
  },
);

storeTest("a pause holds a queue back in another process; resume lets it run", async (db) => {
  const queue = await openHere(db);
  await using child = await workerProcess(db);
  await queue.pause("steps", { reason: "test" });
  const held = await queue.dispatch(step, { n: 1 });
  const other = await queue.dispatch(add, { a: 1, b: 1 });
  await child.line(`complete ${other}`, 60_000);
  assert.equal((await queue.result(held))?.state, "pending", "the paused queue was skipped");
  const resumed = nextEvent(queue, "queue:resumed");
  assert.equal(await queue.resume("steps"), true);
  await resumed;
  await child.line(`complete ${held}`, 60_000);
  assert.deepEqual((await queue.result(held))?.output, { n: 1 });
  await child.exit(30_000);
});

async function waitForState(queue: Queue, id: number, state: string) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const result = await queue.result(id);
    if (result?.state === state) return result;
    if (Date.now() > deadline) {
      throw new Error(`job ${id} never became ${state}: ${JSON.stringify(result)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
