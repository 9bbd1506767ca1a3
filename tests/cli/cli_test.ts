import assert from "node:assert/strict";
import { join } from "node:path";
import { Queue } from "../../mod.ts";
import { formatStatusLine } from "../../src/cli/status_line.ts";
import { migrations } from "../../migrations/sqlite/mod.ts";
import { storedCounts, tempDir, waitUntil, within } from "../_helpers.ts";
import { type CliResult, runCli, startCli } from "../fixtures/cli/cli_process.ts";
import { exitStuckOnce, fails, record, waitForStop } from "../fixtures/cli/jobs.ts";

const JOBS = "tests/fixtures/cli/jobs.ts";
const JOBS_URL = import.meta.resolve("../fixtures/cli/jobs.ts");

function openQueue(path: string): Promise<Queue> {
  return Queue.open({ path, jobs: JOBS_URL });
}

/** A database with `count` failed jobs (ids returned), made by working them here. */
async function withFailed(queue: Queue, count: number): Promise<number[]> {
  const ids = await queue.dispatchMany(fails, Array.from({ length: count }, (_, n) => ({ n })));
  const worker = queue.work({ executor: "isolate", concurrency: 4, stopWhenEmpty: true });
  await worker.done;
  assert.equal(worker.stats.failed, count);
  return ids;
}

function jsonLines(stdout: string): Record<string, unknown>[] {
  return stdout.trim().split("\n").map((line) => JSON.parse(line));
}

Deno.test("CLI: --help on every command, help, and help <command> exit 0 with usage and exit codes", async () => {
  const commands = [
    "work",
    "failed",
    "retry",
    "forget",
    "flush",
    "prune-failed",
    "clear",
    "stats",
    "migrate",
    "move",
    "help",
  ];
  const runs = [
    ["--help"],
    ["help"],
    ["help", "work"],
    ...commands.map((command) => [command, "--help"]),
    ["work", "-h"],
  ];
  const results = await Promise.all(runs.map((args) => runCli(args)));
  results.forEach((result, index) => {
    const args = runs[index]!.join(" ");
    assert.equal(result.code, 0, `${args}: ${result.stderr}`);
    assert.match(result.stdout, /Usage: /, args);
    assert.match(result.stdout, /3 +a job was stuck/, args);
    assert.equal(result.stderr, "", args);
  });
  assert.match(results[0]!.stdout, /prune-failed/);
  assert.match(results[2]!.stdout, /--stop-when-empty/);
});

