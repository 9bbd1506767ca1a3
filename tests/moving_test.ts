/**
 * Moving a queue between stores (`moveQueue`, docs/moving.md): a queue
 * holding every kind of state is moved from SQLite to another SQLite file,
 * to PostgreSQL and to Redis, and from Redis to SQLite, to another prefix
 * and to PostgreSQL, and worked there: every job runs
 * exactly once, batch callbacks fire once, `result(id)` answers for old
 * ids, a schedule does not fire a slot twice. A PostgreSQL queue moved to
 * SQLite, the fence refusing a dispatch on the source, a destination that
 * is not empty and workers still running refused.
 *
 * Handlers run in this isolate and write what ran to `ran`; the queues go
 * by one manual clock, as does the move (its fence and what it leaves behind).
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { z } from "zod";
import {
  abortMove,
  defineJob,
  defineSchedule,
  generateAppKey,
  moveQueue,
  PermanentError,
  Queue,
  QueueMovedError,
  rateLimited,
  withoutOverlapping,
} from "../mod.ts";
import { moveStores } from "../src/moving/move_stores.ts";
import { mismatchError } from "../src/move_queue.ts";
import { workUntilEmpty } from "../src/testing.ts";
import { MoveRules } from "../src/moving/rules.ts";
import { systemClock } from "../src/clock.ts";
import { PostgresStore } from "../src/stores/postgres/mod.ts";
import { RedisStore } from "../src/stores/redis/mod.ts";
import { SqliteStore } from "../src/stores/sqlite/mod.ts";
import { type MoveStore, type Store, TRANSFER_TABLES } from "../src/stores/store.ts";
import { MOVE_PAGE_BYTES } from "../src/stores/rows/transfer.ts";
import { exists, ManualClock, tempDir, waitUntil } from "./_helpers.ts";
import { openSession, postForm } from "./_dashboard.ts";
import { dashboard } from "../src/dashboard.ts";
import { freshSchema, postgresTestUrl } from "./_postgres.ts";
import { deletePrefix, freshPrefix, redisTestUrl } from "./_redis.ts";
import { freshDatabase } from "./fixtures/deploy/serve_process.ts";

const MINUTE = 60_000;
/** A whole minute, so the schedule's slots fall on it. */
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const APP_KEY = generateAppKey();
const pgUrl = postgresTestUrl();
const redisUrl = redisTestUrl();

/** Every job and schedule of these tests, and what ran. */
function movingJobs() {
  const ran: string[] = [];
  const prepared: string[] = [];
  const label = z.object({ label: z.string() });
  const work = defineJob({
    name: "work",
    schema: label,
    keepFinishedMs: 24 * 60 * MINUTE,
    handle({ label }, ctx) {
      ran.push(label);
      ctx.log(`ran ${label}`, { label });
      if (label === "boom") throw new PermanentError("boom");
      return { label };
    },
  });
  const secret = defineJob({
    name: "secret",
    schema: label,
    encrypted: true,
    handle: ({ label }) => void ran.push(label),
  });
  const unique = defineJob({
    name: "unique",
    schema: label,
    uniqueForMs: 60 * MINUTE,
    uniqueId: ({ label }) => label,
    handle: ({ label }) => void ran.push(label),
  });
  const debounced = defineJob({
    name: "debounced",
    schema: label,
    debounceMs: 1_000,
    handle: ({ label }) => void ran.push(label),
  });
  const guarded = defineJob({
    name: "guarded",
    schema: label,
    middleware: () => [withoutOverlapping("guard"), rateLimited("rate", 100, 60 * MINUTE)],
    handle: ({ label }) => void ran.push(label),
  });
  const grouped = defineJob({
    name: "grouped",
    schema: z.object({ label: z.string(), tenant: z.string() }),
    group: ({ tenant }) => tenant,
    handle: ({ label }) => void ran.push(label),
  });
  const survey = defineJob({
    name: "survey",
    schema: label,
    async handle({ label }, ctx) {
      await ctx.step("prepare", () => prepared.push(label));
      const reply = await ctx.waitFor("reply");
      ran.push(`${label}:${JSON.stringify(reply)}`);
    },
  });
  const tick = defineJob({
    name: "tick",
    schema: z.object({ slot: z.string() }),
    handle: ({ slot }) => void ran.push(`tick ${slot}`),
  });
  const everyMinute = defineSchedule({
    name: "every-minute",
    everyMs: MINUTE,
    job: tick,
    payload: (slot: Date) => ({ slot: slot.toISOString() }),
  });
  return {
    ran,
    prepared,
    work,
    secret,
    unique,
    debounced,
    guarded,
    grouped,
    survey,
    all: [work, secret, unique, debounced, guarded, grouped, survey, tick, everyMinute],
  };
}

type Jobs = ReturnType<typeof movingJobs>;

