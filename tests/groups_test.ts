/**
 * Fair scheduling by group (docs/groups.md) through the queue, on every
 * store: what `defineJob` refuses, what a dispatch refuses (nothing
 * stored), `groupConcurrency`, `groupRate` and `ordered` with an
 * in-process worker, and pausing a group. The multi-process ledgers and the fairness run are in
 * tests/faults/groups_processes_test.ts.
 *
 * @module
 */
import assert from "node:assert/strict";
import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import { defineJob, rateLimited } from "../mod.ts";
import { workUntilEmpty } from "../src/testing.ts";
import { ManualClock, waitUntil } from "./_helpers.ts";
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

Deno.test("defineJob() refuses a groupRate without group or with a bad max or perMs; rateLimited() refuses the keys kept for it", () => {
  const base = { schema: tenant, group: (p: { tenant: string }) => p.tenant, handle() {} };
  assert.throws(
    () =>
      defineJob({ name: "r", schema: tenant, groupRate: { max: 1, perMs: 1_000 }, handle() {} }),
    /Job "r": groupRate needs group/,
  );
  assert.throws(
    () => defineJob({ ...base, name: "r0", groupRate: { max: 0, perMs: 1_000 } }),
    /Job "r0": groupRate.max must be a whole number >= 1: got 0/,
  );
  assert.throws(
    () => defineJob({ ...base, name: "r1", groupRate: { max: 1, perMs: 0.5 } }),
    /Job "r1": groupRate.perMs must be a whole number >= 1: got 0.5/,
  );
  assert.throws(
    () => defineJob({ ...base, name: "r2", groupRate: 10 as never }),
    /Job "r2": groupRate must be \{ max, perMs \}: got 10/,
  );
  const ok = defineJob({ ...base, name: "ok", groupRate: { max: 3, perMs: 60_000 } });
  assert.deepEqual(ok.groupRate, { max: 3, perMs: 60_000 });
  assert.throws(
    () => rateLimited("\u0001mine", 1, 1_000),
    /rateLimited: key must not start with U\+0001, kept for the windows of group rate limits/,
  );
});

storeTest(
  "groupRate holds each group to max claims per window, the groups' windows apart, while other jobs run; the window turning lets them go",
  async (db) => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const ran: string[] = [];
    const job = defineJob({
      name: "call-api",
      schema: tenant,
      group: (p) => p.tenant,
      groupRate: { max: 2, perMs: 10_000 },
      handle({ tenant }) {
        ran.push(tenant);
      },
    });
    const other = defineJob({
      name: "other",
      schema: z.null(),
      handle() {
        ran.push("other");
      },
    });
    await using queue = await db.open({ jobs: [job, other], clock });
    await queue.dispatchMany(
      job,
      Array.from({ length: 10 }, (_, n) => ({ tenant: n % 2 === 0 ? "a" : "b", n })),
    );
    await queue.dispatchMany(other, [null, null, null]);
    const tally = () =>
      ["a", "b", "other"].map((key) => ran.filter((tenant) => tenant === key).length);
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 4 });
    assert.deepEqual(tally(), [2, 2, 3], "2 of each group in the first window; the rest all ran");
    clock.advance(9_999);
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 4 });
    assert.deepEqual(tally(), [2, 2, 3], "still the first window");
    clock.advance(1);
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 4 });
    assert.deepEqual(tally(), [4, 4, 3], "the next window");
    clock.advance(10_000);
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 4 });
    assert.deepEqual(tally(), [5, 5, 3]);
  },
);

storeTest(
  "groupRate: an idle worker wakes when its group's window turns (no poll would wake it in time)",
  async (db) => {
    const ran: number[] = [];
    const job = defineJob({
      name: "call-api",
      schema: tenant,
      group: (p) => p.tenant,
      groupRate: { max: 1, perMs: 500 },
      groupConcurrency: 1,
      handle({ n }) {
        ran.push(n);
      },
    });
    await using queue = await db.open({ jobs: [job] });
    await queue.dispatchMany(job, [0, 1, 2].map((n) => ({ tenant: "a", n })));
    const worker = queue.work({ executor: "isolate", pollMs: 600_000, leaseMs: 600_000 });
    try {
      await waitUntil(() => ran.length === 3, { what: "the three jobs ran, one a window" });
    } finally {
      await worker.stop();
    }
    assert.deepEqual(ran, [0, 1, 2]);
  },
);
