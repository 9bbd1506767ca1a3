/**
 * Flows: nodes wait for their parents and read their outputs as
 * `ctx.parents`; a node that fails for good skips its descendants and runs
 * the catch once; `continueOnFailure` lets a child run with the error;
 * retry resumes, cancelFlow cancels; the graph is checked before anything
 * is stored. Every test runs on every store; the scenarios ported from the
 * peers' test suites name their source (see
 * ../shared/research/workflows.md section 2).
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, PermanentError, Queue } from "../../mod.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { storeTest } from "../_stores.ts";

/** The jobs of one test: `log` records what ran with which parents. */
function flowJobs() {
  const log: string[] = [];
  const seen: Record<string, { parents: unknown; parentErrors: unknown }> = {};
  const failing = new Set<string>();
  /** Returns `value`, after recording the parents it saw under `tag`. */
  const node = defineJob({
    name: "node",
    schema: z.object({ tag: z.string(), value: z.number().optional() }),
    output: z.number().nullable(),
    handle({ tag, value }, ctx) {
      seen[tag] = { parents: ctx.parents, parentErrors: ctx.parentErrors };
      if (failing.has(tag)) {
        log.push(`${tag} failed`);
        throw new PermanentError(`${tag} broke`);
      }
      log.push(tag);
      return value ?? null;
    },
  });
  /** Adds up its parents' outputs. */
  const sum = defineJob({
    name: "sum",
    schema: z.object({ tag: z.string() }),
    output: z.number(),
    handle({ tag }, ctx) {
      seen[tag] = { parents: ctx.parents, parentErrors: ctx.parentErrors };
      log.push(tag);
      return Object.values(ctx.parents).reduce((total: number, value) => total + Number(value), 0);
    },
  });
  const alert = defineJob({
    name: "alert",
    schema: z.object({ day: z.string() }),
    handle({ day }) {
      log.push(`alert ${day}`);
    },
  });
  /** Returns `value` and keeps no finished row, so its output lives only in its flow. */
  const forgetful = defineJob({
    name: "forgetful",
    schema: z.object({ value: z.number() }),
    output: z.number(),
    keepFinishedMs: 0,
    handle: ({ value }) => value,
  });
  return {
    log,
    seen,
    failing,
    node,
    sum,
    alert,
    forgetful,
    jobs: [node, sum, alert, forgetful],
  };
}

storeTest(
  "a diamond runs its root, then both sides, then the join with both outputs keyed by parent key (workflows.md §2c 1 and 4: pg-boss flowTest.ts › “should block a job until its parent completes”; Hatchet test_dag.py › “test_run”; BullMQ › “should process children before the parent”)",
  async (db) => {
    const t = flowJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const flow = queue.flow("diamond");
    const a = flow.add(t.node, { tag: "a", value: 1 }, { key: "a" });
    const b = flow.add(t.node, { tag: "b", value: 2 }, { key: "b", after: [a] });
    const c = flow.add(t.node, { tag: "c", value: 3 }, { key: "c", after: [a] });
    flow.add(t.sum, { tag: "d" }, { after: [b, c] });
    const id = await flow.dispatch();

    const before = await queue.flowStatus(id);
    assert.equal(before?.state, "running");
    assert.deepEqual(before?.nodes.map((node) => [node.key, node.state, node.parents]), [
      ["a", "pending", []],
      ["b", "waiting", ["a"]],
      ["c", "waiting", ["a"]],
      ["sum", "waiting", ["b", "c"]],
    ]);
    assert.equal(before?.nodes[1]?.jobId, null);

    await workUntilEmpty(queue, { executor: "isolate", concurrency: 2 });
    assert.equal(t.log[0], "a");
    assert.deepEqual(t.log.slice(1, 3).sort(), ["b", "c"]);
    assert.equal(t.log[3], "d");
    assert.deepEqual(t.seen["b"]?.parents, { a: 1 });
    assert.deepEqual(t.seen["d"]?.parents, { b: 2, c: 3 });
    const after = await queue.flowStatus(id);
    assert.equal(after?.state, "succeeded");
    assert.equal(after?.finished, true);
    assert.ok(after?.nodes.every((node) => node.state === "succeeded" && node.jobId !== null));
    assert.equal((await queue.result(after!.nodes[3]!.jobId!))?.output, 5);
  },
);

