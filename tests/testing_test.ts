/**
 * workUntilEmpty() on every store, and QueueFake (which stores nothing, so it runs once).
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import {
  defineJob,
  type Dispatcher,
  PermanentError,
  previousOutput,
  Queue,
  ValidationError,
} from "../mod.ts";
import { drain, QueueFake, workUntilEmpty } from "../src/testing.ts";
import { ManualClock, storedCounts } from "./_helpers.ts";
import { openTestPostgresStore, postgresTestUrl } from "./_postgres.ts";
import { openTestRedisStore, redisTestUrl } from "./_redis.ts";
import { storeTest } from "./_stores.ts";

const welcome = defineJob({
  name: "welcome",
  schema: z.object({ userId: z.number().int() }),
  handle() {},
});
const invoice = defineJob({
  name: "invoice",
  schema: z.object({ total: z.number() }),
  handle() {},
});

storeTest("workUntilEmpty() runs every due job, then stops and returns its stats", async (db) => {
  const ran: number[] = [];
  const flaky = defineJob({
    name: "flaky",
    schema: z.number(),
    backoff: [0],
    jitter: 0,
    handle(n, ctx) {
      if (n === 2 && ctx.attempt === 1) throw new Error("first try fails");
      if (n === 3) throw new PermanentError("never works");
      ran.push(n);
    },
  });
  await using queue = await db.open({ jobs: [flaky] });
  await queue.dispatchMany(flaky, [1, 2, 3, 4]);
  const stats = await workUntilEmpty(queue, { concurrency: 2 });
  assert.deepEqual(stats, { completed: 3, failed: 1, retried: 1 });
  assert.deepEqual(ran.toSorted(), [1, 2, 4]);
  assert.deepEqual(await queue.counts(), {
    default: { pending: 0, delayed: 0, reserved: 0, failed: 1, running: [] },
  });
});

storeTest(
  "the deprecated drain() is workUntilEmpty(), and its timeoutMs is still the time budget",
  async (db) => {
    const stuck = defineJob({
      name: "stuck",
      schema: z.null(),
      async handle(_payload, ctx) {
        await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
      },
    });
    await using queue = await db.open({ jobs: [welcome, stuck] });
    await queue.dispatch(welcome, { userId: 1 });
    assert.deepEqual(await drain(queue), { completed: 1, failed: 0, retried: 0 });
    await queue.dispatch(stuck, null);
    await assert.rejects(
      drain(queue, { timeoutMs: 50 }),
      /^Error: workUntilEmpty: the queue still had due jobs after 50 ms/,
    );
  },
);

storeTest("workUntilEmpty() on an empty queue returns at once with zero stats", async (db) => {
  await using queue = await db.open({ jobs: [welcome] });
  assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 0, retried: 0 });
});

storeTest(
  "workUntilEmpty() leaves delayed jobs queued until the clock reaches them",
  async (db) => {
    const clock = new ManualClock();
    const ran: number[] = [];
    const job = defineJob({ name: "later", schema: z.number(), handle: (n) => void ran.push(n) });
    await using queue = await db.open({ jobs: [job], clock });
    await queue.dispatch(job, 1);
    await queue.dispatch(job, 2, { delayMs: 60_000 });
    assert.equal((await workUntilEmpty(queue)).completed, 1);
    assert.deepEqual(ran, [1]);
    assert.deepEqual(await queue.counts(), {
      default: { pending: 0, delayed: 1, reserved: 0, failed: 0, running: [] },
    });
    clock.advance(59_999);
    assert.equal((await workUntilEmpty(queue)).completed, 0);
    clock.advance(1);
    assert.equal((await workUntilEmpty(queue)).completed, 1);
    assert.deepEqual(ran, [1, 2]);
    assert.deepEqual(await storedCounts(queue), {});
  },
);

storeTest(
  "workUntilEmpty() leaves a retry waiting for its backoff until the clock reaches it",
  async (db) => {
    const clock = new ManualClock();
    const attempts: number[] = [];
    const job = defineJob({
      name: "retrying",
      schema: z.null(),
      backoff: [5_000],
      jitter: 0,
      handle(_payload, ctx) {
        attempts.push(ctx.attempt);
        if (ctx.attempt === 1) throw new Error("try again");
      },
    });
    await using queue = await db.open({ jobs: [job], clock });
    await queue.dispatch(job, null);
    assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 0, retried: 1 });
    assert.equal((await queue.counts()).default?.delayed, 1);
    clock.advance(5_000);
    assert.deepEqual(await workUntilEmpty(queue), { completed: 1, failed: 0, retried: 0 });
    assert.deepEqual(attempts, [1, 2]);
  },
);

storeTest(
  "workUntilEmpty() rejects after maxTimeMs when a handler never finishes, and releases the job",
  async (db) => {
    let aborted = false;
    const stuck = defineJob({
      name: "stuck",
      schema: z.null(),
      handle(_payload, ctx) {
        return new Promise((_resolve, reject) => {
          ctx.signal.addEventListener("abort", () => {
            aborted = true;
            reject(ctx.signal.reason);
          });
        });
      },
    });
    await using queue = await db.open({ jobs: [stuck] });
    await queue.dispatch(stuck, null);
    // Long enough that even a loaded machine has claimed and started the job by then.
    await assert.rejects(
      workUntilEmpty(queue, { maxTimeMs: 2_000, graceMs: 0 }),
      /^Error: workUntilEmpty: the queue still had due jobs after 2000 ms$/,
    );
    assert.ok(aborted, "the handler's signal was aborted");
    assert.deepEqual(await queue.counts(), {
      default: { pending: 1, delayed: 0, reserved: 0, failed: 0, running: [] },
    });
  },
);

Deno.test("workUntilEmpty() checks maxTimeMs as work() does, before running anything; Infinity is no limit", async () => {
  const ran: number[] = [];
  const slow = defineJob({
    name: "slow",
    schema: z.number(),
    async handle(n) {
      // Longer than the 1 ms a timer given Infinity fires after.
      await new Promise((resolve) => setTimeout(resolve, 100));
      ran.push(n);
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [slow] });
  await queue.dispatch(slow, 1);
  const bad: [string, number, string][] = [
    ["maxTimeMs", NaN, "NaN"],
    ["maxTimeMs", -1, "-1"],
    ["maxTimeMs", 3_000_000_000, "3000000000"],
    ["maxTimeMs", "5000" as unknown as number, '"5000"'],
    ["timeoutMs", NaN, "NaN"],
  ];
  for (const [name, value, shown] of bad) {
    const message = `${name} must be a number of ms from 0 to 2147483647: got ${shown}`;
    if (name === "maxTimeMs") {
      assert.throws(() => queue.work({ maxTimeMs: value }), { message: `work: ${message}` });
    }
    await assert.rejects(workUntilEmpty(queue, { [name]: value }), {
      name: "RangeError",
      message: `workUntilEmpty: ${message}`,
    });
  }
  assert.deepEqual(ran, [], "nothing ran");
  assert.deepEqual(await workUntilEmpty(queue, { maxTimeMs: Infinity }), {
    completed: 1,
    failed: 0,
    retried: 0,
  });
  assert.deepEqual(ran, [1]);
});

Deno.test("QueueFake records each dispatch as the queue would store it, with made-up ids", async () => {
  const fake = new QueueFake();
  const first = await fake.dispatch(welcome, { userId: 1 }, { delayMs: 500, queue: "mail" });
  const more = await fake.dispatchMany(invoice, [{ total: 1 }, { total: 2 }]);
  assert.equal(first, 1);
  assert.deepEqual(more, [2, 3]);
  assert.deepEqual(fake.dispatched.map(({ job, payload, options }) => [job, payload, options]), [
    [welcome, { userId: 1 }, { delayMs: 500, queue: "mail" }],
    [invoice, { total: 1 }, {}],
    [invoice, { total: 2 }, {}],
  ]);
  assert.deepEqual(await fake.dispatchMany(invoice, []), []);
});

Deno.test("QueueFake keeps unique and debounce keys as a queue's store does: a held key records nothing more, a debounced job takes the latest payload and due time", async () => {
  const schema = z.object({ user: z.number(), n: z.number() });
  const unique = defineJob({
    name: "fake.unique",
    schema,
    uniqueForMs: 60_000,
    uniqueId: ({ user }) => String(user),
    handle() {},
  });
  const debounced = defineJob({
    name: "fake.debounced",
    schema,
    debounceMs: 60_000,
    uniqueId: ({ user }) => String(user),
    handle() {},
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [unique, debounced] });
  const fake = new QueueFake();
  for (const on of [queue, fake] as Dispatcher[]) {
    const first = await on.dispatch(unique, { user: 1, n: 1 });
    assert.equal(
      await on.dispatch(unique, { user: 1, n: 2 }),
      first,
      "a duplicate: the holder's id",
    );
    const other = await on.dispatch(unique, { user: 2, n: 3 });
    assert.notEqual(other, first);
    const [a, b] = await on.dispatchMany(unique, [{ user: 3, n: 4 }, { user: 3, n: 5 }]);
    assert.equal(b, a, "a duplicate within one dispatchMany");
    const waiting = await on.dispatch(debounced, { user: 1, n: 6 });
    assert.equal(await on.dispatch(debounced, { user: 1, n: 7 }, { delayMs: 5 }), waiting);
  }
  const stored = async (name: string) => {
    const { jobs } = await queue.jobs({ name });
    return await Promise.all(jobs.map(async ({ id }) => {
      return JSON.parse((await queue.unfinishedJob(id))!.payload);
    }));
  };
  const recorded = (name: string) =>
    fake.dispatched.filter(({ job }) => job.name === name).map(({ payload }) => payload);
  assert.deepEqual(await stored(unique.name), [{ user: 1, n: 1 }, { user: 2, n: 3 }, {
    user: 3,
    n: 4,
  }]);
  assert.deepEqual(recorded(unique.name), await stored(unique.name));
  assert.deepEqual(await stored(debounced.name), [{ user: 1, n: 7 }]);
  assert.deepEqual(recorded(debounced.name), await stored(debounced.name));
  fake.assertDispatchedTimes(unique, 3);
  fake.assertNotDispatched(unique, ({ n }) => n === 2);
  fake.assertDispatchedTimes(debounced, 1);
  fake.assertDispatched(debounced, ({ n }) => n === 7);
  assert.deepEqual(
    fake.dispatched.find(({ job }) => job === debounced)?.options,
    { delayMs: 5 },
    "the due time of the last dispatch, as the store takes it",
  );
});

Deno.test("QueueFake refuses a payload that fails its schema and records nothing", async () => {
  const fake = new QueueFake();
  await assert.rejects(
    fake.dispatch(welcome, { userId: "7" } as never),
    (error: unknown) =>
      error instanceof ValidationError && error.jobName === "welcome" &&
      /^Cannot dispatch "welcome": payload\.userId: /.test(error.message),
  );
  await assert.rejects(
    fake.dispatchMany(welcome, [{ userId: 1 }, { userId: 1.5 }]),
    ValidationError,
  );
  assert.equal(fake.dispatched.length, 0);
  fake.assertNothingDispatched();
});

Deno.test("QueueFake refuses a payload over its size cap", async () => {
  const note = defineJob({ name: "note", schema: z.string(), handle() {} });
  const fake = new QueueFake({ maxPayloadBytes: 10 });
  await fake.dispatch(note, "12345678");
  await assert.rejects(fake.dispatch(note, "123456789"), /over the cap of 10 bytes/);
  fake.assertDispatchedTimes(note, 1);
});

Deno.test("QueueFake refuses the options the real queue refuses", async () => {
  const fake = new QueueFake();
  const bad = [
    { queue: "default'); DROP TABLE jobs;--" },
    { queue: "" },
    { delayMs: -1 },
    { delayMs: NaN },
    { priority: 1.5 },
  ];
  for (const options of bad) {
    await assert.rejects(
      fake.dispatch(welcome, { userId: 1 }, options),
      (error: unknown) => error instanceof TypeError || error instanceof RangeError,
      `QueueFake accepted ${JSON.stringify(options)}`,
    );
  }
  fake.assertNothingDispatched();
});

Deno.test("QueueFake.assertDispatched() passes when the job was dispatched", async () => {
  const fake = new QueueFake();
  await fake.dispatch(welcome, { userId: 7 });
  fake.assertDispatched(welcome);
  fake.assertDispatched(welcome, (payload) => payload.userId === 7);
  fake.assertDispatched(welcome, (_payload, options) => options.delayMs === undefined);
});

Deno.test("QueueFake.assertDispatched() throws a clear message when it was not", async () => {
  const fake = new QueueFake();
  assert.throws(
    () => fake.assertDispatched(welcome),
    { message: 'Expected "welcome" to be dispatched: it was not dispatched' },
  );
  await fake.dispatch(welcome, { userId: 7 });
  await fake.dispatch(welcome, { userId: 8 });
  assert.throws(() => fake.assertDispatched(welcome, (payload) => payload.userId === 9), {
    message:
      'Expected "welcome" to be dispatched with a matching payload: it was dispatched 2 times, none matching: {"userId":7} on "default"; {"userId":8} on "default"',
  });
});

Deno.test("QueueFake tells apart two definitions that share a name", async () => {
  const twin = defineJob({
    name: "welcome",
    schema: z.object({ userId: z.number() }),
    handle() {},
  });
  const fake = new QueueFake();
  await fake.dispatch(twin, { userId: 1 });
  assert.throws(() => fake.assertDispatched(welcome), /it was not dispatched/);
  fake.assertNotDispatched(welcome);
});

Deno.test("QueueFake.assertNotDispatched() passes or throws with the count", async () => {
  const fake = new QueueFake();
  fake.assertNotDispatched(welcome);
  await fake.dispatch(welcome, { userId: 1 });
  await fake.dispatch(welcome, { userId: 2 });
  fake.assertNotDispatched(welcome, (payload) => payload.userId === 3);
  fake.assertNotDispatched(invoice);
  assert.throws(() => fake.assertNotDispatched(welcome), {
    message:
      'Expected "welcome" not to be dispatched: it was, 2 times: {"userId":1} on "default"; {"userId":2} on "default"',
  });
  assert.throws(() => fake.assertNotDispatched(welcome, (payload) => payload.userId === 2), {
    message: 'Expected "welcome" not to be dispatched: it was, 1 time: {"userId":2} on "default"',
  });
});

Deno.test("QueueFake.assertDispatchedTimes() passes on the exact count and throws otherwise", async () => {
  const fake = new QueueFake();
  fake.assertDispatchedTimes(welcome, 0);
  await fake.dispatchMany(welcome, [{ userId: 1 }, { userId: 2 }, { userId: 3 }]);
  fake.assertDispatchedTimes(welcome, 3);
  assert.throws(() => fake.assertDispatchedTimes(welcome, 2), {
    message:
      'Expected "welcome" dispatched 2 times: it was 3 times: {"userId":1} on "default"; {"userId":2} on "default"; {"userId":3} on "default"',
  });
  assert.throws(() => fake.assertDispatchedTimes(invoice, 1), {
    message: 'Expected "invoice" dispatched 1 time: it was 0 times',
  });
});

Deno.test("QueueFake.assertNothingDispatched() passes when empty and names what was dispatched", async () => {
  const fake = new QueueFake();
  fake.assertNothingDispatched();
  await fake.dispatch(welcome, { userId: 1 });
  await fake.dispatch(invoice, { total: 5 });
  await fake.dispatch(welcome, { userId: 2 });
  assert.throws(() => fake.assertNothingDispatched(), {
    message: "Expected nothing dispatched: got 3 (welcome, invoice)",
  });
});

Deno.test("QueueFake can stand in wherever the app takes a Dispatcher", async () => {
  async function signUp(queue: Dispatcher, userId: number) {
    await queue.dispatch(welcome, { userId }, { delayMs: 1_000 });
  }
  const fake = new QueueFake();
  await signUp(fake, 42);
  fake.assertDispatched(
    welcome,
    (payload, options) => payload.userId === 42 && options.delayMs === 1_000,
  );
});

const rates = defineJob({
  name: "rates",
  schema: z.string(),
  output: z.number(),
  handle: () => 1.1,
});
const price = defineJob({ name: "price", schema: z.number(), handle() {} });

Deno.test("QueueFake records a chain with its links and catch jobs", async () => {
  const fake = new QueueFake();
  const id = await fake.chain({ queue: "mail" })
    .then(welcome, { userId: 1 })
    .then(invoice, { total: 2 }, { delayMs: 5 })
    .then(rates, "EUR")
    .then(price, previousOutput)
    .catch(welcome, { userId: 9 })
    .dispatch();
  assert.equal(id, 1);
  assert.deepEqual(fake.chains, [{
    id: 1,
    links: [
      { job: welcome, payload: { userId: 1 }, options: { queue: "mail" }, queue: "mail" },
      {
        job: invoice,
        payload: { total: 2 },
        options: { delayMs: 5, queue: "mail" },
        queue: "mail",
      },
      { job: rates, payload: "EUR", options: { queue: "mail" }, queue: "mail" },
      { job: price, payload: previousOutput, options: { queue: "mail" }, queue: "mail" },
    ],
    catch: [{ job: welcome, payload: { userId: 9 }, options: { queue: "mail" }, queue: "mail" }],
  }]);
  assert.deepEqual(fake.dispatched, []);
  fake.assertChained([welcome, invoice, rates, price]);
  fake.assertChained(
    [welcome, invoice, rates, price],
    (chain) => (chain.links[1]!.payload as { total: number }).total === 2,
  );
  assert.throws(() => fake.assertChained([invoice, welcome]), {
    message:
      'Expected a chain of ["invoice", "welcome"] to be dispatched: the chains dispatched were ["welcome", "invoice", "rates", "price"]',
  });
  assert.throws(() => fake.assertChained([welcome, invoice, rates, price], () => false), {
    message:
      'Expected a chain of ["welcome", "invoice", "rates", "price"] matching to be dispatched: 1 such chain(s) were dispatched, none matching: chain 1 ({"userId":1} on "mail", {"total":2} on "mail" with {"delayMs":5}, "EUR" on "mail", previousOutput on "mail")',
  });
  assert.throws(() => fake.assertNothingChained(), {
    message: "Expected no chain dispatched: got 1",
  });
  assert.throws(() => fake.assertNothingDispatched(), {
    message: "Expected nothing dispatched: got 1 chain(s)",
  });
  assert.throws(() => new QueueFake().assertChained([welcome]), {
    message: 'Expected a chain of ["welcome"] to be dispatched: no chain was dispatched',
  });
});

Deno.test("QueueFake records a batch with its jobs and callbacks", async () => {
  const fake = new QueueFake();
  await fake.dispatch(price, 1);
  const id = await fake.batch("import")
    .pushMany(invoice, [{ total: 1 }, { total: 2 }])
    .push(welcome, { userId: 3 }, { queue: "mail" })
    .then(price, 10)
    .catch(price, 20)
    .finally(price, 30)
    .allowFailures()
    .dispatch();
  assert.equal(id, 2);
  assert.deepEqual(fake.batches, [{
    id: 2,
    name: "import",
    jobs: [
      { job: invoice, payload: { total: 1 }, options: {}, queue: "default" },
      { job: invoice, payload: { total: 2 }, options: {}, queue: "default" },
      { job: welcome, payload: { userId: 3 }, options: { queue: "mail" }, queue: "mail" },
    ],
    then: [{ job: price, payload: 10, options: {}, queue: "default" }],
    catch: [{ job: price, payload: 20, options: {}, queue: "default" }],
    finally: [{ job: price, payload: 30, options: {}, queue: "default" }],
    allowFailures: true,
  }]);
  assert.equal(fake.dispatched.length, 1, "only the plain dispatch");
  fake.assertBatched((batch) => batch.name === "import" && batch.jobs.length === 3);
  fake.assertBatchCount(1);
  assert.throws(() => fake.assertBatched((batch) => batch.name === "export"), {
    message:
      'Expected a matching batch to be dispatched: none of the 1 batch(es) dispatched matches: "import" with 3 job(s) ["invoice" {"total":1} on "default", "invoice" {"total":2} on "default", "welcome" {"userId":3} on "mail"]',
  });
  assert.throws(() => fake.assertBatchCount(2), {
    message: "Expected 2 batch(es) dispatched: 1 were",
  });
  assert.throws(() => fake.assertNothingBatched(), {
    message: "Expected no batch dispatched: got 1",
  });
  assert.throws(() => fake.assertNothingDispatched(), {
    message: "Expected nothing dispatched: got 1 (price), 1 batch(es)",
  });
  new QueueFake().assertNothingBatched();
});

Deno.test("QueueFake refuses a chain or batch the real queue refuses, with its message, and records nothing", async () => {
  await using queue = await Queue.open({ mode: "inline", jobs: [welcome, invoice, rates, price] });
  const fake = new QueueFake();
  const bad: [string, (on: QueueFake | Queue) => Promise<number>][] = [
    [
      "a bad link",
      (on) =>
        on.chain().then(welcome, { userId: 1 }).then(invoice, { total: "2" } as never).dispatch(),
    ],
    ["previousOutput first", (on) => on.chain().then(price, previousOutput).dispatch()],
    [
      "previousOutput after a job without output",
      (on) => on.chain().then(price, 1).then(price, previousOutput).dispatch(),
    ],
    ["a bad catch", (on) => on.chain().then(price, 1).catch(price, "x" as never).dispatch()],
    ["a bad queue", (on) => on.chain().then(price, 1, { queue: "no spaces" }).dispatch()],
    ["a bad batch job", (on) => on.batch("b").push(price, 1).push(price, "2" as never).dispatch()],
    [
      "a bad finally",
      (on) => on.batch("b").push(price, 1).finally(welcome, {} as never).dispatch(),
    ],
  ];
  for (const [what, attempt] of bad) {
    const real = await attempt(queue).then(() => null, (error: Error) => error.message);
    assert.ok(real !== null, `the real queue refuses ${what}`);
    await assert.rejects(attempt(fake), { message: real }, what);
  }
  assert.deepEqual([fake.dispatched, fake.chains, fake.batches], [[], [], []]);
});

Deno.test("QueueFake.flow() records a flow's nodes parents first with their keys, parents and options, and its catch; a refused payload or a cycle records nothing", async () => {
  const queue = new QueueFake();
  const flow = queue.flow("signup");
  const a = flow.add(welcome, { userId: 1 }, { key: "a", delayMs: 5 });
  flow.add(invoice, { total: 3 }, { key: "b", after: [a], continueOnFailure: true });
  flow.catch(welcome, { userId: 0 });
  const id = await flow.dispatch();
  assert.deepEqual(queue.flows, [{
    id,
    name: "signup",
    nodes: [
      {
        key: "a",
        after: [],
        continueOnFailure: false,
        dispatch: {
          job: welcome,
          payload: { userId: 1 },
          options: { delayMs: 5 },
          queue: "default",
        },
      },
      {
        key: "b",
        after: ["a"],
        continueOnFailure: true,
        dispatch: { job: invoice, payload: { total: 3 }, options: {}, queue: "default" },
      },
    ],
    catch: [{ job: welcome, payload: { userId: 0 }, options: {}, queue: "default" }],
  }]);
  assert.throws(() => queue.assertNothingDispatched(), /1 flow\(s\)/);

  const bad = queue.flow("bad");
  // @ts-expect-error: the payload fails the schema on purpose
  bad.add(welcome, { userId: "x" });
  await assert.rejects(bad.dispatch(), /node "welcome" of flow "bad"/);
  const cyclic = queue.flow("cyclic");
  cyclic.add(welcome, { userId: 1 }, { key: "x", after: ["x"] });
  await assert.rejects(cyclic.dispatch(), /cycle: x → x/);
  assert.equal(queue.flows.length, 1);
});

Deno.test("QueueFake refuses what the real queue refuses, with its message, by the queue's own checks", async () => {
  const grouped = defineJob({
    name: "grouped",
    schema: z.number(),
    group: (n: number) => {
      if (n < 0) throw new Error("no group for a negative");
      return n === 0 ? "" : `g${n}`;
    },
    handle() {},
  });
  const unique = defineJob({
    name: "unique",
    schema: z.number(),
    uniqueForMs: 60_000,
    uniqueId: (n: number) => {
      if (n < 0) throw new Error("no id for a negative");
      return "x".repeat(n);
    },
    handle() {},
  });
  const child = defineJob({
    name: "child",
    schema: z.null(),
    parents: { rates },
    handle() {},
  });
  await using queue = await Queue.open({
    mode: "inline",
    jobs: [welcome, price, rates, grouped, unique, child],
  });
  const fake = new QueueFake();
  const bad: [string, (on: QueueFake | Queue) => Promise<unknown>][] = [
    ["a group that throws", (on) => on.dispatch(grouped, -1)],
    ["a group that returns an empty key", (on) => on.dispatch(grouped, 0)],
    ["a uniqueId that throws", (on) => on.dispatch(unique, -1)],
    ["a uniqueId of 300 characters", (on) => on.dispatch(unique, 300)],
    ["a job declaring parents on its own", (on) => on.dispatch(child, null)],
    [
      "an unknown chain option",
      (on) => on.chain({ qeueu: "x" } as never).then(price, 1).dispatch(),
    ],
    [
      "a chain option of the wrong shape",
      (on) => on.chain("mail" as never).then(price, 1).dispatch(),
    ],
    // deno-lint-ignore no-sparse-arrays
    ["a sparse array of payloads", (on) => on.dispatchMany(price, [1, , 3] as number[])],
    ["payloads that are no array", (on) => on.dispatchMany(price, "123" as never)],
    ["something that is no job", (on) => on.dispatch({ name: "x" } as never, null as never)],
    [
      "a grouped job waiting in a chain",
      (on) => on.chain().then(price, 1).then(grouped, 2).dispatch(),
    ],
    ["a grouped job as a batch's then", (on) => on.batch("b").then(grouped, 2).dispatch()],
  ];
  for (const [what, attempt] of bad) {
    let real: string | null = null;
    try {
      await attempt(queue);
    } catch (error) {
      real = `${(error as Error).name}: ${(error as Error).message}`;
    }
    assert.ok(real !== null, `the real queue refuses ${what}`);
    let faked: string | null = null;
    try {
      await attempt(fake);
    } catch (error) {
      faked = `${(error as Error).name}: ${(error as Error).message}`;
    }
    assert.equal(faked, real, what);
  }
  assert.deepEqual([fake.dispatched, fake.chains, fake.batches, fake.flows], [[], [], [], []]);
  fake.assertNotDispatched(price);
});

Deno.test("QueueFake's per-job assertions count each chain link, batch job and flow node, not the jobs queued only on an outcome", async () => {
  const fake = new QueueFake();
  await fake.batch("import").push(welcome, { userId: 1 }).pushMany(welcome, [
    { userId: 2 },
    { userId: 3 },
  ]).then(invoice, { total: 0 }).catch(invoice, { total: 0 }).finally(invoice, { total: 0 })
    .dispatch();
  await fake.chain().then(welcome, { userId: 4 }).then(rates, "EUR").then(price, previousOutput)
    .catch(invoice, { total: 0 }).dispatch();
  const flow = fake.flow("signup");
  flow.add(welcome, { userId: 5 }, { key: "a" });
  flow.catch(invoice, { total: 0 });
  await flow.dispatch();
  assert.deepEqual(fake.dispatched, [], "fake.dispatched lists plain dispatches alone");

  fake.assertDispatched(welcome);
  fake.assertDispatchedTimes(welcome, 5);
  assert.throws(() => fake.assertNotDispatched(welcome), /not to be dispatched: it was, 5 times/);
  assert.throws(() => fake.assertDispatchedTimes(welcome, 0), /it was 5 times/);
  for (const userId of [1, 3, 4, 5]) {
    fake.assertDispatched(welcome, (payload) => payload.userId === userId);
  }
  fake.assertNotDispatched(welcome, (payload) => payload.userId === 6);
  fake.assertDispatchedTimes(rates, 1);
  // A link given previousOutput counts, but no predicate is asked about a payload it lacks.
  fake.assertDispatched(price);
  fake.assertNotDispatched(price, () => true);
  // Callbacks run only on an outcome: not counted.
  fake.assertNotDispatched(invoice);
  fake.assertDispatchedTimes(invoice, 0);
});

Deno.test("QueueFake records the payload as the queue stores it, a copy of the options, and the queue the job would go on", async () => {
  const emails = defineJob({
    name: "emails",
    schema: z.object({ to: z.string(), tag: z.string().default("none") }),
    queue: "emails",
    handle() {},
  });
  const length = defineJob({
    name: "length",
    schema: z.string().transform((text) => text.length),
    handle() {},
  });
  const fake = new QueueFake();
  await fake.dispatch(emails, { to: "a" }, { delayMs: 5 });
  await fake.dispatch(emails, { to: "b" }, { queue: "high" });
  await fake.dispatch(length, "abcd");
  const at = new Date("2030-01-01T00:00:00Z");
  const given: { delayMs?: number; at?: Date } = { at };
  await fake.dispatch(length, "xy", given);
  given.delayMs = 999;
  at.setTime(0);
  await fake.chain({ queue: "q2" }).then(emails, { to: "c" }).then(length, "z", { queue: "own" })
    .dispatch();

  assert.deepEqual(
    fake.dispatched.map(({ payload, options, queue }) => [payload, options, queue]),
    [
      // What was dispatched, after a JSON round trip: no default filled in, no transform run
      // (the handler of "length" gets 4; the queue stores "abcd", and so does the fake).
      [{ to: "a" }, { delayMs: 5 }, "emails"],
      [{ to: "b" }, { queue: "high" }, "high"],
      ["abcd", {}, "default"],
      ["xy", { at: new Date("2030-01-01T00:00:00Z") }, "default"],
    ],
  );
  assert.deepEqual(fake.chains[0]!.links.map((link) => link.queue), ["q2", "own"]);
  fake.assertDispatchedOn(emails, "emails");
  fake.assertDispatchedOn(emails, "high", (payload) => payload.to === "b");
  fake.assertDispatchedOn(length, "own");
  assert.throws(() => fake.assertDispatchedOn(emails, "low"), {
    message: 'Expected "emails" to be dispatched on queue "low": it was dispatched 3 times, ' +
      'none on it: {"to":"a"} on "emails" with {"delayMs":5}; {"to":"b"} on "high"; ' +
      '{"to":"c"} on "q2" as link 1 of chain 5',
  });
  assert.throws(() => fake.assertDispatchedOn(emails, "emails", (payload) => payload.to === "b"), {
    message:
      'Expected "emails" to be dispatched on queue "emails" with a matching payload: it was dispatched 1 time, none on it: {"to":"b"} on "high"',
  });
  assert.throws(() => fake.assertDispatchedOn(invoice, "default"), {
    message:
      'Expected "invoice" to be dispatched on queue "default": it was not dispatched (dispatched: "emails" 3 times, "length" 3 times)',
  });
});

Deno.test("QueueFake refuses a count no number of dispatches could be", async () => {
  const fake = new QueueFake();
  await fake.dispatch(welcome, { userId: 1 });
  for (const times of [-1, 1.5, NaN, "1" as unknown as number]) {
    assert.throws(() => fake.assertDispatchedTimes(welcome, times), {
      name: "RangeError",
      message: /^assertDispatchedTimes: times must be a whole number, 0 or more: got /,
    });
    assert.throws(() => fake.assertBatchCount(times), {
      name: "RangeError",
      message: /^assertBatchCount: count must be a whole number, 0 or more: got /,
    });
  }
});

Deno.test("QueueFake's failure messages show what was dispatched", async () => {
  const fake = new QueueFake();
  await fake.dispatch(welcome, { userId: 7 }, { delayMs: 500 });
  await fake.batch("import").push(welcome, { userId: 8 }).dispatch();
  assert.throws(() => fake.assertDispatched(welcome, (payload) => payload.userId === 9), {
    message: 'Expected "welcome" to be dispatched with a matching payload: it was dispatched ' +
      '2 times, none matching: {"userId":7} on "default" with {"delayMs":500}; ' +
      '{"userId":8} on "default" in batch "import"',
  });
  assert.throws(() => fake.assertNotDispatched(welcome, (payload) => payload.userId === 8), {
    message:
      'Expected "welcome" not to be dispatched: it was, 1 time: {"userId":8} on "default" in batch "import"',
  });
  assert.throws(() => fake.assertDispatchedTimes(welcome, 1), {
    message: 'Expected "welcome" dispatched 1 time: it was 2 times: {"userId":7} on "default" ' +
      'with {"delayMs":500}; {"userId":8} on "default" in batch "import"',
  });
  assert.throws(() => fake.assertDispatched(invoice), {
    message:
      'Expected "invoice" to be dispatched: it was not dispatched (dispatched: "welcome" 2 times)',
  });
  assert.throws(() => fake.assertBatched((batch) => batch.name === "export"), {
    message:
      'Expected a matching batch to be dispatched: none of the 1 batch(es) dispatched matches: "import" with 1 job(s) ["welcome" {"userId":8} on "default"]',
  });
  await fake.dispatchMany(price, Array.from({ length: 12 }, (_, index) => index));
  assert.throws(
    () => fake.assertNotDispatched(price),
    /: 0 on "default"; 1 on "default"; .*; 9 on "default"; and 2 more$/,
  );
});

for (
  const [kind, url, open] of [
    ["PostgreSQL", postgresTestUrl(), openTestPostgresStore],
    ["Redis", redisTestUrl(), openTestRedisStore],
  ] as const
) {
  Deno.test({
    name:
      `${kind}: an injected clock moves a retry's due time only on a store opened with clock "caller", as docs/testing.md says`,
    ignore: url === null,
    async fn() {
      for (const storeClock of ["database", "caller"] as const) {
        const clock = new ManualClock();
        const attempts: number[] = [];
        const flaky = defineJob({
          name: "flaky",
          schema: z.null(),
          backoff: [45_000],
          jitter: 0,
          handle(_payload, ctx) {
            attempts.push(ctx.attempt);
            if (ctx.attempt === 1) throw new Error("fails once");
          },
        });
        await using opened = await open(url!, { clock: storeClock });
        await using queue = await Queue.open({ store: opened.store, jobs: [flaky], clock });
        await queue.dispatch(flaky, null);
        assert.deepEqual(await workUntilEmpty(queue), { completed: 0, failed: 0, retried: 1 });
        clock.advance(45_000);
        // By the database's clock the retry is still 45 s away: moving the test's clock does nothing.
        assert.deepEqual(
          (await workUntilEmpty(queue)).completed,
          storeClock === "caller" ? 1 : 0,
          `clock "${storeClock}"`,
        );
        assert.deepEqual(attempts, storeClock === "caller" ? [1, 2] : [1]);
      }
    },
  });
}
