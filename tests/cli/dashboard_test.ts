/**
 * The `dashboard` command as a real process: it serves the dashboard of
 * `--db`, prints its URL, and exits 0 on SIGTERM.
 */
import assert from "node:assert/strict";
import { Queue } from "../../mod.ts";
import { drainQueue, HOSTILE, hostile } from "../_dashboard.ts";
import { tempDir, waitUntil } from "../_helpers.ts";
import { runCli, startCli } from "../fixtures/cli/cli_process.ts";

const URL_LINE =
  /^Dashboard of (.+?)( \(read-only\))?: (http:\/\/127\.0\.0\.1:\d+\/) \(Ctrl-C to stop\)$/;

/** A database file with one failed job. */
async function databaseWithFailedJob(path: string): Promise<void> {
  await using queue = await Queue.open({ path, jobs: [hostile] });
  await queue.dispatch(hostile, { note: "from the CLI test" });
  await drainQueue(queue);
  assert.equal((await queue.failed()).length, 1);
}

Deno.test("CLI dashboard: serves --db on 127.0.0.1 at a free --port 0, prints its URL, and exits 0 on SIGTERM", async () => {
  await using tmp = await tempDir();
  await databaseWithFailedJob(tmp.dbPath);
  await using cli = startCli(["dashboard", "--db", tmp.dbPath, "--port", "0"]);
  await waitUntil(() => Promise.resolve(cli.lines.some((l) => URL_LINE.test(l))), {
    what: "the URL printed",
  });
  const [, db, readOnly, url] = URL_LINE.exec(cli.lines.find((line) => URL_LINE.test(line))!)!;
  assert.deepEqual([db, readOnly], [tmp.dbPath, undefined]);

  const failed = await (await fetch(`${url}api/failed`)).json();
  assert.equal(failed.total, 1);
  assert.equal(failed.jobs[0].name, HOSTILE.name);
  const page = await fetch(`${url}failed`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get("content-security-policy") ?? "", /script-src 'nonce-/);
  assert.match(await page.text(), /action="\/failed\/1\/retry"/);
  const refused = await fetch(`${url}failed/1/retry`, {
    method: "POST",
    body: new URLSearchParams(),
  });
  assert.equal(refused.status, 403, "no CSRF token");
  await refused.body?.cancel();

  cli.kill("SIGTERM");
  assert.equal((await cli.child.status).code, 0);
  assert.equal(await cli.stderr, "");
});

Deno.test("CLI dashboard --host 0.0.0.0: prints a loopback URL the gate lets in, and says only loopback requests get in", async () => {
  await using tmp = await tempDir();
  await databaseWithFailedJob(tmp.dbPath);
  await using cli = startCli(["dashboard", "--db", tmp.dbPath, "--port", "0", "--host", "0.0.0.0"]);
  await waitUntil(() => Promise.resolve(cli.lines.some((l) => URL_LINE.test(l))), {
    what: "the URL printed",
  });
  const [, , , url] = URL_LINE.exec(cli.lines.find((line) => URL_LINE.test(line))!)!;
  const page = await fetch(`${url}failed`);
  assert.equal(page.status, 200, "the printed URL gets in");
  await page.body?.cancel();
  assert.ok(
    cli.lines.some((line) =>
      line.startsWith("Listening on 0.0.0.0, but only requests from a loopback address get in")
    ),
    cli.lines.join("\n"),
  );
  cli.kill("SIGTERM");
  assert.equal((await cli.child.status).code, 0);
});

Deno.test("CLI dashboard: --read-only says so and draws no forms; bad flags exit 2 naming them", async () => {
  await using tmp = await tempDir();
  await databaseWithFailedJob(tmp.dbPath);
  await using cli = startCli(["dashboard", "--db", tmp.dbPath, "--port", "0", "--read-only"]);
  await waitUntil(() => Promise.resolve(cli.lines.some((l) => URL_LINE.test(l))), {
    what: "the URL printed",
  });
  const [, , readOnly, url] = URL_LINE.exec(cli.lines.find((line) => URL_LINE.test(line))!)!;
  assert.equal(readOnly, " (read-only)");
  const page = await (await fetch(`${url}failed`)).text();
  assert.doesNotMatch(page, /method="post"/);
  cli.kill("SIGINT");
  assert.equal((await cli.child.status).code, 0);

  const [badPort, extra] = await Promise.all([
    runCli(["dashboard", "--db", tmp.dbPath, "--port", "70000"]),
    runCli(["dashboard", "--db", tmp.dbPath, "now"]),
  ]);
  assert.equal(badPort.code, 2);
  assert.match(badPort.stderr, /--port must be a whole number from 0 to 65535: got "70000"/);
  assert.equal(extra.code, 2);
  assert.match(extra.stderr, /unexpected argument "now"/);
});

Deno.test("CLI dashboard --metrics: a QUEUE_METRICS_TOKEN under 16 characters exits 2 naming the variable", async () => {
  await using tmp = await tempDir();
  await databaseWithFailedJob(tmp.dbPath);
  const short = await runCli(["dashboard", "--db", tmp.dbPath, "--port", "0", "--metrics"], {
    QUEUE_METRICS_TOKEN: "short",
  });
  assert.equal(short.code, 2, short.stderr);
  assert.match(short.stderr, /QUEUE_METRICS_TOKEN must be at least 16 characters: got 5/);
});

/** Starts the CLI dashboard with `flags` on a free port; resolves with its URL once printed. */
async function serveDashboard(flags: readonly string[]) {
  const cli = startCli(["dashboard", "--port", "0", ...flags]);
  await waitUntil(() => Promise.resolve(cli.lines.some((l) => URL_LINE.test(l))), {
    what: "the URL printed",
    timeoutMs: 30_000,
  });
  const [, , , url] = URL_LINE.exec(cli.lines.find((line) => URL_LINE.test(line))!)!;
  return { cli, url: url! };
}

Deno.test("CLI dashboard --jobs: Run now stores the schedule's job; without --jobs the button is not shown", async () => {
  await using tmp = await tempDir();
  const jobs = "tests/fixtures/cli/schedule_jobs.ts";
  await using queue = await Queue.open({
    path: tmp.dbPath,
    jobs: import.meta.resolve("../fixtures/cli/schedule_jobs.ts"),
  });
  const runPath = "/schedules/yearly-report/run";

  {
    const { cli, url } = await serveDashboard(["--db", tmp.dbPath]);
    await using _cli = cli;
    const page = await (await fetch(`${url}schedules`)).text();
    assert.match(page, /yearly-report/);
    assert.doesNotMatch(page, new RegExp(`action="${runPath}"`));
    assert.match(page, /run now: not defined here/);
    cli.kill("SIGTERM");
    assert.equal((await cli.child.status).code, 0);
  }

  const { cli, url } = await serveDashboard(["--db", tmp.dbPath, "--jobs", jobs]);
  await using _cli = cli;
  const page = await fetch(`${url}schedules`);
  const cookie = /^(renox_queue_csrf=[A-Za-z0-9_-]{22});/.exec(
    page.headers.get("set-cookie") ?? "",
  )?.[1];
  const html = await page.text();
  const token = /name="_csrf" value="([A-Za-z0-9_-]+)"/.exec(html)?.[1];
  assert.ok(cookie !== undefined && token !== undefined, "a CSRF cookie and token");
  assert.match(html, new RegExp(`action="${runPath}"`));
  const run = await fetch(`${url}${runPath.slice(1)}`, {
    method: "POST",
    body: new URLSearchParams({ _csrf: token }),
    headers: { cookie, origin: new URL(url).origin, "sec-fetch-site": "same-origin" },
    redirect: "manual",
  });
  assert.equal(run.status, 303, await run.text());
  assert.match(run.headers.get("location") ?? "", /\/schedules\?notice=schedule-run/);
  const listed = await queue.jobs();
  assert.deepEqual(listed.jobs.map((job) => job.name), ["cli.report"]);
  cli.kill("SIGTERM");
  assert.equal((await cli.child.status).code, 0, await cli.stderr);
});

Deno.test("CLI dashboard --jobs leaves the stored schedules its module does not define as they are, paused ones paused", async () => {
  await using tmp = await tempDir();
  const { report, reportA, reportB } = await import("../fixtures/schedules/cli_jobs.ts");
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [report, reportA, reportB] });
  assert.equal(await queue.pauseSchedule("report-a"), true);
  const before = await queue.schedules();

  const { cli, url } = await serveDashboard([
    "--db",
    tmp.dbPath,
    "--jobs",
    "tests/fixtures/cli/schedule_jobs.ts",
  ]);
  await using _cli = cli;
  const page = await (await fetch(`${url}schedules`)).text();
  assert.match(page, /yearly-report/);
  cli.kill("SIGTERM");
  assert.equal((await cli.child.status).code, 0, await cli.stderr);

  const after = await queue.schedules();
  assert.deepEqual(after.map((schedule) => schedule.name), [
    "report-a",
    "report-b",
    "yearly-report",
  ]);
  // What is stored, without nextRuns: a view computed from the clock, which may cross a slot
  // between the two reads.
  const stored = (schedules: typeof before) => schedules.map(({ nextRuns: _, ...rest }) => rest);
  assert.deepEqual(
    stored(after.filter((schedule) => schedule.name !== "yearly-report")),
    stored(before),
  );
  assert.equal(after[0]!.paused, true);
});