Deno.test("CLI: unknown flags and commands, bad values, missing and extra arguments exit 2 with one line naming them", async () => {
  await using tmp = await tempDir();
  const db = ["--db", tmp.dbPath];
  const cases: [string[], RegExp][] = [
    [["work", "--jobs", JOBS, "--bogus"], /unknown flag --bogus/],
    [["work", "--jobs", JOBS, "--concurrency", "0"], /--concurrency .*"0"/],
    [["work", "--jobs", JOBS, "--max-time", "soon"], /--max-time .*"soon"/],
    [
      ["work", "--jobs", JOBS, "--max-time", "2592000"],
      /--max-time .*at most 2147483.647: got "2592000"/,
    ],
    [["work", "--jobs", JOBS, "--executor", "threads"], /--executor .*"threads"/],
    [["work", "--jobs", JOBS, "--queue", "high,no way"], /--queue.*"no way"/],
    [["work", "--jobs", JOBS, "--once", "--max-jobs", "3"], /--once/],
    [["work"], /--jobs is required/],
    [["frobnicate"], /unknown command "frobnicate"/],
    [["retry", "abc", ...db], /job id .*"abc"/],
    [["retry", 'x"\x1b[2J', ...db], /job id .*: got "x\\"\\u001b\[2J" \(see/],
    [["retry", ...db], /missing job ids/],
    [["retry", "-1", ...db], /a job id must be a positive whole number: got "-1"/],
    [["logs", "-5", ...db], /a job id must be a positive whole number: got "-5"/],
    [["retry", "1", "all", ...db], /ids or all/],
    [["forget", ...db], /missing the job id/],
    [["forget", "1", "2", ...db], /unexpected argument "2"/],
    [["prune-failed", ...db], /--hours is required/],
    [["prune-failed", "--hours", "-1", ...db], /--hours .*"-1"/],
    [["failed", "--limit", "0", ...db], /--limit .*"0"/],
    [["stats", "--json=yes", ...db], /--json takes no value/],
    [["clear", "--queue", ...db], /--queue needs a value/],
    [["help", "frobnicate"], /unknown command "frobnicate"/],
    [["migrate", "--wait-ms", "abc", ...db], /--wait-ms .*"abc"/],
    [["migrate", "--plan", "--wait-ms", "-1", ...db], /--wait-ms .*"-1"/],
    [
      ["stats", "--db", " mysql://app:secret@db.internal/app"],
      /--db must be a path, a postgres:\/\/ URL or a redis:\/\/ URL: got " mysql:\/\/app:\*\*\*@db/,
    ],
    // What a store would refuse at open, refused as the flag it is, before anything is opened.
    [
      ["stats", "--db", "postgres://app:secret@db.internal/app?schema=Bad-Name"],
      /--db: schema must be 1 to 51 lower-case letters, .*got "Bad-Name"/,
    ],
    [
      ["failed", "--db", "postgres://db.internal/app?schema=a&schema=b"],
      /--db: url takes the schema parameter once/,
    ],
    [["stats", "--db", "redis://db.internal:6379/0?prefx=app"], /--db: url takes one parameter/],
    [["stats", "--db", "redis://db.internal:6379/0?prefix=a b"], /--db: prefix must be 1 to 100/],
  ];
  // Four at a time, each given a minute: 27 processes at once on a loaded 2-core machine took
  // longer than runCli's default deadline to start.
  const results: CliResult[] = [];
  for (let from = 0; from < cases.length; from += 4) {
    const some = cases.slice(from, from + 4);
    results.push(...await Promise.all(some.map(([args]) => runCli(args, {}, 60_000))));
  }
  results.forEach((result, index) => {
    const [args, message] = cases[index]!;
    assert.equal(result.code, 2, `${args.join(" ")}: ${result.stderr}`);
    assert.match(result.stderr, message);
    assert.equal(result.stderr.trim().split("\n").length, 1, result.stderr);
    assert.equal(result.stdout, "");
  });
  await assert.rejects(Deno.stat(tmp.dbPath), Deno.errors.NotFound); // nothing was opened
});

Deno.test("CLI: a jobs module that cannot be imported exits 1 with one line, its stack only with --verbose", async () => {
  await using tmp = await tempDir();
  const args = ["work", "--jobs", "./no/such/jobs.ts", "--db", tmp.dbPath];
  const [bare, supervised, verbose] = await Promise.all([
    runCli([...args, "--no-supervise"]),
    runCli(args),
    runCli([...args, "--no-supervise", "--verbose"]),
  ]);
  for (const result of [bare, supervised, verbose]) {
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, /^queue work: .*no\/such\/jobs\.ts/);
  }
  assert.equal(bare.stderr.trim().split("\n").length, 1, bare.stderr);
  assert.equal(supervised.stderr.trim().split("\n").length, 1, supervised.stderr);
  assert.ok(verbose.stderr.trim().split("\n").length > 1, verbose.stderr);
});

Deno.test("work --no-supervise --stop-when-empty drains the jobs dispatched before, one JSON line per outcome, and exits 0", async () => {
  await using tmp = await tempDir();
  await using queue = await openQueue(tmp.dbPath);
  const done = await queue.dispatchMany(record, Array.from({ length: 20 }, (_, n) => ({ n })));
  const failed = await queue.dispatchMany(fails, [{ n: 1 }, { n: 2 }]);

  const result = await runCli([
    "work",
    "--no-supervise",
    "--stop-when-empty",
    "--jobs",
    JOBS,
    "--db",
    tmp.dbPath,
    "--concurrency",
    "4",
    "--sleep-ms",
    "20",
  ]);

  assert.equal(result.code, 0, result.stderr);
  const lines = jsonLines(result.stdout);
  assert.equal(lines.length, 24);
  assert.equal(lines[0]!.event, "worker:start");
  const completes = lines.filter((line) => line.event === "job:complete");
  const failures = lines.filter((line) => line.event === "job:failed");
  assert.equal(completes.length + failures.length, 22);
  const byId = (a: Record<string, unknown>, b: Record<string, unknown>) =>
    Number(a.id) - Number(b.id);
  assert.deepEqual(completes.sort(byId).map((line) => line.id), done);
  assert.deepEqual(Object.keys(completes[0]!), [
    "event",
    "id",
    "name",
    "queue",
    "attempt",
    "durationMs",
  ]);
  assert.equal(completes[0]!.name, "cli.record");
  assert.deepEqual(failures.sort(byId).map(({ id, error }) => ({ id, error })), [
    { id: failed[0], error: "PermanentError: fixture failure 1" },
    { id: failed[1], error: "PermanentError: fixture failure 2" },
  ]);
  assert.deepEqual(lines.at(-1), {
    event: "worker:stop",
    reason: "empty",
    completed: 20,
    failed: 2,
    retried: 0,
    cancelled: 0,
  });
  assert.deepEqual(await queue.counts(), {
    default: { pending: 0, delayed: 0, reserved: 0, failed: 2, running: [] },
  });
});

Deno.test("work --once runs exactly one job even with --concurrency 4", async () => {
  await using tmp = await tempDir();
  await using queue = await openQueue(tmp.dbPath);
  await queue.dispatchMany(record, Array.from({ length: 6 }, (_, n) => ({ n })));

  const result = await runCli([
    "work",
    "--no-supervise",
    "--once",
    "--concurrency",
    "4",
    "--jobs",
    JOBS,
    "--db",
    tmp.dbPath,
  ]);

  assert.equal(result.code, 0, result.stderr);
  const lines = jsonLines(result.stdout);
  assert.equal(lines.filter((line) => line.event === "job:complete").length, 1);
  assert.equal(lines.at(-1)!.reason, "jobs");
  assert.equal((await queue.counts()).default!.pending, 5);
});

Deno.test("work --queue high,default takes every high job before any default job", async () => {
  await using tmp = await tempDir();
  await using queue = await openQueue(tmp.dbPath);
  const low = await queue.dispatchMany(record, [{ n: 1 }, { n: 2 }, { n: 3 }]);
  const high = await queue.dispatchMany(record, [{ n: 4 }, { n: 5 }, { n: 6 }], { queue: "high" });

  const result = await runCli([
    "work",
    "--no-supervise",
    "--stop-when-empty",
    "--queue",
    "high,default",
    "--executor",
    "isolate",
    "--jobs",
    JOBS,
    "--db",
    tmp.dbPath,
  ]);

  assert.equal(result.code, 0, result.stderr);
  const completes = jsonLines(result.stdout).filter((line) => line.event === "job:complete");
  assert.deepEqual(completes.map((line) => line.id), [...high, ...low]);
  assert.deepEqual(completes.map((line) => line.queue), [
    ...Array(3).fill("high"),
    ...Array(3).fill("default"),
  ]);
});

for (const signal of ["SIGTERM", "SIGHUP"] as const) {
  Deno.test(
    `work --no-supervise: ${signal} releases a running job after --grace-ms and exits 0 (${
      signal === "SIGHUP" ? "its terminal closed" : "R02"
    })`,
    async () => {
      await using tmp = await tempDir();
      await using queue = await openQueue(tmp.dbPath);
      const id = await queue.dispatch(waitForStop, null);
      await using worker = startCli([
        "work",
        "--no-supervise",
        "--grace-ms",
        "500",
        "--sleep-ms",
        "20",
        "--jobs",
        JOBS,
        "--db",
        tmp.dbPath,
      ]);
      await waitUntil(async () => (await queue.counts()).default?.reserved === 1, {
        what: "the job runs",
      });

      const signalledAt = performance.now();
      worker.kill(signal);
      const status = await worker.child.status;
      const exitMs = performance.now() - signalledAt;

      assert.equal(status.code, 0, await worker.stderr);
      console.log(`time to exit after ${signal} with a 500 ms grace: ${exitMs.toFixed(0)} ms`);
      await worker.stdout;
      const records = worker.records();
      assert.deepEqual(records.find((line) => line.event === "worker:stopping"), {
        event: "worker:stopping",
        signal,
        graceMs: 500,
      });
      assert.equal(records.at(-1)!.reason, "requested");
      assert.deepEqual(await queue.counts(), {
        default: { pending: 1, delayed: 0, reserved: 0, failed: 0, running: [] },
      });
      assert.equal(await queue.failedJob(id), null);
    },
  );
}

Deno.test("work prints a job:cancelled line for a running job cancelled from another process, and worker:stop counts it", async () => {
  await using tmp = await tempDir();
  await using queue = await openQueue(tmp.dbPath);
  const id = await queue.dispatch(waitForStop, null);
  await using worker = startCli([
    "work",
    "--no-supervise",
    "--executor",
    "isolate",
    "--sleep-ms",
    "20",
    "--jobs",
    JOBS,
    "--db",
    tmp.dbPath,
  ]);
  await waitUntil(async () => (await queue.counts()).default?.reserved === 1, {
    what: "the job runs",
  });
  const cancel = await runCli(["cancel", String(id), "--reason", "not needed", "--db", tmp.dbPath]);
  assert.equal(cancel.code, 0, cancel.stderr);
  const cancelled = await worker.waitForRecord((line) => line.event === "job:cancelled", 30_000);
  assert.deepEqual(cancelled, {
    event: "job:cancelled",
    id,
    name: "cli.wait-for-stop",
    queue: "default",
    attempt: 1,
    reason: "not needed",
  });

  worker.kill("SIGTERM");
  assert.equal((await worker.child.status).code, 0, await worker.stderr);
  await worker.stdout;
  assert.deepEqual(worker.records().at(-1), {
    event: "worker:stop",
    reason: "requested",
    completed: 0,
    failed: 0,
    retried: 0,
    cancelled: 1,
  });
  assert.equal((await queue.result(id))?.state, "cancelled");
});

Deno.test("work --no-supervise: a second signal stops at once instead of waiting out the grace", async () => {
  await using tmp = await tempDir();
  await using queue = await openQueue(tmp.dbPath);
  await queue.dispatch(waitForStop, null);
  await using worker = startCli([
    "work",
    "--no-supervise",
    "--executor",
    "isolate",
    "--grace-ms",
    "60000",
    "--sleep-ms",
    "20",
    "--jobs",
    JOBS,
    "--db",
    tmp.dbPath,
  ]);
  await waitUntil(async () => (await queue.counts()).default?.reserved === 1, {
    what: "the job runs",
  });

  worker.kill("SIGTERM");
  await worker.waitForRecord((line) => line.event === "worker:stopping");
  worker.kill("SIGINT");
  // Far within the 60 s grace: the second signal, not the grace, ended it.
  const status = await within(worker.child.status, 30_000, "exit after the second signal");

  assert.equal(status.code, 0, await worker.stderr);
  await worker.stdout;
  assert.deepEqual(
    worker.records().filter((line) => line.event === "worker:stopping").map((line) => line.graceMs),
    [60_000, 0],
  );
  assert.equal((await queue.counts()).default!.pending, 1);
});

Deno.test("work (supervised) starts a new worker process after one exits with code 3, then exits 0 with it", async () => {
  await using tmp = await tempDir();
  await using queue = await openQueue(tmp.dbPath);
  await queue.dispatch(exitStuckOnce, null);
  const marker = join(tmp.dir, "exited");

  const result = await runCli([
    "work",
    "--executor",
    "isolate",
    "--max-jobs",
    "1",
    "--lease-ms",
    "1000",
    "--sleep-ms",
    "20",
    "--jobs",
    JOBS,
    "--db",
    tmp.dbPath,
  ], { CLI_FIXTURE_MARKER: marker });

  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stderr, /exited with code 3 .*starting another in 0\.5 s/);
  const starts = jsonLines(result.stdout).filter((line) => line.event === "worker:start");
  assert.equal(starts.length, 2);
  assert.equal(String(starts[0]!.pid), await Deno.readTextFile(marker)); // the first one exited
  assert.notEqual(starts[1]!.pid, starts[0]!.pid);
  assert.deepEqual(jsonLines(result.stdout).at(-1), {
    event: "worker:stop",
    reason: "jobs",
    completed: 1,
    failed: 0,
    retried: 0,
    cancelled: 0,
  });
  assert.deepEqual(await storedCounts(queue), {});
});