/** Runs a worker of this isolate on `queues` until nothing is due (or `maxJobs` ran). */
async function run(queue: Queue, queues?: string[], maxJobs?: number): Promise<void> {
  await workUntilEmpty(queue, {
    executor: "isolate",
    ...(queues !== undefined && { queues }),
    ...(maxJobs !== undefined && { maxJobs }),
    timeoutMs: 30_000,
  });
}

/** Ids of what the source holds when it is moved, for the checks on the destination. */
interface Held {
  readonly history: number;
  readonly failed: number;
  readonly batch: number;
  readonly running: number;
  readonly survey: number;
  readonly secret: number;
}

/**
 * Fills the queue with every kind of state: pending, delayed, running (a
 * worker's claim with its overlap lock, left as a killed worker leaves
 * it), failed, kept history, a batch half done, a chain and a flow mid-way,
 * unique and debounce keys, a rate window, a schedule that fired, a paused
 * queue and group, job logs, a durable step and a buffered signal, an
 * encrypted payload.
 */
async function fill(queue: Queue, store: Store, jobs: Jobs, clock: ManualClock): Promise<Held> {
  const { work } = jobs;
  clock.advance(MINUTE); // the schedule's first slot, T0 + 1 min
  await run(queue);
  const history = await queue.dispatch(work, { label: "history" }, { queue: "history" });
  await queue.dispatch(work, { label: "boom" }, { queue: "history" });
  await queue.dispatch(jobs.guarded, { label: "guarded-1" }, { queue: "history" });
  await run(queue, ["history"]);
  const failed = (await queue.failed())[0]!.id;

  const batch = await queue.batch("half").push(work, { label: "batch-1" }, { queue: "batch" })
    .push(work, { label: "batch-2" }, { queue: "batch" })
    .push(work, { label: "batch-3" }, { queue: "batch" })
    .push(work, { label: "batch-4" }, { queue: "batch" })
    .then(work, { label: "batch-then" }).finally(work, { label: "batch-finally" }).dispatch();
  await run(queue, ["batch"], 2);
  await queue.chain({ queue: "chain" }).then(work, { label: "chain-1" })
    .then(work, { label: "chain-2" }).then(work, { label: "chain-3" }).dispatch();
  await run(queue, ["chain"], 1);
  const flow = queue.flow("two");
  const first = flow.add(work, { label: "flow-1" }, { key: "first", queue: "flow" });
  flow.add(work, { label: "flow-2" }, { key: "second", after: [first], queue: "flow" });
  await flow.dispatch();
  await run(queue, ["flow"], 1);

  const survey = await queue.dispatch(jobs.survey, { label: "survey" }, { queue: "steps" });
  await run(queue, ["steps"]); // parks in its wait after the step
  assert.equal(await queue.signal(survey, "reply", { yes: true }), "delivered");

  await queue.dispatch(work, { label: "pending" });
  await queue.dispatch(work, { label: "delayed" }, { delayMs: 30_000 });
  const secret = await queue.dispatch(jobs.secret, { label: "secret" });
  await queue.dispatch(jobs.unique, { label: "unique" });
  await queue.dispatch(jobs.debounced, { label: "debounced" });
  await queue.dispatch(work, { label: "paused" }, { queue: "paused" });
  await queue.pause("paused");
  await queue.dispatch(jobs.grouped, { label: "grouped", tenant: "t1" });
  await queue.pauseGroup(jobs.grouped, "t1");
  await queue.dispatch(jobs.grouped, { label: "held", tenant: "t2" });
  await queue.pauseGroup(jobs.grouped, "t2", { forMs: 30_000 }); // a hold: ends on its own

  // A worker claimed a guarded job and took its lock, then died.
  const running = await queue.dispatch(jobs.guarded, { label: "guarded-2" }, { queue: "guard" });
  const now = clock.now();
  const [claimed] = await store.claim({
    queues: ["guard"],
    limit: 1,
    now,
    leaseMs: 10 * MINUTE,
    token: 77,
  });
  assert.equal(claimed?.id, running);
  assert.deepEqual(
    await store.acquire([{
      id: running,
      token: 77,
      locks: [{ key: "guard", limit: 1, expiresAt: now + 60 * MINUTE, retryAt: now + 1_000 }],
      rates: [{ key: "rate", max: 100, perMs: 60 * MINUTE }],
    }], now),
    [null],
  );
  // Its handler began (as a worker's tick records): a death now charges it, and a move keeps its attempt.
  await store.settle([], undefined, { begun: [{ id: running, token: 77 }] });
  return { history, failed, batch, running, survey, secret };
}

/** Every queue the scenario's jobs are on. */
const QUEUES = ["default", "history", "batch", "chain", "flow", "steps", "guard", "paused"];

/** What every run of the scenario must have run, once each. */
const EXPECTED_RUNS = [
  `tick ${new Date(T0 + MINUTE).toISOString()}`,
  `tick ${new Date(T0 + 2 * MINUTE).toISOString()}`,
  "history",
  "boom",
  "guarded-1",
  "guarded-2",
  ...[1, 2, 3, 4].map((n) => `batch-${n}`),
  "batch-then",
  "batch-finally",
  "chain-1",
  "chain-2",
  "chain-3",
  "flow-1",
  "flow-2",
  'survey:{"yes":true}',
  "pending",
  "delayed",
  "secret",
  "unique",
  "debounced",
  "paused",
  "grouped",
  "held",
].sort();