storeTest(
  "a fan-out of 1,000 children with one fan-in: the join runs once, after the last child, with every child's output (workflows.md §2c 2: pg-boss flowTest.ts › “should support fan-in: child waits for multiple parents”)",
  async (db) => {
    const t = flowJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const flow = queue.flow("fan");
    const root = flow.add(t.node, { tag: "root", value: 0 }, { key: "root" });
    const children = Array.from(
      { length: 1_000 },
      (_, n) => flow.add(t.node, { tag: `c${n}`, value: n }, { key: `c${n}`, after: [root] }),
    );
    flow.add(t.sum, { tag: "join" }, { key: "join", after: children });
    const id = await flow.dispatch();
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 8, timeoutMs: 120_000 });
    assert.equal(t.log.filter((tag) => tag === "join").length, 1);
    assert.equal(t.log.at(-1), "join");
    assert.equal(Object.keys(t.seen["join"]!.parents as object).length, 1_000);
    const status = await queue.flowStatus(id);
    assert.equal(status?.state, "succeeded");
    assert.equal((await queue.result(status!.nodes.at(-1)!.jobId!))?.output, (999 * 1_000) / 2);
  },
);

storeTest(
  "a node failing for good skips its descendants, leaves its siblings running, and runs the catch once (workflows.md §2c 5 and 13: pg-boss › “should keep child blocked when parent fails permanently”, where we skip instead; BullMQ › “should not process parent if child fails”; pgflow when_exhausted_skip_cascade_skips_dependents.test.sql)",
  async (db) => {
    const t = flowJobs();
    t.failing.add("b");
    t.failing.add("c");
    await using queue = await db.open({ jobs: t.jobs });
    const flow = queue.flow("broken");
    const a = flow.add(t.node, { tag: "a" }, { key: "a" });
    const b = flow.add(t.node, { tag: "b" }, { key: "b", after: [a] });
    flow.add(t.node, { tag: "c" }, { key: "c", after: [a] });
    const side = flow.add(t.node, { tag: "side" }, { key: "side", after: [a] });
    const d = flow.add(t.node, { tag: "d" }, { key: "d", after: [b, side] });
    flow.add(t.node, { tag: "e" }, { key: "e", after: [d] });
    flow.add(t.node, { tag: "f" }, { key: "f", after: [side] });
    flow.catch(t.alert, { day: "monday" });
    const id = await flow.dispatch();
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 1 });

    assert.equal(t.log.filter((line) => line.startsWith("alert")).length, 1);
    assert.ok(!t.log.includes("d") && !t.log.includes("e"));
    assert.ok(t.log.includes("side") && t.log.includes("f"));
    const status = await queue.flowStatus(id);
    assert.equal(status?.state, "failed");
    assert.equal(status?.finished, true);
    assert.deepEqual(
      Object.fromEntries(status!.nodes.map((node) => [node.key, node.state])),
      {
        a: "succeeded",
        b: "failed",
        c: "failed",
        side: "succeeded",
        d: "skipped",
        e: "skipped",
        f: "succeeded",
      },
    );
    assert.match(status!.nodes[1]!.error ?? "", /b broke/);
    assert.equal(status!.nodes[4]!.jobId, null);
  },
);

storeTest(
  "continueOnFailure runs the child with the failed parent's error in ctx.parentErrors and the others' outputs in ctx.parents (workflows.md §2c 14 and 12: BullMQ › “when continueParentOnFailure … should start processing parent after a child fails”; pgflow skipped_deps_excluded_from_input.test.sql)",
  async (db) => {
    const t = flowJobs();
    t.failing.add("bad");
    await using queue = await db.open({ jobs: t.jobs });
    const flow = queue.flow("lenient");
    const good = flow.add(t.node, { tag: "good", value: 7 }, { key: "good" });
    const bad = flow.add(t.node, { tag: "bad" }, { key: "bad" });
    flow.add(t.node, { tag: "after" }, {
      key: "after",
      after: [good, bad],
      continueOnFailure: true,
    });
    const id = await flow.dispatch();
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 1 });

    assert.deepEqual(t.seen["after"]?.parents, { good: 7 });
    const errors = t.seen["after"]?.parentErrors as Record<string, string>;
    assert.deepEqual(Object.keys(errors), ["bad"]);
    assert.match(errors["bad"]!, /bad broke/);
    const status = await queue.flowStatus(id);
    assert.equal(status?.nodes[2]?.state, "succeeded");
    assert.equal(status?.state, "failed"); // a node failed, though every node that could run did
  },
);

