/**
 * Fair scheduling by group (docs/groups.md) through the queue, on every
 * store: what `defineJob` refuses, what a dispatch refuses (nothing
 * stored), `groupConcurrency` and `ordered` with an in-process worker, and
 * pausing a group. The multi-process ledgers and the fairness run are in
 * tests/faults/groups_processes_test.ts.
 *
 * @module
 */
import assert from "node:assert/strict";
import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import { defineJob } from "../mod.ts";
import { workUntilEmpty } from "../src/testing.ts";
import { ManualClock } from "./_helpers.ts";
import { storeTest } from "./_stores.ts";

const tenant = z.object({ tenant: z.string(), n: z.number() });

Deno.test("defineJob() refuses ordered without groupConcurrency 1, and groupConcurrency without group", () => {
  const base = { schema: tenant, group: (p: { tenant: string }) => p.tenant, handle() {} };
  assert.throws(
    () => defineJob({ ...base, name: "o", ordered: true }),
    /Job "o": ordered needs groupConcurrency: 1 \(one job of a group at a time, in dispatch order\): got groupConcurrency undefined/,
  );
  assert.throws(
    () => defineJob({ ...base, name: "o2", ordered: true, groupConcurrency: 2 }),
    /ordered needs groupConcurrency: 1 .*got groupConcurrency 2/,
  );
  assert.throws(
    () => defineJob({ name: "c", schema: tenant, groupConcurrency: 2, handle() {} }),
    /Job "c": groupConcurrency needs group/,
  );
  assert.throws(
    () => defineJob({ ...base, name: "z", groupConcurrency: 0 }),
    /Job "z": groupConcurrency must be a whole number >= 1: got 0/,
  );
  assert.throws(
    () => defineJob({ ...base, name: "g", group: "tenant" as never }),
    /Job "g": group must be a function/,
  );
  const ok = defineJob({ ...base, name: "ok", groupConcurrency: 1, ordered: true });
  assert.deepEqual([ok.groupConcurrency, ok.ordered], [1, true]);
});

storeTest(
  "dispatch() refuses a group that throws or returns no key, naming the job and what it returned; nothing is stored",
  async (db) => {
    const keys: unknown[] = ["", 42, "x".repeat(256)];
    const job = defineJob({
      name: "sync-mailbox",
      schema: tenant,
      group: ({ n }) => {
        if (n === 3) throw new Error("no tenant");
        return keys[n] as string;
      },
      handle() {},
    });
    await using queue = await db.open({ jobs: [job] });
    await assert.rejects(
      queue.dispatch(job, { tenant: "a", n: 0 }),
      /Cannot dispatch "sync-mailbox": group must return a non-empty string of at most 255 characters, without NUL or lone surrogates: got 0 characters \(""\)/,
    );
    await assert.rejects(
      queue.dispatch(job, { tenant: "a", n: 1 }),
      /group must return .*: got 42/,
    );
    await assert.rejects(
      queue.dispatch(job, { tenant: "a", n: 2 }),
      /group must return .*: got 256 characters$/,
    );
    await assert.rejects(
      queue.dispatch(job, { tenant: "a", n: 3 }),
      /Cannot dispatch "sync-mailbox": its group threw: no tenant/,
    );
    keys[0] = "fine";
    await assert.rejects(
      queue.dispatchMany(job, [{ tenant: "a", n: 0 }, { tenant: "a", n: 1 }]),
      /got 42/,
      "one bad key refuses them all",
    );
    assert.equal((await queue.counts()).default?.pending ?? 0, 0, "nothing stored");
  },
);

