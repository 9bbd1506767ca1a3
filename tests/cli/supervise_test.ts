/**
 * The `work` supervisor, run as real processes with real signals: it
 * restarts a worker that exited 0 though no limit flag asked for it, kills a
 * worker that a second signal cannot reach (stuck in synchronous code), and
 * starts its child with the parent's own Deno flags and permissions.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Queue } from "../../mod.ts";
import { SqliteStore } from "../../src/stores/sqlite/mod.ts";
import { exists, tempDir, waitUntil, within } from "../_helpers.ts";
import { type CliProcess, startCli } from "../fixtures/cli/cli_process.ts";
import { exitOnce, fenceAndExit, spin } from "../fixtures/cli/supervise_jobs.ts";

const JOBS = fileURLToPath(import.meta.resolve("../fixtures/cli/supervise_jobs.ts"));
const CLI = fileURLToPath(import.meta.resolve("../../src/cli.ts"));
const MOD = import.meta.resolve("../../mod.ts");

/** The pid of the supervised `work` command's worker process, as soon as it exists (Linux: /proc). */
async function workerProcess(cli: CliProcess): Promise<number> {
  const children = `/proc/${cli.child.pid}/task/${cli.child.pid}/children`;
  await waitUntil(() => Promise.resolve(Deno.readTextFileSync(children).trim() !== ""), {
    what: "the worker process to exist",
    timeoutMs: 60_000,
    everyMs: 5,
  });
  return Number(Deno.readTextFileSync(children).trim().split(" ")[0]);
}