Deno.test("work (supervised) passes SIGTERM to its worker process and exits with its code", async () => {
  await using tmp = await tempDir();
  await using supervisor = startCli([
    "work",
    "--executor",
    "isolate",
    "--sleep-ms",
    "20",
    "--jobs",
    JOBS,
    "--db",
    tmp.dbPath,
  ]);
  const start = await supervisor.waitForRecord((line) => line.event === "worker:start");
  assert.notEqual(start.pid, supervisor.child.pid);

  supervisor.kill("SIGTERM");
  const status = await supervisor.child.status;

  assert.equal(status.code, 0, await supervisor.stderr);
  await supervisor.stdout;
  assert.deepEqual(supervisor.records().at(-1), {
    event: "worker:stop",
    reason: "requested",
    completed: 0,
    failed: 0,
    retried: 0,
    cancelled: 0,
  });
  assert.throws(() => Deno.kill(start.pid as number, "SIGKILL"), Deno.errors.NotFound);
  assert.equal(await supervisor.stderr, "");
});

Deno.test("failed lists failed jobs as a table, as JSON, and up to --limit", async () => {
  await using tmp = await tempDir();
  await using queue = await openQueue(tmp.dbPath);
  const ids = await withFailed(queue, 3);
  const db = ["--db", tmp.dbPath];

  await (await Queue.open({ path: join(tmp.dir, "empty.db"), jobs: [] })).close();
  const [table, json, limited, none] = await Promise.all([
    runCli(["failed", ...db]),
    runCli(["failed", "--json", ...db]),
    runCli(["failed", "--json", "--limit", "2", ...db]),
    runCli(["failed", "--db", join(tmp.dir, "empty.db")]),
  ]);

  assert.equal(table.code, 0, table.stderr);
  const [header, rule, ...rows] = table.stdout.trim().split("\n");
  assert.match(header!, /^id +queue +name +attempts +failed at +error$/);
  assert.match(rule!, /^-+ +-+/);
  assert.equal(rows.length, 3);
  assert.match(
    rows[0]!,
    new RegExp(
      `^ *${
        ids[2]
      } +default +cli\\.fails +1 +\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d +PermanentError: fixture failure 2$`,
    ),
  );
  assert.doesNotMatch(table.stdout, /second line/);
  const listed = JSON.parse(json.stdout) as { id: number; payload: string }[];
  assert.deepEqual(listed.map((job) => job.id), [...ids].reverse());
  assert.equal(listed[0]!.payload, '{"n":2}');
  assert.equal((JSON.parse(limited.stdout) as unknown[]).length, 2);
  assert.equal(none.stdout.trim(), "No failed jobs");
});

