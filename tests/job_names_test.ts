/**
 * A worker claims only the jobs its process knows: two processes with
 * different jobs modules on one database (a rolling deploy) each run their
 * own jobs and leave the others due, never failing them as unknown, and
 * `queue.unclaimed()` (with the dashboard and `stats`) names what no worker
 * knows.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, Queue, rateLimited, withoutOverlapping } from "../mod.ts";
import { dashboard } from "../src/dashboard.ts";
import { workUntilEmpty } from "../src/testing.ts";
import { fetchFrom } from "./_dashboard.ts";
import { runCli } from "./fixtures/cli/cli_process.ts";
import { storeTest } from "./_stores.ts";
import { failedCount, unfinishedCount, waitUntil } from "./_helpers.ts";

const ran: string[] = [];
const oldJob = defineJob({
  name: "resize-v1",
  schema: z.number(),
  handle(n) {
    ran.push(`v1:${n}`);
  },
});
const newJob = defineJob({
  name: "resize-v2",
  schema: z.number(),
  handle(n) {
    ran.push(`v2:${n}`);
  },
});

storeTest(
  "a worker claims only jobs it has a definition for; the others wait for a worker that knows them",
  async (db) => {
    ran.length = 0;
    const oldApp = await db.open({ jobs: [oldJob] });
    const newApp = await db.open({ jobs: [newJob] });
    await newApp.dispatchMany(newJob, [1, 2, 3]);
    await oldApp.dispatchMany(oldJob, [1, 2]);

    const stats = await workUntilEmpty(oldApp, { executor: "isolate", concurrency: 4 });
    assert.deepEqual(stats, { completed: 2, failed: 0, retried: 0 });
    assert.deepEqual(ran.sort(), ["v1:1", "v1:2"]);
    assert.deepEqual(await oldApp.failed(), [], "no job failed as unknown");
    const waiting = (await newApp.jobs({ name: "resize-v2" })).jobs;
    assert.deepEqual(waiting.map((job) => job.attempts), [0, 0, 0]);

    await workUntilEmpty(newApp, { executor: "isolate" });
    assert.deepEqual(ran.sort(), ["v1:1", "v1:2", "v2:1", "v2:2", "v2:3"]);
    assert.equal(await unfinishedCount(newApp), 0);
    assert.equal(await failedCount(newApp), 0);
  },
);

storeTest(
  "queue.unclaimed() and the dashboard list due jobs no worker seen lately knows, by queue and name",
  async (db) => {
    const oldApp = await db.open({ jobs: [oldJob] });
    const newApp = await db.open({ jobs: [newJob] });
    await newApp.dispatchMany(newJob, [1, 2, 3]);
    await newApp.dispatch(newJob, 9, { delayMs: 60_000 }); // delayed: not due, not listed
    await oldApp.dispatch(oldJob, 2);
    assert.deepEqual(await newApp.unclaimed(), [], "no worker runs: nothing to compare with");

    const worker = oldApp.work({ executor: "isolate", pollMs: 10 });
    try {
      await waitUntil(async () =>
        (await oldApp.workers()).length === 1 &&
        (await oldApp.jobs({ name: "resize-v1" })).total === 0, {
        what: "the old worker ran its due job and wrote a heartbeat",
      });
      assert.deepEqual(await newApp.unclaimed(), [
        { queue: "default", name: "resize-v2", pending: 3 },
      ]);
      const page = await (await fetchFrom(dashboard(newApp), "/")).text();
      assert.match(page, /Due jobs no running worker knows/);
      assert.match(page, /<td>default<\/td>\s*<td>resize-v2<\/td>\s*<td class="num">3<\/td>/);
      if (db.file !== null) {
        const stats = await runCli(["stats", "--db", db.file]);
        assert.equal(stats.code, 0, stats.stderr);
        assert.match(stats.stdout, /Due jobs no running worker knows/);
        assert.match(stats.stdout, /default\s+resize-v2\s+3/);
      }
    } finally {
      await worker.stop();
    }
    assert.deepEqual(await oldApp.workers(), [], "a stopped worker removes its row");
  },
);

const noop = defineJob({ name: "noop", schema: z.number(), handle() {} });

Deno.test("defineJob(), queue.batch(), withoutOverlapping() and rateLimited() refuse a name with NUL or a lone surrogate", async () => {
  for (const name of ["a\u0000b", "\uD800x", "x\uDC00"]) {
    assert.throws(
      () => defineJob({ name, schema: z.null(), handle() {} }),
      (error: Error) =>
        error instanceof TypeError &&
        /^defineJob: name .* without NUL or lone surrogates/.test(error.message),
      JSON.stringify(name),
    );
  }
  await using queue = await Queue.open({ path: ":memory:", jobs: [noop] });
  assert.throws(
    () => queue.batch("a\u0000b"),
    (error: Error) =>
      error instanceof TypeError &&
      /batch: name .* without NUL or lone surrogates/.test(error.message),
  );
  assert.throws(() => queue.batch("\uD800"), TypeError);
  assert.throws(
    () => withoutOverlapping("a\u0000b"),
    (error: Error) =>
      error instanceof TypeError && /withoutOverlapping: key .* without NUL/.test(error.message),
  );
  assert.throws(
    () => rateLimited("r\u0000", 5, 1000),
    (error: Error) =>
      error instanceof TypeError && /rateLimited: key .* without NUL/.test(error.message),
  );
  assert.equal((await queue.batches()).length, 0, "no batch stored");
  assert.equal((await queue.jobs()).total, 0, "no job stored");
});
