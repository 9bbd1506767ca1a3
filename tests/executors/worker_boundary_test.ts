/**
 * What crosses the Web Worker boundary: every value a Web Worker sends back
 * can be cloned, so one job's odd error never takes the results of the jobs
 * beside it along. Real Web Workers on a real SQLite file.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { Queue, ValidationError } from "../../mod.ts";
import { fromWire, toWire } from "../../src/executors/_worker_messages.ts";
import { tempDir } from "../_helpers.ts";
import { odd, recorded } from "../fixtures/web_workers/odd_error_jobs.ts";

const JOBS = import.meta.resolve("../fixtures/web_workers/odd_error_jobs.ts");

Deno.test("Web Workers: an error whose name and stack are functions fails only its own job; its siblings' results arrive once", async () => {
  await using tmp = await tempDir();
  const log = join(tmp.dir, "runs.log");
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  await queue.dispatchMany(recorded, ["a", "b", "c"].map((label) => ({ log, label })));
  await queue.dispatch(odd, null);
  const worker = queue.work({
    executor: "workers",
    workers: 1,
    concurrency: 4,
    stopWhenEmpty: true,
  });
  await worker.done;
  assert.deepEqual(worker.stats, { completed: 3, failed: 1, retried: 0 });
  const runs = (await Deno.readTextFile(log)).trim().split("\n").sort();
  assert.deepEqual(runs, ["a", "b", "c"], "each sibling ran once");
  const [failed] = await queue.failed();
  assert.equal(failed?.name, "boundary.odd");
  assert.equal(failed.crashes, 0, "no crash was charged");
  assert.match(failed.error, /"not a string".*: odd fields$/);
});

Deno.test("a ValidationError whose issue path holds a Symbol crosses with its fields, the symbol as its description", () => {
  const error = new ValidationError("boundary.symbol", "bad", [
    { path: ["items", 0, Symbol("tag")], message: "expected string" },
  ]);
  const crossed = fromWire(structuredClone(toWire(error))); // what postMessage does
  assert.ok(crossed instanceof ValidationError);
  assert.equal(crossed.jobName, "boundary.symbol");
  assert.deepEqual(crossed.issues, [
    { path: ["items", 0, "Symbol(tag)"], message: "expected string" },
  ]);
});