Deno.test("retry <id…> and retry all put failed jobs back, an id given twice once; an id that is not failed exits 1", async () => {
  await using tmp = await tempDir();
  await using queue = await openQueue(tmp.dbPath);
  const [first, second, third, fourth] = await withFailed(queue, 4);
  const db = ["--db", tmp.dbPath];

  const some = await runCli(["retry", String(first), String(second), String(first), ...db]);
  assert.equal(some.code, 0, some.stderr);
  assert.equal(
    some.stdout,
    `Retried job ${first}\nRetried job ${second}\n`,
    "an id given twice is retried once",
  );
  assert.equal((await queue.counts()).default!.pending, 2);
  assert.equal(await queue.failedJob(first!), null);

  const missing = await runCli(["retry", String(third), "999", ...db]);
  assert.equal(missing.code, 1);
  assert.equal(missing.stderr.trim(), "queue retry: no failed job 999");
  assert.equal(await queue.failedJob(third!), null);

  const all = await runCli(["retry", "all", ...db]);
  assert.equal(all.code, 0, all.stderr);
  assert.equal(all.stdout.trim(), "Retried 1 failed job");
  assert.equal(await queue.failedJob(fourth!), null);
  assert.deepEqual((await queue.counts()).default, {
    pending: 4,
    delayed: 0,
    reserved: 0,
    failed: 0,
    running: [],
  });
});

