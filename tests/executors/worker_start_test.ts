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
import { fileURLToPath } from "node:url";
import { tempDir } from "../_helpers.ts";

const MOD = import.meta.resolve("../../mod.ts");

/**
 * Runs `app.ts` in `dir` with the permission flags `permissions`, expects
 * it to exit 0, and gives what its last line of output says (JSON).
 */
// deno-lint-ignore no-explicit-any -- each app prints a report of its own shape
async function runApp(dir: string, permissions: readonly string[]): Promise<any> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...permissions, "--quiet", "--no-config", join(dir, "app.ts")],
    cwd: dir,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  assert.equal(code, 0, decode(stderr));
  return JSON.parse(decode(stdout).trim().split("\n").at(-1)!);
}

/**
 * The app's lines that open the queue on `dbPath` with the jobs module
 * beside it, collecting each `queue:error` into `errors` as "during: message".
 */
function openQueue(dbPath: string): string {
  return `const errors: string[] = [];
await using queue = await Queue.open({
  path: ${JSON.stringify(dbPath)},
  jobs: import.meta.resolve("./jobs.ts"),
});
queue.addEventListener("queue:error", (event) => {
  const { error, during } = (event as CustomEvent<{ error: Error; during: string }>).detail;
  errors.push(during + ": " + error.message);
});`;
}

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
${openQueue(tmp.dbPath)}
await queue.dispatchMany(note, [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
await queue.dispatch(holds, null);
const worker = queue.work({ executor: "workers", workers: 2, concurrency: 2, stopWhenEmpty: true });
await worker.done;
const failed = await queue.failed();
console.log(JSON.stringify({ stats: worker.stats, errors, failed: failed.map((job) => job.error) }));
`,
  );
  const report = await runApp(tmp.dir, [
    `--allow-read=${tmp.dir}`,
    `--allow-write=${tmp.dir}`,
    "--allow-env",
  ]);
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

Deno.test("a Web Worker started in place of one that ended, that cannot load the jobs module, is dropped: the handlers running beside it finish where they are, once, and the pool goes on with the others", async () => {
  await using tmp = await tempDir();
  const mark = join(tmp.dir, "no-more-loads");
  const shrunk = join(tmp.dir, "pool-shrunk");
  const ledger = join(tmp.dir, "ledger.txt");
  await Deno.writeTextFile(
    join(tmp.dir, "jobs.ts"),
    `import { z } from "npm:zod@4";
import { defineJob } from ${JSON.stringify(MOD)};
const scope = (globalThis as { WorkerGlobalScope?: unknown }).WorkerGlobalScope;
const inWebWorker = typeof scope === "function" && globalThis instanceof scope;
const exists = (path: string) => {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
};
// A Web Worker started once the mark is there cannot load this module.
let marked = exists(${JSON.stringify(mark)});
if (inWebWorker && marked) throw new Error("loads refused from now on");
const note = (line: string) =>
  Deno.writeTextFileSync(${JSON.stringify(ledger)}, line + "\\n", { append: true });
export const long = defineJob({
  name: "late.long",
  schema: z.object({ n: z.number() }),
  maxAttempts: 1,
  async handle({ n }, ctx) {
    note("start " + n + " attempt " + ctx.attempt + (inWebWorker ? " in a Web Worker" : " in the isolate"));
    while (!marked) {
      marked = exists(${JSON.stringify(mark)});
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // Still running when the replacement fails to load, however long that takes on a busy machine.
    const deadline = Date.now() + 60_000;
    while (!exists(${JSON.stringify(shrunk)}) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    note("end " + n);
  },
});
export const killer = defineJob({
  name: "late.killer",
  schema: z.null(),
  maxAttempts: 1,
  maxCrashes: 1,
  async handle() {
    Deno.writeTextFileSync(${JSON.stringify(mark)}, "");
    await new Promise((resolve) => setTimeout(resolve, 200));
    (globalThis as unknown as { close(): void }).close(); // ends its Web Worker
  },
});
`,
  );
  await Deno.writeTextFile(
    join(tmp.dir, "app.ts"),
    `import { Queue } from ${JSON.stringify(MOD)};
import { killer, long } from "./jobs.ts";
${openQueue(tmp.dbPath)}
// The long jobs end once the pool reported the replacement that could not load.
queue.addEventListener("queue:error", () => Deno.writeTextFileSync(${JSON.stringify(shrunk)}, ""));
const longs = await queue.dispatchMany(long, [{ n: 1 }, { n: 2 }]);
const worker = queue.work({ executor: "workers", workers: 3, concurrency: 3, stopWhenEmpty: true });
// Both long jobs run before the killer is dispatched: it lands in the third Web Worker.
while (Deno.readTextFileSync(${JSON.stringify(ledger)}).split("\\n").length < 3) {
  await new Promise((resolve) => setTimeout(resolve, 20));
}
await queue.dispatch(killer, null);
await worker.done;
const results = await Promise.all(longs.map((id) => queue.result(id)));
console.log(JSON.stringify({ errors, states: results.map((result) => result?.state) }));
`,
  );
  await Deno.writeTextFile(ledger, "");
  const report = await runApp(tmp.dir, ["-A"]);
  assert.deepEqual(report.states, ["completed", "completed"]);
  const lines = (await Deno.readTextFile(ledger)).trim().split("\n").sort();
  assert.deepEqual(lines, [
    "end 1",
    "end 2",
    "start 1 attempt 1 in a Web Worker",
    "start 2 attempt 1 in a Web Worker",
  ], "each long job ran once, where it began");
  assert.equal(report.errors.length, 1, JSON.stringify(report.errors));
  assert.match(
    report.errors[0],
    /^replacing a Web Worker: Web Worker failed to load the jobs module: .*loads refused from now on; going on with 2 Web Workers$/,
  );
});

Deno.test("where this process cannot see its threads (no read access to /proc), a Web Worker terminated for a job that ignored its timeout is taken to have ended: the worker goes on with the next jobs instead of stopping as stuck", async () => {
  await using tmp = await tempDir();
  await Deno.writeTextFile(
    join(tmp.dir, "jobs.ts"),
    `import { z } from "npm:zod@4";
import { defineJob } from ${JSON.stringify(MOD)};
export const ignores = defineJob({
  name: "blind.ignores",
  schema: z.null(),
  timeoutMs: 300,
  maxAttempts: 1,
  handle: () => new Promise(() => {}), // ignores its signal, without holding the thread
});
export const note = defineJob({ name: "blind.note", schema: z.object({ n: z.number() }), handle() {} });
`,
  );
  await Deno.writeTextFile(
    join(tmp.dir, "app.ts"),
    `import { Queue } from ${JSON.stringify(MOD)};
import { ignores, note } from "./jobs.ts";
${openQueue(tmp.dbPath)}
await queue.dispatch(ignores, null);
// Due once the termination is long over: the worker must still be working by then.
await queue.dispatchMany(note, [{ n: 1 }, { n: 2 }], { delayMs: 3_000 });
const worker = queue.work({
  executor: "workers",
  workers: 1,
  concurrency: 1,
  graceMs: 100,
  maxJobs: 3,
  pollMs: 50,
});
await worker.done;
console.log(JSON.stringify({ stopReason: worker.stopReason, stats: worker.stats, errors }));
`,
  );
  const root = fileURLToPath(new URL("../../", import.meta.url));
  const report = await runApp(tmp.dir, [
    `--allow-read=${tmp.dir},${root}`,
    `--allow-write=${tmp.dir}`,
    "--allow-env",
  ]);
  assert.equal(report.stopReason, "jobs", JSON.stringify(report));
  assert.deepEqual(report.stats, { completed: 2, failed: 1, retried: 0 });
  assert.deepEqual(report.errors, [], "the Web Workers started, and nothing was reported stuck");
});
