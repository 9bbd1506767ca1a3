import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, type JobConfig, type PayloadSchema } from "../mod.ts";

const schema = z.object({ orderId: z.number().int() });

/** Settings as a caller might pass them, wrong types included. */
type LooseConfig = { [K in keyof JobConfig<PayloadSchema>]?: unknown };

function config(overrides: LooseConfig = {}): JobConfig<PayloadSchema> {
  return { name: "send-receipt", schema, handle() {}, ...overrides } as JobConfig<PayloadSchema>;
}

/** Asserts that `defineJob(config)` throws `type` with a message naming the job and `field`. */
function assertRefused(
  bad: LooseConfig,
  type: ErrorConstructor | TypeErrorConstructor | RangeErrorConstructor,
  field: string,
  jobName = "send-receipt",
): void {
  assert.throws(
    () => defineJob(config(bad)),
    (error: unknown) => {
      assert.ok(error instanceof type, `expected a ${type.name}, got ${String(error)}`);
      assert.ok(error.message.includes(`"${jobName}"`), `message names the job: ${error.message}`);
      assert.ok(error.message.includes(field), `message names ${field}: ${error.message}`);
      return true;
    },
  );
}

Deno.test("defineJob() fills in the documented defaults", () => {
  const job = defineJob(config());
  assert.equal(job.name, "send-receipt");
  assert.equal(job.schema, schema);
  assert.equal(job.queue, "default");
  assert.equal(job.maxAttempts, 3);
  assert.equal(job.maxCrashes, 2);
  assert.equal(job.timeoutMs, 60_000);
  assert.equal(job.jitter, 0.5);
  assert.equal(job.priority, 0);
  assert.equal(job.retryUntil, undefined);
  assert.equal(job.failed, undefined);
  assert.equal(typeof job.backoff, "function");
  const backoff = job.backoff as (attempt: number) => number;
  assert.equal(backoff(1), 10_000);
  assert.equal(backoff(3), 30_000);
});

Deno.test("defineJob() treats settings passed as undefined like omitted ones", () => {
  const job = defineJob(config({
    queue: undefined,
    maxAttempts: undefined,
    timeoutMs: undefined,
    jitter: undefined,
    priority: undefined,
  }));
  assert.equal(job.queue, "default");
  assert.equal(job.maxAttempts, 3);
  assert.equal(job.timeoutMs, 60_000);
  assert.equal(job.jitter, 0.5);
  assert.equal(job.priority, 0);
});

Deno.test("defineJob() keeps every setting it is given", () => {
  const handle = () => {};
  const failed = () => {};
  const retryUntil = (at: Date) => new Date(at.getTime() + 1_000);
  const job = defineJob({
    name: "custom",
    schema,
    queue: "mail:high-1.x",
    maxAttempts: 7,
    maxCrashes: 5,
    backoff: [1, 2, 3],
    jitter: 0,
    timeoutMs: 1.5,
    retryUntil,
    priority: -4,
    handle,
    failed,
  });
  assert.equal(job.queue, "mail:high-1.x");
  assert.equal(job.maxAttempts, 7);
  assert.equal(job.maxCrashes, 5);
  assert.deepEqual(job.backoff, [1, 2, 3]);
  assert.equal(job.jitter, 0);
  assert.equal(job.timeoutMs, 1.5);
  assert.equal(job.retryUntil, retryUntil);
  assert.equal(job.priority, -4);
  assert.equal(job.handle, handle);
  assert.equal(job.failed, failed);
});