Deno.test("forget deletes one failed job, flush deletes them all, prune-failed --hours keeps the recent ones", async () => {
  await using tmp = await tempDir();
  await using queue = await openQueue(tmp.dbPath);
  const [first] = await withFailed(queue, 3);
  const db = ["--db", tmp.dbPath];

  const forgot = await runCli(["forget", String(first), ...db]);
  assert.equal(forgot.code, 0, forgot.stderr);
  assert.equal(await queue.failedJob(first!), null);
  assert.equal((await queue.failed()).length, 2);
  const again = await runCli(["forget", String(first), ...db]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /no failed job/);

  const kept = await runCli(["prune-failed", "--hours", "1", ...db]);
  assert.equal(kept.code, 0, kept.stderr);
  assert.match(kept.stdout, /^Deleted 0 failed jobs that failed more than 1 hour ago/);
  assert.equal((await queue.failed()).length, 2);
  const pruned = await runCli(["prune-failed", "--hours", "0", ...db]);
  assert.match(pruned.stdout, /^Deleted 2 failed jobs/);
  assert.equal((await queue.failed()).length, 0);

  await withFailed(queue, 2);
  const flushed = await runCli(["flush", ...db]);
  assert.equal(flushed.code, 0, flushed.stderr);
  assert.equal(flushed.stdout.trim(), "Deleted 2 failed jobs");
  assert.equal((await queue.failed()).length, 0);
});

