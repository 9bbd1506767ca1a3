/**
 * The lifetime of `Queue.serverless()`'s cron job and of a `deno serve` app
 * that opens a queue: closing the queue unregisters the cron job, and the
 * Deploy-style example (examples/deploy/main.ts) served by a real
 * `deno serve` exits on its first SIGTERM or SIGINT with a PostgreSQL queue
 * open and its cron job registered. The Hono example does the same on
 * SQLite (tests/examples_test.ts).
 *
 * @module
 */
import assert from "node:assert/strict";
import { within } from "../_helpers.ts";
import { postgresTestUrl } from "../_postgres.ts";
import { freshDatabase, ROOT, ServeProcess } from "../fixtures/deploy/serve_process.ts";

/** Far more than the few ms an app takes to exit, far less than "never". */
const EXIT_DEADLINE_MS = 8_000;

Deno.test("closing a queue unregisters the drain cron job of serverless(), so the process can exit", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      "--quiet",
      "--unstable-cron",
      "tests/fixtures/deploy/cron_close_app.ts",
    ],
    cwd: ROOT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // A job left registered keeps the process alive: give up after 30 s.
  const deadline = setTimeout(() => child.kill("SIGKILL"), 30_000);
  const { code, stdout, stderr } = await child.output();
  clearTimeout(deadline);
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  assert.equal(code, 0, `killed after 30 s? ${decode(stderr)}`);
  assert.deepEqual(decode(stdout).trim().split("\n"), ["registered", "unregistered"]);
});

const url = postgresTestUrl();
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  Deno.test({
    name:
      `the Deploy-style example under deno serve exits on its first ${signal} with a PostgreSQL queue and its cron job`,
    ignore: url === null,
    async fn() {
      await using database = await freshDatabase(url!);
      const { hostname, port } = new URL(database.url);
      await using app = await ServeProcess.start(
        "examples/deploy/main.ts",
        (listen) => [
          "--unstable-cron",
          `--allow-net=${hostname}:${port || "5432"},127.0.0.1:${listen}`,
          "--allow-env",
        ],
        { DATABASE_URL: database.url, DASHBOARD_PASSWORD: "correct horse" },
      );
      const counts = await fetch(`${app.origin}/`);
      assert.equal(counts.status, 200, app.describe());
      await counts.body?.cancel();
      const placed = await fetch(`${app.origin}/orders`, {
        method: "POST",
        body: JSON.stringify({ sku: "mug", quantity: 1 }),
      });
      assert.equal(placed.status, 202, await placed.text());
      await app.until(
        "the order's job",
        (lines) => lines.some((line) => line.includes("fulfilling")),
        30_000,
      );

      app.kill(signal);
      const status = await within(app.status, EXIT_DEADLINE_MS, `exit after ${signal}`);
      assert.equal(status.code, 0, app.describe());
    },
  });
}
