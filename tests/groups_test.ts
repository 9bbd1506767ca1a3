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
  const parent = defineJob({ name: "parent", schema: tenant, handle() {} });
  assert.throws(
    () => defineJob({ ...base, name: "gp", parents: { parent } }),
    /Job "gp": group and parents cannot go together/,
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
    keys[0] = Promise.reject(new Error("an async group"));
    await assert.rejects(
      queue.dispatch(job, { tenant: "a", n: 0 }),
      /Cannot dispatch "sync-mailbox": group must return the key itself, not a Promise/,
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
    /Cannot dispatch "grouped": a job with a group cannot wait for another job's outcome \(.*any node of a flow, a root too, or its catch\)/,
  );
  assert.equal((await queue.counts()).default?.pending ?? 0, 0, "nothing stored");
  assert.deepEqual(await queue.flows(), [], "no flow stored");
});

storeTest(
  "jobs without a group are one turn beside the groups: at concurrency 1 a group's jobs alternate with a backlog of jobs without a group in their queue",
  async (db) => {
    const ran: string[] = [];
    const plain = defineJob({
      name: "plain-job",
      schema: z.object({ n: z.number() }),
      handle({ n }) {
        ran.push(`p${n}`);
      },
    });
    const grouped = defineJob({
      name: "grouped-job",
      schema: tenant,
      group: (p) => p.tenant,
      handle({ tenant, n }) {
        ran.push(`${tenant}${n}`);
      },
    });
    await using queue = await db.open({ jobs: [plain, grouped] });
    await queue.dispatchMany(plain, Array.from({ length: 30 }, (_, n) => ({ n })));
    await queue.dispatchMany(grouped, [0, 1, 2].map((n) => ({ tenant: "x", n })));
    await workUntilEmpty(queue, { executor: "isolate", concurrency: 1 });
    assert.deepEqual(ran.slice(0, 8), ["x0", "p0", "x1", "p1", "x2", "p2", "p3", "p4"]);
    assert.equal(ran.length, 33);
  },
);

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

storeTest(
  "pauseGroup() with forMs or until holds one group's jobs until the hold ends while another group runs; resumeGroup() ends a hold early",
  async (db) => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const ran: string[] = [];
    const job = defineJob({
      name: "sync-mailbox",
      schema: tenant,
      group: (p) => p.tenant,
      handle({ tenant }) {
        ran.push(tenant);
      },
    });
    await using queue = await db.open({ jobs: [job], clock });
    await queue.pauseGroup(job, "a", { forMs: 10_000 });
    await queue.dispatchMany(job, [{ tenant: "a", n: 1 }, { tenant: "b", n: 2 }]);
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(ran, ["b"]);
    clock.advance(9_999);
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(ran, ["b"], "still held");
    clock.advance(1);
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(ran, ["b", "a"], "the hold ended on its own");
    assert.equal(await queue.resumeGroup(job, "a"), false, "a hold that ended is no pause");

    await queue.pauseGroup(job, "a", { until: new Date(clock.now() + 60_000) });
    await queue.dispatch(job, { tenant: "a", n: 3 });
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(ran, ["b", "a"]);
    assert.equal(await queue.resumeGroup(job, "a"), true, "resume ends the hold early");
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(ran, ["b", "a", "a"]);
  },
);

storeTest(
  "pausedGroups() lists the paused and held groups with their ends, a handler's hold included, and not a hold that has ended; a page at a time",
  async (db) => {
    const T = Date.UTC(2026, 0, 1);
    const clock = new ManualClock(T);
    const job = defineJob({
      name: "call-api",
      schema: tenant,
      group: (p) => p.tenant,
      handle({ tenant }, ctx) {
        if (tenant === "c") ctx.rateLimitGroup(30_000);
      },
    });
    await using queue = await db.open({ jobs: [job], clock });
    assert.deepEqual(await queue.pausedGroups(), []);
    await queue.pauseGroup(job, "b");
    await queue.pauseGroup("call-api", "a", { forMs: 10_000 });
    await queue.dispatch(job, { tenant: "c", n: 0 });
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(await queue.pausedGroups(), [
      { name: "call-api", key: "a", pausedAt: new Date(T), until: new Date(T + 10_000) },
      { name: "call-api", key: "b", pausedAt: new Date(T), until: null },
      { name: "call-api", key: "c", pausedAt: new Date(T), until: new Date(T + 30_000) },
    ]);
    assert.deepEqual(
      (await queue.pausedGroups({ limit: 1, offset: 2 })).map((group) => group.key),
      ["c"],
    );
    await assert.rejects(
      queue.pausedGroups({ limit: 0 }),
      /pausedGroups: limit must be an integer from 1 to 1000: got 0/,
    );
    clock.advance(10_000);
    assert.deepEqual(
      (await queue.pausedGroups()).map((group) => group.key),
      ["b", "c"],
      "a's hold has ended",
    );
    await queue.resumeGroup(job, "b");
    assert.deepEqual((await queue.pausedGroups()).map((group) => group.key), ["c"]);
  },
);

