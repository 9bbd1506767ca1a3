/**
 * A seeded property test of batches: random batches, random job outcomes and
 * random steps (dispatch, work a few jobs, cancel, retry a member, retry a
 * batch) across two queue handles on one SQLite file. After every step each
 * batch's counters must match the rows in the tables (read through a third
 * connection) and a model of the rules in .scratch/SEMANTICS.md that is fed
 * only what the test saw happen; at the end then/catch/finally must have run
 * exactly as often as that model says.
 *
 * Replay one seed with `BATCH_PROPERTY_SEED=<seed> deno test -A tests/batch_property_test.ts`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { z } from "zod";
import { defineJob, type JobContext, PermanentError, Queue, type QueueWorker } from "../mod.ts";
import { tempDir } from "./_helpers.ts";

// ---------------------------------------------------------------------------------------------
// Jobs (run in this isolate): what each member does is decided by the test before dispatch.

/** How a member job ends: always succeeds, always fails for good, or fails for good once. */
type Behavior = "ok" | "fails" | "flaky";
type Role = "then" | "catch" | "finally";
const ROLES: readonly Role[] = ["then", "catch", "finally"];

const behaviors = new Map<string, Behavior>();
/** Runs per payload key (`b/m` for members, `b/role/n` for callbacks). */
const runs = new Map<string, number>();
/** The `ctx.batchId` each payload key's handler saw. */
const seenBatchIds = new Map<string, number | null>();
/** Set by a step that cancels a batch from inside one of its running members. */
let onMemberStart: ((ctx: JobContext) => Promise<void>) | null = null;

function recordRun(key: string, ctx: JobContext): number {
  const n = (runs.get(key) ?? 0) + 1;
  runs.set(key, n);
  seenBatchIds.set(key, ctx.batchId);
  return n;
}

const member = defineJob({
  name: "prop.member",
  schema: z.object({ b: z.number().int(), m: z.number().int() }),
  async handle({ b, m }, ctx) {
    const key = `${b}/${m}`;
    const run = recordRun(key, ctx);
    await onMemberStart?.(ctx);
    const behavior = behaviors.get(key);
    if (behavior === undefined) throw new Error(`no behavior for member ${key}`);
    if (behavior === "fails" || (behavior === "flaky" && run === 1)) {
      throw new PermanentError(`member ${key} fails for good (run ${run})`);
    }
  },
});

function callbackJob(role: Role) {
  return defineJob({
    name: `prop.${role}`,
    schema: z.object({ b: z.number().int(), n: z.number().int() }),
    handle({ b, n }, ctx) {
      recordRun(`${b}/${role}/${n}`, ctx);
    },
  });
}
const callbacks = {
  then: callbackJob("then"),
  catch: callbackJob("catch"),
  finally: callbackJob("finally"),
};
const JOBS = [member, callbacks.then, callbacks.catch, callbacks.finally];

// ---------------------------------------------------------------------------------------------
// The model: fed only with what the test observed (job events, the steps it took).

type MemberState = "waiting" | "running" | "succeeded" | "failed" | "skipped";

interface ModelMember {
  readonly id: number;
  readonly key: string;
  readonly behavior: Behavior;
  state: MemberState;
  starts: number;
}

interface ModelBatch {
  readonly key: number;
  readonly id: number;
  readonly allowFailures: boolean;
  readonly members: ModelMember[];
  /** How many callback jobs of each role the builder was given. */
  readonly callbacks: Record<Role, number>;
  cancelled: boolean;
  /** What cancelled it, as the model saw it. */
  cancelledBy: "failure" | "call" | null;
  finished: boolean;
  readonly fired: Record<Role, boolean>;
  /** Callback jobs of each role that queue.clear() deleted while they waited (seen in the table). */
  readonly cleared: Record<Role, number>;
}

class Model {
  readonly batches: ModelBatch[] = [];
  readonly #members = new Map<number, [ModelBatch, ModelMember]>();

  add(batch: ModelBatch): void {
    this.batches.push(batch);
    for (const m of batch.members) this.#members.set(m.id, [batch, m]);
    this.#finishIfDone(batch); // a batch is never empty here, but the rule is the same
  }

  member(id: number): [ModelBatch, ModelMember] | undefined {
    return this.#members.get(id);
  }

  count(batch: ModelBatch, ...states: MemberState[]): number {
    return batch.members.filter((m) => states.includes(m.state)).length;
  }

