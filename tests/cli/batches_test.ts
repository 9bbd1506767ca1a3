/**
 * The batch commands of the CLI (`batches`, `cancel-batch`, `retry-batch`,
 * `prune-batches`) and the running jobs `stats` lists, run as real child
 * processes on a database this test fills through the queue.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, PermanentError, Queue } from "../../mod.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { ManualClock, nextEvent, storedCounts, tempDir, waitUntil } from "../_helpers.ts";
import { runCli } from "../fixtures/cli/cli_process.ts";

const failing = new Set<string>();
const work = defineJob({
  name: "cli.batch-work",
  schema: z.object({ label: z.string() }),
  handle({ label }) {
    if (failing.has(label)) throw new PermanentError(`${label} failed`);
  },
});
const JOBS = [work];

/** `2026-01-01 00:00:00` for a time in ms. */
function shown(ms: number): string {
  return new Date(ms).toISOString().replace("T", " ").slice(0, 19);
}

/**
 * Four batches: done, failed (allowFailures, one failure), cancelled, and
 * running (two jobs waiting); created at the clock's time.
 */
async function fourBatches(queue: Queue): Promise<Record<string, number>> {
  failing.add("broken");
  const done = await queue.batch("import october.csv")
    .pushMany(work, [{ label: "a" }, { label: "b" }]).dispatch();
  const failed = await queue.batch("half")
    .pushMany(work, [{ label: "ok" }, { label: "broken" }]).allowFailures().dispatch();
  await workUntilEmpty(queue, { executor: "isolate" });
  const cancelled = await queue.batch("stopped").pushMany(work, [{ label: "x" }, { label: "y" }])
    .dispatch();
  assert.equal(await queue.cancelBatch(cancelled), true);
  const running = await queue.batch("running")
    .pushMany(work, [{ label: "p" }, { label: "q" }]).dispatch();
  return { done, failed, cancelled, running };
}

Deno.test("batches prints a table, newest first, with state and progress; --json an array; --limit caps it", async () => {
  await using tmp = await tempDir();
  const clock = new ManualClock();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS, clock });
  const ids = await fourBatches(queue);
  const db = ["--db", tmp.dbPath];

  await (await Queue.open({ path: `${tmp.dir}/empty.db`, jobs: [] })).close();
  const [table, json, limited, empty] = await Promise.all([
    runCli(["batches", ...db]),
    runCli(["batches", "--json", ...db]),
    runCli(["batches", "--json", "--limit", "2", ...db]),
    runCli(["batches", "--db", `${tmp.dir}/empty.db`]),
  ]);

  assert.equal(table.code, 0, table.stderr);
  assert.equal(table.stderr, "");
  const [header, rule, ...rows] = table.stdout.trimEnd().split("\n");
  assert.match(
    header!,
    /^id +name +state +progress +total +pending +succeeded +failed +skipped +created at$/,
  );
  assert.match(rule!, /^-+ +-+ +-+/);
  const at = shown(clock.now());
  const row = (id: number, ...cells: (string | number)[]) =>
    new RegExp(`^ *${id}  ${cells.map(String).join(" +")} +${at}$`);
  assert.equal(rows.length, 4);
  assert.match(rows[0]!, row(ids.running!, "running", "running", "0%", 2, 2, 0, 0, 0));
  assert.match(rows[1]!, row(ids.cancelled!, "stopped", "cancelled", "0%", 2, 0, 0, 0, 2));
  assert.match(rows[2]!, row(ids.failed!, "half", "failed", "100%", 2, 0, 1, 1, 0));
  assert.match(rows[3]!, row(ids.done!, "import october.csv", "done", "100%", 2, 0, 2, 0, 0));

  assert.equal(json.code, 0, json.stderr);
  const listed = JSON.parse(json.stdout) as Record<string, unknown>[];
  assert.deepEqual(listed.map((batch) => batch.id), [
    ids.running,
    ids.cancelled,
    ids.failed,
    ids.done,
  ]);
  assert.deepEqual(listed[2], {
    id: ids.failed,
    name: "half",
    total: 2,
    pending: 0,
    succeeded: 1,
    failed: 1,
    skipped: 0,
    allowFailures: true,
    cancelled: false,
    finished: true,
    createdAt: new Date(clock.now()).toISOString(),
    cancelledAt: null,
    finishedAt: new Date(clock.now()).toISOString(),
    progress: 100,
  });
  assert.equal(listed[0]!.progress, 0);
  assert.equal(limited.code, 0, limited.stderr);
  assert.deepEqual((JSON.parse(limited.stdout) as { id: number }[]).map((batch) => batch.id), [
    ids.running,
    ids.cancelled,
  ]);
  assert.equal(empty.code, 0, empty.stderr);
  assert.equal(empty.stdout.trim(), "No batches");
});

