/**
 * The contract of flows every `Store` keeps, at the store level (no queue):
 * inserting a flow, what a settle of a node moves along (a child queued
 * once, when its last parent settles, carrying the parents' outputs; the
 * descendants of a failed node skipped and the catch queued once), retry
 * resuming, `flow()` and `cancelFlow()`. Only the `Store` API is used, so
 * the same cases run against every engine.
 *
 * @module
 */
import assert from "node:assert/strict";
import type {
  CancelFlowRequest,
  ClaimedJob,
  FlowParentsRow,
  NewFlowNodeRow,
  NewFlowRow,
  Store,
} from "../../../src/stores/store.ts";
import {
  claim,
  complete,
  type ContractArea,
  type ContractTest,
  fail,
  LEASE_MS,
  newJob,
  plain,
  T0,
} from "./fixtures.ts";

/** Far enough ahead that every lease taken before has expired. */
const LATER = T0 + 1_000 * LEASE_MS;

/** A node `key` (job name `key` in "default") after `parents` (positions). */
function node(key: string, parents: number[] = [], continueOnFailure = false): NewFlowNodeRow {
  const row = newJob({ name: key, payload: `{"node":"${key}"}` });
  return {
    key,
    job: { ...row, delayMs: 0, retryForMs: null },
    parents,
    continueOnFailure,
  };
}

/** A flow of `nodes` with a catch job "catch" in queue "cb". */
function newFlow(...nodes: NewFlowNodeRow[]): NewFlowRow {
  return {
    name: "contract-flow",
    createdAt: T0,
    nodes,
    onFailure: [{
      queue: "cb",
      name: "catch",
      payload: "null",
      priority: 0,
      delayMs: 0,
      retryForMs: null,
    }],
  };
}

let lastToken = 1_000;
/** Claims every due job of `queues` at `now` with a fresh token. */
function take(store: Store, now = T0, queues = ["default"]): Promise<ClaimedJob[]> {
  return claim(store, { queues, now, limit: 100, token: ++lastToken });
}

/** A cancel of flow `id` at T0 whose jobs are not kept. */
function cancelOf(id: number): CancelFlowRequest {
  return { id, reason: "flow cancelled", now: T0, keepUntil: T0, keepUntilByName: {} };
}

/** Node key → state. */
async function states(store: Store, id: number): Promise<Record<string, string>> {
  const row = await store.flow(id);
  return Object.fromEntries(row!.nodes.map((node) => [node.key, node.state]));
}

/** Completes `job` with `output`. */
async function succeed(store: Store, job: ClaimedJob, output: string | null, at = T0) {
  const settled = await store.settle([{
    kind: "complete",
    id: job.id,
    token: job.token,
    at,
    output,
  }]);
  assert.deepEqual(settled.applied, [true]);
}

