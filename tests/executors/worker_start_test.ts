/**
 * A Web Worker that cannot start (here: no read permission on the library,
 * so its script cannot load) is reported once, with the cause, and the pool
 * runs every job in the isolate instead: no job is charged a crash, and a
 * handler that held the event loop past its timeout times out there as on
 * the isolate executor. A real
 * child `deno run` with real permissions, real Web Workers, a real SQLite file.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { tempDir } from "../_helpers.ts";

const MOD = import.meta.resolve("../../mod.ts");

Deno.test("Web Workers that fail before their first job are reported once, and the jobs run in the isolate, charged nothing, under its timeout rule", async () => {
  await using tmp = await tempDir();
  await Deno.writeTextFile(
    join(tmp.dir, "jobs.ts"),
    `import { z } from "npm:zod@4";
import { defineJob } from ${JSON.stringify(MOD)};
export const note = defineJob({ name: "start.note", schema: z.object({ n: z.number() }), handle() {} });
export const holds = defineJob({
  name: "start.holds",
  schema: z.null(),
  timeoutMs: 100,
  maxAttempts: 1,
  handle() {
    const until = performance.now() + 400;
    while (performance.now() < until) {} // holds the event loop: the timeout's timer cannot fire
    return "done";
  },
});
`,
  );
  await Deno.writeTextFile(
    join(tmp.dir, "app.ts"),
    `import { Queue } from ${JSON.stringify(MOD)};
import { holds, note } from "./jobs.ts";
const errors: string[] = [];
await using queue = await Queue.open({
  path: ${JSON.stringify(tmp.dbPath)},
  jobs: import.meta.resolve("./jobs.ts"),
});
queue.addEventListener("queue:error", (event) => {
  const { error, during } = (event as CustomEvent<{ error: Error; during: string }>).detail;
  errors.push(during + ": " + error.message);
});
await queue.dispatchMany(note, [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
await queue.dispatch(holds, null);
const worker = queue.work({ executor: "workers", workers: 2, concurrency: 2, stopWhenEmpty: true });
await worker.done;
const failed = await queue.failed();
console.log(JSON.stringify({ stats: worker.stats, errors, failed: failed.map((job) => job.error) }));
`,
  );
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      `--allow-read=${tmp.dir}`,
      `--allow-write=${tmp.dir}`,
      "--allow-env",
      "--quiet",
      "--no-config",
      join(tmp.dir, "app.ts"),
    ],
    cwd: tmp.dir,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  assert.equal(code, 0, decode(stderr));
  const report = JSON.parse(decode(stdout).trim().split("\n").at(-1)!);
  assert.deepEqual(report.stats, { completed: 4, failed: 1, retried: 0 });
  assert.deepEqual(
    report.failed,
    ['JobTimeoutError: Job "start.holds" timed out: ran past 100 ms'],
    "in the isolate, a handler that held the event loop past timeoutMs times out as on the isolate executor",
  );
  assert.equal(report.errors.length, 1, JSON.stringify(report.errors));
  assert.match(report.errors[0], /^starting Web Workers: Web Worker failed to start: .*read/i);
  assert.match(report.errors[0], /running jobs in this isolate instead/);
});