storeTest("pauseGroup() refuses bad hold options, naming what was wrong", async (db) => {
  const job = defineJob({
    name: "sync-mailbox",
    schema: tenant,
    group: (p) => p.tenant,
    handle() {},
  });
  await using queue = await db.open({ jobs: [job] });
  const refused: [unknown, RegExp][] = [
    [{ forMs: 0 }, /pauseGroup: forMs must be a positive number of ms up to 2\^41: got 0/],
    [{ forMs: "5s" }, /pauseGroup: forMs must be a positive number of ms up to 2\^41: got "5s"/],
    [{ forMs: 2 ** 42 }, /pauseGroup: forMs must be .*: got 4398046511104/],
    [{ forMs: 1_000, until: new Date() }, /pauseGroup: give forMs or until, not both/],
    [{ until: "tomorrow" }, /pauseGroup: until must be a valid Date: got "tomorrow"/],
    [{ until: new Date(NaN) }, /pauseGroup: until must be a valid Date/],
    [{ until: new Date(Date.now() - 1_000) }, /pauseGroup: until must be after now .*: got 20/],
    [42, /pauseGroup: options must be an object: got 42/],
  ];
  for (const [options, error] of refused) {
    await assert.rejects(queue.pauseGroup(job, "a", options as never), error);
  }
  const groupless = defineJob({ name: "groupless", schema: tenant, handle() {} });
  await assert.rejects(
    queue.pauseGroup(groupless, "a"),
    /pauseGroup: job "groupless" has no group \(defineJob\(\{ group \}\)\): none of its jobs is in one/,
  );
  assert.equal(await queue.resumeGroup(job, "a"), false, "nothing was paused");
});

storeTest(
  "pauseGroup() with forMs: an idle worker wakes when the hold ends (no poll would wake it in time)",
  async (db) => {
    const ran: number[] = [];
    const job = defineJob({
      name: "sync-mailbox",
      schema: tenant,
      group: (p) => p.tenant,
      handle({ n }) {
        ran.push(n);
      },
    });
    await using queue = await db.open({ jobs: [job] });
    await queue.pauseGroup(job, "a", { forMs: 300 });
    await queue.dispatch(job, { tenant: "a", n: 1 });
    const worker = queue.work({ executor: "isolate", pollMs: 600_000, leaseMs: 600_000 });
    try {
      await waitUntil(() => ran.length === 1, { what: "the held job ran once its hold ended" });
    } finally {
      await worker.stop();
    }
  },
);

storeTest(
  "ctx.rateLimitGroup() holds the running job's group and puts the job back after the hold, its attempt given back; other groups go on",
  async (db) => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const ran: string[] = [];
    const errors: string[] = [];
    const job = defineJob({
      name: "call-api",
      schema: tenant,
      group: (p) => p.tenant,
      handle({ tenant, n }, ctx) {
        if (tenant === "c") {
          for (const ms of [-1, 0, Number.NaN, "5s", 2 ** 42]) {
            try {
              (ctx as unknown as { rateLimitGroup(ms: unknown): void }).rateLimitGroup(ms);
            } catch (error) {
              errors.push((error as Error).message);
            }
          }
          return;
        }
        ran.push(`${tenant}${n}@${ctx.attempt}`);
        if (tenant === "a" && n === 0 && ran.filter((run) => run.startsWith("a0")).length === 1) {
          ctx.rateLimitGroup(10_000); // the tenant's API said 429: wait 10 s
        }
      },
    });
    const ungrouped = defineJob({
      name: "no-group",
      schema: z.null(),
      handle(_, ctx) {
        try {
          ctx.rateLimitGroup(1_000);
        } catch (error) {
          errors.push((error as Error).message);
        }
      },
    });
    await using queue = await db.open({ jobs: [job, ungrouped], clock });
    const failed: unknown[] = [];
    queue.addEventListener("job:failed", (event) => failed.push(event));
    await queue.dispatch(job, { tenant: "a", n: 0 });
    await workUntilEmpty(queue, { executor: "isolate" });
    await queue.dispatchMany(job, [{ tenant: "a", n: 1 }, { tenant: "b", n: 0 }]);
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(ran, ["a0@1", "b0@1"], "a is held; b goes on");
    clock.advance(9_999);
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(ran, ["a0@1", "b0@1"], "still held");
    clock.advance(1);
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(
      [...ran.slice(0, 2), ...ran.slice(2).sort()],
      ["a0@1", "b0@1", "a0@1", "a1@1"],
      "the held job comes back with its attempt given back, and its group goes on",
    );
    assert.deepEqual(failed, []);

    await queue.dispatch(ungrouped, null);
    await queue.dispatch(job, { tenant: "c", n: 0 });
    await workUntilEmpty(queue, { executor: "isolate" });
    const bad = "ctx.rateLimitGroup: ms must be a positive number of ms up to 2^41: got";
    assert.deepEqual(errors.sort(), [
      'ctx.rateLimitGroup: job "no-group" has no group (defineJob({ group }))',
      `${bad} "5s"`,
      `${bad} -1`,
      `${bad} 0`,
      `${bad} 4398046511104`,
      `${bad} NaN`,
    ]);
    assert.equal(await queue.resumeGroup(job, "c"), false, "a refused hold holds nothing");
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
  assert.throws(
    () =>
      defineJob({ ...base, name: "r3", groupRate: { max: 1, perMs: 1_000, burst: 3 } as never }),
    /Job "r3": groupRate: unknown option "burst"/,
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
