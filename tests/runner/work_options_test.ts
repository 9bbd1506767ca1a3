import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob } from "../../src/job.ts";
import { Queue } from "../../src/queue.ts";
import { resolveWorkOptions, type WorkOptions } from "../../src/runner/work_options.ts";

Deno.test("resolveWorkOptions() fills in every default", () => {
  assert.deepEqual(resolveWorkOptions({}, ["default", "mail"], false), {
    queues: ["default", "mail"],
    concurrency: 1,
    executor: "isolate",
    workers: 0,
    leaseMs: 30_000,
    graceMs: 10_000,
    pollMs: 1_000,
    stopWhenEmpty: false,
    maxJobs: Infinity,
    maxTimeMs: Infinity,
    schedules: true,
    captureConsole: false,
    maxLogBytes: 65_536,
  });
});

Deno.test("resolveWorkOptions() gives the default to an option passed as undefined", () => {
  const explicit = {
    queues: undefined,
    concurrency: undefined,
    leaseMs: undefined,
    graceMs: undefined,
    pollMs: undefined,
    stopWhenEmpty: undefined,
    maxJobs: undefined,
    maxTimeMs: undefined,
    captureConsole: undefined,
    maxLogBytes: undefined,
  } as unknown as WorkOptions;
  assert.deepEqual(
    resolveWorkOptions(explicit, ["default"], false),
    resolveWorkOptions({}, ["default"], false),
  );
});

Deno.test("resolveWorkOptions() keeps every valid value given", () => {
  const given = {
    queues: ["high", "default"],
    concurrency: 8,
    executor: "workers",
    workers: 3,
    leaseMs: 100,
    graceMs: 0,
    pollMs: 1,
    stopWhenEmpty: true,
    maxJobs: 10_000,
    maxTimeMs: 0,
    schedules: false,
    captureConsole: true,
    maxLogBytes: 1_024,
  };
  assert.deepEqual(resolveWorkOptions(given as WorkOptions, ["default"], true), given);
  assert.equal(resolveWorkOptions({ maxJobs: Infinity }, ["default"], false).maxJobs, Infinity);
  assert.equal(resolveWorkOptions({ maxTimeMs: Infinity }, ["default"], false).maxTimeMs, Infinity);
});

Deno.test("resolveWorkOptions() copies the queue list so later changes to it do not leak in", () => {
  const queues = ["high", "default"];
  const resolved = resolveWorkOptions({ queues }, ["default"], false);
  queues.push("low");
  assert.deepEqual(resolved.queues, ["high", "default"]);
});

const refused: [string, WorkOptions, typeof RangeError | typeof TypeError, RegExp][] = [
  ["concurrency 0", { concurrency: 0 }, RangeError, /concurrency/],
  ["concurrency 1.5", { concurrency: 1.5 }, RangeError, /concurrency/],
  ["concurrency -1", { concurrency: -1 }, RangeError, /concurrency/],
  ["concurrency NaN", { concurrency: NaN }, RangeError, /concurrency/],
  ["concurrency 10001", { concurrency: 10_001 }, RangeError, /concurrency/],
  ["concurrency as a string", { concurrency: "2" as unknown as number }, RangeError, /concurrency/],
  ["leaseMs 50", { leaseMs: 50 }, RangeError, /leaseMs/],
  ["leaseMs Infinity", { leaseMs: Infinity }, RangeError, /leaseMs/],
  ["graceMs -1", { graceMs: -1 }, RangeError, /graceMs/],
  ["pollMs 0", { pollMs: 0 }, RangeError, /pollMs/],
  ["schedules as a string", { schedules: "no" as unknown as boolean }, TypeError, /schedules/],
  ["pollMs NaN", { pollMs: NaN }, RangeError, /pollMs/],
  ["maxJobs 0", { maxJobs: 0 }, RangeError, /maxJobs/],
  ["maxJobs 2.5", { maxJobs: 2.5 }, RangeError, /maxJobs/],
  ["maxTimeMs -1", { maxTimeMs: -1 }, RangeError, /maxTimeMs/],
  ["maxTimeMs NaN", { maxTimeMs: NaN }, RangeError, /maxTimeMs/],
  ["empty queues", { queues: [] }, TypeError, /queues/],
  ["queues as a string", { queues: "default" as unknown as string[] }, TypeError, /queues/],
  ["a queue listed twice", { queues: ["high", "default", "high"] }, TypeError, /queue.*twice/],
  ["a bad queue name", { queues: ["high", "bad name"] }, TypeError, /queue name "bad name"/],
  ["an over-long queue name", { queues: ["q".repeat(65)] }, TypeError, /queue name/],
];