storeTest("a grouped job cannot wait as a chain's later link, nor as a flow's node", async (db) => {
  const plain = defineJob({ name: "plain", schema: z.null(), handle() {} });
  const job = defineJob({ name: "grouped", schema: tenant, group: (p) => p.tenant, handle() {} });
  await using queue = await db.open({ jobs: [plain, job] });
  await assert.rejects(
    queue.chain().then(plain, null).then(job, { tenant: "a", n: 1 }).dispatch(),
    /Cannot dispatch "grouped": a job with a group cannot wait for another job's outcome/,
  );
  const flow = queue.flow("grouped-node");
  const first = flow.add(plain, null);
  flow.add(job, { tenant: "a", n: 2 }, { after: [first] });
  await assert.rejects(
    flow.dispatch(),
    /Cannot dispatch "grouped": a job with a group cannot wait for another job's outcome \(.*a flow's node or catch\)/,
  );
  assert.equal((await queue.counts()).default?.pending ?? 0, 0, "nothing stored");
  assert.deepEqual(await queue.flows(), [], "no flow stored");
});

storeTest(
  "groupConcurrency: 2 holds each group to 2 running at once with 6 workers, and every job runs",
  async (db) => {
    const running = new Map<string, number>();
    const most = new Map<string, number>();
    const done: number[] = [];
    const job = defineJob({
      name: "sync-mailbox",
      schema: tenant,
      group: (p) => p.tenant,
      groupConcurrency: 2,
      async handle({ tenant, n }) {
        running.set(tenant, (running.get(tenant) ?? 0) + 1);
        most.set(tenant, Math.max(most.get(tenant) ?? 0, running.get(tenant)!));
        await delay(20);
        running.set(tenant, running.get(tenant)! - 1);
        done.push(n);
      },
    });
    await using queue = await db.open({ jobs: [job] });
    await queue.dispatchMany(
      job,
      Array.from({ length: 12 }, (_, n) => ({ tenant: n % 2 === 0 ? "a" : "b", n })),
    );
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 6, timeoutMs: 30_000 });
    assert.equal(done.length, 12);
    assert.ok((most.get("a") ?? 0) <= 2 && (most.get("b") ?? 0) <= 2, JSON.stringify([...most]));
  },
);

storeTest(
  "ordered: a job that fails holds its group until it succeeds; the group's jobs run in dispatch order",
  async (db) => {
    const clock = new ManualClock(1_000_000);
    const ran: string[] = [];
    let failures = 0;
    const job = defineJob({
      name: "apply-change",
      schema: tenant,
      group: (p) => p.tenant,
      groupConcurrency: 1,
      ordered: true,
      backoff: [10_000],
      jitter: 0,
      handle({ tenant, n }) {
        ran.push(`${tenant}${n}`);
        if (tenant === "a" && n === 1 && failures++ === 0) throw new Error("first try fails");
      },
    });
    await using queue = await db.open({ jobs: [job], clock });
    for (const n of [1, 2, 3]) {
      await queue.dispatch(job, { tenant: "a", n });
      await queue.dispatch(job, { tenant: "b", n });
    }
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 4 });
    assert.deepEqual(ran.filter((step) => step.startsWith("a")), ["a1"], "a1's backoff holds a");
    assert.deepEqual(ran.filter((step) => step.startsWith("b")), ["b1", "b2", "b3"]);
    clock.advance(10_000);
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 4 });
    assert.deepEqual(ran.filter((step) => step.startsWith("a")), ["a1", "a1", "a2", "a3"]);
  },
);

storeTest(
  "pauseGroup() holds one group's jobs back while others run; resumeGroup() lets them run",
  async (db) => {
    const ran: string[] = [];
    const job = defineJob({
      name: "sync-mailbox",
      schema: tenant,
      group: (p) => p.tenant,
      handle({ tenant }) {
        ran.push(tenant);
      },
    });
    await using queue = await db.open({ jobs: [job] });
    await queue.pauseGroup(job, "a");
    await queue.dispatchMany(job, [{ tenant: "a", n: 1 }, { tenant: "b", n: 2 }]);
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(ran, ["b"]);
    assert.equal(await queue.resumeGroup("sync-mailbox", "a"), true);
    assert.equal(await queue.resumeGroup("sync-mailbox", "a"), false, "not paused any more");
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(ran, ["b", "a"]);
    await assert.rejects(
      queue.pauseGroup(job, ""),
      /pauseGroup: the group key must be a non-empty string of at most 255 characters/,
    );
  },
);