storeTest(
  "retry of the failed node resumes the flow: its skipped descendants wait again and run with its output, the catch having run once (workflows.md §2c 6: pg-boss › “should unblock child after a blocking parent fails and is retried”; BullMQ › “.retry › when retrying a failed child”)",
  async (db) => {
    const t = flowJobs();
    t.failing.add("b");
    await using queue = await db.open({ jobs: t.jobs });
    const flow = queue.flow("resumed");
    const a = flow.add(t.node, { tag: "a", value: 1 }, { key: "a" });
    const b = flow.add(t.node, { tag: "b", value: 2 }, { key: "b", after: [a] });
    const c = flow.add(t.node, { tag: "c", value: 3 }, { key: "c", after: [b] });
    flow.add(t.sum, { tag: "d" }, { key: "d", after: [a, c] });
    flow.catch(t.alert, { day: "tuesday" });
    const id = await flow.dispatch();
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 1 });
    const failed = await queue.flowStatus(id);
    assert.deepEqual(failed?.nodes.map((node) => node.state), [
      "succeeded",
      "failed",
      "skipped",
      "skipped",
    ]);

    t.failing.delete("b");
    assert.equal(await queue.retry(failed!.nodes[1]!.jobId!), true);
    const resumed = await queue.flowStatus(id);
    assert.deepEqual(resumed?.nodes.map((node) => node.state), [
      "succeeded",
      "pending",
      "waiting",
      "waiting",
    ]);
    assert.equal(resumed?.state, "running");
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 1 });

    assert.deepEqual(t.log, ["a", "b failed", "alert tuesday", "b", "c", "d"]);
    assert.deepEqual(t.seen["d"]?.parents, { a: 1, c: 3 });
    assert.equal((await queue.flowStatus(id))?.state, "succeeded");
  },
);

storeTest(
  "cancelFlow cancels every node not finished and the catch never runs (workflows.md §2b “Cancel”)",
  async (db) => {
    const t = flowJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const flow = queue.flow("stopped");
    const a = flow.add(t.node, { tag: "a" }, { key: "a" });
    const b = flow.add(t.node, { tag: "b" }, { key: "b" });
    flow.add(t.node, { tag: "c" }, { key: "c", after: [a, b] });
    flow.catch(t.alert, { day: "wednesday" });
    const id = await flow.dispatch();
    assert.equal(await queue.cancelFlow(id), true);
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 1 });

    assert.deepEqual(t.log, []);
    const status = await queue.flowStatus(id);
    assert.equal(status?.state, "cancelled");
    assert.deepEqual(status?.nodes.map((node) => node.state), [
      "cancelled",
      "cancelled",
      "cancelled",
    ]);
    assert.equal(await queue.cancelFlow(id), false);
    assert.equal(await queue.cancelFlow(987_654), false);
    assert.equal(await queue.flowStatus(987_654), null);
  },
);

storeTest(
  "cancelling one node's job the normal way skips its descendants and runs the catch once (workflows.md §2c 7: pg-boss › “should keep child blocked when parent is cancelled”, where we skip instead)",
  async (db) => {
    const t = flowJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const flow = queue.flow("one-cancelled");
    const a = flow.add(t.node, { tag: "a" }, { key: "a" });
    flow.add(t.node, { tag: "b" }, { key: "b", after: [a] });
    flow.catch(t.alert, { day: "thursday" });
    const id = await flow.dispatch();
    const root = (await queue.flowStatus(id))!.nodes[0]!.jobId!;
    assert.equal(await queue.cancel(root), "cancelled");
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 1 });
    assert.deepEqual(t.log, ["alert thursday"]);
    assert.deepEqual((await queue.flowStatus(id))?.nodes.map((node) => node.state), [
      "cancelled",
      "skipped",
    ]);
  },
);