  onStart(id: number): void {
    const [batch, m] = this.#expect(id);
    assert.equal(
      m.state,
      "waiting",
      `member ${m.key} (job ${id}) of batch ${batch.id} started while ${m.state}`,
    );
    m.state = "running";
    m.starts++;
  }

  onComplete(id: number): void {
    const [batch, m] = this.#expect(id);
    assert.equal(m.state, "running", `member ${m.key} completed while ${m.state}`);
    m.state = "succeeded";
    this.#finishIfDone(batch);
  }

  onFailed(id: number): void {
    const [batch, m] = this.#expect(id);
    assert.equal(m.state, "running", `member ${m.key} failed while ${m.state}`);
    m.state = "failed";
    batch.fired.catch = true; // at the first failure; once ever
    if (!batch.allowFailures) this.cancel(batch, "failure");
    this.#finishIfDone(batch);
  }

  /** The model of cancelBatch (and of the cancel a failure causes); false when nothing changes. */
  cancel(batch: ModelBatch, by: "failure" | "call"): boolean {
    if (batch.cancelled || batch.finished) return false;
    batch.cancelled = true;
    batch.cancelledBy = by;
    for (const m of batch.members) if (m.state === "waiting") m.state = "skipped";
    this.#finishIfDone(batch);
    return true;
  }

  /** The model of queue.clear(): waiting members are skipped; the batch is not cancelled. */
  clear(): void {
    for (const batch of this.batches) {
      for (const m of batch.members) if (m.state === "waiting") m.state = "skipped";
      this.#finishIfDone(batch);
    }
  }

  retry(id: number): boolean {
    const found = this.#members.get(id);
    if (found === undefined || found[1].state !== "failed") return false;
    found[1].state = "waiting";
    found[0].finished = false;
    return true;
  }

  retryBatch(batch: ModelBatch): number {
    const failed = batch.members.filter((m) => m.state === "failed");
    for (const m of failed) m.state = "waiting";
    if (failed.length > 0) batch.finished = false;
    return failed.length;
  }

  #finishIfDone(batch: ModelBatch): void {
    if (batch.finished || this.count(batch, "waiting", "running") > 0) return;
    batch.finished = true;
    if (
      !batch.cancelled && this.count(batch, "failed") === 0 && this.count(batch, "skipped") === 0
    ) batch.fired.then = true;
    batch.fired.finally = true;
  }

  #expect(id: number): [ModelBatch, ModelMember] {
    const found = this.#members.get(id);
    assert.ok(
      found !== undefined,
      `an event for job ${id}, which is no member the test dispatched`,
    );
    return found;
  }
}

