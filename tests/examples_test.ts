/**
 * The Hono example (examples/hono/main.ts) as `deno serve` runs it: a route
 * dispatches a job that runs in the app's process, the dashboard answers
 * under `/admin/queue` only behind the app's own basic auth, and the app
 * exits on its first SIGTERM or SIGINT, on SQLite and on PostgreSQL (named
 * by `DATABASE_URL` alone, where the job it ran must be found). And
 * the durable steps example (examples/steps/main.ts), the groups example
 * (examples/groups.ts) and the flows example (examples/flows/main.ts), each
 * run to its end.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Queue } from "../mod.ts";
import { tempDir, within } from "./_helpers.ts";
import { ROOT } from "./fixtures/cli/cli_process.ts";
import { postgresTestUrl } from "./_postgres.ts";
import { freshDatabase, ServeProcess } from "./fixtures/deploy/serve_process.ts";

const APP = "examples/hono/main.ts";
const PASSWORD = "correct horse";
/** Far more than the few ms the app takes to exit, far less than "never". */
const EXIT_DEADLINE_MS = 8_000;

/** Serves the Hono example with `env` (its database) added. */
function serveHono(env: Record<string, string>): Promise<ServeProcess> {
  return ServeProcess.start(APP, () => ["-A"], { DASHBOARD_PASSWORD: PASSWORD, ...env });
}

function basic(user: string, password: string): HeadersInit {
  return { authorization: `Basic ${btoa(`${user}:${password}`)}` };
}

/** GETs `path` and returns its status, the body read. */
async function status(app: ServeProcess, path: string, headers: HeadersInit = {}) {
  const response = await fetch(`${app.origin}${path}`, { headers });
  await response.text();
  return response.status;
}

Deno.test("Hono example: POST /signups dispatches a job that runs; the dashboard under /admin/queue needs the app's basic auth", async () => {
  await using tmp = await tempDir();
  await using app = await serveHono({ QUEUE_DB: tmp.dbPath });

  const placed = await fetch(`${app.origin}/signups`, {
    method: "POST",
    body: JSON.stringify({ email: "ada@example.com" }),
  });
  assert.equal(placed.status, 202, app.describe());
  const { id } = await placed.json();
  assert.equal(typeof id, "number");
  await app.until(
    "the welcome job",
    (lines) => lines.some((line) => line.includes('"welcomed":"ada@example.com"')),
    30_000,
  );
  const refused = await fetch(`${app.origin}/signups`, {
    method: "POST",
    body: JSON.stringify({ email: "not an address" }),
  });
  assert.equal(refused.status, 400);
  assert.match((await refused.json()).error, /Cannot dispatch "send-welcome": payload\.email/);

  for (const path of ["/admin/queue", "/admin/queue/failed", "/admin/queue/api/overview"]) {
    assert.equal(await status(app, path), 401, `${path} without auth`);
    assert.equal(await status(app, path, basic("admin", "wrong")), 401, `${path}, wrong password`);
    assert.equal(await status(app, path, basic("admin", PASSWORD)), 200, `${path} with auth`);
  }
  const page = await fetch(`${app.origin}/admin/queue/jobs/${id}`, {
    headers: basic("admin", PASSWORD),
  });
  const html = await page.text();
  assert.equal(page.status, 200);
  assert.match(html, /href="\/admin\/queue\/jobs"/, "links stay under the mount path");
});

Deno.test("Hono example: with no DASHBOARD_PASSWORD the dashboard refuses everyone", async () => {
  await using tmp = await tempDir();
  await using app = await serveHono({ QUEUE_DB: tmp.dbPath, DASHBOARD_PASSWORD: "" });
  assert.equal(await status(app, "/admin/queue"), 403);
  assert.equal(await status(app, "/admin/queue", basic("admin", "")), 403);
});

