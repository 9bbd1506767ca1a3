/**
 * Flows under real faults: worker processes killed with SIGKILL while
 * parents settle and children start. The step from a parent to its child
 * is part of the transaction (or script) that settles the parent, so a kill
 * can cost a node an attempt but never skip a node nor queue it twice.
 * Every test runs on each store (`storeTest`), its workers in child
 * processes (tests/fixtures/flows/) on the test's database
 * (`db.childArgs()`), and counts what ran in a ledger file (outside the
 * database). Waits are on conditions with generous deadlines; no duration
 * is asserted.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { ChildScript } from "../_child.ts";
import { waitUntil } from "../_helpers.ts";
import { type StoreContext, storeTest } from "../_stores.ts";
import { flowNode, readLedger, stoppableNode } from "../fixtures/flows/jobs.ts";

const WORKER = new URL("../fixtures/flows/worker_child.ts", import.meta.url);
const JOBS = new URL("../fixtures/flows/jobs.ts", import.meta.url).href;
/** How long one wait of a test may take on a loaded machine before it counts as stuck. */
const DEADLINE_MS = 120_000;

/** A worker process on the test's database, running `concurrency` jobs at once, once it printed `ready`. */
async function startWorker(db: StoreContext, concurrency = 4): Promise<ChildScript> {
  // Web Workers (the default executor): the parents reach each handler across the thread boundary.
  const options = { leaseMs: 1_000, pollMs: 20, concurrency };
  const child = new ChildScript(WORKER, [JSON.stringify(options), ...await db.childArgs()]);
  try {
    await child.line("ready", DEADLINE_MS);
  } catch (error) {
    await child[Symbol.asyncDispose]();
    throw error;
  }
  return child;
}

storeTest(
  "worker processes killed (SIGKILL) while diamonds run: every node is queued once (one job id), each join sees both sides' outputs, and every flow succeeds",
  // Follows workflows.md §2's crash scenario for DAG steps: pgflow's
  // "complete_task is atomic with start_ready_steps" and pg-boss's
  // dependsOn "child queued in the parent's completion transaction", here
  // with the whole `work` process killed between settles.
  async (db) => {
    await using queue = await db.open({ jobs: JOBS });
    const ledger = join(db.dir, "ledger.txt");
    const flowIds: number[] = [];
    for (let n = 0; n < 12; n++) {
      const flow = queue.flow(`diamond-${n}`);
      const node = (key: string, value: number) => ({ ledger, key: `${n}:${key}`, value, ms: 40 });
      const top = flow.add(flowNode, node("top", 1), { key: "top" });
      const left = flow.add(flowNode, node("left", 2), { key: "left", after: [top] });
      const right = flow.add(flowNode, node("right", 3), { key: "right", after: [top] });
      flow.add(flowNode, node("join", 0), { key: "join", after: [left, right] });
      flowIds.push(await flow.dispatch());
    }
    const finished = async () => {
      let done = 0;
      for (const id of flowIds) {
        if ((await queue.flowStatus(id))?.state === "succeeded") done++;
      }
      return done;
    };

    // Kill a worker process each time a few more nodes have started, until half the flows are done.
    let kills = 0;
    while (kills < 6 && (await finished()) < flowIds.length / 2) {
      const startedBefore = readLedger(ledger).length;
      const worker = await startWorker(db);
      try {
        await waitUntil(() => readLedger(ledger).length >= startedBefore + 3, {
          what: "three more node starts",
          timeoutMs: DEADLINE_MS,
        });
      } finally {
        await worker[Symbol.asyncDispose](); // SIGKILL
      }
      assert.equal((await worker.status).signal, "SIGKILL");
      kills++;
    }
    const last = await startWorker(db);
    try {
      await waitUntil(async () => (await finished()) === flowIds.length || null, {
        what: "every flow succeeded",
        timeoutMs: DEADLINE_MS,
        everyMs: 100,
      });
    } finally {
      await last[Symbol.asyncDispose]();
    }

    const lines = readLedger(ledger);
    for (const [n, id] of flowIds.entries()) {
      const status = (await queue.flowStatus(id))!;
      assert.deepEqual(status.nodes.map((node) => node.state), [
        "succeeded",
        "succeeded",
        "succeeded",
        "succeeded",
      ]);
      for (const node of status.nodes) {
        const runs = lines.filter((line) => line.key === `${n}:${node.key}`);
        assert.ok(runs.length >= 1, `${n}:${node.key} ran`);
        assert.deepEqual(
          [...new Set(runs.map((line) => line.id))],
          [node.jobId],
          `${n}:${node.key} was queued once: every start was of job ${node.jobId}`,
        );
      }
      const joins = lines.filter((line) => line.key === `${n}:join`);
      for (const join of joins) assert.deepEqual(join.parents, { left: 2, right: 3 });
      const sides = lines.filter((line) => line.key === `${n}:left` || line.key === `${n}:right`);
      for (const side of sides) assert.deepEqual(side.parents, { top: 1 });
    }
    assert.ok(kills >= 1, "at least one worker was killed mid-run");
  },
);