storeTest(
  "dispatch refuses a cycle naming it, an unknown parent, an empty flow and a payload failing its schema, storing nothing (workflows.md §2c 9 and 10: pg-boss › “should reject invalid flow input”, › “should roll back flow when job creation fails”)",
  async (db) => {
    const t = flowJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const cyclic = queue.flow("cyclic");
    cyclic.add(t.node, { tag: "x" }, { key: "x", after: ["z"] });
    cyclic.add(t.node, { tag: "y" }, { key: "y", after: ["x"] });
    cyclic.add(t.node, { tag: "z" }, { key: "z", after: ["y"] });
    await assert.rejects(cyclic.dispatch(), /cycle: x → z → y → x/);

    const unknown = queue.flow("unknown");
    unknown.add(t.node, { tag: "x" }, { key: "x", after: ["nobody"] });
    await assert.rejects(
      unknown.dispatch(),
      /node "x" waits for "nobody", which is not in the flow/,
    );

    await assert.rejects(queue.flow("empty").dispatch(), /empty flow "empty"/);

    const invalid = queue.flow("invalid");
    const ok = invalid.add(t.node, { tag: "ok" }, { key: "ok" });
    // @ts-expect-error: the payload fails the schema on purpose
    invalid.add(t.node, { tag: 5 }, { key: "bad", after: [ok] });
    await assert.rejects(invalid.dispatch(), /node "bad" of flow "invalid"/);

    const duplicate = queue.flow("duplicate");
    duplicate.add(t.node, { tag: "a" });
    assert.throws(() => duplicate.add(t.node, { tag: "b" }), /key "node" is taken/);
    const other = queue.flow("other").add(t.node, { tag: "o" });
    assert.throws(
      () => duplicate.add(t.node, { tag: "c" }, { key: "c", after: [other] }),
      /parent "node" is not a node of this flow/,
    );
    for (const key of ["", "\ud800", "a\0b", "k".repeat(256)]) {
      assert.throws(
        () => duplicate.add(t.node, { tag: "k" }, { key }),
        /to flow "duplicate": key must be a string of 1 to 255 characters, without NUL or lone surrogates: got /,
      );
    }
    assert.throws(
      // @ts-expect-error: a string where the option takes a boolean, as plain JavaScript may pass
      () => duplicate.add(t.node, { tag: "d" }, { key: "d", continueOnFailure: "yes" }),
      /"d" to flow "duplicate": continueOnFailure must be true or false: got "yes"/,
    );

    assert.equal((await queue.counts()).default?.pending ?? 0, 0);
    assert.equal(await queue.flowStatus(1), null);
  },
);

storeTest("a flow dispatched in a transaction is stored with it, or not at all", async (db) => {
  const t = flowJobs();
  await using queue = await db.open({ jobs: t.jobs });
  await assert.rejects(
    queue.transaction(async (tx) => {
      const flow = tx.flow("rolled-back");
      flow.add(t.node, { tag: "a" });
      await flow.dispatch();
      throw new Error("undo");
    }),
    /undo/,
  );
  assert.equal((await queue.counts()).default?.pending ?? 0, 0);
  const id = await queue.transaction(async (tx) => {
    const flow = tx.flow("kept");
    const a = flow.add(t.node, { tag: "a", value: 4 }, { key: "a" });
    flow.add(t.node, { tag: "b" }, { key: "b", after: [a] });
    return await flow.dispatch();
  });
  await workUntilEmpty(queue, { executor: "isolate", concurrency: 1 });
  assert.deepEqual(t.seen["b"]?.parents, { a: 4 });
  assert.equal((await queue.flowStatus(id))?.state, "succeeded");
});

storeTest(
  "a child gets its parents' outputs though the parents keep no finished row (workflows.md §2c 18: BullMQ › “when removeOnComplete is true in children › keeps children results in parent”)",
  async (db) => {
    const t = flowJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const flow = queue.flow("no-history");
    const a = flow.add(t.forgetful, { value: 5 }, { key: "a" });
    const b = flow.add(t.forgetful, { value: 6 }, { key: "b" });
    flow.add(t.sum, { tag: "total" }, { after: [a, b] });
    const id = await flow.dispatch();
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 2 });
    const status = (await queue.flowStatus(id))!;
    assert.equal(await queue.result(status.nodes[0]!.jobId!), null, "no finished row kept");
    assert.deepEqual(t.seen["total"]?.parents, { a: 5, b: 6 });
    assert.equal(status.state, "succeeded");
  },
);

storeTest(
  "a child's delayMs counts from its last parent's settle: it is queued delayed, not waiting (workflows.md §2c 11: pg-boss › “should honor startAfter on a dependent job”)",
  async (db) => {
    const t = flowJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const flow = queue.flow("delayed-child");
    const a = flow.add(t.node, { tag: "a" }, { key: "a" });
    flow.add(t.node, { tag: "b" }, { key: "b", after: [a], delayMs: 3_600_000 });
    const id = await flow.dispatch();
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 1 });
    assert.deepEqual(t.log, ["a"]);
    const status = (await queue.flowStatus(id))!;
    assert.equal(status.nodes[1]?.state, "pending");
    assert.notEqual(status.nodes[1]?.jobId, null);
    assert.equal((await queue.counts()).default?.delayed, 1);
  },
);

