/**
 * The job-control commands of the CLI (`cancel`, `pause`, `resume`,
 * `paused`, the group pauses and `paused-groups`), run as real child processes on a database this test fills
 * through the queue.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, Queue } from "../../mod.ts";
import { readDurationMs } from "../../src/cli/job_control.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { tempDir } from "../_helpers.ts";
import { runCli } from "../fixtures/cli/cli_process.ts";

const work = defineJob({ name: "cli.control", schema: z.null(), queue: "mail", handle() {} });

Deno.test("cancel removes a waiting job; a second cancel and an unknown id exit 1", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [work] });
  const id = await queue.dispatch(work, null, { delayMs: 60_000 });
  const db = ["--db", tmp.dbPath];
  const first = await runCli(["cancel", String(id), "--reason", "not needed", ...db]);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, new RegExp(`Cancelled job ${id}`));
  assert.deepEqual(await queue.result(id), {
    state: "cancelled",
    attempts: 0,
    error: "not needed",
  });
  const again = await runCli(["cancel", String(id), ...db]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /has already ended \(completed, failed or cancelled\)/);
  const unknown = await runCli(["cancel", "999", ...db]);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /no job 999/);
  const bad = await runCli(["cancel", "x", ...db]);
  assert.equal(bad.code, 2);
});

Deno.test("pause, paused and resume: persisted for every process; bad input exits 2", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [work] });
  const db = ["--db", tmp.dbPath];
  const paused = await runCli(["pause", "mail", "--for", "10m", "--reason", "deploy", ...db]);
  assert.equal(paused.code, 0, paused.stderr);
  assert.match(paused.stdout, /Paused queue mail for 10m/);
  const [row] = await queue.paused();
  assert.equal(row?.queue, "mail");
  assert.equal(row?.reason, "deploy");
  assert.ok(row!.until!.getTime() - row!.pausedAt.getTime() === 600_000);
  const listed = await runCli(["paused", ...db]);
  assert.match(listed.stdout, /mail .* deploy/);
  const json = JSON.parse((await runCli(["paused", "--json", ...db])).stdout);
  assert.equal(json[0].queue, "mail");
  const resumed = await runCli(["resume", "mail", ...db]);
  assert.equal(resumed.code, 0, resumed.stderr);
  assert.deepEqual(await queue.paused(), []);
  assert.equal((await runCli(["resume", "mail", ...db])).code, 1);
  assert.match((await runCli(["paused", ...db])).stdout, /No paused queues/);
  const badFor = await runCli(["pause", "mail", "--for", "0s", ...db]);
  assert.equal(badFor.code, 2);
  assert.match(badFor.stderr, /--for must be a duration from 1ms/);
  assert.deepEqual(await queue.paused(), []);
});

Deno.test("pause-group and resume-group pause one group of a job for every process; bad input exits 2", async () => {
  await using tmp = await tempDir();
  const ran: string[] = [];
  const grouped = defineJob({
    name: "cli.grouped",
    schema: z.object({ tenant: z.string() }),
    group: (p) => p.tenant,
    handle({ tenant }) {
      ran.push(tenant);
    },
  });
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [grouped] });
  const db = ["--db", tmp.dbPath];
  const paused = await runCli(["pause-group", "cli.grouped", "tenant a", ...db]);
  assert.equal(paused.code, 0, paused.stderr);
  assert.match(paused.stdout, /Paused group "tenant a" of cli.grouped until resumed$/m);
  const kept = await runCli(["pause-group", "cli.grouped", "tenant a", "--for", "1m", ...db]);
  assert.match(
    kept.stdout,
    /Paused group "tenant a" of cli.grouped until resumed$/m,
    "a pause in force is not shortened, and the output says the end the group has",
  );
  await queue.dispatchMany(grouped, [{ tenant: "tenant a" }, { tenant: "b" }]);
  await workUntilEmpty(queue, { executor: "isolate" });
  assert.deepEqual(ran, ["b"]);
  const resumed = await runCli(["resume-group", "cli.grouped", "tenant a", ...db]);
  assert.equal(resumed.code, 0, resumed.stderr);
  await workUntilEmpty(queue, { executor: "isolate" });
  assert.deepEqual(ran, ["b", "tenant a"]);
  assert.equal((await runCli(["resume-group", "cli.grouped", "tenant a", ...db])).code, 1);
  const bad = await runCli(["pause-group", "cli.grouped", "", ...db]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /the group key must be a non-empty string/);
  assert.equal((await runCli(["pause-group", "cli.grouped", ...db])).code, 2);
});

Deno.test("pause-group --for and --until hold a group until then; resume-group ends a hold early; bad values (a day the calendar does not have included) exit 2 and store nothing", async () => {
  await using tmp = await tempDir();
  const ran: string[] = [];
  const grouped = defineJob({
    name: "cli.grouped",
    schema: z.object({ tenant: z.string() }),
    group: (p) => p.tenant,
    handle({ tenant }) {
      ran.push(tenant);
    },
  });
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [grouped] });
  const db = ["--db", tmp.dbPath];
  const held = await runCli(["pause-group", "cli.grouped", "a", "--for", "10m", ...db]);
  assert.equal(held.code, 0, held.stderr);
  assert.match(held.stdout, /Paused group "a" of cli.grouped until \d{4}-\d\d-\d\dT/);
  await queue.dispatchMany(grouped, [{ tenant: "a" }, { tenant: "b" }]);
  await workUntilEmpty(queue, { executor: "isolate" });
  assert.deepEqual(ran, ["b"], "a is held");
  assert.equal((await runCli(["resume-group", "cli.grouped", "a", ...db])).code, 0);
  await workUntilEmpty(queue, { executor: "isolate" });
  assert.deepEqual(ran, ["b", "a"]);

  const until = new Date(Date.now() + 3_600_000).toISOString();
  const untilRun = await runCli(["pause-group", "cli.grouped", "a", "--until", until, ...db]);
  assert.equal(untilRun.code, 0, untilRun.stderr);
  assert.match(untilRun.stdout, new RegExp(`Paused group "a" of cli.grouped until ${until}`));
  assert.equal((await runCli(["resume-group", "cli.grouped", "a", ...db])).code, 0, "was held");

  const cases: [args: string[], message: RegExp][] = [
    [["--for", "0s"], /--for must be a duration from 1ms to 25451d/],
    [
      ["--until", "tomorrow"],
      /--until must be an ISO 8601 time such as 2026-12-05T10:00:00Z: got "tomorrow"/,
    ],
    [
      ["--until", "2090-02-30T10:00:00Z"],
      /--until must be an ISO 8601 time .*: got "2090-02-30T10:00:00Z" \(there is no day 2090-02-30\)/,
    ],
    [["--until", "2090-04-31T10:00:00Z"], /there is no day 2090-04-31/],
    [["--until", "2090-01-01T24:00:00Z"], /--until must be an ISO 8601 time/],
    [
      ["--until", "2020-01-01T00:00:00Z"],
      /--until must be after now and within 25451d: got 2020-01-01T00:00:00.000Z/,
    ],
    [["--for", "1m", "--until", until], /give --for or --until, not both/],
  ];
  for (const [flags, message] of cases) {
    const bad = await runCli(["pause-group", "cli.grouped", "a", ...flags, ...db]);
    assert.equal(bad.code, 2, flags.join(" "));
    assert.match(bad.stderr, message);
  }
  assert.equal((await runCli(["resume-group", "cli.grouped", "a", ...db])).code, 1, "none held");
});

Deno.test("paused-groups lists the paused and held groups with their ends, as a table or JSON; an ended hold is not listed", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [] });
  const db = ["--db", tmp.dbPath];
  const none = await runCli(["paused-groups", ...db]);
  assert.equal(none.code, 0, none.stderr);
  assert.match(none.stdout, /No paused groups/);
  await queue.pauseGroup("cli.grouped", "tenant b");
  await queue.pauseGroup("cli.grouped", "a", { until: new Date("2090-01-01T00:00:00Z") });
  await queue.pauseGroup("cli.other", "c", { forMs: 1 }); // ended before the CLI process reads it
  const listed = await runCli(["paused-groups", ...db]);
  assert.equal(listed.code, 0, listed.stderr);
  const lines = listed.stdout.trim().split("\n").slice(-4);
  assert.match(lines[0]!, /^job\s+key\s+paused at\s+until/);
  assert.match(
    lines[2]!,
    /^cli\.grouped\s+a\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+2090-01-01 00:00:00$/,
  );
  assert.match(lines[3]!, /^cli\.grouped\s+tenant b\s+\S+ \S+\s+resumed by hand$/);
  const json = JSON.parse((await runCli(["paused-groups", "--json", ...db])).stdout);
  assert.deepEqual(
    json.map((
      row: { name: string; key: string; until: string | null },
    ) => [row.name, row.key, row.until]),
    [["cli.grouped", "a", "2090-01-01T00:00:00.000Z"], ["cli.grouped", "tenant b", null]],
  );
  const one = await runCli(["paused-groups", "--limit", "1", "--json", ...db]);
  assert.deepEqual(JSON.parse(one.stdout).map((row: { key: string }) => row.key), ["a"]);
  assert.equal((await runCli(["paused-groups", "extra", ...db])).code, 2);
  const bad = await runCli(["paused-groups", "--limit", "0", ...db]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--limit/);
});

Deno.test("pause, resume and cancel argument errors name the flag, state the limit and exit 2", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [work] });
  const id = await queue.dispatch(work, null, { delayMs: 60_000 });
  const db = ["--db", tmp.dbPath];
  const cases: [args: string[], message: RegExp][] = [
    [
      ["pause", "mail", "--for", "30000d"],
      /--for must be a duration from 1ms to 25451d .*"30000d"/,
    ],
    [["pause", "bad name"], /queue name "bad name" is invalid: use 1 to 64 of/],
    [["resume", "bad name"], /queue name "bad name" is invalid: use 1 to 64 of/],
    [
      ["pause", "mail", "--reason", "r".repeat(256)],
      /--reason must be at most 255 characters: got 256/,
    ],
    [
      ["cancel", String(id), "--reason", "r".repeat(300)],
      /--reason must be at most 255 characters: got 300/,
    ],
  ];
  for (const [args, message] of cases) {
    const run = await runCli([...args, ...db]);
    assert.equal(run.code, 2, `${args.join(" ").slice(0, 60)}: ${run.stderr}`);
    assert.match(run.stderr, message);
    assert.doesNotMatch(run.stderr, /forMs/);
  }
  assert.deepEqual(await queue.paused(), []);
  assert.equal((await queue.result(id))?.state, "pending");
});

Deno.test("--for reads ms, s, m, h and d", () => {
  assert.equal(readDurationMs("pause", "500ms"), 500);
  assert.equal(readDurationMs("pause", "1.5s"), 1_500);
  assert.equal(readDurationMs("pause", "10m"), 600_000);
  assert.equal(readDurationMs("pause", "2h"), 7_200_000);
  assert.equal(readDurationMs("pause", "1d"), 86_400_000);
  assert.equal(readDurationMs("pause", "25451d"), 25_451 * 86_400_000);
  assert.throws(() => readDurationMs("pause", "10"), /--for must be a duration from 1ms/);
  assert.throws(() => readDurationMs("pause", "-1m"), /--for must be a duration from 1ms/);
  assert.throws(() => readDurationMs("pause", "25452d"), /to 25451d \(about 69 years\)/);
});