Deno.test("work (supervised) starts its child with the parent's Deno flags: --config, and its permissions, not -A", async () => {
  await using app = await tempDir();
  await using elsewhere = await tempDir(); // the current folder: no deno.json to find
  const done = join(app.dir, "done.json");
  await Deno.writeTextFile(
    join(app.dir, "deno.json"),
    JSON.stringify({ imports: { "flag-check/": "./lib/" } }),
  );
  await Deno.mkdir(join(app.dir, "lib"));
  await Deno.writeTextFile(join(app.dir, "lib", "value.ts"), `export const value = 42;\n`);
  await Deno.writeTextFile(
    join(app.dir, "jobs.ts"),
    `import { z } from "npm:zod@4";
import { defineJob } from ${JSON.stringify(MOD)};
import { value } from "flag-check/value.ts";
export const probe = defineJob({
  name: "flags.probe",
  schema: z.object({ done: z.string() }),
  handle({ done }) {
    const net = Deno.permissions.querySync({ name: "net" }).state;
    Deno.writeTextFileSync(done, JSON.stringify({ value, net, pid: Deno.pid }));
  },
});
`,
  );
  const jobs = join(app.dir, "jobs.ts");
  // The test's own import map lacks flag-check/: a process with --config dispatches.
  const dispatcher = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--config",
      join(app.dir, "deno.json"),
      "-A",
      "--quiet",
      "-",
    ],
    cwd: elsewhere.dir,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = dispatcher.stdin.getWriter();
  await writer.write(new TextEncoder().encode(
    `import { Queue } from ${JSON.stringify(MOD)};
import { probe } from ${JSON.stringify(new URL(`file://${jobs}`).href)};
await using queue = await Queue.open({ path: ${JSON.stringify(app.dbPath)}, jobs: [probe] });
await queue.dispatch(probe, { done: ${JSON.stringify(done)} });`,
  ));
  await writer.close();
  const dispatched = await dispatcher.output();
  assert.equal(dispatched.code, 0, new TextDecoder().decode(dispatched.stderr));

  const parent = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--config",
      join(app.dir, "deno.json"),
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-run",
      "--allow-sys",
      "--allow-ffi",
      "--quiet",
      CLI,
      "work",
      "--jobs",
      jobs,
      "--db",
      app.dbPath,
      "--executor",
      "isolate",
      "--stop-when-empty",
    ],
    cwd: elsewhere.dir,
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = await within(parent.output(), 60_000, "the supervised work exits").catch(
    (error) => {
      parent.kill("SIGKILL");
      throw error;
    },
  );
  const stderr = new TextDecoder().decode(output.stderr);
  assert.equal(output.code, 0, stderr);
  const probe = JSON.parse(await Deno.readTextFile(done));
  assert.equal(probe.value, 42, "the child resolved the import map of --config");
  assert.equal(probe.net, "prompt", "the child has no --allow-net: it did not get -A");
  assert.notEqual(probe.pid, parent.pid);
});

Deno.test("work (supervised) starts another worker when one exits 0 with no limit flag to explain it", async () => {
  await using tmp = await tempDir();
  const marker = join(tmp.dir, "exited");
  const done = join(tmp.dir, "done");
  {
    await using queue = await Queue.open({ path: tmp.dbPath, jobs: [exitOnce] });
    await queue.dispatch(exitOnce, { marker, done });
  }
  await using cli = startCli([
    "work",
    "--jobs",
    JOBS,
    "--db",
    tmp.dbPath,
    "--executor",
    "isolate",
    "--lease-ms",
    "500",
    "--sleep-ms",
    "100",
  ]);
  await waitUntil(() => Promise.resolve(exists(done)), {
    what: "the job ran again in a new worker",
    timeoutMs: 60_000,
  });
  assert.notEqual(Deno.readTextFileSync(done), Deno.readTextFileSync(marker), "another process");
  cli.kill("SIGTERM");
  const status = await within(cli.child.status, 60_000, "the supervisor exits on SIGTERM");
  assert.equal(status.code, 0);
  assert.match(await cli.stderr, /exited with code 0, though no limit flag asked it to/);
});

Deno.test("work (supervised) starts no other worker once its queue was moved: a worker that exits 1 on a fenced store ends the supervisor with 1", async () => {
  await using tmp = await tempDir();
  const to = join(tmp.dir, "moved.db");
  {
    await using queue = await Queue.open({ path: tmp.dbPath, jobs: [fenceAndExit] });
    await queue.dispatch(fenceAndExit, { db: tmp.dbPath, to });
  }
  await using cli = startCli(["work", "--jobs", JOBS, "--db", tmp.dbPath, "--executor", "isolate"]);
  const status = await within(cli.child.status, 60_000, "the supervisor exits");
  assert.equal(status.code, 1, await cli.stderr);
  assert.doesNotMatch(await cli.stderr, /starting another/);
});

Deno.test("work on a moved store exits 1 at once, naming where the queue went, before it starts a worker", async () => {
  await using tmp = await tempDir();
  const to = join(tmp.dir, "moved.db");
  const store = await SqliteStore.open(tmp.dbPath); // the queue's file, migrated
  await store.fenceForMove(to, Date.now());
  await store.close();
  await using cli = startCli(["work", "--jobs", JOBS, "--db", tmp.dbPath]);
  const status = await within(cli.child.status, 60_000, "work exits");
  assert.equal(status.code, 1);
  assert.match(
    await cli.stderr,
    new RegExp(`^queue work: Cannot write to this queue: it was moved to ${RegExp.escape(to)} `),
  );
});

Deno.test("work (supervised): a second SIGTERM SIGKILLs a worker stuck in synchronous code", async () => {
  await using tmp = await tempDir();
  const started = join(tmp.dir, "started");
  {
    await using queue = await Queue.open({ path: tmp.dbPath, jobs: [spin] });
    await queue.dispatch(spin, { started });
  }
  await using cli = startCli([
    "work",
    "--jobs",
    JOBS,
    "--db",
    tmp.dbPath,
    "--executor",
    "isolate",
    "--grace-ms",
    "200",
  ]);
  await waitUntil(() => Promise.resolve(exists(started)), {
    what: "the job started",
    timeoutMs: 60_000,
  });
  const childPid = Number(Deno.readTextFileSync(started));
  assert.notEqual(childPid, cli.child.pid);
  // Signals sent at once may merge into one: repeat SIGTERM until the supervisor exits.
  let exited = false;
  const status = cli.child.status.finally(() => exited = true);
  await waitUntil(() => {
    if (!exited) cli.kill("SIGTERM");
    return Promise.resolve(exited);
  }, { what: "the supervisor exits after a second SIGTERM", timeoutMs: 60_000 });
  assert.equal((await status).signal, null, "the supervisor itself exits");
  assert.equal(exists(`/proc/${childPid}`), false, "the stuck worker is gone");
  assert.match(await cli.stderr, /did not stop within 2 s of the second signal: SIGKILL/);
});

Deno.test({
  name:
    "work (supervised): SIGTERM as soon as its worker process exists, before the worker listens for it, ends with 0",
  // The child is found through /proc (Linux).
  ignore: Deno.build.os !== "linux",
  async fn() {
    await using tmp = await tempDir();
    await (await SqliteStore.open(tmp.dbPath)).close();
    await using cli = startCli(["work", "--jobs", JOBS, "--db", tmp.dbPath]);
    await workerProcess(cli);
    cli.kill("SIGTERM");
    const status = await within(cli.child.status, 60_000, "the supervisor exits on SIGTERM");
    assert.equal(status.code, 0, await cli.stderr);
  },
});

Deno.test("work (supervised) refuses --db :memory:, a database of one process, naming --no-supervise", async () => {
  await using cli = startCli(["work", "--jobs", JOBS, "--db", ":memory:", "--stop-when-empty"]);
  const status = await within(cli.child.status, 60_000, "work exits");
  assert.equal(status.code, 2);
  assert.match(await cli.stderr, /--db :memory: is a database of one process.*add --no-supervise/);
});

Deno.test({
  name:
    "work (supervised): its worker stops by itself once the supervisor was killed with SIGKILL, which reaches no child",
  // The child is found through /proc (Linux).
  ignore: Deno.build.os !== "linux",
  async fn() {
    await using tmp = await tempDir();
    await (await SqliteStore.open(tmp.dbPath)).close();
    await using cli = startCli(["work", "--jobs", JOBS, "--db", tmp.dbPath]);
    const worker = await workerProcess(cli);
    // It looks for the supervisor's loss from the moment it says it started.
    await waitUntil(
      () => Promise.resolve(cli.lines.some((line) => line.includes('"worker:start"'))),
      {
        what: "the worker to start",
        timeoutMs: 60_000,
      },
    );
    cli.kill("SIGKILL");
    await cli.child.status;
    await waitUntil(() => Promise.resolve(!exists(`/proc/${worker}`)), {
      what: "the orphaned worker to exit",
      timeoutMs: 60_000,
    });
  },
});
