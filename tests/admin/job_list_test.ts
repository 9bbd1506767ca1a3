/** `Queue.jobs()`: the listing of unfinished jobs, as the public API hands it out and checks it. */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, Queue } from "../../mod.ts";
import { ManualClock } from "../_helpers.ts";

const NOON = Date.UTC(2026, 0, 1, 12, 0, 0);
const noop = defineJob({ name: "noop", schema: z.null(), handle() {} });

Deno.test("Queue.jobs() lists unfinished jobs with Dates, filtered and paged", async () => {
  const clock = new ManualClock(NOON);
  await using queue = await Queue.open({ path: ":memory:", jobs: [noop], clock });
  const [first, second] = await queue.dispatchMany(noop, [null, null]);
  const [later] = await queue.dispatchMany(noop, [null], {
    delayMs: 5_000,
    queue: "low",
    priority: 3,
  });
  assert.deepEqual(await queue.jobs({ state: "delayed" }), {
    total: 1,
    jobs: [{
      id: later,
      queue: "low",
      name: "noop",
      state: "delayed",
      priority: 3,
      attempts: 0,
      availableAt: new Date(NOON + 5_000),
      createdAt: new Date(NOON),
      progress: null,
      batchId: null,
      lastError: null,
    }],
  });
  const page = await queue.jobs({ limit: 1, offset: 1 });
  assert.deepEqual([page.total, page.jobs.map((job) => job.id)], [3, [second]]);
  assert.deepEqual((await queue.jobs({ queue: "default", name: "noop" })).jobs.map((j) => j.id), [
    first,
    second,
  ]);
  clock.advance(5_000);
  assert.deepEqual((await queue.jobs({ state: "pending" })).total, 3, "due now");
});

Deno.test("Queue.jobs() refuses a bad state, queue, name, limit or offset, naming it", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [noop] });
  const cases: [object, RegExp][] = [
    [
      { state: "done" },
      /^TypeError: jobs: state must be "pending", "delayed" or "running": got "done"$/,
    ],
    [{ queue: "a b" }, /^TypeError: jobs: queue name "a b" is invalid/],
    [
      { name: "" },
      /^TypeError: jobs: name must be a string of 1 to 255 characters, without NUL or lone surrogates: got ""$/,
    ],
    [{ limit: 0 }, /^RangeError: jobs: limit must be an integer from 1 to 1000: got 0$/],
    [{ offset: -1 }, /^RangeError: jobs: offset must be an integer >= 0: got -1$/],
  ];
  for (const [options, message] of cases) {
    await assert.rejects(queue.jobs(options), message, JSON.stringify(options));
  }
});