Deno.test("defineJob() refuses a misspelt setting by name, which it would ignore, and takes every setting of JobConfig", () => {
  for (const key of ["maxAtempts", "timeout", "retries"]) {
    assert.throws(
      () => defineJob({ ...config(), [key]: 10 } as JobConfig<PayloadSchema>),
      new RegExp(
        `^TypeError: Job "send-receipt": unknown option "${key}" \\(it takes .*"maxAttempts"`,
      ),
    );
  }
  const parent = defineJob({ name: "parent", schema: z.null(), handle() {} });
  const every = defineJob({
    ...config(),
    queue: "mail",
    maxAttempts: 4,
    maxCrashes: 3,
    backoff: [1],
    jitter: 0,
    timeoutMs: 1_000,
    retryUntil: (at: Date) => at,
    expireInMs: 60_000,
    deadlineMs: 60_000,
    priority: 1,
    encrypted: false,
    uniqueForMs: 1_000,
    uniqueId: () => "a",
    uniqueUntil: "processing",
    group: () => "g",
    groupConcurrency: 1,
    ordered: true,
    groupRate: { max: 1, perMs: 1_000 },
    middleware: () => [],
    output: z.null(),
    maxOutputBytes: 100,
    keepFinishedMs: 0,
    failed() {},
  } as never);
  assert.equal(every.uniqueUntil, "processing");
  // The one setting that cannot go with a group: a job with parents runs only as a flow's node.
  const child = defineJob({ ...config(), parents: { parent } } as never);
  assert.deepEqual(Object.keys(child.parents ?? {}), ["parent"]);
  const debounced = defineJob({ ...config(), debounceMs: 1_000, debounceMaxWaitMs: 2_000 });
  assert.equal(debounced.debounceMaxWaitMs, 2_000);
  assert.equal(defineJob({ ...config(), keepCompletedMs: 5 }).keepFinishedMs, 5);
});

Deno.test("defineJob() accepts unlimited attempts, a jitter of 0 or 1 and a 255-character name", () => {
  const retryUntil = (at: Date) => new Date(at.getTime() + 60_000);
  assert.equal(defineJob(config({ maxAttempts: Infinity, retryUntil })).maxAttempts, Infinity);
  assert.equal(defineJob(config({ jitter: 0 })).jitter, 0);
  assert.equal(defineJob(config({ jitter: 1 })).jitter, 1);
  assert.equal(defineJob(config({ name: "n".repeat(255) })).name.length, 255);
});

Deno.test("defineJob() returns a frozen definition", () => {
  const job = defineJob(config());
  assert.ok(Object.isFrozen(job));
  assert.throws(() => {
    (job as { maxAttempts: number }).maxAttempts = 99;
  }, TypeError);
});

Deno.test("defineJob() refuses an empty or overlong name, naming the field", () => {
  for (const name of ["", "n".repeat(256)]) {
    assert.throws(() => defineJob(config({ name })), (error: unknown) => {
      assert.ok(error instanceof TypeError);
      assert.match(error.message, /^defineJob: name must be a string of 1 to 255 characters/);
      return true;
    });
  }
  assert.throws(
    () => defineJob(config({ name: 42 })),
    /defineJob: name must be a string/,
  );
});

Deno.test("defineJob() refuses an encrypted job whose name holds # or starts with job-log: (what its other sealed values are bound to), and takes them unencrypted", () => {
  for (const name of ["charge#output", "7#step:x", "#", "job-log:7"]) {
    assertRefused(
      { name, encrypted: true },
      TypeError,
      'cannot hold "#" or start with "job-log:"',
      name,
    );
    assert.equal(defineJob(config({ name })).name, name);
  }
  assert.equal(defineJob(config({ name: "log-job-log:7", encrypted: true })).encrypted, true);
});

Deno.test("defineJob() refuses a schema that is not a zod schema", () => {
  assertRefused({ schema: {} }, TypeError, "schema");
  assertRefused({ schema: undefined }, TypeError, "schema");
  assertRefused({ schema: (x: unknown) => x }, TypeError, "schema");
});

Deno.test("defineJob() refuses a missing handle", () => {
  assertRefused({ handle: undefined }, TypeError, "handle");
  assertRefused({ handle: "run" }, TypeError, "handle");
});

Deno.test("defineJob() refuses a queue name outside [A-Za-z0-9_.:-]{1,64}", () => {
  for (const queue of ["", "has space", "q".repeat(65), "ünï", "default'); DROP TABLE jobs;--"]) {
    assertRefused({ queue }, TypeError, "queue name");
  }
});

Deno.test("defineJob() refuses maxAttempts of 0, -1 or 1.5", () => {
  for (const maxAttempts of [0, -1, 1.5, NaN]) {
    assertRefused({ maxAttempts }, RangeError, "maxAttempts");
  }
});