function register(test: ContractTest): void {
  test("insertFlow() queues the nodes without parents only; flow() shows every node with its parents", async (store) => {
    const { id, jobIds } = await store.insertFlow(
      newFlow(node("a"), node("b"), node("c", [0, 1]), node("d", [2])),
    );
    assert.equal(jobIds.length, 2);
    const claimed = await take(store);
    assert.deepEqual(claimed.map((job) => job.name).sort(), ["a", "b"]);
    assert.deepEqual(claimed.map((job) => job.flowParents), [undefined, undefined]);
    const row = await store.flow(id);
    assert.equal(row?.name, "contract-flow");
    assert.equal(row?.cancelledAt, null);
    assert.deepEqual(
      row?.nodes.map((n) => [n.key, n.name, n.state, n.parents, n.error]),
      [
        ["a", "a", "running", [], null],
        ["b", "b", "running", [], null],
        ["c", "c", "waiting", ["a", "b"], null],
        ["d", "d", "waiting", ["c"], null],
      ],
    );
    assert.deepEqual(row?.nodes.map((n) => n.jobId).slice(2), [null, null]);
    assert.deepEqual([...jobIds].sort(), claimed.map((job) => job.id).sort());
    assert.equal(await store.flow(id + 1_000), null);
  });

  test("flows() lists flows newest first, paged, each with its nodes", async (store) => {
    const first = await store.insertFlow(newFlow(node("a")));
    const second = await store.insertFlow(newFlow(node("b"), node("c", [0])));
    const all = await store.flows({ limit: 10, offset: 0 });
    assert.deepEqual(all.map((row) => row.id), [second.id, first.id]);
    assert.deepEqual(all[0]?.nodes.map((n) => [n.key, n.state]), [["b", "pending"], [
      "c",
      "waiting",
    ]]);
    assert.deepEqual((await store.flows({ limit: 1, offset: 1 })).map((row) => row.id), [first.id]);
    assert.deepEqual(await store.flows({ limit: 10, offset: 2 }), []);
  });

  test("pruneFlows(before) deletes the flows that ended (no node waiting, queued or running) strictly before it, counting from their end, and no running one", async (store) => {
    const ran = 10_000; // how long the long flows ran after their dispatch at T0
    const done = await store.insertFlow(newFlow(node("a"), node("b", [0])));
    const long = await store.insertFlow(newFlow(node("long")));
    const retried = await store.insertFlow(newFlow(node("again")));
    const cancelled = await store.insertFlow(newFlow(node("stop")));
    const byName = new Map((await take(store)).map((job) => [job.name, job]));
    const queued = node("queued");
    const running = await store.insertFlow(
      newFlow({ ...queued, job: { ...queued.job, queue: "q" } }),
    );
    const a = byName.get("a")!;
    assert.deepEqual((await store.settle([fail(a.id, a.token, T0)])).applied, [true]);
    const first = byName.get("again")!;
    assert.deepEqual((await store.settle([fail(first.id, first.token, T0)])).applied, [true]);
    assert.deepEqual(await store.retry([first.id], T0 + 1), [first.id]);
    const [again] = await take(store, T0 + 1);
    assert.equal(again?.name, "again");
    const stop = byName.get("stop")!;
    assert.deepEqual(await store.cancelFlow(cancelOf(cancelled.id)), {
      cancelled: [],
      cancelling: [stop.id],
    });

    assert.equal(await store.pruneFlows(T0 + 1, T0 + 1), 1, "done ended at T0");
    assert.equal(await store.flow(done.id), null);
    const long1 = byName.get("long")!;
    assert.deepEqual(
      (await store.settle([
        complete(long1.id, long1.token, T0 + ran),
        complete(again!.id, again!.token, T0 + ran),
        fail(stop.id, stop.token, T0 + ran),
      ])).applied,
      [true, true, true],
    );
    for (const { id } of [long, retried, cancelled]) {
      assert.deepEqual(
        (await store.flow(id))?.nodes.map((n) => n.state).filter((state) =>
          state === "waiting" || state === "pending" || state === "running"
        ),
        [],
        "it ended",
      );
    }
    assert.equal(await store.pruneFlows(T0 + ran, T0 + ran), 0, "they ended at T0 + ran");
    assert.equal(await store.pruneFlows(T0 + ran + 1, T0 + ran + 1), 3);
    for (const { id } of [long, retried, cancelled]) assert.equal(await store.flow(id), null);
    assert.deepEqual((await store.flows({ limit: 10, offset: 0 })).map((row) => row.id), [
      running.id,
    ]);
    assert.equal(await store.pruneFlows(LATER, LATER), 0, "a node still queued");
  });

  test(
    "pruneFlows() gives a flow that code before schema step 29 ended without an end its own now, keeps it for the retention from then, and clears the end of an open one",
    async (store) => {
      const ended = await store.insertFlow(newFlow(node("a")));
      const open = await store.insertFlow(newFlow(node("b")));
      const a = (await take(store)).find((job) => job.name === "a")!;
      await succeed(store, a, null, T0);
      // As code before step 29 leaves them: an end never written, or one written before a retry.
      await store.transaction(async (tx) => {
        await tx.query(`UPDATE flows SET ended_at = NULL WHERE id = ${ended.id}`);
        await tx.query(`UPDATE flows SET ended_at = ${T0} WHERE id = ${open.id}`);
      });
      const endOf = async (id: number) => {
        const [row] = await store.transaction((tx) =>
          tx.query<{ ended_at: number | null }>(`SELECT ended_at FROM flows WHERE id = ${id}`)
        );
        return row?.ended_at === null || row === undefined ? null : Number(row.ended_at);
      };

      const seen = T0 + 60_000;
      assert.equal(await store.pruneFlows(seen, seen), 0, "an end never written is not before");
      assert.equal(await endOf(ended.id), seen);
      assert.equal(await endOf(open.id), null, "a node still queued");
      assert.equal(await store.pruneFlows(seen + 1, seen + 1), 1);
      assert.equal(await store.flow(ended.id), null);
      assert.notEqual(await store.flow(open.id), null);
    },
    { sql: true },
  );

  test(
    "a flow that code before schema step 29 opened again by a retry, keeping its end, counts its age from when it ends again",
    async (store) => {
      const ran = 10_000; // how long the retried node ran
      const { id } = await store.insertFlow(newFlow(node("a")));
      const [a] = await take(store);
      assert.deepEqual((await store.settle([fail(a!.id, a!.token, T0)])).applied, [true]);
      assert.deepEqual(await store.retry([a!.id], T0), [a!.id]);
      // As a retry by code before step 29 leaves it: the end written before the retry kept.
      await store.transaction((tx) =>
        tx.query(`UPDATE flows SET ended_at = ${T0} WHERE id = ${id}`)
      );
      const [again] = await take(store);
      await succeed(store, again!, null, T0 + ran);

      assert.equal(await store.pruneFlows(T0 + ran, T0 + ran), 0, "it ended at T0 + ran");
      assert.notEqual(await store.flow(id), null);
      assert.equal(await store.pruneFlows(T0 + ran + 1, T0 + ran + 1), 1);
    },
    { sql: true },
  );

  test("the last parent's settle queues the child once, carrying each parent's output by key", async (store) => {
    const { id } = await store.insertFlow(newFlow(node("a"), node("b"), node("join", [0, 1])));
    const [a, b] = (await take(store)).sort((x, y) => x.name.localeCompare(y.name));
    await succeed(store, a!, "1");
    assert.deepEqual(await take(store, T0), [], "the join waits for b");
    await succeed(store, b!, null);
    // A second settle of the same attempt applies nothing and queues nothing.
    assert.deepEqual((await store.settle([complete(b!.id, b!.token)])).applied, [false]);
    const [join, ...more] = await take(store, LATER);
    assert.deepEqual(more, []);
    assert.equal(join?.name, "join");
    const carried = JSON.parse(join!.flowParents!) as FlowParentsRow;
    assert.deepEqual(carried, {
      outputs: { a: { name: "a", output: "1" }, b: { name: "b", output: null } },
      errors: {},
    });
    assert.equal((await store.flow(id))?.nodes[2]?.jobId, join!.id);
  });

  test("a child carries its parents' outputs and errors in the order of the parents in the flow, whatever their keys", async (store) => {
    await store.insertFlow(
      newFlow(
        node("z"),
        node("x"),
        node("a"),
        node("b"),
        node("m"),
        node("join", [4, 3, 2, 1, 0], true),
      ),
    );
    for (const parent of await take(store)) {
      if (parent.name === "x" || parent.name === "b") {
        assert.deepEqual((await store.settle([fail(parent.id, parent.token, T0)])).applied, [true]);
      } else {
        await succeed(store, parent, "1");
      }
    }
    const [join] = await take(store, LATER);
    assert.equal(join?.name, "join");
    const carried = JSON.parse(join!.flowParents!) as FlowParentsRow;
    assert.deepEqual(Object.keys(carried.outputs), ["z", "a", "m"]);
    assert.deepEqual(Object.keys(carried.errors), ["x", "b"]);
  });

  test("a node failing for good skips its descendants and queues the catch once; retry resumes them", async (store) => {
    const { id } = await store.insertFlow(
      newFlow(node("a"), node("b"), node("c", [0]), node("d", [1]), node("e", [2, 3])),
    );
    const [a, b] = (await take(store)).sort((x, y) => x.name.localeCompare(y.name));
    assert.deepEqual((await store.settle([fail(a!.id, a!.token, T0)])).applied, [true]);
    assert.deepEqual(await states(store, id), {
      a: "failed",
      b: "running",
      c: "skipped",
      d: "waiting",
      e: "skipped",
    });
    assert.equal((await store.flow(id))?.nodes[0]?.error, "Error: boom");
    await succeed(store, b!, null);
    const [d] = await take(store, LATER);
    assert.equal(d?.name, "d");
    assert.deepEqual((await store.settle([fail(d!.id, d!.token, T0)])).applied, [true]);
    const catches = await take(store, LATER, ["cb"]);
    assert.deepEqual(catches.map((job) => job.name), ["catch"], "the catch is queued once");

    assert.deepEqual(await store.retry([a!.id], LATER), [a!.id]);
    assert.deepEqual(await states(store, id), {
      a: "pending",
      b: "succeeded",
      c: "waiting",
      d: "failed",
      e: "skipped",
    });
    const [again] = await take(store, LATER);
    await succeed(store, again!, "2", LATER);
    const [c] = await take(store, LATER);
    assert.equal(c?.name, "c");
    assert.deepEqual(JSON.parse(c!.flowParents!), {
      outputs: { a: { name: "a", output: "2" } },
      errors: {},
    });
  });

  test("a child with continueOnFailure is queued with the failed parent's error", async (store) => {
    const { id } = await store.insertFlow(newFlow(node("a"), node("b"), node("c", [0, 1], true)));
    const [a, b] = (await take(store)).sort((x, y) => x.name.localeCompare(y.name));
    await succeed(store, a!, "3");
    assert.deepEqual((await store.settle([fail(b!.id, b!.token, T0)])).applied, [true]);
    const [c] = await take(store, LATER);
    assert.equal(c?.name, "c");
    assert.deepEqual(JSON.parse(c!.flowParents!), {
      outputs: { a: { name: "a", output: "3" } },
      errors: { b: "Error: boom" },
    });
    assert.equal((await states(store, id))["c"], "running");
  });

  test("cancelFlow() cancels the waiting nodes, drops the catch and asks the running node to stop; a node ending later moves nothing (workflows.md §2c 17: pgflow no_mutations_on_failed_run.test.sql)", async (store) => {
    const { id, jobIds } = await store.insertFlow(newFlow(node("a"), node("b", [0])));
    const [a] = await take(store);
    const cancelled = await store.cancelFlow(cancelOf(id));
    assert.deepEqual(cancelled, { cancelled: [], cancelling: jobIds });
    assert.deepEqual(await states(store, id), { a: "running", b: "cancelled" });
    assert.notEqual((await store.flow(id))?.cancelledAt, null);
    // The running node that ends after the cancel queues no child; a fail queues no catch.
    assert.deepEqual((await store.settle([fail(a!.id, a!.token, T0)])).applied, [true]);
    assert.deepEqual(await take(store, LATER, ["default", "cb"]), []);
    assert.equal(await store.cancelFlow(cancelOf(id + 1_000)), null);
  });

  test("cancelFlow() asks a running node to stop, as cancel() asks a job: a handler that returns before its worker sees the ask leaves its node succeeded and queues no child", async (store) => {
    const { id, jobIds } = await store.insertFlow(newFlow(node("a"), node("b", [0])));
    const [a] = await take(store);
    assert.deepEqual(await store.cancelFlow(cancelOf(id)), { cancelled: [], cancelling: jobIds });
    // The worker settles the handler's return, not yet having seen the ask.
    await succeed(store, a!, "7");
    const row = (await store.flow(id))!;
    assert.deepEqual(row.nodes.map((n) => [n.key, n.state, n.error]), [
      ["a", "succeeded", null],
      ["b", "cancelled", null],
    ]);
    assert.notEqual(row.cancelledAt, null);
    assert.deepEqual(await take(store, LATER, ["default", "cb"]), [], "no child, no catch");
    assert.deepEqual(await store.cancelsAsked([{ id: a!.id, token: a!.token }]), []);
  });

  test("cancelFlow() cancels its queued nodes' jobs in its own write, one claimed ahead as a queued one, and asks its running one to stop: a claim after it takes none of its nodes", async (store) => {
    const { id } = await store.insertFlow(
      newFlow(node("run"), node("ahead"), node("q1"), node("q2"), node("join", [0, 1, 2, 3])),
    );
    const [run, ahead, ...more] = await claim(store, {
      limit: 2,
      aheadFrom: 1,
      token: ++lastToken,
    });
    assert.deepEqual([run?.name, ahead?.name, ahead?.ahead, more], ["run", "ahead", true, []]);
    assert.deepEqual(await states(store, id), {
      run: "running",
      ahead: "pending", // claimed ahead, not started
      q1: "pending",
      q2: "pending",
      join: "waiting",
    });
    const q = (await store.flow(id))!.nodes.slice(2, 4).map((n) => n.jobId!);

    const done = await store.cancelFlow({
      ...cancelOf(id),
      keepUntil: T0 + 60_000,
      keepUntilByName: { q2: T0 }, // a job type that keeps no finished job
    });
    assert.deepEqual(done, { cancelled: [ahead!.id, ...q], cancelling: [run!.id] });
    assert.deepEqual(await take(store, T0 + 1), [], "no claim takes a node of the flow");
    assert.deepEqual(plain(await store.cancelsAsked([{ id: run!.id, token: run!.token }])), [
      { id: run!.id, token: run!.token, reason: "flow cancelled" },
    ]);
    const starts = { leases: [{ id: ahead!.id, token: ahead!.token }], leaseMs: LEASE_MS, now: T0 };
    assert.deepEqual((await store.settle([], undefined, { starts })).started, [], "start refused");
    const row = (await store.flow(id))!;
    assert.deepEqual(row.nodes.map((n) => [n.key, n.state, n.error]), [
      ["run", "running", null],
      ["ahead", "cancelled", "flow cancelled"],
      ["q1", "cancelled", "flow cancelled"],
      ["q2", "cancelled", "flow cancelled"],
      ["join", "cancelled", null],
    ]);
    for (const jobId of [ahead!.id, q[0]!]) {
      const kept = await store.result(jobId, T0);
      assert.deepEqual([kept?.state, kept?.error], ["cancelled", "flow cancelled"]);
    }
    assert.equal(await store.result(q[1]!, T0), null, "kept as its type says: not at all");
    // The running node's stop settles it as cancelled; nothing more is queued.
    const stopped = await store.settle([{
      kind: "cancel",
      id: run!.id,
      token: run!.token,
      at: T0,
      reason: "flow cancelled",
      keepUntil: T0,
    }]);
    assert.deepEqual(stopped.applied, [true]);
    assert.equal((await states(store, id))["run"], "cancelled");
    assert.deepEqual(await take(store, LATER, ["default", "cb"]), []);
  });

  test("cancelFlow() of a flow that has ended gives null and writes nothing: the flow keeps its state", async (store) => {
    const { id } = await store.insertFlow(newFlow(node("a"), node("b", [0])));
    await succeed(store, (await take(store))[0]!, "1", T0);
    await succeed(store, (await take(store))[0]!, "2", T0);
    assert.equal(await store.cancelFlow(cancelOf(id)), null);
    assert.equal((await store.flow(id))?.cancelledAt, null, "not marked cancelled");
    assert.deepEqual(await states(store, id), { a: "succeeded", b: "succeeded" });
  });

  test("cancelFlow() racing claims that run its nodes to their end: it marks the flow only while a node is open at its write, and no claim after it takes a node", async (store) => {
    const size = 6;
    const seen = { ended: 0, cancelled: 0 };
    // Rounds until the cancel has come both before the flow's end and after it (the claims race
    // it to the last node), or 100 rounds.
    for (let round = 0; round < 100 && (seen.ended === 0 || seen.cancelled === 0); round++) {
      const { id } = await store.insertFlow(
        newFlow(...Array.from({ length: size }, (_, n) => node(`n${n}`))),
      );
      let completed = 0;
      let stop = false;
      let failure: unknown = null;
      const claimer = async () => {
        while (!stop && failure === null) {
          const [job] = await claim(store, { limit: 1, token: ++lastToken });
          if (job === undefined) {
            await new Promise((resolve) => setTimeout(resolve, 1));
            continue;
          }
          await store.settle([complete(job.id, job.token, T0)]);
          completed++;
          await new Promise((resolve) => setTimeout(resolve, 0)); // the cancel's turn too
        }
      };
      const claimers = Array.from({ length: 4 }, () => claimer().catch((e) => failure = e));
      // Fire at once, while the last two nodes run, as the last one does, or once every node ended.
      const fireAt = [0, size - 2, size - 1, size][round % 4]!;
      while (completed < fireAt && failure === null) await new Promise((r) => setTimeout(r, 1));
      if (failure !== null) throw failure;
      const reply = await store.cancelFlow(cancelOf(id));
      const claimedAfter = await take(store, T0);
      stop = true;
      await Promise.all(claimers);
      const row = (await store.flow(id))!;
      assert.deepEqual(claimedAfter, [], "no claim after the cancel takes a node");
      // Every node had ended before the call: nothing open, nothing to mark.
      if (fireAt === size) assert.equal(reply, null, `round ${round}: the flow had ended`);
      if (reply === null) {
        seen.ended++;
        assert.equal(row.cancelledAt, null, `round ${round}: an ended flow is not marked`);
        assert.ok(row.nodes.every((n) => n.state === "succeeded"), `round ${round}: it ended`);
      } else {
        seen.cancelled++;
        assert.notEqual(row.cancelledAt, null);
        // A node open at its write was cancelled, or asked to stop and may still have succeeded
        // (as a settle that held its row then, on an engine that locks rows, left it).
        for (const n of row.nodes) assert.ok(["succeeded", "cancelled"].includes(n.state));
      }
    }
    assert.ok(seen.ended > 0 && seen.cancelled > 0, `both outcomes seen: ${JSON.stringify(seen)}`);
  });
}

/** The flows area of the contract. */
export const flows: ContractArea = {
  covers: ["insertFlow", "flow", "flows", "pruneFlows", "cancelFlow"],
  register,
};