Deno.test("batches refuses bad flags and arguments with exit 2", async () => {
  await using tmp = await tempDir();
  const db = ["--db", tmp.dbPath];
  const results = await Promise.all([
    runCli(["batches", "--limit", "0", ...db]),
    runCli(["batches", "extra", ...db]),
    runCli(["batches", "--json=yes", ...db]),
  ]);
  assert.deepEqual(results.map(({ code, stdout }) => ({ code, stdout })), [
    { code: 2, stdout: "" },
    { code: 2, stdout: "" },
    { code: 2, stdout: "" },
  ]);
  assert.equal(
    results[0]!.stderr,
    'queue batches: --limit must be a whole number from 1 to 1000: got "0" (see batches --help)\n',
  );
  assert.equal(
    results[1]!.stderr,
    'queue batches: unexpected argument "extra" (see batches --help)\n',
  );
  assert.match(results[2]!.stderr, /^queue batches: --json takes no value/);
  await assert.rejects(Deno.stat(tmp.dbPath), Deno.errors.NotFound);
});

Deno.test("cancel-batch cancels once (exit 0), then exits 1 saying why; bad or missing ids exit 2", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  const ids = await fourBatches(queue);
  const db = ["--db", tmp.dbPath];

  const cancelled = await runCli(["cancel-batch", String(ids.running), ...db]);
  assert.deepEqual(cancelled, {
    code: 0,
    stdout: `Cancelled batch ${ids.running}\n`,
    stderr: "",
  });
  const status = (await queue.batchStatus(ids.running!))!;
  assert.deepEqual([status.cancelled, status.finished, status.skipped, status.pending], [
    true,
    true,
    2,
    0,
  ]);

  const refusals = await Promise.all([
    runCli(["cancel-batch", String(ids.running), ...db]),
    runCli(["cancel-batch", String(ids.done), ...db]),
    runCli(["cancel-batch", "999", ...db]),
  ]);
  assert.deepEqual(refusals.map(({ code, stdout, stderr }) => ({ code, stdout, stderr })), [
    {
      code: 1,
      stdout: "",
      stderr: `queue cancel-batch: cannot cancel batch ${ids.running}: already cancelled\n`,
    },
    {
      code: 1,
      stdout: "",
      stderr: `queue cancel-batch: cannot cancel batch ${ids.done}: it has finished\n`,
    },
    { code: 1, stdout: "", stderr: "queue cancel-batch: cannot cancel batch 999: no such batch\n" },
  ]);

  const usage = await Promise.all([
    runCli(["cancel-batch", ...db]),
    runCli(["cancel-batch", "abc", ...db]),
    runCli(["cancel-batch", "1", "2", ...db]),
  ]);
  assert.deepEqual(usage.map(({ code, stdout, stderr }) => ({ code, stdout, stderr })), [
    {
      code: 2,
      stdout: "",
      stderr: "queue cancel-batch: missing the batch id (see cancel-batch --help)\n",
    },
    {
      code: 2,
      stdout: "",
      stderr:
        'queue cancel-batch: a batch id must be a positive whole number: got "abc" (see cancel-batch --help)\n',
    },
    {
      code: 2,
      stdout: "",
      stderr: 'queue cancel-batch: unexpected argument "2" (see cancel-batch --help)\n',
    },
  ]);
});

Deno.test("retry-batch puts a batch's failed jobs back (exit 0), exits 1 for no such batch", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  const ids = await fourBatches(queue);
  const db = ["--db", tmp.dbPath];

  const [retried, none, missing, usage] = await Promise.all([
    runCli(["retry-batch", String(ids.failed), ...db]),
    runCli(["retry-batch", String(ids.done), ...db]),
    runCli(["retry-batch", "999", ...db]),
    runCli(["retry-batch", ...db]),
  ]);

  assert.deepEqual(retried, {
    code: 0,
    stdout: `Retried 1 failed job of batch ${ids.failed}\n`,
    stderr: "",
  });
  assert.deepEqual(none, {
    code: 0,
    stdout: `Retried 0 failed jobs of batch ${ids.done}\n`,
    stderr: "",
  });
  assert.deepEqual(missing, { code: 1, stdout: "", stderr: "queue retry-batch: no batch 999\n" });
  assert.equal(usage.code, 2);
  assert.equal(
    usage.stderr,
    "queue retry-batch: missing the batch id (see retry-batch --help)\n",
  );
  const status = (await queue.batchStatus(ids.failed!))!;
  assert.deepEqual([status.pending, status.failed, status.finished], [1, 0, false]);
  assert.deepEqual(await queue.failed(), []);

  failing.clear();
  await workUntilEmpty(queue, { executor: "isolate" });
  const after = (await queue.batchStatus(ids.failed!))!;
  assert.deepEqual([after.succeeded, after.failed, after.finished], [2, 0, true]);
});