/** A fresh, empty store a move reads from or writes to: its URL (or path), and how to open it. */
interface Place extends AsyncDisposable {
  readonly url: string;
  open(): Promise<Store>;
}

/** A new SQLite file named `name` in `dir`. */
function sqliteAt(dir: string, name: string): Promise<Place> {
  const path = join(dir, name);
  return Promise.resolve({
    url: path,
    open: () => SqliteStore.open(path),
    [Symbol.asyncDispose]: () => Promise.resolve(),
  });
}

/** A fresh PostgreSQL database, dropped afterwards. */
async function postgresAt(): Promise<Place> {
  const database = await freshDatabase(pgUrl!);
  return {
    url: database.url,
    open: () => PostgresStore.open(database.url, { clock: "caller" }),
    [Symbol.asyncDispose]: () => database[Symbol.asyncDispose](),
  };
}

/** A fresh key prefix on the test Redis, its keys deleted afterwards. */
function redisAt(): Promise<Place> {
  const prefix = freshPrefix();
  const url = `${redisUrl}/0?prefix=${prefix}`;
  return Promise.resolve({
    url,
    open: () => RedisStore.open(url, { clock: "caller" }),
    [Symbol.asyncDispose]: () => deletePrefix(redisUrl!, prefix),
  });
}

/**
 * Moves a queue with every kind of state from `from` (a SQLite file when
 * not given) to `to` and works it there.
 */
async function scenario(
  to: (dir: string) => Promise<Place>,
  from: (dir: string) => Promise<Place> = (dir) => sqliteAt(dir, "source.db"),
): Promise<void> {
  await using dir = await tempDir();
  await using origin = await from(dir.dir);
  await using destination = await to(dir.dir);
  const jobs = movingJobs();
  const clock = new ManualClock(T0 + 1_000);
  const sourceStore = await origin.open();
  const source = await Queue.open({ store: sourceStore, jobs: jobs.all, clock, appKey: APP_KEY });
  let held: Held;
  try {
    held = await fill(source, sourceStore, jobs, clock);
    const before = [...jobs.ran];

    const report = await moveQueue(origin.url, destination.url, { clock });
    assert.deepEqual(report.mismatched, []);
    assert.equal(report.resumed, false);
    const table = (name: string) => report.tables.find((row) => row.table === name)!;
    assert.deepEqual({ ...table("job_locks") }, {
      table: "job_locks",
      source: 1,
      leftBehind: 1,
      destination: 0,
    }, "the dead attempt's lock is left behind");
    for (const name of ["jobs", "batches", "failed_jobs", "completed_jobs", "job_keys"]) {
      assert.ok(table(name).destination > 0, `${name} copied`);
    }
    for (const row of report.tables.filter(({ table }) => table !== "job_locks")) {
      assert.equal(row.destination, row.source, `${row.table} counts`);
    }

    await assert.rejects(
      source.dispatch(jobs.work, { label: "too late" }),
      (error) => error instanceof QueueMovedError && error.to === destination.url,
      "the fenced source refuses a dispatch, naming where the queue went",
    );
    assert.deepEqual(jobs.ran, before, "nothing ran on the source since");
  } finally {
    await source.close();
  }

  const movedStore = await destination.open() as Store & MoveStore;
  const copied = (await movedStore.exportRows("jobs", null, 1_000)).rows;
  const runningRow = copied.find((row) => row.id === held.running);
  const secretRow = copied.find((row) => row.id === held.secret);
  assert.doesNotMatch(String(secretRow?.payload), /secret/, "ciphertext copied as ciphertext");
  assert.deepEqual(
    [runningRow?.token, runningRow?.attempts, runningRow?.available_at],
    [null, 1, clock.now()],
    "the running job came as pending, due at the fence, its attempt kept",
  );
  const moved = await Queue.open({
    store: movedStore,
    jobs: jobs.all,
    clock,
    appKey: APP_KEY,
  });
  try {
    assert.equal((await moved.result(held.history))?.state, "completed");
    assert.equal((await moved.result(held.failed))?.state, "failed");
    assert.equal((await moved.result(held.running))?.state, "pending");
    assert.equal((await moved.batchStatus(held.batch))?.pending, 2);
    assert.equal((await moved.logs(held.history)).length, 1, "the job log came along");
    assert.deepEqual((await moved.paused()).map(({ queue }) => queue), ["paused"]);
    await run(moved, QUEUES);
    assert.equal(jobs.ran.includes("held"), false, "the held group is still held after the move");
    clock.advance(MINUTE); // the next slot, the delayed job and the debounced one come due; the hold ends
    await run(moved, QUEUES);
    await moved.resume("paused");
    await moved.resumeGroup(jobs.grouped, "t1");
    await run(moved, QUEUES);
    assert.deepEqual([...jobs.ran].sort(), EXPECTED_RUNS, "every job ran exactly once");
    assert.deepEqual(jobs.prepared, ["survey"], "the durable step ran once, before the move");
    const batch = await moved.batchStatus(held.batch);
    assert.equal(batch?.succeeded, 4);
    assert.equal(batch?.finished, true);
    assert.equal((await moved.result(held.secret))?.state, "completed");
    assert.equal((await moved.result(held.survey))?.state, "completed");
    const newer = await moved.dispatch(jobs.work, { label: "after" });
    assert.ok(newer > held.running && newer > held.survey, "new ids come after the copied ones");
  } finally {
    await moved.close();
  }
}

