/**
 * The schedule commands of the CLI (`schedules`, `schedule:pause`,
 * `schedule:resume`, `schedule:run`, `schedule:backfill`,
 * `schedule:forget`) and `work --no-schedules`, run as real child processes.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Queue } from "../../mod.ts";
import { exists, tempDir } from "../_helpers.ts";
import { runCli } from "../fixtures/cli/cli_process.ts";

const JOBS = new URL("../fixtures/schedules/jobs.ts", import.meta.url).pathname;
const CLI_JOBS = new URL("../fixtures/schedules/cli_jobs.ts", import.meta.url).pathname;

async function count(queue: Queue, where: string): Promise<number> {
  const [row] = await queue.transaction((tx) =>
    tx.query<{ n: number }>(`SELECT COUNT(*) AS n FROM ${where}`)
  );
  return Number(row!.n);
}

Deno.test("schedules lists them; pause, resume, run and backfill change them; backfill refuses a time not ISO 8601 or a day the calendar does not have; work --no-schedules fires none", async () => {
  await using tmp = await tempDir();
  const db = ["--db", tmp.dbPath];
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });

  const table = await runCli(["schedules", ...db]);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /every-second\s+tick\s+every 1 s\s+active/);
  const json = await runCli(["schedules", "--json", ...db]);
  const [listed] = JSON.parse(json.stdout);
  assert.equal(listed.name, "every-second");
  assert.equal(listed.nextRuns.length, 5);

  const paused = await runCli(["schedule:pause", "every-second", ...db]);
  assert.equal(paused.code, 0, paused.stderr);
  assert.match(paused.stdout, /Paused schedule "every-second"/);
  assert.equal((await queue.schedules())[0]!.paused, true);
  const unknown = await runCli(["schedule:pause", "nope", ...db]);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /no schedule named "nope"/);
  assert.equal((await runCli(["schedule:pause", ...db])).code, 2, "NAME is required");
  const empty = await runCli(["schedule:pause", "", ...db]);
  assert.equal(empty.code, 2, "an empty NAME is a usage error");
  assert.match(
    empty.stderr,
    /^queue schedule:pause: NAME must be 1 to 255 characters without NUL or lone surrogates: got ""/,
  );

  const ran = await runCli(["schedule:run", "every-second", "--jobs", JOBS, ...db]);
  assert.equal(ran.code, 0, ran.stderr);
  assert.match(ran.stdout, /Queued job \d+ of schedule "every-second"/);
  assert.equal(await count(queue, "schedule_runs WHERE manual = 1"), 1);
  assert.equal(
    (await runCli(["schedule:run", "every-second", ...db])).code,
    2,
    "--jobs is required",
  );
  const typo = `${tmp.dir}/typo.db`;
  for (
    const command of [["schedule:run"], [
      "schedule:backfill",
      "--from",
      "2026-01-01T00:00:00Z",
      "--to",
      "2026-01-01T00:00:05Z",
    ]]
  ) {
    const mistyped = await runCli([...command, "every-second", "--jobs", JOBS, "--db", typo]);
    assert.equal(mistyped.code, 1, `${command[0]}: ${mistyped.stderr}`);
    assert.match(mistyped.stderr, /no database at/, command[0]);
    assert.equal(exists(typo), false, `${command[0]} made no queue at a mistyped --db`);
  }

  const to = Math.floor(Date.now() / 1000) * 1000 - 10_000;
  const range = ["--from", new Date(to - 3_000).toISOString(), "--to", new Date(to).toISOString()];
  const filled = await runCli([
    "schedule:backfill",
    "every-second",
    "--jobs",
    JOBS,
    ...range,
    ...db,
  ]);
  assert.equal(filled.code, 0, filled.stderr);
  assert.match(filled.stdout, /Queued 4 jobs for schedule "every-second"/);
  const again = await runCli([
    "schedule:backfill",
    "every-second",
    "--jobs",
    JOBS,
    ...range,
    ...db,
  ]);
  assert.match(again.stdout, /Queued 0 jobs .*skipped 4 slots fired already/);
  const badTimes: [from: string, to: string, message: RegExp][] = [
    ["yesterday", "now", /--from must be an ISO 8601 time such as .*: got "yesterday"/],
    [
      "2026-02-30T00:00:00Z",
      "2026-03-02T00:00:00Z",
      /--from must be an ISO 8601 time .*\(there is no day 2026-02-30\)/,
    ],
    ["2026-03-01T00:00:00Z", "3/2/2026", /--to must be an ISO 8601 time .*: got "3\/2\/2026"/],
    ["March 1, 2026", "2026-03-02T00:00:00Z", /--from must be an ISO 8601 time/],
  ];
  for (const [from, to, message] of badTimes) {
    const badTime = await runCli([
      "schedule:backfill",
      "every-second",
      "--jobs",
      JOBS,
      "--from",
      from,
      "--to",
      to,
      ...db,
    ]);
    assert.equal(badTime.code, 2, `${from} ${to}`);
    assert.match(badTime.stderr, message);
  }

  const resumed = await runCli(["schedule:resume", "every-second", ...db]);
  assert.equal(resumed.code, 0, resumed.stderr);
  assert.equal((await queue.schedules())[0]!.paused, false);
  const fired = await count(queue, "schedule_runs WHERE manual = 0");
  const worked = await runCli([
    "work",
    "--jobs",
    JOBS,
    "--no-supervise",
    "--executor",
    "isolate",
    "--stop-when-empty",
    "--no-schedules",
    ...db,
  ]);
  assert.equal(worked.code, 0, worked.stderr);
  assert.equal(await count(queue, "jobs"), 0, "it ran the queued jobs");
  assert.equal(await count(queue, "schedule_runs WHERE manual = 0"), fired, "and fired no slot");
});

Deno.test("schedule:run and schedule:backfill store only the schedule named, and need no APP_KEY for another job", async () => {
  await using tmp = await tempDir();
  const db = ["--db", tmp.dbPath];
  const env = { APP_KEY: "" };
  assert.equal((await runCli(["migrate", ...db], env)).code, 0, "the queue is made first");
  const ran = await runCli(["schedule:run", "report-a", "--jobs", CLI_JOBS, ...db], env);
  assert.equal(ran.code, 0, ran.stderr);
  assert.match(ran.stdout, /Queued job \d+ of schedule "report-a"/);
  const to = Math.floor(Date.now() / 60_000) * 60_000 - 60_000;
  const filled = await runCli([
    "schedule:backfill",
    "report-a",
    "--jobs",
    CLI_JOBS,
    "--from",
    new Date(to - 60_000).toISOString(),
    "--to",
    new Date(to).toISOString(),
    ...db,
  ], env);
  assert.equal(filled.code, 0, filled.stderr);
  assert.match(filled.stdout, /Queued 2 jobs for schedule "report-a"/);
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [] });
  assert.deepEqual((await queue.schedules()).map((each) => each.name), ["report-a"]);
  assert.equal(await count(queue, "jobs"), 3);
  const unknown = await runCli(["schedule:run", "nope", "--jobs", CLI_JOBS, ...db], env);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /no schedule named "nope" is defined in the jobs module/);
});

Deno.test("schedule:forget removes a stored schedule no jobs module defines any more", async () => {
  await using tmp = await tempDir();
  const db = ["--db", tmp.dbPath];
  {
    await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
    await queue.pauseSchedule("every-second");
  }
  const forgot = await runCli(["schedule:forget", "every-second", ...db]);
  assert.equal(forgot.code, 0, forgot.stderr);
  assert.match(forgot.stdout, /Forgot schedule "every-second"/);
  const again = await runCli(["schedule:forget", "every-second", ...db]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /no schedule named "every-second"/);
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [] });
  assert.deepEqual(await queue.schedules(), []);
});