Deno.test("prune-batches --hours N deletes batches that ended longer ago; without --hours it is a usage error", async () => {
  await using tmp = await tempDir();
  const clock = new ManualClock(Date.now() - 3 * 3_600_000);
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS, clock });
  const old = await queue.batch("old").dispatch();
  const oldRunning = await queue.batch("old but running").push(work, { label: "w" }).dispatch();
  clock.advance(3 * 3_600_000);
  const recent = await queue.batch("recent").dispatch();
  const db = ["--db", tmp.dbPath];

  const [missing, negative] = await Promise.all([
    runCli(["prune-batches", ...db]),
    runCli(["prune-batches", "--hours", "-1", ...db]),
  ]);
  assert.deepEqual(missing, {
    code: 2,
    stdout: "",
    stderr: "queue prune-batches: --hours is required (see prune-batches --help)\n",
  });
  assert.equal(negative.code, 2);
  assert.match(negative.stderr, /^queue prune-batches: --hours .*"-1"/);
  assert.equal((await queue.batches()).length, 3);

  const pruned = await runCli(["prune-batches", "--hours", "1", ...db]);
  assert.deepEqual(pruned, {
    code: 0,
    stdout: "Deleted 1 batch that ended more than 1 hour ago\n",
    stderr: "",
  });
  assert.equal(await queue.batchStatus(old), null);
  assert.deepEqual((await queue.batches()).map((batch) => batch.id), [recent, oldRunning]);
  const again = await runCli(["prune-batches", "--hours", "1.5", ...db]);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.stdout, "Deleted 0 batches that ended more than 1.5 hours ago\n");
});

Deno.test("stats lists a running job with its progress, and batches shows its cancelled batch as cancelling", async () => {
  await using tmp = await tempDir();
  const hold = Promise.withResolvers<void>();
  const reporting = defineJob({
    name: "cli.reporting",
    schema: z.null(),
    async handle(_payload, ctx) {
      ctx.progress(42.7);
      await hold.promise;
    },
  });
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [reporting] });
  const id = await queue.batch("live").push(reporting, null).dispatch();
  const [jobId] = await queue.transaction((tx) =>
    tx.query<{ id: number }>("SELECT id FROM jobs WHERE batch_id = ?", [id])
  ).then((rows) => rows.map((row) => row.id));
  const started = nextEvent(queue, "job:start");
  const worker = queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 10 });
  await started;
  await waitUntil(async () => (await queue.counts()).default?.running[0]?.progress === 42.7, {
    what: "the progress is written",
  });
  assert.equal(await queue.cancelBatch(id), true);
  const db = ["--db", tmp.dbPath];

  const [table, json, batches] = await Promise.all([
    runCli(["stats", ...db]),
    runCli(["stats", "--json", ...db]),
    runCli(["batches", ...db]),
  ]);
  hold.resolve();
  await worker.done;

  assert.equal(table.code, 0, table.stderr);
  const lines = table.stdout.trimEnd().split("\n");
  assert.match(lines[0]!, /^queue +pending +delayed +reserved +failed$/);
  assert.match(lines[2]!, /^default +0 +0 +1 +0$/);
  assert.equal(lines[3], "");
  assert.equal(lines[4], "Running");
  assert.match(lines[5]!, /^id +queue +name +attempt +progress$/);
  assert.match(lines[7]!, new RegExp(`^ *${jobId}  default +cli\\.reporting +1 +42%$`));
  assert.equal(lines.length, 8);
  assert.equal(json.code, 0, json.stderr);
  const counts = JSON.parse(json.stdout) as Record<string, { running: Record<string, unknown>[] }>;
  assert.deepEqual(
    counts.default!.running.map(({ id, name, attempt, progress, batchId }) => ({
      id,
      name,
      attempt,
      progress,
      batchId,
    })),
    [{ id: jobId, name: "cli.reporting", attempt: 1, progress: 42.7, batchId: id }],
  );
  assert.equal(batches.code, 0, batches.stderr);
  assert.match(
    batches.stdout.trimEnd().split("\n")[2]!,
    /^ *\d+ {2}live +cancelling +0% +1 +1 +0 +0 +0 /,
  );
  assert.deepEqual(await storedCounts(queue), {});
});