Deno.test("a move whose counts differ says to run it again when rows are missing, and to check the new store when it holds more than the move copied (a run again would refuse)", () => {
  const report = (jobs: { source: number; destination: number }) => ({
    from: "/srv/old.db",
    to: "/srv/new.db",
    tables: [
      { table: "jobs" as const, leftBehind: 0, ...jobs },
      { table: "job_locks" as const, source: 2, leftBehind: 1, destination: 0 },
    ],
    mismatched: ["jobs"] as ("jobs" | "job_locks")[],
    fencedAt: new Date(0),
    resumed: true,
    ms: 1,
  });
  assert.equal(
    mismatchError(report({ source: 3, destination: 2 })).message,
    "The move of /srv/old.db to /srv/new.db is not complete: counts differ in jobs (source 3, destination 2); run the move again to finish it",
  );
  assert.equal(
    mismatchError(report({ source: 3, destination: 4 })).message,
    "The move of /srv/old.db to /srv/new.db is not complete: counts differ in jobs (source 3, destination 4); /srv/new.db holds more than the move copied in jobs (something else wrote there since the move started, such as the app pointed at it), so running the move again would refuse; nothing is lost: check the new store's jobs before starting its workers",
  );
  const both = report({ source: 3, destination: 4 });
  assert.equal(
    mismatchError({ ...both, mismatched: ["jobs", "job_locks"] }).message,
    "The move of /srv/old.db to /srv/new.db is not complete: counts differ in jobs (source 3, destination 4), job_locks (source 2 less 1 left behind, destination 0); /srv/new.db holds more than the move copied in jobs (something else wrote there since the move started, such as the app pointed at it), so running the move again would refuse; and rows are missing in job_locks: check both stores before starting the new store's workers",
  );
});

Deno.test("moveQueue() moves a SQLite queue with every kind of state to another SQLite file: every job runs once there", async () => {
  await scenario((dir) => sqliteAt(dir, "moved.db"));
});

Deno.test({
  name:
    "moveQueue() moves a SQLite queue with every kind of state to PostgreSQL: every job runs once there, batch callbacks once, no slot twice",
  ignore: pgUrl === null,
  async fn() {
    await scenario(postgresAt);
  },
});

Deno.test({
  name:
    "moveQueue() moves a SQLite queue with every kind of state to Redis: every job runs once there, batch callbacks once, no slot twice",
  ignore: redisUrl === null,
  async fn() {
    await scenario(redisAt);
  },
});

Deno.test({
  name: "moveQueue() moves a Redis queue with every kind of state to SQLite and works it there",
  ignore: redisUrl === null,
  async fn() {
    await scenario((dir) => sqliteAt(dir, "moved.db"), redisAt);
  },
});

Deno.test({
  name:
    "moveQueue() moves a Redis queue with every kind of state to another prefix, and to PostgreSQL",
  ignore: redisUrl === null || pgUrl === null,
  async fn() {
    await scenario(redisAt, redisAt);
    await scenario(postgresAt, redisAt);
  },
});

Deno.test({
  name:
    "moveQueue() moves a PostgreSQL queue to SQLite: running jobs come as pending, failed jobs and batches with them",
  ignore: pgUrl === null,
  async fn() {
    await using database = await freshDatabase(pgUrl!);
    await using dir = await tempDir();
    const jobs = movingJobs();
    const clock = new ManualClock(T0 + 1_000);
    const store = await PostgresStore.open(database.url, { clock: "caller" });
    const source = await Queue.open({ store, jobs: jobs.all, clock, appKey: APP_KEY });
    let batch: number;
    try {
      await source.dispatch(jobs.work, { label: "boom" });
      await run(source, ["default"]);
      batch = await source.batch("b").push(jobs.work, { label: "batch-1" })
        .push(jobs.work, { label: "batch-2" }).then(jobs.work, { label: "batch-then" }).dispatch();
      await store.claim({
        queues: ["default"],
        limit: 1,
        now: clock.now(),
        leaseMs: MINUTE,
        token: 5,
      });
      await source.dispatch(jobs.secret, { label: "secret" });
      const report = await moveQueue(database.url, dir.dbPath, { clock });
      assert.deepEqual(report.mismatched, []);
      await assert.rejects(source.dispatch(jobs.work, { label: "late" }), QueueMovedError);
    } finally {
      await source.close();
    }
    await using moved = await Queue.open({
      path: dir.dbPath,
      jobs: jobs.all,
      clock,
      appKey: APP_KEY,
    });
    assert.equal((await moved.failed()).length, 1);
    await run(moved, ["default"]);
    assert.deepEqual(
      [...jobs.ran].sort(),
      ["batch-1", "batch-2", "batch-then", "boom", "secret"].sort(),
    );
    assert.equal((await moved.batchStatus(batch))?.succeeded, 2);
  },
});

