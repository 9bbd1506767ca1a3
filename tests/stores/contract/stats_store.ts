/**
 * The contract of `StatsStore`, what the dashboard reads: counts, the
 * per-minute metrics rollup written by `settle`, the workers' heartbeats,
 * the listing of jobs not yet finished, and each job's log. Only the
 * `Store` API is used, and times are passed in, so the same cases run
 * against every engine.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  type ListedJob,
  METRICS_CARRIED_MINUTE,
  type MetricsRow,
  type NewJobRow,
  RUNTIME_BUCKETS_MS,
  type Settlement,
  type Store,
  type WorkerHeartbeat,
  type WorkerInfo,
} from "../../../src/stores/store.ts";
import {
  claim,
  type ContractArea,
  type ContractTest,
  countsAt,
  fail,
  failedJobs,
  LEASE_MS,
  newJob,
  T0,
} from "./fixtures.ts";

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const BOOM = { message: "Error: boom", stack: null };

/** A histogram with `counts` at the given bucket indexes and zero elsewhere. */
function buckets(counts: Record<number, number> = {}): number[] {
  return Array.from({ length: RUNTIME_BUCKETS_MS.length + 1 }, (_, index) => counts[index] ?? 0);
}

/** A rollup row of "default"/"contract-job" at minute `T0` with `fields` set. */
function metricsRow(fields: Partial<MetricsRow>): MetricsRow {
  return {
    minute: T0,
    queue: "default",
    name: "contract-job",
    completed: 0,
    failed: 0,
    retried: 0,
    expired: 0,
    runtimeMs: 0,
    waitMs: 0,
    runtimeBuckets: buckets(),
    ...fields,
  };
}

/** Rows as plain objects with plain arrays (drivers may hand out other prototypes). */
const plain = <R extends object>(rows: readonly R[]) =>
  rows.map((row) =>
    Object.fromEntries(
      Object.entries(row).map(([key, value]) => [key, Array.isArray(value) ? [...value] : value]),
    )
  );

/** Every rollup row of the first 8 days from `T0`. */
function allMetrics(store: Store): Promise<MetricsRow[]> {
  return store.metrics(T0 - DAY, T0 + 8 * DAY);
}

/** Pushes one job per row, claims them all at `now` with `token`; returns their ids in order. */
async function claimed(
  store: Store,
  rows: Partial<NewJobRow>[],
  now: number,
  token: number,
): Promise<number[]> {
  const ids = await store.insertJobs(rows.map((row) => newJob(row)));
  const queues = [...new Set(rows.map((row) => row.queue ?? "default"))];
  const jobs = await claim(store, { queues, limit: 100, now, token });
  assert.deepEqual(jobs.map((job) => job.id).sort((a, b) => a - b), ids);
  return ids;
}

/** A worker row started at `T0`, last seen at `lastSeenAt`. */
function worker(
  id: string,
  lastSeenAt: number,
  fields: Partial<WorkerHeartbeat> = {},
): WorkerHeartbeat {
  return {
    id,
    host: "box-1",
    pid: 4242,
    queues: ["high", "default"],
    concurrency: 4,
    startedAt: T0,
    lastSeenAt,
    running: 0,
    names: ["send-receipt"],
    ...fields,
  };
}

/** A heartbeat as `workers()` hands it back: its times as dates, with the store's code's schema step. */
function seen(heartbeat: WorkerHeartbeat, schemaStep: number): WorkerInfo {
  const { startedAt, lastSeenAt } = heartbeat;
  return {
    ...heartbeat,
    startedAt: new Date(startedAt),
    lastSeenAt: new Date(lastSeenAt),
    schemaStep,
  };
}

/** What the dashboard and stats read. */
export const statsStore: ContractArea = {
  covers: [
    "counts",
    "pendingByName",
    "jobs",
    "metrics",
    "workers",
    "heartbeat",
    "removeWorker",
    "logs",
  ],
  register,
};

