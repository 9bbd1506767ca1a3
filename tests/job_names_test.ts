/**
 * A worker claims only the jobs its process knows: two processes with
 * different jobs modules on one database (a rolling deploy) each run their
 * own jobs and leave the others waiting, never failing them as unknown.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob } from "../mod.ts";
import { drain } from "../src/testing.ts";
import { storeTest } from "./_stores.ts";

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

    const stats = await drain(oldApp, { executor: "isolate", concurrency: 4 });
    assert.deepEqual(stats, { completed: 2, failed: 0, retried: 0 });
    assert.deepEqual(ran.sort(), ["v1:1", "v1:2"]);
    assert.deepEqual(await oldApp.failed(), [], "no job failed as unknown");
    assert.equal(await db.count("jobs", "name = ? AND attempts = 0", ["resize-v2"]), 3);

    await drain(newApp, { executor: "isolate" });
    assert.deepEqual(ran.sort(), ["v1:1", "v1:2", "v2:1", "v2:2", "v2:3"]);
    assert.equal(await db.count("jobs"), 0);
    assert.equal(await db.count("failed_jobs"), 0);
  },
);