/**
 * Moves a queue whose newest ids no row holds any more (its newest jobs
 * finished without being kept, the one before the newest after writing a
 * log line; its newest batch pruned) from `from` to `to`: the destination's next job and batch get ids
 * past every id the source handed out, so an old id never reads another job.
 */
async function idsNeverReused(
  to: (dir: string) => Promise<Place>,
  from: (dir: string) => Promise<Place>,
): Promise<void> {
  await using dir = await tempDir();
  await using origin = await from(dir.dir);
  await using destination = await to(dir.dir);
  const label = z.object({ label: z.string() });
  const kept = defineJob({ name: "kept", schema: label, keepFinishedMs: MINUTE, handle() {} });
  const fleeting = defineJob({
    name: "fleeting",
    schema: label,
    keepFinishedMs: 0,
    handle({ label }, ctx) {
      if (label === "a") ctx.log(`ran ${label}`);
    },
  });
  const clock = new ManualClock(T0 + 1_000);
  const source = await Queue.open({ store: await origin.open(), jobs: [kept, fleeting], clock });
  let lastJob: number;
  let lastBatch: number;
  try {
    const keptId = await source.dispatch(kept, { label: "kept" });
    lastBatch = await source.batch("gone").push(fleeting, { label: "in a batch" }).dispatch();
    await source.dispatch(fleeting, { label: "a" });
    lastJob = await source.dispatch(fleeting, { label: "b" });
    await run(source);
    clock.advance(MINUTE);
    assert.equal(await source.pruneBatches({ olderThanMs: 1 }), 1);
    assert.equal(await source.result(lastJob), null, "the newest job was not kept");
    assert.equal((await source.result(keptId))?.state, "completed");

    const report = await moveQueue(origin.url, destination.url, { clock });
    assert.deepEqual(report.mismatched, []);
    const counters = report.tables.find(({ table }) => table === "id_counters");
    assert.deepEqual(
      { ...counters },
      { table: "id_counters", source: 3, leftBehind: 0, destination: 3 },
      "the counters of jobs, batches and log lines came along",
    );
  } finally {
    await source.close();
  }
  await using moved = await Queue.open({
    store: await destination.open(),
    jobs: [kept, fleeting],
    clock,
  });
  assert.equal(await moved.result(lastJob), null, "the old id reads no job");
  const next = await moved.dispatch(fleeting, { label: "after" });
  assert.ok(next > lastJob, `job id ${next} after ${lastJob}, the newest the source handed out`);
  const batch = await moved.batch("new").push(fleeting, { label: "new batch" }).dispatch();
  assert.ok(batch > lastBatch, `batch id ${batch} after ${lastBatch}, pruned on the source`);
}

const PAIRS: [string, (dir: string) => Promise<Place>, boolean][] = [
  ["SQLite", (dir) => sqliteAt(dir, "source.db"), true],
  ["PostgreSQL", postgresAt, pgUrl !== null],
  ["Redis", redisAt, redisUrl !== null],
];
for (const [fromName, from, fromThere] of PAIRS) {
  for (const [toName, to, toThere] of PAIRS) {
    Deno.test({
      name:
        `moveQueue() from ${fromName} to ${toName} carries the id counters: the next job and batch get ids past every id the source handed out, though no row holds the newest`,
      ignore: !fromThere || !toThere,
      async fn() {
        await idsNeverReused(
          toName === "SQLite" ? (dir) => sqliteAt(dir, "moved.db") : to,
          from,
        );
      },
    });
  }
}

/** A source queue with one job, and a destination path, for the refusals. */
async function oneJobQueue(dir: { dir: string; dbPath: string }) {
  const jobs = movingJobs();
  const queue = await Queue.open({ path: dir.dbPath, jobs: jobs.all, appKey: APP_KEY });
  await queue.dispatch(jobs.work, { label: "waiting" });
  return { queue, jobs, to: join(dir.dir, "to.db") };
}

Deno.test("moveQueue() refuses an option it does not take, naming it, before it opens either store", async () => {
  await using dir = await tempDir();
  const from = join(dir.dir, "from.db");
  await assert.rejects(
    moveQueue(from, join(dir.dir, "to.db"), { waitMS: 60_000 } as unknown as { waitMs: number }),
    {
      name: "TypeError",
      message: 'moveQueue: unknown option "waitMS" (it takes "waitMs", "pageSize", "clock")',
    },
  );
  assert.deepEqual([...Deno.readDirSync(dir.dir)], [], "neither store was made");
});