storeTest(
  "two worker processes settle the parents of one fan-in at once: the join is queued once and starts once, with all 200 parents' outputs (workflows.md §2c 3: pg-boss › “should unblock fan-in child when sibling parents complete concurrently”; pgflow concurrent_completion.test.sql)",
  async (db) => {
    await using queue = await db.open({ jobs: JOBS });
    const ledger = join(db.dir, "ledger.txt");
    // Both workers are polling before the flow is stored, so both take parents from the start.
    const workers = await Promise.all([startWorker(db), startWorker(db)]);
    const flow = queue.flow("concurrent-fan-in");
    const parents = Array.from(
      { length: 200 },
      (_, n) => flow.add(flowNode, { ledger, key: `p${n}`, value: n, ms: 10 }, { key: `p${n}` }),
    );
    flow.add(flowNode, { ledger, key: "join", value: -1, ms: 0 }, { key: "join", after: parents });
    const id = await flow.dispatch();
    try {
      await waitUntil(async () => (await queue.flowStatus(id))?.state === "succeeded" || null, {
        what: "the flow succeeded",
        timeoutMs: DEADLINE_MS,
        everyMs: 100,
      });
    } finally {
      for (const worker of workers) await worker[Symbol.asyncDispose]();
    }
    const lines = readLedger(ledger);
    const joins = lines.filter((line) => line.key === "join");
    assert.equal(joins.length, 1, "the join started once");
    assert.equal(Object.keys(joins[0]!.parents).length, 200);
    assert.equal(joins[0]!.parents["p199"], 199);
    const parentLines = lines.filter((line) => line.key !== "join");
    assert.equal(new Set(parentLines.map((line) => line.id)).size, 200, "every parent, one job");
    assert.deepEqual(
      [...new Set(parentLines.map((line) => line.pid))].sort(),
      workers.map((worker) => worker.pid).sort(),
      "both processes ran parents",
    );
  },
);

storeTest(
  "cancelFlow() while worker processes run its nodes: no node queued at the call ever starts, the running ones are stopped, and every node ends cancelled",
  // The flow's queued nodes are cancelled in the write that marks the flow: before, they were
  // cancelled one by one after it, and the workers, whose slots the running nodes' stops freed,
  // claimed and ran the nodes the loop had not reached yet.
  async (db) => {
    await using queue = await db.open({ jobs: JOBS });
    const ledger = join(db.dir, "ledger.txt");
    const workers = await Promise.all([startWorker(db, 2), startWorker(db, 2)]);
    const flow = queue.flow("cancelled-while-running");
    const nodes = Array.from(
      { length: 300 },
      (_, n) =>
        flow.add(stoppableNode, { ledger, key: `n${n}`, ms: DEADLINE_MS }, { key: `n${n}` }),
    );
    flow.add(stoppableNode, { ledger, key: "join", ms: 0 }, { key: "join", after: nodes });
    const id = await flow.dispatch();
    let startedAtCall: string[];
    try {
      // Every slot holds a node that runs until it is stopped: none can start before the cancel.
      await waitUntil(() => readLedger(ledger).length >= 4 || null, {
        what: "four nodes running, one per slot",
        timeoutMs: DEADLINE_MS,
      });
      startedAtCall = readLedger(ledger).map((line) => line.key).sort();
      assert.equal(await queue.cancelFlow(id), true);
      await waitUntil(async () => (await queue.flowStatus(id))?.finished || null, {
        what: "the running nodes stopped",
        timeoutMs: DEADLINE_MS,
        everyMs: 100,
      });
    } finally {
      for (const worker of workers) await worker[Symbol.asyncDispose]();
    }
    const started = readLedger(ledger).map((line) => line.key).sort();
    assert.deepEqual(started, startedAtCall, "no node queued at the call started");
    const status = (await queue.flowStatus(id))!;
    assert.equal(status.state, "cancelled");
    assert.deepEqual(
      status.nodes.filter((node) => node.state !== "cancelled").map((node) => node.key),
      [],
      "the running nodes were stopped, the others never ran",
    );
  },
);