// ---------------------------------------------------------------------------------------------
// Randomness.

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Rng {
  readonly #next: () => number;
  constructor(seed: number) {
    this.#next = mulberry32(seed);
  }
  float(): number {
    return this.#next();
  }
  int(min: number, max: number): number {
    return min + Math.floor(this.#next() * (max - min + 1));
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.#next() * items.length)]!;
  }
}

// ---------------------------------------------------------------------------------------------
// One seed.

interface BatchRowRead {
  id: number;
  total: number;
  pending: number;
  failed: number;
  skipped: number;
  allow_failures: number;
  cancelled_at: number | null;
  finished_at: number | null;
}

interface SeedResult {
  steps: number;
  batches: number;
  members: number;
  callbackRuns: number;
  cancelsByFailure: number;
  cancelsByCall: number;
  cancelsMidRun: number;
}

async function runSeed(seed: number, log: string[]): Promise<SeedResult> {
  behaviors.clear();
  onMemberStart = null;
  runs.clear();
  seenBatchIds.clear();
  const rng = new Rng(seed);
  await using tmp = await tempDir();
  await using queueA = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  await using queueB = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  const db = new DatabaseSync(tmp.dbPath, { timeout: 10_000 });
  using _closeDb = { [Symbol.dispose]: () => db.isOpen && db.close() };
  const handles = [queueA, queueB];
  const names = new Map([[queueA, "A"], [queueB, "B"]]);
  const model = new Model();
  let cancelsByCall = 0;
  let cancelsMidRun = 0;

  const count = (sql: string, ...params: (number | string)[]) =>
    Number((db.prepare(sql).get(...params) as { n: number }).n);

  /** Every batch's counters against the tables and the model; callbacks queued or run as fired. */
  const check = async (after: string) => {
    for (const batch of model.batches) {
      const where = `after ${after}, batch ${batch.id} (key ${batch.key})`;
      const row = db.prepare(
        "SELECT id, total, pending, failed, skipped, allow_failures, cancelled_at, finished_at FROM batches WHERE id = ?",
      ).get(batch.id) as BatchRowRead | undefined;
      assert.ok(row !== undefined, `${where}: no batches row`);
      const succeeded = row.total - row.pending - row.failed - row.skipped;
      const inJobs = db.prepare(
        "SELECT id FROM jobs WHERE batch_id = ? AND batch_member = 1 ORDER BY id",
      ).all(batch.id).map((r) => Number(r.id));
      const inFailed = db.prepare(
        "SELECT id FROM failed_jobs WHERE batch_id = ? AND batch_member = 1 ORDER BY id",
      ).all(batch.id).map((r) => Number(r.id));
      const ids = (...states: MemberState[]) =>
        batch.members.filter((m) => states.includes(m.state)).map((m) => m.id);
      // What the tables say.
      assert.equal(row.total, batch.members.length, `${where}: total`);
      assert.ok(
        row.pending >= 0 && row.failed >= 0 && row.skipped >= 0 && succeeded >= 0,
        `${where}: a negative counter ${JSON.stringify(row)}`,
      );
      assert.equal(row.pending, inJobs.length, `${where}: pending vs member rows in jobs`);
      assert.equal(row.failed, inFailed.length, `${where}: failed vs member rows in failed_jobs`);
      // What the model says (so total = pending + failed + skipped + succeeded with each term
      // checked on its own).
      assert.deepEqual(inJobs, ids("waiting", "running"), `${where}: members pending`);
      assert.deepEqual(inFailed, ids("failed"), `${where}: members failed`);
      assert.equal(row.skipped, model.count(batch, "skipped"), `${where}: skipped`);
      assert.equal(succeeded, model.count(batch, "succeeded"), `${where}: succeeded`);
      assert.equal(row.cancelled_at !== null, batch.cancelled, `${where}: cancelled`);
      assert.equal(row.finished_at !== null, batch.finished, `${where}: finished`);
      assert.equal(row.allow_failures === 1, batch.allowFailures, `${where}: allowFailures`);
      // A callback fired is queued, running or has run, exactly once per callback job.
      for (const role of ROLES) {
        const queued = count(
          "SELECT COUNT(*) AS n FROM jobs WHERE batch_id = ? AND name = ?",
          batch.id,
          `prop.${role}`,
        );
        const failed = count(
          "SELECT COUNT(*) AS n FROM failed_jobs WHERE batch_id = ? AND name = ?",
          batch.id,
          `prop.${role}`,
        );
        let ran = 0;
        for (let n = 0; n < batch.callbacks[role]; n++) {
          ran += runs.get(`${batch.key}/${role}/${n}`) ?? 0;
        }
        const expected = batch.fired[role] ? batch.callbacks[role] : 0;
        const cleared = batch.cleared[role];
        assert.equal(
          queued + ran + failed + cleared,
          expected,
          `${where}: ${role} callbacks queued ${queued} + ran ${ran} + failed ${failed} + ` +
            `cleared ${cleared}, ` +
            `the model says ${batch.fired[role] ? "fired" : "not fired"} (${
              batch.callbacks[role]
            } given)`,
        );
      }
      // The API reads the same row.
      const status = await rng.pick(handles).batchStatus(batch.id);
      assert.ok(status !== null, `${where}: batchStatus is null`);
      assert.deepEqual(
        [status.total, status.pending, status.failed, status.skipped, status.succeeded],
        [row.total, row.pending, row.failed, row.skipped, succeeded],
        `${where}: batchStatus`,
      );
      assert.equal(
        status.progress(),
        Math.floor(((row.total - row.pending) / row.total) * 100),
        `${where}: progress`,
      );
    }
  };

  /** Works up to `maxJobs` jobs (all when undefined) on `queue`, feeding its events to the model. */
  const work = async (queue: Queue, maxJobs: number | undefined, concurrency: number) => {
    const runner: QueueWorker = queue.work({
      executor: "isolate",
      stopWhenEmpty: true,
      concurrency,
      pollMs: 50,
      ...(maxJobs !== undefined && { maxJobs }),
    });
    const problems: string[] = [];
    const isMember = (name: string) => name === member.name;
    runner.addEventListener("job:start", ({ detail }) => {
      if (isMember(detail.name)) model.onStart(detail.id);
    });
    runner.addEventListener("job:complete", ({ detail }) => {
      if (isMember(detail.name)) model.onComplete(detail.id);
    });
    runner.addEventListener("job:failed", ({ detail }) => {
      if (isMember(detail.name)) model.onFailed(detail.id);
      else problems.push(`callback job ${detail.id} (${detail.name}) failed: ${detail.error}`);
    });
    runner.addEventListener("job:retry", ({ detail }) => {
      problems.push(`job ${detail.id} (${detail.name}) was retried: ${detail.error}`);
    });
    runner.addEventListener("queue:error", ({ detail }) => {
      problems.push(`queue:error during ${detail.during}: ${detail.error}`);
    });
    await runner.done;
    assert.deepEqual(problems, []);
    return runner.stats;
  };

  let batchKey = 0;
  const steps = rng.int(30, 70);
  let step = 0;
  for (; step < steps; step++) {
    const queue = rng.pick(handles);
    const on = `on ${names.get(queue)}`;
    const roll = rng.float();
    let what: string;
    if (model.batches.length === 0 || (roll < 0.2 && model.batches.length < 8)) {
      // Dispatch a batch.
      const key = batchKey++;
      const size = rng.int(1, 50);
      const failRate = rng.pick([0, 0, 0.05, 0.15, 0.4]);
      const allowFailures = rng.float() < 0.5;
      const counts: Record<Role, number> = {
        then: rng.pick([0, 1, 1, 2]),
        catch: rng.pick([0, 1, 1, 2]),
        finally: rng.pick([0, 1, 1, 2]),
      };
      const builder = queue.batch(`prop ${seed} #${key}`);
      const members: { key: string; behavior: Behavior }[] = [];
      for (let m = 0; m < size; m++) {
        const behavior: Behavior = rng.float() < failRate
          ? rng.pick(["fails", "flaky"] as const)
          : "ok";
        behaviors.set(`${key}/${m}`, behavior);
        members.push({ key: `${key}/${m}`, behavior });
      }
      // Mixed push and pushMany, in order.
      for (let m = 0; m < size;) {
        const chunk = Math.min(size - m, rng.int(1, 10));
        const payloads = Array.from({ length: chunk }, (_, i) => ({ b: key, m: m + i }));
        if (chunk === 1) builder.push(member, payloads[0]!);
        else builder.pushMany(member, payloads);
        m += chunk;
      }
      for (const role of ROLES) {
        for (let n = 0; n < counts[role]; n++) builder[role](callbacks[role], { b: key, n });
      }
      if (allowFailures) builder.allowFailures();
      else if (rng.float() < 0.3) builder.allowFailures(false);
      const id = await builder.dispatch();
      const memberIds = db.prepare(
        "SELECT id FROM jobs WHERE batch_id = ? AND batch_member = 1 ORDER BY id",
      ).all(id).map((r) => Number(r.id));
      assert.equal(memberIds.length, size, `batch ${id}: member rows after dispatch`);
      model.add({
        key,
        id,
        allowFailures,
        members: members.map((m, i) => ({ ...m, id: memberIds[i]!, state: "waiting", starts: 0 })),
        callbacks: counts,
        cancelled: false,
        cancelledBy: null,
        finished: false,
        fired: { then: false, catch: false, finally: false },
        cleared: { then: 0, catch: 0, finally: 0 },
      });
      const fails = members.filter((m) => m.behavior !== "ok").length;
      what = `dispatch ${on}: batch ${id} (key ${key}) of ${size}, ${fails} failing, ` +
        `allowFailures ${allowFailures}, callbacks ${JSON.stringify(counts)}`;
    } else if (roll < 0.52) {
      const maxJobs = rng.int(1, 15);
      const concurrency = rng.int(1, 3);
      const stats = await work(queue, maxJobs, concurrency);
      what = `work ${on}: maxJobs ${maxJobs}, concurrency ${concurrency} → ${
        JSON.stringify(stats)
      }`;
    } else if (roll < 0.6) {
      // Cancel a batch from the other handle while one of its members runs (concurrency 1, so
      // that member is the only job leased): it must finish as it would have, the rest skipped.
      const open = model.batches.filter((b) => model.count(b, "waiting") > 0);
      const batch = rng.pick(open.length > 0 ? open : model.batches);
      const other = queue === queueA ? queueB : queueA;
      const maxJobs = rng.int(5, 40);
      let cancelled: string | null = null;
      onMemberStart = async (ctx) => {
        if (cancelled !== null || ctx.batchId !== batch.id) return;
        cancelled = "pending";
        const running = batch.members.filter((m) => m.state === "running").map((m) => m.id);
        const expected = model.cancel(batch, "call");
        const actual = await other.cancelBatch(batch.id);
        if (actual) cancelsByCall++, cancelsMidRun++;
        cancelled = `cancelBatch(${batch.id}) from job ${ctx.id} (running: ${running}) → ${actual}`;
        if (actual !== expected) cancelled += ` BUT the model says ${expected}`;
      };
      try {
        const stats = await work(queue, maxJobs, 1);
        what = `work ${on}: maxJobs ${maxJobs}, concurrency 1, ${
          cancelled ?? `no member of batch ${batch.id} ran, no cancel`
        } → ${JSON.stringify(stats)}`;
      } finally {
        onMemberStart = null;
      }
      assert.doesNotMatch(what, /BUT the model says/, what);
    } else if (roll < 0.7) {
      const batch = rng.pick(model.batches);
      const expected = model.cancel(batch, "call");
      const actual = await queue.cancelBatch(batch.id);
      if (actual) cancelsByCall++;
      what = `cancelBatch(${batch.id}) ${on} → ${actual}`;
      assert.equal(actual, expected, `cancelBatch(${batch.id}): the model says ${expected}`);
    } else if (roll < 0.73) {
      // Rarely: clear every queue. Callback jobs waiting in it go too: note them first.
      const waitingCallbacks = db.prepare(
        "SELECT batch_id, name, COUNT(*) AS n FROM jobs WHERE name != ? GROUP BY batch_id, name",
      ).all(member.name) as { batch_id: number; name: string; n: number }[];
      for (const { batch_id: id, name, n } of waitingCallbacks) {
        const batch = model.batches.find((b) => b.id === id);
        assert.ok(batch !== undefined, `a ${name} job of no batch of the test: ${id}`);
        batch.cleared[name.slice("prop.".length) as Role] += n;
      }
      const expected = model.batches.reduce((sum, b) => sum + model.count(b, "waiting"), 0) +
        waitingCallbacks.reduce((sum, row) => sum + row.n, 0);
      model.clear();
      const actual = await queue.clear();
      what = `clear() ${on} → ${actual}`;
      assert.equal(actual, expected, `clear(): rows deleted`);
    } else if (roll < 0.88) {
      const failed = model.batches.flatMap((b) => b.members.filter((m) => m.state === "failed"));
      const all = model.batches.flatMap((b) => b.members);
      const target = failed.length > 0 && rng.float() < 0.8 ? rng.pick(failed) : rng.pick(all);
      const expected = model.retry(target.id);
      const actual = await queue.retry(target.id);
      what = `retry(${target.id}) ${on} (member ${target.key}, ${target.behavior}) → ${actual}`;
      assert.equal(actual, expected, `retry(${target.id}): the model says ${expected}`);
    } else {
      const batch = rng.pick(model.batches);
      const expected = model.retryBatch(batch);
      const actual = await queue.retryBatch(batch.id);
      what = `retryBatch(${batch.id}) ${on} → ${actual}`;
      assert.equal(actual, expected, `retryBatch(${batch.id}): the model says ${expected}`);
    }
    log.push(`${step + 1}. ${what}`);
    await check(`step ${step + 1}: ${what}`);
  }

  // Drain: retry what the model says can now succeed (flaky members that failed), until
  // nothing is pending and nothing retry-able is failed.
  for (let round = 1;; round++) {
    const flaky = model.batches.flatMap((b) =>
      b.members.filter((m) => m.behavior === "flaky" && m.state === "failed")
    );
    for (const m of flaky) {
      const queue = rng.pick(handles);
      assert.equal(model.retry(m.id), true);
      assert.equal(await queue.retry(m.id), true, `retry(${m.id}) of flaky member ${m.key}`);
    }
    const queue = rng.pick(handles);
    const stats = await work(queue, undefined, rng.int(1, 3));
    const what = `drain round ${round} on ${names.get(queue)}: retried ${flaky.length} → ${
      JSON.stringify(stats)
    }`;
    log.push(what);
    await check(what);
    const waiting = model.batches.some((b) => model.count(b, "waiting", "running") > 0);
    const retryable = model.batches.some((b) =>
      b.members.some((m) => m.behavior === "flaky" && m.state === "failed")
    );
    if (!waiting && !retryable) break;
    assert.ok(round < 5, "still not drained after 5 rounds");
  }
  assert.equal(count("SELECT COUNT(*) AS n FROM jobs"), 0, "jobs left after the drain");

  // The callbacks ran exactly as often as the model says, and saw their batch.
  let callbackRuns = 0;
  let cancelsByFailure = 0;
  for (const batch of model.batches) {
    assert.ok(batch.finished, `batch ${batch.id} finished`);
    const anyFailed = batch.members.some((m) => m.behavior !== "ok" && m.starts > 0);
    assert.equal(batch.fired.catch, anyFailed, `batch ${batch.id}: catch iff a member failed`);
    assert.ok(batch.fired.finally, `batch ${batch.id}: finally fired`);
    if (batch.cancelledBy === "failure") cancelsByFailure++;
    for (const role of ROLES) {
      for (let n = 0; n < batch.callbacks[role]; n++) {
        const key = `${batch.key}/${role}/${n}`;
        const ran = runs.get(key) ?? 0;
        callbackRuns += ran;
        assert.ok(
          ran === (batch.fired[role] ? 1 : 0) || (ran === 0 && batch.cleared[role] > 0),
          `batch ${batch.id}: ${role} callback ${n} ran ${ran} times (fired ${batch.fired[role]}, ${
            batch.cleared[role]
          } cleared)`,
        );
        if (ran > 0) assert.equal(seenBatchIds.get(key), batch.id, `${key}: ctx.batchId`);
      }
    }
    for (const m of batch.members) {
      assert.equal(runs.get(m.key) ?? 0, m.starts, `member ${m.key}: runs vs job:start events`);
      if (m.starts > 0) assert.equal(seenBatchIds.get(m.key), batch.id, `${m.key}: ctx.batchId`);
    }
  }
  return {
    steps: step,
    batches: model.batches.length,
    members: model.batches.reduce((sum, b) => sum + b.members.length, 0),
    callbackRuns,
    cancelsByFailure,
    cancelsByCall,
    cancelsMidRun,
  };
}

Deno.test("Batches: under random steps on two handles, counters always match the tables and then/catch/finally run exactly as the rules say", async () => {
  const fixed = Deno.env.get("BATCH_PROPERTY_SEED") || undefined;
  const seeds = fixed !== undefined ? [Number(fixed)] : (() => {
    const base = Math.floor(Math.random() * 2 ** 31);
    return Array.from({ length: 25 }, (_, i) => (base + i) >>> 0);
  })();
  assert.ok(seeds.every(Number.isSafeInteger), `BATCH_PROPERTY_SEED must be an integer: ${fixed}`);
  console.log(
    `batch property: seeds ${seeds[0]}..${seeds.at(-1)} ` +
      `(replay one with BATCH_PROPERTY_SEED=<seed>)`,
  );
  const started = performance.now();
  const totals = {
    steps: 0,
    batches: 0,
    members: 0,
    callbackRuns: 0,
    cancelsByFailure: 0,
    cancelsByCall: 0,
    cancelsMidRun: 0,
  };
  for (const seed of seeds) {
    const log: string[] = [];
    try {
      const result = await runSeed(seed, log);
      for (const key of Object.keys(totals) as (keyof typeof totals)[]) totals[key] += result[key];
    } catch (error) {
      console.error(`batch property: seed ${seed} failed after:\n  ${log.join("\n  ")}`);
      throw new Error(`seed ${seed} (BATCH_PROPERTY_SEED=${seed}): ${(error as Error).message}`, {
        cause: error,
      });
    }
  }
  console.log(
    `batch property: ${seeds.length} seeds in ${Math.round(performance.now() - started)} ms: ` +
      `${totals.steps} steps, ${totals.batches} batches of ${totals.members} jobs, ` +
      `${totals.callbackRuns} callback runs, ${totals.cancelsByCall} cancelBatch calls that cancelled ` +
      `(${totals.cancelsMidRun} while a member ran), ` +
      `${totals.cancelsByFailure} batches cancelled by a failure`,
  );
});