Deno.test("moveQueue() refuses a destination that holds jobs, naming its tables, and leaves the source as it was", async () => {
  await using dir = await tempDir();
  const { queue, jobs, to } = await oneJobQueue(dir);
  try {
    await using taken = await Queue.open({ path: to, jobs: jobs.all, appKey: APP_KEY });
    await taken.dispatch(jobs.work, { label: "already there" });
    await assert.rejects(moveQueue(dir.dbPath, to), /is not empty \(jobs: 1, schedules: 1\)/);
    await queue.dispatch(jobs.work, { label: "still open" }); // no fence
    assert.equal((await taken.counts()).default?.pending, 1);
  } finally {
    await queue.close();
  }
});

Deno.test("moveQueue() refuses while a worker of the source runs, and with waitMs moves once it stopped", async () => {
  await using dir = await tempDir();
  const { queue, jobs, to } = await oneJobQueue(dir);
  try {
    // No schedules: the jobs' every-minute schedule would add a job when the test spans a minute.
    const worker = queue.work({
      executor: "isolate",
      queues: ["idle"],
      pollMs: 50,
      schedules: false,
    });
    await waitUntil(async () => (await queue.workers()).length === 1, {
      what: "the worker's heartbeat",
    });
    await assert.rejects(moveQueue(dir.dbPath, to), /1 worker\(s\) of it were seen/);
    assert.equal(exists(to), false, "the refused move created its destination");
    await queue.dispatch(jobs.work, { label: "no fence yet" });
    const moving = moveQueue(dir.dbPath, to, { waitMs: 60_000 });
    await worker.stop();
    const report = await moving;
    assert.equal(report.tables.find(({ table }) => table === "jobs")?.destination, 2);
  } finally {
    await queue.close();
  }
});

Deno.test("a worker started on a moved store stops at once, naming where the queue went", async () => {
  await using dir = await tempDir();
  const { queue, to } = await oneJobQueue(dir);
  try {
    await moveQueue(dir.dbPath, to);
    const errors: unknown[] = [];
    queue.addEventListener("queue:error", ({ detail }) => errors.push(detail.error));
    const worker = queue.work({ executor: "isolate", pollMs: 20 });
    await worker.done;
    assert.equal(worker.stopReason, "moved");
    assert.ok(errors.some((error) => error instanceof QueueMovedError), String(errors));
  } finally {
    await queue.close();
  }
});

Deno.test("a drain on a moved store stops with stoppedBecause moved, and a dashboard action there answers 409 naming where the queue went", async () => {
  await using dir = await tempDir();
  const { queue, to } = await oneJobQueue(dir);
  try {
    await moveQueue(dir.dbPath, to);
    assert.equal((await queue.drain({ maxTimeMs: 30_000 })).stoppedBecause, "moved");
    const handler = dashboard(queue);
    const session = await openSession(handler, "/");
    const paused = await postForm(handler, "/queues/default/pause", session, {
      headers: { accept: "application/json" },
    });
    assert.equal(paused.status, 409);
    assert.match(
      (await paused.json()).error,
      new RegExp(
        `^409 Conflict: Cannot write to this queue: it was moved to ${RegExp.escape(to)} `,
      ),
    );
    assert.equal((await queue.paused()).length, 0, "nothing paused");
  } finally {
    await queue.close();
  }
});

Deno.test({
  name:
    "a move to Redis keeps a backfill's record of slots older than 7 days: the same backfill on the destination skips them",
  ignore: redisUrl === null,
  async fn() {
    await using dir = await tempDir();
    await using place = await redisAt();
    const jobs = movingJobs();
    const from = Math.floor((Date.now() - 10 * 24 * 60 * MINUTE) / MINUTE) * MINUTE;
    const range = { from: new Date(from), to: new Date(from + 2 * MINUTE) };
    {
      await using queue = await Queue.open({ path: dir.dbPath, jobs: jobs.all, appKey: APP_KEY });
      assert.equal((await queue.backfillSchedule("every-minute", range)).jobIds.length, 3);
    }
    await moveQueue(dir.dbPath, place.url);
    await using moved = await Queue.open({ url: place.url, jobs: jobs.all, appKey: APP_KEY });
    // Twice: each backfill prunes the records it finds past the time kept after its own check.
    for (const time of ["once", "twice"]) {
      const again = await moved.backfillSchedule("every-minute", range);
      assert.deepEqual([again.jobIds.length, again.skipped], [0, 3], `fired already, ${time}`);
    }
  },
});

Deno.test("a move run again resumes: the same destination is finished without duplicates; another is refused, and not created", async () => {
  await using dir = await tempDir();
  const { queue, to } = await oneJobQueue(dir);
  await queue.close();
  const first = await moveQueue(dir.dbPath, to);
  const again = await moveQueue(dir.dbPath, to);
  assert.equal(again.resumed, true);
  assert.deepEqual(again.tables, first.tables);
  const other = join(dir.dir, "other.db");
  await assert.rejects(moveQueue(dir.dbPath, other), /it was moved to/);
  assert.equal(exists(other), false, "a refused move wrote nothing at its destination");
  const source = await SqliteStore.open(dir.dbPath) as SqliteStore & MoveStore;
  try {
    assert.equal(await source.liftMoveFence(), true);
  } finally {
    await source.close();
  }
});