function register(test: ContractTest): void {
  test("counts() reports pending, delayed, reserved and failed per queue", async (store) => {
    const [expired] = await store.insertJobs([newJob({ queue: "a", availableAt: T0 - 5_000 })]);
    await claim(store, { queues: ["a"], now: T0 - 5_000, leaseMs: 1_000, token: 1 });
    await store.insertJobs([newJob({ queue: "a", availableAt: T0 - 100, priority: 1 })]);
    const [reserved] = await claim(store, { queues: ["a"], now: T0 - 100, limit: 1, token: 2 });
    assert.notEqual(reserved?.id, expired);
    await store.insertJobs([newJob({ queue: "a" }), newJob({ queue: "a", availableAt: T0 - 1 })]);
    await store.insertJobs([newJob({ queue: "a", availableAt: T0 + 10_000 })]);
    await failedJobs(store, [T0], { queue: "b" });
    await store.insertJobs([newJob({ queue: "c", availableAt: T0 + 1 })]);
    assert.deepEqual(await countsAt(store, T0), {
      a: [3, 1, 1, 0],
      b: [0, 0, 0, 1],
      c: [0, 1, 0, 0],
    });
  });

  test("settle() adds a completed, timed attempt to its minute's rollup row, with its wait since due", async (store) => {
    const [id] = await claimed(store, [{ availableAt: T0 + 1_000 }], T0 + 1_250, 7);
    const settled = await store.settle([{
      kind: "complete",
      id: id!,
      token: 7,
      at: T0 + 61_000,
      durationMs: 42,
    }]);
    assert.deepEqual(settled.applied, [true]);
    assert.deepEqual(plain(await allMetrics(store)), [
      metricsRow({
        minute: T0 + MINUTE,
        completed: 1,
        runtimeMs: 42,
        waitMs: 250,
        runtimeBuckets: buckets({ 5: 1 }), // 20 < 42 <= 50
      }),
    ]);
  });

  test("settle() adds up a tick per (minute, queue, name), and later ticks add to the same rows", async (store) => {
    const rows = [
      { queue: "mail", name: "send" },
      { queue: "mail", name: "send" },
      { queue: "mail", name: "send" },
      { queue: "mail", name: "bounce" },
      { queue: "default", name: "send" },
    ];
    const ids = await claimed(store, rows, T0 + 100, 1);
    const done = (index: number, at: number, durationMs: number): Settlement => ({
      kind: "complete",
      id: ids[index]!,
      token: 1,
      at,
      durationMs,
    });
    await store.settle([
      done(0, T0 + 1_000, 1),
      done(1, T0 + 59_999, 3),
      done(2, T0 + MINUTE, 0.5),
      done(3, T0 + 2_000, 700),
      done(4, T0 + 3_000, 400_000),
    ]);
    const [later] = await claimed(store, [{ queue: "mail", name: "send" }], T0 + 200, 2);
    await store.settle([{
      kind: "fail",
      id: later!,
      token: 2,
      error: BOOM,
      attempts: 1,
      at: T0 + 30_000,
      durationMs: 2,
    }]);
    assert.deepEqual(plain(await allMetrics(store)), [
      metricsRow({
        queue: "default",
        name: "send",
        completed: 1,
        runtimeMs: 400_000,
        waitMs: 100,
        runtimeBuckets: buckets({ 16: 1 }), // above the last bound
      }),
      metricsRow({
        queue: "mail",
        name: "bounce",
        completed: 1,
        runtimeMs: 700,
        waitMs: 100,
        runtimeBuckets: buckets({ 9: 1 }), // 500 < 700 <= 1000
      }),
      metricsRow({
        queue: "mail",
        name: "send",
        completed: 2,
        failed: 1,
        runtimeMs: 6,
        waitMs: 100 + 100 + 200,
        runtimeBuckets: buckets({ 0: 1, 1: 1, 2: 1 }), // 1, 2 (the fail), 3
      }),
      metricsRow({
        minute: T0 + MINUTE,
        queue: "mail",
        name: "send",
        completed: 1,
        runtimeMs: 0.5,
        waitMs: 100,
        runtimeBuckets: buckets({ 0: 1 }),
      }),
    ]);
  });

  test("settle() keeps each job name whole in its rollup row, the unit separator (U+001F) included", async (store) => {
    const names = ["report\x1fdaily", "report", "\x1f", "a\x1f\x1fb\x1f", "\x1fb"];
    const ids = await claimed(store, names.map((name) => ({ name })), T0 + 100, 1);
    await store.settle(ids.map((id): Settlement => ({
      kind: "complete",
      id,
      token: 1,
      at: T0 + 1_000,
      durationMs: 1,
    })));
    // By name in code units: the order of text is the engine's (its collation on PostgreSQL).
    const byName = (a: MetricsRow, b: MetricsRow) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    assert.deepEqual(
      plain((await allMetrics(store)).toSorted(byName)),
      names.toSorted().map((name) =>
        metricsRow({
          name,
          completed: 1,
          runtimeMs: 1,
          waitMs: 100,
          runtimeBuckets: buckets({ 0: 1 }),
        })
      ),
    );
  });

  test("settle() counts fail as failed, a release with an error as retried, and nothing for put-backs, progress or lost leases", async (store) => {
    const ids = await claimed(store, Array.from({ length: 7 }, () => ({})), T0, 3);
    const at = T0 + 5_000;
    const [failTimed, failUntimed, retry, putBack, released, progressed, lost] = ids as [
      number,
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    const release = { kind: "release", token: 3, at, availableAt: at + 1_000 } as const;
    const settled = await store.settle([
      { kind: "fail", id: failTimed, token: 3, error: BOOM, attempts: 1, at, durationMs: 12 },
      { kind: "fail", id: failUntimed, token: 3, error: BOOM, attempts: 1, at },
      { ...release, id: retry, error: "Error: flaky", refundAttempt: false, durationMs: 8 },
      { ...release, id: putBack, error: "worker stopped", refundAttempt: true },
      { ...release, id: released, error: null, refundAttempt: false },
      { kind: "progress", id: progressed, token: 3, at, percent: 50 },
      { kind: "complete", id: lost, token: 999, at, durationMs: 5 },
    ]);
    assert.deepEqual(settled.applied, [true, true, true, true, true, true, false]);
    assert.deepEqual(plain(await allMetrics(store)), [
      metricsRow({
        failed: 2,
        retried: 1,
        runtimeMs: 20,
        waitMs: 0,
        runtimeBuckets: buckets({ 3: 1, 4: 1 }), // 8 <= 10, 12 <= 20
      }),
    ]);
  });

  test("a job's wait counts from when it was due to its claim: after a release, and after a dead worker's lease", async (store) => {
    const [id] = await claimed(store, [{}], T0 + 40, 1);
    const retryAt = T0 + 10_000;
    await store.settle([{
      kind: "release",
      id: id!,
      token: 1,
      at: T0 + 1_000,
      availableAt: retryAt,
      error: "Error: flaky",
      refundAttempt: false,
      durationMs: 900,
    }]);
    assert.equal((await claim(store, { now: retryAt - 1, token: 2 })).length, 0, "not due yet");
    assert.equal((await claim(store, { now: retryAt + 300, token: 2 })).length, 1);
    // Worker 2 dies: the lease ends at retryAt + 300 + LEASE_MS, and worker 3 claims 500 ms later.
    const leaseEnd = retryAt + 300 + LEASE_MS;
    assert.equal((await claim(store, { now: leaseEnd + 500, token: 3 })).length, 1);
    await store.settle([{
      kind: "complete",
      id: id!,
      token: 3,
      at: leaseEnd + 600,
      durationMs: 10,
    }]);
    assert.equal(Math.floor((leaseEnd + 600) / MINUTE) * MINUTE, T0, "one minute, one row");
    assert.deepEqual(plain(await allMetrics(store)), [
      metricsRow({
        completed: 1,
        retried: 1,
        runtimeMs: 910,
        waitMs: 40 + 500, // the attempt its dead worker never settled counts nothing
        runtimeBuckets: buckets({ 3: 1, 9: 1 }), // 10 <= 10, 500 < 900 <= 1000
      }),
    ]);
  });

  test("metrics() returns the rows with since <= minute < until, by minute, queue, name", async (store) => {
    const rows = [0, 1, 2, 3].map((minute) => ({ queue: minute % 2 ? "a" : "b", name: "n" }));
    const ids = await claimed(store, rows, T0, 1);
    await store.settle(ids.map((id, minute) => ({
      kind: "complete",
      id,
      token: 1,
      at: T0 + minute * MINUTE + 10,
    })));
    const minutes = (list: MetricsRow[]) => list.map((row) => [row.minute - T0, row.queue]);
    assert.deepEqual(minutes(await store.metrics(T0 + MINUTE, T0 + 3 * MINUTE)), [
      [MINUTE, "a"],
      [2 * MINUTE, "b"],
    ]);
    assert.deepEqual(minutes(await store.metrics(T0 + MINUTE + 1, T0 + 3 * MINUTE + 1)), [
      [2 * MINUTE, "b"],
      [3 * MINUTE, "a"],
    ]);
    assert.deepEqual(await store.metrics(T0 + 4 * MINUTE, T0 + 9 * MINUTE), []);
  });

  test("settle() prunes rollup rows older than 7 days before its time, at most once a minute", async (store) => {
    const settleOne = async (at: number, token: number) => {
      const [id] = await claimed(store, [{ availableAt: at - 10 }], at - 10, token);
      await store.settle([{ kind: "complete", id: id!, token, at }]);
    };
    const minutes = async () => (await allMetrics(store)).map((row) => (row.minute - T0) / MINUTE);
    await settleOne(T0, 1); // a prune here finds nothing to delete
    await settleOne(T0 + 7 * DAY, 2); // cutoff T0: the row of minute T0 is kept
    assert.deepEqual(await minutes(), [0, 7 * 24 * 60]);
    await settleOne(T0 + 7 * DAY + 59_999, 3); // within a minute of the last prune: none
    assert.deepEqual(await minutes(), [0, 7 * 24 * 60]);
    await settleOne(T0 + 7 * DAY + MINUTE, 4); // cutoff T0 + 1 minute: the row of minute T0 goes
    assert.deepEqual(await minutes(), [7 * 24 * 60, 7 * 24 * 60 + 1]);
  });

  test("settle()'s prune deletes the rows it finds past the 7 days and adds them to the carried totals, which no prune deletes, so the rollup's totals never fall", async (store) => {
    // Each job due 1,000 ms before its settle and claimed 10 ms before it: it waited 990 ms.
    const settle = async (at: number, token: number, kinds: ("complete" | "fail")[]) => {
      const rows = kinds.map((_, index) => ({ availableAt: at - 1_000, name: `job-${index % 2}` }));
      const ids = await claimed(store, rows, at - 10, token);
      await store.settle(
        ids.map((id, index): Settlement =>
          kinds[index] === "complete"
            ? { kind: "complete", id, token, at, durationMs: 3 }
            : { kind: "fail", id, token, at, error: BOOM, attempts: 1, durationMs: 2.5 }
        ),
      );
    };
    /** [completed, failed, runtimeMs, waitMs, runs] per name, of the rows read from `since` to `until`. */
    const sums = async (since: number, until: number) => {
      const byName = new Map<string, [number, number, number, number, number]>();
      for (const row of await store.metrics(since, until)) {
        const sums = byName.get(row.name) ?? [0, 0, 0, 0, 0];
        byName.set(row.name, [
          sums[0] + row.completed,
          sums[1] + row.failed,
          sums[2] + row.runtimeMs,
          sums[3] + row.waitMs,
          sums[4] + row.runtimeBuckets.reduce((sum, count) => sum + count, 0),
        ]);
      }
      return Object.fromEntries([...byName].sort(([a], [b]) => a < b ? -1 : 1));
    };
    const totals = () => sums(0, METRICS_CARRIED_MINUTE + MINUTE);
    const carried = () => sums(METRICS_CARRIED_MINUTE, METRICS_CARRIED_MINUTE + MINUTE);
    await settle(T0, 1, ["complete", "complete", "fail"]);
    await settle(T0 + MINUTE, 2, ["complete"]);
    assert.deepEqual(await totals(), {
      "job-0": [2, 1, 8.5, 2_970, 3],
      "job-1": [1, 0, 3, 990, 1],
    });
    assert.deepEqual(await carried(), {});
    // 8 days on: both minutes are pruned, their counts carried.
    await settle(T0 + 8 * DAY, 3, ["complete"]);
    assert.deepEqual(await totals(), {
      "job-0": [3, 1, 11.5, 3_960, 4],
      "job-1": [1, 0, 3, 990, 1],
    });
    assert.deepEqual(await carried(), {
      "job-0": [2, 1, 8.5, 2_970, 3],
      "job-1": [1, 0, 3, 990, 1],
    });
    assert.deepEqual(
      (await store.metrics(0, T0 + 30 * DAY)).map((row) => row.minute),
      [T0 + 8 * DAY],
    );
    // Another 8 days: the minute of T0 + 8 days is carried too, added to what was carried.
    await settle(T0 + 16 * DAY, 4, ["fail", "complete"]);
    assert.deepEqual(await totals(), {
      "job-0": [3, 2, 14, 4_950, 5],
      "job-1": [2, 0, 6, 1_980, 2],
    });
    assert.deepEqual(await carried(), {
      "job-0": [3, 1, 11.5, 3_960, 4],
      "job-1": [1, 0, 3, 990, 1],
    });
  });

  test("heartbeat() writes and replaces a worker's row; workers() lists those seen since, earliest started first", async (store) => {
    await store.heartbeat(worker("b", T0 + 1_000), 0);
    await store.heartbeat(worker("a", T0 + 2_000, { startedAt: T0 + 5 }), 0);
    await store.heartbeat(
      worker("c", T0 + 3_000, { queues: ["x"], concurrency: 1, names: ["a", "b"] }),
      0,
    );
    await store.heartbeat(worker("b", T0 + 9_000, { running: 3 }), 0);
    const { codeStep } = await store.migrationPlan();
    assert.deepEqual(
      plain(await store.workers(T0 + 2_000, T0)),
      [
        { ...worker("b", T0 + 9_000, { running: 3 }), queues: ["high", "default"] },
        { ...worker("c", T0 + 3_000, { concurrency: 1 }), queues: ["x"], names: ["a", "b"] },
        { ...worker("a", T0 + 2_000, { startedAt: T0 + 5 }), queues: ["high", "default"] },
      ].sort((x, y) => x.startedAt - y.startedAt || (x.id < y.id ? -1 : 1)).map((row) =>
        seen(row, codeStep)
      ),
    );
    assert.deepEqual((await store.workers(T0 + 3_001, T0)).map((row) => row.id), ["b"]);
  });

  test("heartbeat() records the schema step of the store's code and answers the database's: no newer contract step on a store this code migrated", async (store) => {
    const plan = await store.migrationPlan();
    assert.deepEqual(plan.steps, [], "a store opened by this code lacks no step");
    assert.equal(plan.databaseStep, plan.codeStep);
    const news = await store.heartbeat(worker("w", T0), 0);
    assert.deepEqual(news, {
      codeStep: plan.codeStep,
      databaseStep: plan.codeStep,
      contractStep: null,
    });
    assert.deepEqual((await store.workers(0, T0)).map((row) => row.schemaStep), [plan.codeStep]);
  });

  test("heartbeat() drops workers last seen before staleBefore; removeWorker() deletes one row", async (store) => {
    await store.heartbeat(worker("old", T0), 0);
    await store.heartbeat(worker("live", T0 + 5_000), 0);
    await store.heartbeat(worker("me", T0 + 9_000), T0 + 1);
    assert.deepEqual((await store.workers(0, T0)).map((row) => row.id), ["live", "me"]);
    assert.equal(await store.removeWorker("me"), true);
    assert.equal(await store.removeWorker("me"), false);
    assert.deepEqual((await store.workers(0, T0)).map((row) => row.id), ["live"]);
  });

  test("jobs() lists unfinished jobs in id order with their state at now; an expired lease is pending", async (store) => {
    const now = T0 + LEASE_MS + 10_000;
    const [due, later, running, dead] = await store.insertJobs([
      newJob({ name: "due", availableAt: T0, createdAt: T0 - 5 }),
      newJob({ name: "later", availableAt: now + 60_000, priority: 2 }),
      newJob({ name: "running", queue: "mail" }),
      newJob({ name: "dead", queue: "dead" }),
    ]) as [number, number, number, number];
    assert.equal((await claim(store, { queues: ["mail"], now: now - 5, token: 5 })).length, 1);
    assert.equal(
      (await claim(store, { queues: ["dead"], now: now - LEASE_MS - 1, token: 6 })).length,
      1,
    );
    await store.settle([{ kind: "progress", id: running, token: 5, at: now - 2, percent: 37.5 }]);
    const listing = await store.jobs({ state: null, queue: null, name: null }, {
      limit: 10,
      offset: 0,
    }, now);
    const expected: ListedJob[] = [
      {
        id: due,
        queue: "default",
        name: "due",
        state: "pending",
        priority: 0,
        attempts: 0,
        availableAt: new Date(T0),
        createdAt: new Date(T0 - 5),
        progress: null,
        batchId: null,
        lastError: null,
      },
      {
        id: later,
        queue: "default",
        name: "later",
        state: "delayed",
        priority: 2,
        attempts: 0,
        availableAt: new Date(now + 60_000),
        createdAt: new Date(T0),
        progress: null,
        batchId: null,
        lastError: null,
      },
      {
        id: running,
        queue: "mail",
        name: "running",
        state: "running",
        priority: 0,
        attempts: 1,
        availableAt: new Date(now - 5 + LEASE_MS),
        createdAt: new Date(T0),
        progress: 37.5,
        batchId: null,
        lastError: null,
      },
      {
        id: dead,
        queue: "dead",
        name: "dead",
        state: "pending",
        priority: 0,
        attempts: 1,
        availableAt: new Date(now - 1),
        createdAt: new Date(T0),
        progress: null,
        batchId: null,
        lastError: null,
      },
    ];
    assert.equal(listing.total, 4);
    assert.deepEqual(plain(listing.jobs), expected);
  });

  test("counts(), running() and jobs() read a job claimed ahead as pending until its start is confirmed, as result() does", async (store) => {
    const [a, b, c] = await store.insertJobs([newJob(), newJob(), newJob()]);
    const claimed = await claim(store, { limit: 3, aheadFrom: 1, token: 1 });
    assert.deepEqual(claimed.map((job) => [job.id, job.ahead === true]), [
      [a, false],
      [b, true],
      [c, true],
    ]);
    const now = T0 + 1;
    const states = async () => {
      const listing = await store.jobs({ state: null, queue: null, name: null }, {
        limit: 10,
        offset: 0,
      }, now);
      const running = await store.jobs({ state: "running", queue: null, name: null }, {
        limit: 10,
        offset: 0,
      }, now);
      return {
        counts: (await countsAt(store, now)).default,
        running: (await store.running(now)).map((job) => job.id),
        listed: listing.jobs.map((job) => [job.id, job.state]),
        runningTotal: running.total,
        result: (await store.result(b!, now))?.state,
      };
    };
    assert.deepEqual(await states(), {
      counts: [2, 0, 1, 0],
      running: [a],
      listed: [[a, "running"], [b, "pending"], [c, "pending"]],
      runningTotal: 1,
      result: "pending",
    });
    const confirmed = await store.settle([], undefined, {
      starts: { leases: [{ id: b!, token: 1 }], leaseMs: LEASE_MS, now },
    });
    assert.deepEqual(confirmed.started, [b]);
    assert.deepEqual(await states(), {
      counts: [1, 0, 2, 0],
      running: [a, b],
      listed: [[a, "running"], [b, "running"], [c, "pending"]],
      runningTotal: 2,
      result: "running",
    });
    assert.deepEqual(await store.pendingByName(now), [], "a worker holds c: none is unclaimed");
  });

  test("jobs() filters by state, queue and name, pages in id order, and counts every match", async (store) => {
    const ids = await store.insertJobs([
      ...Array.from({ length: 5 }, () => newJob({ queue: "a", name: "x" })),
      newJob({ queue: "a", name: "y" }),
      newJob({ queue: "b", name: "x" }),
      newJob({ queue: "a", name: "x", availableAt: T0 + 99_000 }),
    ]);
    const list = async (
      filter: Partial<Parameters<Store["jobs"]>[0]>,
      limit = 100,
      offset = 0,
    ) => {
      const all = { state: null, queue: null, name: null, ...filter };
      const { total, jobs } = await store.jobs(all, { limit, offset }, T0);
      return { total, ids: jobs.map((job) => job.id) };
    };
    assert.deepEqual(await list({ queue: "a", name: "x", state: "pending" }, 2, 1), {
      total: 5,
      ids: ids.slice(1, 3),
    });
    assert.deepEqual(await list({ queue: "a", name: "x" }, 2, 4), {
      total: 6,
      ids: [ids[4]!, ids[7]!],
    });
    assert.deepEqual(await list({ name: "x", state: "delayed" }), { total: 1, ids: [ids[7]!] });
    assert.deepEqual(await list({ queue: "b" }), { total: 1, ids: [ids[6]!] });
    assert.deepEqual(await list({ state: "running" }), { total: 0, ids: [] });
    assert.deepEqual(await list({ queue: "a'); DROP TABLE jobs;--" }), { total: 0, ids: [] });
    assert.deepEqual(await list({}, 3, 6), { total: 8, ids: ids.slice(6) });
  });

  test("jobs() shows a released job's last error and no progress left from its last attempt", async (store) => {
    const [id] = await claimed(store, [{}], T0, 1);
    await store.settle([
      { kind: "progress", id: id!, token: 1, at: T0 + 1, percent: 80 },
    ]);
    await store.settle([{
      kind: "release",
      id: id!,
      token: 1,
      at: T0 + 2,
      availableAt: T0 + 5,
      error: "Error: <b>flaky</b>",
      refundAttempt: false,
    }]);
    const { jobs } = await store.jobs({ state: null, queue: null, name: null }, {
      limit: 10,
      offset: 0,
    }, T0 + 3);
    assert.deepEqual(
      plain(jobs).map(({ state, progress, lastError, attempts }) => ({
        state,
        progress,
        lastError,
        attempts,
      })),
      [{ state: "delayed", progress: null, lastError: "Error: <b>flaky</b>", attempts: 1 }],
    );
  });

  test("pendingByName() counts due jobs per queue and name, expired leases included, by queue then name", async (store) => {
    const now = T0 + 10;
    await store.insertJobs([
      newJob({ name: "x", queue: "b", availableAt: T0 }),
      newJob({ name: "x", queue: "b", availableAt: T0 }),
      newJob({ name: "y", queue: "b", availableAt: T0 }),
      newJob({ name: "x", queue: "a", availableAt: T0 }),
      newJob({ name: "x", queue: "a", availableAt: now + 60_000 }),
      newJob({ name: "leased", queue: "a", availableAt: T0 }),
      newJob({ name: "expired", queue: "a", availableAt: T0 }),
    ]);
    await claim(store, { queues: ["a"], limit: 1, now: T0, token: 5, names: ["leased"] });
    await claim(store, {
      queues: ["a"],
      limit: 1,
      now: T0,
      token: 6,
      leaseMs: 5,
      names: ["expired"],
    });
    assert.deepEqual(plain(await store.pendingByName(now)), [
      { queue: "a", name: "expired", pending: 1 },
      { queue: "a", name: "x", pending: 1 },
      { queue: "b", name: "x", pending: 2 },
      { queue: "b", name: "y", pending: 1 },
    ]);
  });

  test("claim() with names takes only jobs of those names, in claim order", async (store) => {
    const ids = await store.insertJobs([
      newJob({ name: "a", priority: 1 }),
      newJob({ name: "b", priority: 9 }),
      newJob({ name: "c" }),
      newJob({ name: "a" }),
    ]);
    const claimed = await claim(store, { names: ["a", "c"], limit: 10 });
    assert.deepEqual(claimed.map((job) => job.id), [ids[0], ids[2], ids[3]]);
    assert.deepEqual((await claim(store, { names: [], token: 2 })).map((job) => job.id), []);
    assert.deepEqual((await claim(store, { token: 3 })).map((job) => job.id), [ids[1]]);
  });

  test("logs() gives a job's lines as settle() wrote them, oldest first, and keeps each job under its cap", async (store) => {
    const [a, b] = await claimed(store, [{}, {}], T0, 1);
    const line = (jobId: number, n: number, bytes = 10) => ({
      jobId,
      attempt: 1,
      at: T0 + n,
      level: n % 2 ? "info" : "warn",
      message: `line ${n} ✓`,
      fields: n === 1 ? '{"k":"v"}' : null,
      encrypted: n === 2,
      bytes,
    });
    const progress = { kind: "progress", id: a!, token: 1, at: T0 + 10, percent: 5 } as const;
    await store.settle([progress], undefined, {
      logs: { lines: [line(a!, 1), line(a!, 2), line(b!, 3)], maxBytesPerJob: 10_000 },
    });
    const shown = async (jobId: number) =>
      plain(await store.logs(jobId)).map(({ id: _, ...row }) => row);
    const strip = ({ bytes: _, ...row }: ReturnType<typeof line>) => row;
    assert.deepEqual(await shown(a!), [strip(line(a!, 1)), strip(line(a!, 2))]);
    assert.deepEqual(await shown(b!), [strip(line(b!, 3))]);
    assert.deepEqual(await store.logs(987_654), []);
    await store.settle([{ ...progress, at: T0 + 20 }], undefined, {
      logs: { lines: [4, 5, 6, 7].map((n) => line(a!, n, 100)), maxBytesPerJob: 300 },
    });
    const capped = await shown(a!);
    assert.deepEqual(
      capped.map((row) => row.level),
      ["cap", "info"],
      "the cap line, then the newest",
    );
    assert.match(capped[0]!.message, /log capped at 300 bytes per job: 5 older lines dropped/);
    assert.equal(capped[1]!.message, "line 7 ✓");
  });

  test("logs() of a job removed for good is empty at once, before the prune deletes its lines", async (store) => {
    const [forgotten, kept] = await claimed(store, [{}, {}], T0, 1);
    const line = (jobId: number) => ({
      jobId,
      attempt: 1,
      at: T0 + 1,
      level: "info",
      message: "a line",
      fields: null,
      encrypted: false,
      bytes: 10,
    });
    await store.settle([fail(forgotten!, 1, T0 + 2), fail(kept!, 1, T0 + 2)], undefined, {
      logs: { lines: [line(forgotten!), line(kept!)], maxBytesPerJob: 10_000 },
    });
    assert.equal((await store.logs(forgotten!)).length, 1);
    assert.equal(await store.forget(forgotten!), true);
    assert.deepEqual(await store.logs(forgotten!), []);
    assert.equal((await store.logs(kept!)).length, 1, "a failed job still kept keeps its lines");
  });
}