const url = postgresTestUrl();
for (const store of ["SQLite", "PostgreSQL"] as const) {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    Deno.test({
      name: `Hono example under deno serve exits on its first ${signal} (${store}, worker running)`,
      ignore: store === "PostgreSQL" && url === null,
      async fn() {
        await using tmp = await tempDir();
        await using database = store === "PostgreSQL" ? await freshDatabase(url!) : null;
        await using app = await serveHono(
          database === null ? { QUEUE_DB: tmp.dbPath } : { DATABASE_URL: database.url },
        );
        const placed = await fetch(`${app.origin}/signups`, {
          method: "POST",
          body: JSON.stringify({ email: "grace@example.com" }),
        });
        assert.equal(placed.status, 202, app.describe());
        const { id } = await placed.json();
        await app.until(
          "the welcome job",
          (lines) => lines.some((line) => line.includes("grace@example.com")),
          30_000,
        );

        app.kill(signal);
        const exited = await within(app.status, EXIT_DEADLINE_MS, `exit after ${signal}`);
        assert.equal(exited.code, 0, app.describe());
        if (database !== null) {
          // The app read DATABASE_URL (through readConfig()), so the job it ran is kept there.
          await using queue = await Queue.open({ url: database.url, jobs: [] });
          const finished = await queue.finishedJob(id);
          assert.equal(finished?.name, "send-welcome", "the job is in PostgreSQL");
        }
      },
    });
  }
}

Deno.test("Durable steps example: each step runs once across the sleep and the wait, Grace's early answer is buffered, Ada's is delivered, and it ends on its own", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", "examples/steps/main.ts"],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // A deadline, not a speed test: the example sleeps a second and then waits for a signal.
  const deadline = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const { code, stdout, stderr } = await child.output().finally(() => clearTimeout(deadline));
  const out = new TextDecoder().decode(stdout);
  const describe = `${out}\n${new TextDecoder().decode(stderr)}`;
  assert.equal(code, 0, describe);
  assert.match(out, /Grace's answer, sent before her job waits: buffered/, describe);
  assert.match(out, /Ada's answer, sent while her job waits: delivered/, describe);
  const count = (line: string) => out.split("\n").filter((text) => text === line).length;
  for (const name of ["Ada", "Grace"]) {
    assert.equal(count(`${name}: create-account runs`), 1, describe);
    assert.equal(count(`${name}: thank runs (score ${name === "Ada" ? 9 : 7})`), 1, describe);
    assert.ok(count(`${name}: the handler starts (attempt 1)`) >= 2, describe);
  }
  assert.doesNotMatch(out, /attempt 2/, "sleeps and waits spend no attempt");
  assert.match(out, /completed, \{"email":"user1@example.com","score":9\}/, describe);
  assert.match(out, /completed, \{"email":"user2@example.com","score":7\}/, describe);
  assert.match(out, /1\. step create-account: done \(attempt 1\) \{"email":"user1@example.com"\}/);
  assert.match(out, /2\. sleep cool-off: done/);
  assert.match(out, /3\. wait survey: done \(attempt 1\) \{"score":9\}/);
  assert.match(out, /4\. step thank: done/);
});

Deno.test("Groups example: the small tenant's jobs run within the first turns, never more than 2 of a tenant at once", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", "examples/groups.ts"],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // A deadline, not a speed test.
  const deadline = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const { code, stdout, stderr } = await child.output().finally(() => clearTimeout(deadline));
  const out = new TextDecoder().decode(stdout);
  const describe = `${out}\n${new TextDecoder().decode(stderr)}`;
  assert.equal(code, 0, describe);
  const done = /small's 5 jobs were done by run (\d+) of 205/.exec(out);
  assert.ok(done !== null && Number(done[1]) <= 20, describe);
  const most = /at most (\d+) jobs ran at once/.exec(out);
  assert.ok(most !== null && Number(most[1]) <= 4, describe);
});

Deno.test("Flows example: the report reads both fetches' outputs, the mail waits for the report, every node succeeds, and it ends on its own", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", "examples/flows/main.ts"],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // A deadline, not a speed test.
  const deadline = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const { code, stdout, stderr } = await child.output().finally(() => clearTimeout(deadline));
  const out = new TextDecoder().decode(stdout);
  const describe = `${out}\n${new TextDecoder().decode(stderr)}`;
  assert.equal(code, 0, describe);
  assert.match(out, /mail to ops: 2026-12-01: net 1050\n/, describe);
  assert.match(out, /build-report: succeeded \(after: fetch-sales, refunds\)/, describe);
  assert.match(out, /mail-report: succeeded \(after: build-report\)/, describe);
  assert.match(out, /flow \d+: succeeded/, describe);
});