Deno.test("defineJob() refuses maxCrashes that is not a positive integer", () => {
  for (const maxCrashes of [0, -2, 0.5]) {
    assertRefused({ maxCrashes }, RangeError, "maxCrashes");
  }
});

Deno.test("defineJob() refuses timeoutMs of 0, -5, NaN or Infinity", () => {
  for (const timeoutMs of [0, -5, NaN, Infinity]) {
    assertRefused({ timeoutMs }, RangeError, "timeoutMs");
  }
});

Deno.test("defineJob() refuses an empty backoff array", () => {
  assertRefused({ backoff: [] }, TypeError, "backoff");
});

Deno.test("defineJob() refuses a negative or non-finite backoff delay", () => {
  assertRefused({ backoff: [1_000, -1] }, RangeError, "backoff");
  assertRefused({ backoff: [NaN] }, RangeError, "backoff");
  assertRefused({ backoff: [Infinity] }, RangeError, "backoff");
});

Deno.test("defineJob() refuses a jitter outside 0 to 1", () => {
  for (const jitter of [2, -0.1, NaN]) {
    assertRefused({ jitter }, RangeError, "jitter");
  }
});

Deno.test("defineJob() refuses a jitter given as a string, though it would read as a number", () => {
  for (const jitter of ["0.5", "1", true]) {
    assertRefused({ jitter }, RangeError, "jitter");
  }
});

Deno.test("defineJob() refuses maxAttempts Infinity without retryUntil, which would retry forever", () => {
  assertRefused({ maxAttempts: Infinity }, RangeError, "retryUntil");
});

Deno.test("defineJob() refuses a non-integer priority", () => {
  for (const priority of [1.5, NaN, Infinity, 2 ** 60]) {
    assertRefused({ priority }, RangeError, "priority");
  }
});

Deno.test("defineJob() refuses a backoff that is neither an array nor a function", () => {
  assertRefused({ backoff: "fast" }, TypeError, "backoff");
});

Deno.test("defineJob() refuses a failed hook or retryUntil that is not a function", () => {
  assertRefused({ failed: "notify-admin" }, TypeError, "failed");
  assertRefused({ retryUntil: 60_000 }, TypeError, "retryUntil");
});

Deno.test("defineJob() refuses a timeoutMs past 2^31-1 ms, which a timer cannot wait", () => {
  // setTimeout fires at once past 2^31-1 ms: the job would time out the moment it starts.
  assertRefused({ timeoutMs: 3e9 }, RangeError, "timeoutMs");
  assert.equal(defineJob(config({ timeoutMs: 2_147_483_647 })).timeoutMs, 2_147_483_647);
});

Deno.test("defineJob() refuses uniqueId without uniqueForMs or debounceMs, and uniqueUntil without uniqueForMs, which would be ignored", () => {
  const uniqueId = ({ orderId }: { orderId: number }) => String(orderId);
  assertRefused({ uniqueId }, TypeError, "uniqueId needs uniqueForMs or debounceMs");
  assertRefused({ uniqueUntil: "processing" }, TypeError, "uniqueUntil needs uniqueForMs");
  assertRefused({ uniqueId, uniqueUntil: "completed" }, TypeError, "needs uniqueForMs");
  assertRefused(
    { uniqueId, debounceMs: 1_000, uniqueUntil: "processing" },
    TypeError,
    "uniqueUntil needs uniqueForMs",
  );
  // The combinations docs/unique_and_middleware.md shows.
  const unique = defineJob(
    config({ uniqueForMs: 1_000, uniqueId, uniqueUntil: "processing" }),
  );
  assert.equal(unique.uniqueUntil, "processing");
  const debounced = defineJob(config({ debounceMs: 1_000, debounceMaxWaitMs: 5_000, uniqueId }));
  assert.equal(debounced.uniqueId({ orderId: 7 }), "7");
  assert.equal(
    defineJob(config({ uniqueId: undefined, uniqueUntil: undefined })).uniqueForMs,
    undefined,
  );
});