/**
 * Moves the store `open()` opens (created empty) from `url` to `sameUrl`,
 * another name of it: refused, and the store is left without a fence.
 */
async function refusesMoveToItself(
  url: string,
  sameUrl: string,
  open: () => Promise<Store>,
): Promise<void> {
  await (await open()).close();
  await assert.rejects(moveQueue(url, sameUrl), /Cannot move a queue to the store it is in/);
  const store = await open() as Store & MoveStore;
  try {
    assert.equal(await store.moveFence(), null);
  } finally {
    await store.close();
  }
}

Deno.test("moveQueue() refuses a move to the store it is in under another name (a symlink), leaving it unfenced", async () => {
  await using dir = await tempDir();
  const link = join(dir.dir, "link.db");
  await Deno.symlink(dir.dbPath, link);
  await refusesMoveToItself(dir.dbPath, link, () => SqliteStore.open(dir.dbPath));
});

Deno.test({
  name:
    "moveQueue() refuses a move to the store it is in under another name (PostgreSQL by another host name, Redis by another spelling), leaving it unfenced",
  ignore: pgUrl === null && redisUrl === null,
  async fn() {
    if (pgUrl !== null) {
      await using database = await freshDatabase(pgUrl);
      const other = new URL(database.url);
      other.hostname = other.hostname === "localhost" ? "127.0.0.1" : "localhost";
      await refusesMoveToItself(database.url, other.href, () => PostgresStore.open(database.url));
    }
    if (redisUrl !== null) {
      await using place = await redisAt();
      const other = place.url.replace("/0?prefix=", "?prefix=");
      await refusesMoveToItself(place.url, other, () => RedisStore.open(place.url));
    }
  },
});