storeTest(
  "nodes on different queues: a worker of the child's queue claims nothing until the parent, on another queue, has run (workflows.md §2c 8: pg-boss › “should support cross-queue dependencies”)",
  async (db) => {
    const t = flowJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const flow = queue.flow("two-queues");
    const a = flow.add(t.node, { tag: "a", value: 1 }, { key: "a", queue: "q1" });
    flow.add(t.node, { tag: "b" }, { key: "b", after: [a], queue: "q2" });
    await flow.dispatch();
    await workUntilEmpty(queue, { executor: "isolate", queues: ["q2"] });
    assert.deepEqual(t.log, []);
    await workUntilEmpty(queue, { executor: "isolate", queues: ["q1"] });
    await workUntilEmpty(queue, { executor: "isolate", queues: ["q2"] });
    assert.deepEqual(t.log, ["a", "b"]);
    assert.deepEqual(t.seen["b"]?.parents, { a: 1 });
  },
);

storeTest(
  "clearing a queue cancels the flow's queued node and skips its descendants, without the catch",
  async (db) => {
    const t = flowJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const flow = queue.flow("cleared");
    const a = flow.add(t.node, { tag: "a" }, { key: "a" });
    flow.add(t.node, { tag: "b" }, { key: "b", after: [a] });
    flow.catch(t.alert, { day: "friday" });
    const id = await flow.dispatch();
    assert.equal(await queue.clear(), 1);
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(t.log, []);
    const status = await queue.flowStatus(id);
    assert.deepEqual(status?.nodes.map((node) => node.state), ["cancelled", "skipped"]);
    assert.equal(status?.state, "failed");
    assert.equal(status?.finished, true);
  },
);

Deno.test("inline mode runs a flow's nodes parents first with their outputs, skips the descendants of a failure, runs the catch, and rejects with the failure", async () => {
  const t = flowJobs();
  t.failing.add("bad");
  await using queue = await Queue.open({ mode: "inline", jobs: t.jobs });
  const ok = queue.flow("inline-ok");
  const a = ok.add(t.node, { tag: "a", value: 2 }, { key: "a" });
  const b = ok.add(t.node, { tag: "b", value: 3 }, { key: "b" });
  ok.add(t.sum, { tag: "sum" }, { after: [a, b] });
  assert.equal(await ok.dispatch(), 0);
  assert.deepEqual(t.seen["sum"]?.parents, { a: 2, b: 3 });

  const broken = queue.flow("inline-broken");
  const bad = broken.add(t.node, { tag: "bad" }, { key: "bad" });
  broken.add(t.node, { tag: "after-bad" }, { key: "after", after: [bad] });
  broken.add(t.node, { tag: "lenient" }, { key: "lenient", after: [bad], continueOnFailure: true });
  broken.catch(t.alert, { day: "inline" });
  await assert.rejects(broken.dispatch(), /bad broke/);
  assert.deepEqual(t.log.slice(3), ["bad failed", "alert inline", "lenient"]);
  assert.match((t.seen["lenient"]?.parentErrors as Record<string, string>)["bad"]!, /bad broke/);
});

storeTest(
  "pruneFlows() deletes the finished flows older than olderThanMs and keeps a running one",
  async (db) => {
    const t = flowJobs();
    await using queue = await db.open({ jobs: t.jobs });
    const done = queue.flow("done");
    done.add(t.node, { tag: "a" });
    const doneId = await done.dispatch();
    await workUntilEmpty(queue, { executor: "isolate" });
    const open = queue.flow("open");
    open.add(t.node, { tag: "b" }, { delayMs: 60_000 });
    const openId = await open.dispatch();
    assert.equal(await queue.pruneFlows({ olderThanMs: 3_600_000 }), 0, "not old enough");
    await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(await queue.pruneFlows({ olderThanMs: 0 }), 1);
    assert.equal(await queue.flowStatus(doneId), null);
    assert.equal((await queue.flowStatus(openId))?.state, "running");
    await assert.rejects(
      queue.pruneFlows({ olderThanMs: -1 }),
      /pruneFlows: olderThanMs must be a finite number >= 0/,
    );
  },
);