Deno.test("clear --queue deletes the waiting jobs of one queue, clear those of every queue", async () => {
  await using tmp = await tempDir();
  await using queue = await openQueue(tmp.dbPath);
  await queue.dispatchMany(record, [{ n: 1 }, { n: 2 }]);
  await queue.dispatchMany(record, [{ n: 3 }], { queue: "high" });
  await queue.dispatch(record, { n: 4 }, { queue: "mail", delayMs: 60_000 });
  const db = ["--db", tmp.dbPath];

  const one = await runCli(["clear", "--queue", "default", ...db]);
  assert.equal(one.code, 0, one.stderr);
  assert.equal(one.stdout.trim(), "Deleted 2 jobs from queue default");
  assert.deepEqual(Object.keys(await storedCounts(queue)).sort(), ["high", "mail"]);

  const every = await runCli(["clear", ...db]);
  assert.equal(every.stdout.trim(), "Deleted 2 jobs from every queue");
  assert.deepEqual(await storedCounts(queue), {});
});

Deno.test("stats prints the counts per queue (a table, or JSON), and migrate the schema version", async () => {
  await using tmp = await tempDir();
  await using queue = await openQueue(tmp.dbPath);
  await withFailed(queue, 1);
  await queue.dispatchMany(record, [{ n: 1 }, { n: 2 }]);
  await queue.dispatch(record, { n: 3 }, { queue: "mail", delayMs: 60_000 });
  const db = ["--db", tmp.dbPath];

  const [json, table, migrated] = await Promise.all([
    runCli(["stats", "--json", ...db]),
    runCli(["stats", ...db]),
    runCli(["migrate", "--db", join(tmp.dir, "new", "queue.db")]),
  ]);

  assert.equal(json.code, 0, json.stderr);
  assert.deepEqual(JSON.parse(json.stdout), await queue.counts());
  assert.deepEqual(table.stdout.trim().split("\n").map((line) => line.split(/ +/)), [
    ["queue", "pending", "delayed", "reserved", "failed"],
    ["-------", "-------", "-------", "--------", "------"],
    ["default", "2", "0", "0", "1"],
    ["mail", "0", "1", "0", "0"],
  ]);
  assert.equal(migrated.code, 0, migrated.stderr);
  const newest = migrations.at(-1)!.version;
  assert.deepEqual(migrated.stdout.trim().split("\n"), [
    ...migrations.map((step) => `Applied schema step ${step.version} (${step.kind})`),
    `${join(tmp.dir, "new", "queue.db")} is at schema version ${newest}`,
  ]);
});