Deno.test("a move whose fence is lifted while it copies (move --abort) fails instead of reporting the destination complete", async () => {
  await using dir = await tempDir();
  const { queue, to } = await oneJobQueue(dir);
  await queue.close();
  await using source = await SqliteStore.open(dir.dbPath);
  await using destination = await SqliteStore.open(to);
  // The abort lands while the jobs are copied, as one from another shell would.
  const aborting = new Proxy(destination, {
    get(target, property) {
      if (property === "importRows") {
        return async (...args: Parameters<Store["importRows"]>) => {
          if (args[0] === "jobs") assert.notEqual(await abortMove(dir.dbPath), null);
          return await target.importRows(...args);
        };
      }
      const value = Reflect.get(target, property);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  await assert.rejects(
    moveStores(source, aborting, {
      from: dir.dbPath,
      to,
      waitMs: 0,
      pageSize: 500,
      pageBytes: MOVE_PAGE_BYTES,
      clock: systemClock,
    }),
    /was given up while it copied: .* has no fence any more/,
  );
});

Deno.test("moveQueue() refuses a destination whose workers run, naming them, and leaves the source unfenced", async () => {
  await using dir = await tempDir();
  const { queue, jobs, to } = await oneJobQueue(dir);
  try {
    await using early = await Queue.open({ path: to, jobs: [jobs.work] });
    const worker = early.work({ executor: "isolate", pollMs: 50 });
    try {
      await waitUntil(async () => (await early.workers()).length === 1, {
        what: "the destination worker's heartbeat",
      });
      await assert.rejects(
        moveQueue(dir.dbPath, to),
        /1 worker\(s\) of .*to\.db were seen .*start the workers of the new store once the move is done/,
      );
    } finally {
      await worker.stop();
    }
    await queue.dispatch(jobs.work, { label: "no fence" });
    assert.equal((await queue.counts()).default?.pending, 2);
  } finally {
    await queue.close();
  }
});

Deno.test("a move resumed after the app dispatched to the new store too early loses no row: the counts differ and it says so", async () => {
  await using dir = await tempDir();
  const to = join(dir.dir, "to.db");
  const jobs = movingJobs();
  {
    await using queue = await Queue.open({ path: dir.dbPath, jobs: jobs.all, appKey: APP_KEY });
    for (const label of ["a", "b", "c"]) await queue.dispatch(jobs.work, { label });
  }
  {
    // What a first run did before it was killed: the fence, then the tables in the move's
    // order up to one page of one job.
    await using source = await SqliteStore.open(dir.dbPath);
    await using destination = await SqliteStore.open(to);
    await source.fenceForMove(to, Date.now());
    for (const table of TRANSFER_TABLES) {
      const page = await source.exportRows(table, null, table === "jobs" ? 1 : 1_000);
      await destination.importRows(table, page.rows);
      if (table === "jobs") break;
    }
  }
  {
    await using early = await Queue.open({ path: to, jobs: jobs.all, appKey: APP_KEY });
    await early.dispatch(jobs.work, { label: "early" });
  }
  await assert.rejects(moveQueue(dir.dbPath, to), /jobs/);
  await using destination = await SqliteStore.open(to);
  const labels = (await destination.exportRows("jobs", null, 10)).rows
    .map((row) => JSON.parse(String(row.payload)).label).sort();
  assert.deepEqual(labels, ["a", "b", "c", "early"]);
});

Deno.test("MoveRules: a running job comes as pending with its attempts, and a job held ahead or not yet begun gets back the attempt its claim counted", () => {
  const rules = new MoveRules(T0);
  const running = (id: number, claimedAhead: 0 | 1, begun: 0 | 1) => ({
    id,
    token: 7,
    attempts: 2,
    crashes: 1,
    available_at: T0 + MINUTE,
    claimed_ahead: claimedAhead,
    begun,
    progress: 50,
    locked: 0,
  });
  const copied = rules.apply("jobs", [running(1, 0, 1), running(2, 1, 1), running(3, 0, 0)]);
  assert.deepEqual(
    copied.map(({ id, token, attempts, crashes, available_at, claimed_ahead, begun }) => ({
      id,
      token,
      attempts,
      crashes,
      available_at,
      claimed_ahead,
      begun,
    })),
    [
      { id: 1, token: null, attempts: 2, crashes: 1, available_at: T0, claimed_ahead: 0, begun: 1 },
      { id: 2, token: null, attempts: 1, crashes: 1, available_at: T0, claimed_ahead: 0, begun: 1 },
      { id: 3, token: null, attempts: 1, crashes: 1, available_at: T0, claimed_ahead: 0, begun: 1 },
    ],
  );
});

for (const onto of ["SQLite", "PostgreSQL", "Redis"] as const) {
  Deno.test({
    name:
      `a move onto ${onto} whose destination the app opens while the move runs keeps the source's schedule state: a paused schedule stays paused, its last slot kept`,
    ignore: (onto === "Redis" && redisUrl === null) ||
      (onto === "PostgreSQL" && postgresTestUrl() === null),
    async fn() {
      await using dir = await tempDir();
      const jobs = movingJobs();
      const prefix = freshPrefix();
      const schema = freshSchema();
      const to = onto === "SQLite"
        ? join(dir.dir, "to.db")
        : onto === "Redis"
        ? `${redisUrl}/0?prefix=${prefix}`
        : `${postgresTestUrl()}?schema=${schema}`;
      // Where the app's queue opens the destination: a store of its own, as another process's.
      const where = onto === "SQLite" ? { path: to } : { url: to };
      try {
        let before;
        {
          await using queue = await Queue.open({
            path: dir.dbPath,
            jobs: jobs.all,
            appKey: APP_KEY,
          });
          assert.notEqual(await queue.triggerSchedule("every-minute"), null);
          assert.equal(await queue.pauseSchedule("every-minute"), true);
          [before] = await queue.schedules();
        }
        await using source = await SqliteStore.open(dir.dbPath);
        await using destination = onto === "SQLite"
          ? await SqliteStore.open(to)
          : onto === "Redis"
          ? await RedisStore.open(to)
          : await PostgresStore.open(postgresTestUrl()!, { schema });
        // The app, pointed at the new store early, opens it while the jobs are copied: its open
        // stores the jobs module's schedules there, active and never fired.
        let opened = false;
        const appOpening = new Proxy(destination, {
          get(target, property) {
            if (property === "importRows") {
              return async (...args: Parameters<Store["importRows"]>) => {
                if (args[0] === "jobs" && !opened) {
                  opened = true;
                  const app = await Queue.open({ ...where, jobs: jobs.all, appKey: APP_KEY });
                  await app.close();
                }
                return await target.importRows(...args);
              };
            }
            const value = Reflect.get(target, property);
            return typeof value === "function" ? value.bind(target) : value;
          },
        });
        await moveStores(source, appOpening, {
          from: dir.dbPath,
          to,
          waitMs: 0,
          pageSize: 500,
          pageBytes: MOVE_PAGE_BYTES,
          clock: systemClock,
        });
        assert.equal(opened, true);
        await using moved = await Queue.open({
          ...where,
          jobs: jobs.all,
          appKey: APP_KEY,
        });
        const [after] = await moved.schedules();
        const state = (schedule: typeof after) => ({
          paused: schedule?.paused,
          lastSlot: schedule?.lastSlot,
          lastJobId: schedule?.lastJobId,
          lastFiredAt: schedule?.lastFiredAt,
        });
        assert.equal(before?.paused, true);
        assert.deepEqual(state(after), state(before));
      } finally {
        if (onto === "Redis") await deletePrefix(redisUrl!, prefix);
        if (onto === "PostgreSQL") {
          await using dropper = await PostgresStore.open(postgresTestUrl()!, {
            schema,
            migrate: false,
          });
          await dropper.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
        }
      }
    },
  });
}
