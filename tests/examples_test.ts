/**
 * The Hono example (examples/hono/main.ts) as `deno serve` runs it: a route
 * dispatches a job that runs in the app's process, the dashboard answers
 * under `/admin/queue` only behind the app's own basic auth, and the app
 * exits on its first SIGTERM or SIGINT, on SQLite and on PostgreSQL.
 *
 * @module
 */
import assert from "node:assert/strict";
import { tempDir, within } from "./_helpers.ts";
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
        assert.equal(placed.status, 202, await placed.text());
        await app.until(
          "the welcome job",
          (lines) => lines.some((line) => line.includes("grace@example.com")),
          30_000,
        );

        app.kill(signal);
        const exited = await within(app.status, EXIT_DEADLINE_MS, `exit after ${signal}`);
        assert.equal(exited.code, 0, app.describe());
      },
    });
  }
}