Deno.test("stats --watch --json prints a line a second until SIGINT, then exits 0", async () => {
  await using tmp = await tempDir();
  await (await Queue.open({ path: tmp.dbPath, jobs: [] })).close();
  await using watch = startCli(["stats", "--watch", "--json", "--db", tmp.dbPath]);
  await watch.waitForRecord(() => true);
  watch.kill("SIGINT");
  assert.equal((await watch.child.status).code, 0, await watch.stderr);
  assert.deepEqual(watch.records()[0], {});
});

Deno.test("the status line shows processed, failed, retried, running, rate and pending per queue", () => {
  assert.equal(
    formatStatusLine({
      stats: { completed: 10, failed: 2, retried: 3 },
      running: 4,
      ratePerSecond: 5.25,
      pending: [["high", 0], ["default", 12]],
    }),
    "processed 12 · failed 2 · retried 3 · running 4 · 5.3/s · pending high 0, default 12",
  );
});
for (const supervised of [false, true]) {
  Deno.test(
    `work${
      supervised ? "" : " --no-supervise"
    }: a SIGTERM while the jobs module loads ends it with 0 once the start is done, claiming nothing; a second SIGTERM ends a start that hangs with 143`,
    async () => {
      await using tmp = await tempDir();
      const jobsUrl = import.meta.resolve("../fixtures/cli/slow_load_jobs.ts");
      const { idle } = await import(jobsUrl);
      await using queue = await Queue.open({ path: tmp.dbPath, jobs: jobsUrl });
      await queue.dispatch(idle, null);
      const args = [
        "work",
        ...(supervised ? [] : ["--no-supervise"]),
        "--jobs",
        "tests/fixtures/cli/slow_load_jobs.ts",
        "--db",
        tmp.dbPath,
      ];
      const go = join(tmp.dir, "go");
      const env = { CLI_FIXTURE_LOAD: go };
      {
        await using worker = startCli(args, env);
        await worker.waitForRecord((line) => line.event === "jobs-module:loading", 60_000);
        worker.kill("SIGTERM");
        // The signal is heard while the module still loads: only then may the start finish.
        await new Promise((resolve) => setTimeout(resolve, 200));
        await Deno.writeTextFile(go, "");
        const status = await worker.child.status;
        const stderr = await worker.stderr;
        assert.equal(status.code, 0, stderr);
        assert.match(stderr, /queue work: stopped by SIGTERM before the worker started/);
        assert.equal(worker.records().some((line) => line.event === "worker:start"), false);
      }
      await Deno.remove(go);
      {
        await using worker = startCli(args, env);
        await worker.waitForRecord((line) => line.event === "jobs-module:loading", 60_000);
        // Signals sent at once may arrive as one: send them until the start gives up.
        const resend = setInterval(() => worker.kill("SIGTERM"), 100);
        worker.kill("SIGTERM");
        const status = await worker.child.status.finally(() => clearInterval(resend));
        assert.equal(status.code, 143, await worker.stderr);
      }
      assert.equal((await queue.counts())["default"]?.pending, 1);
    },
  );
}