for (const [what, options, type, message] of refused) {
  Deno.test(`resolveWorkOptions() refuses ${what} with a ${type.name} naming the option`, () => {
    assert.throws(() => resolveWorkOptions(options, ["default"], false), (error: unknown) => {
      assert.ok(error instanceof type, `expected ${type.name}, got ${String(error)}`);
      assert.match(error.message, /^work: /);
      assert.match(error.message, message);
      return true;
    });
  });
}

Deno.test("resolveWorkOptions() refuses an empty default queue list when no queues are given", () => {
  assert.throws(() => resolveWorkOptions({}, [], false), TypeError);
});

Deno.test("resolveWorkOptions() refuses a stopWhenEmpty that is not a boolean", () => {
  // A string such as "false" read from the environment would otherwise be truthy.
  const options = { stopWhenEmpty: "false" } as unknown as WorkOptions;
  assert.throws(() => resolveWorkOptions(options, ["default"], false), /stopWhenEmpty/);
});

Deno.test("Queue.work() refuses bad options before a worker starts or anything is claimed", async () => {
  let runs = 0;
  const job = defineJob({
    name: "counted",
    schema: z.null(),
    handle() {
      runs++;
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  await queue.dispatch(job, null);
  assert.throws(() => queue.work({ concurrency: 0 }), RangeError);
  assert.throws(() => queue.work({ queues: ["default", "default"] }), TypeError);
  assert.equal(runs, 0);
  assert.deepEqual(await queue.counts(), {
    default: { pending: 1, delayed: 0, reserved: 0, failed: 0, running: [] },
  });
});

Deno.test("resolveWorkOptions() picks Web Workers only where they can be used", () => {
  assert.equal(resolveWorkOptions({}, ["default"], true).executor, "workers");
  assert.equal(resolveWorkOptions({}, ["default"], false).executor, "isolate");
  assert.equal(resolveWorkOptions({ executor: "isolate" }, ["default"], true).workers, 0);
  assert.throws(
    () => resolveWorkOptions({ executor: "workers" }, ["default"], false),
    /executor "workers" needs Web Workers and the jobs given as a module URL/,
  );
  assert.throws(
    () => resolveWorkOptions({ executor: "threads" as never }, ["default"], true),
    /executor must be "workers" or "isolate"/,
  );
});

Deno.test("resolveWorkOptions() sizes the pool at most to the concurrency", () => {
  const cores = navigator.hardwareConcurrency;
  assert.equal(resolveWorkOptions({ concurrency: 64 }, ["default"], true).workers, cores);
  assert.equal(resolveWorkOptions({ concurrency: 1 }, ["default"], true).workers, 1);
  assert.equal(resolveWorkOptions({ concurrency: 2, workers: 8 }, ["default"], true).workers, 2);
  assert.throws(() => resolveWorkOptions({ workers: 0 }, ["default"], true), /workers must be/);
});

Deno.test("work() accepts a maxJobs past 10000: it is a count of jobs, not of slots", async () => {
  assert.equal(resolveWorkOptions({ maxJobs: 20_000 }, ["default"], false).maxJobs, 20_000);
  assert.equal(
    resolveWorkOptions({ maxJobs: Number.MAX_SAFE_INTEGER }, ["default"], false).maxJobs,
    Number.MAX_SAFE_INTEGER,
  );
  const job = defineJob({ name: "many", schema: z.null(), handle() {} });
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  await queue.dispatch(job, null);
  const worker = queue.work({ maxJobs: 20_000, stopWhenEmpty: true, pollMs: 5 });
  assert.equal(worker.options.maxJobs, 20_000);
  await worker.done;
  assert.equal(worker.stats.completed, 1);
});

Deno.test("resolveWorkOptions() refuses a captureConsole that is not a boolean and a maxLogBytes out of range", () => {
  assert.throws(
    () => resolveWorkOptions({ captureConsole: "yes" as unknown as boolean }, ["default"], false),
    /work: captureConsole must be true or false: got "yes"/,
  );
  for (const maxLogBytes of [0, 1_023, 1.5, 16_777_217, NaN]) {
    assert.throws(
      () => resolveWorkOptions({ maxLogBytes }, ["default"], false),
      /work: maxLogBytes must be an integer number of bytes from 1024 to 16777216/,
    );
  }
});
