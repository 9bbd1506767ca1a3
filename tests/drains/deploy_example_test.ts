/**
 * The Deno Deploy-style example (examples/deploy/main.ts) as a host runs it:
 * `deno serve` with network access to PostgreSQL and its own port and the
 * environment, nothing else (no read, write, sys, ffi or run), prompts off,
 * and no `Worker` in the isolate.
 *
 * @module
 */
import assert from "node:assert/strict";
import { postgresTestUrl } from "../_postgres.ts";
import { freshDatabase, percentile, ServeProcess } from "../fixtures/deploy/serve_process.ts";

const APP = "tests/fixtures/deploy/serve_without_worker.ts";
const PASSWORD = "correct horse";
const url = postgresTestUrl();
if (url === null) {
  console.log("deploy example tests skipped: QUEUE_TEST_POSTGRES_URL is not set");
}

/** The example on a database of its own, with exactly the permissions a host grants. */
function serveExample(databaseUrl: string, env: Record<string, string> = {}) {
  const database = new URL(databaseUrl);
  return ServeProcess.start(APP, (port) => [
    "--unstable-cron",
    `--allow-net=${database.hostname}:${database.port || "5432"},127.0.0.1:${port}`,
    "--allow-env",
  ], { DATABASE_URL: databaseUrl, DASHBOARD_PASSWORD: PASSWORD, ...env });
}

/** POSTs `count` orders, `parallel` at a time (or one every `spacingMs`); returns their ids. */
async function placeOrders(
  app: ServeProcess,
  count: number,
  { parallel = 1, spacingMs = 0 }: { parallel?: number; spacingMs?: number },
): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: parallel }, async () => {
    while (next < count) {
      next++;
      let response: Response;
      try {
        response = await fetch(`${app.origin}/orders`, {
          method: "POST",
          body: JSON.stringify({ sku: "mug", quantity: 1 + (next % 3) }),
        });
      } catch (error) {
        throw new Error(`POST /orders failed: ${error}\n${app.describe()}`, { cause: error });
      }
      assert.equal(response.status, 202, await response.clone().text());
      ids.push((await response.json()).orderId);
      if (spacingMs > 0) await new Promise((resolve) => setTimeout(resolve, spacingMs));
    }
  }));
  return ids;
}

/** The `fulfilling` log lines, parsed. */
function starts(lines: readonly string[]): { fulfilling: string; waitedMs: number }[] {
  return lines.filter((line) => line.startsWith('{"fulfilling"')).map((line) => JSON.parse(line));
}

/** Waits until nothing is left in the queue (the last jobs settle after they log their start), then asserts every order ran exactly once. */
async function assertEachRanOnce(app: ServeProcess, ids: readonly string[]): Promise<void> {
  const idle = { default: { pending: 0, delayed: 0, reserved: 0, failed: 0, running: [] } };
  const deadline = performance.now() + 30_000;
  for (;;) {
    const counts = await (await fetch(`${app.origin}/`)).json();
    if (JSON.stringify(counts) === JSON.stringify(idle)) break;
    assert.ok(performance.now() < deadline, `jobs left in the queue: ${JSON.stringify(counts)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const runs = new Map<string, number>();
  for (const { fulfilling } of starts(app.lines)) {
    runs.set(fulfilling, (runs.get(fulfilling) ?? 0) + 1);
  }
  assert.equal(new Set(ids).size, ids.length);
  for (const id of ids) assert.equal(runs.get(id), 1, `order ${id} ran ${runs.get(id) ?? 0} times`);
  assert.equal(runs.size, ids.length, "a job ran that no POST dispatched");
}

/** No permission was refused (a prompt fails with --no-prompt) and nothing was logged as an error. */
function assertNoErrors(app: ServeProcess): void {
  const stderr = app.stderr.replace(/^deno serve: Listening on .*$/m, "").trim();
  assert.equal(stderr, "", `deno serve wrote to stderr:\n${app.stderr}`);
  assert.doesNotMatch(app.lines.join("\n"), /Requires|NotCapable|error/i);
}

function latency(jobs: readonly { waitedMs: number }[]): string {
  const waited = jobs.map((job) => job.waitedMs);
  return `p50 ${percentile(waited, 50)} ms, p99 ${
    percentile(waited, 99)
  } ms (${waited.length} jobs)`;
}

Deno.test({
  name:
    "the deploy example under deno serve with --allow-net and --allow-env only and no Worker: 200 orders each run once by drains after responses, and 10 by cron ticks alone",
  ignore: url === null,
  async fn() {
    await using afterResponses = await freshDatabase(url!);
    await using cronOnly = await freshDatabase(url!);
    await using app = await serveExample(afterResponses.url);
    await using cronApp = await serveExample(cronOnly.url, { DRAIN_AFTER_RESPONSE_MS: "0" });

    // Cron ticks only: orders spread over 10 s, run at the next minute's tick.
    const cronOrders = placeOrders(cronApp, 10, { spacingMs: 1_000 });
    cronOrders.catch(() => {}); // awaited below; a failure meanwhile is not an uncaught one

    // 50 orders one at a time (each drain finds the queue idle), then 150 from 8 clients at once.
    const oneByOne = await placeOrders(app, 50, {});
    const burst = await placeOrders(app, 150, { parallel: 8 });
    const ids = [...oneByOne, ...burst];
    await app.until("all 200 orders to start", (lines) => starts(lines).length >= 200, 120_000);
    await assertEachRanOnce(app, ids);

    const gateless = await fetch(`${app.origin}/admin/queue`);
    assert.equal(gateless.status, 401);
    await gateless.body?.cancel();
    const authorization = `Basic ${btoa(`admin:${PASSWORD}`)}`;
    const page = await fetch(`${app.origin}/admin/queue`, { headers: { authorization } });
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<html/i);
    const wrong = await fetch(`${app.origin}/admin/queue`, {
      headers: { authorization: `Basic ${btoa("admin:guess")}` },
    });
    assert.equal(wrong.status, 401);
    await wrong.body?.cancel();

    const cronIds = await cronOrders;
    await cronApp.until(
      "the cron ticks to run all 10 orders",
      (lines) => starts(lines).length >= 10,
      150_000,
    );
    await assertEachRanOnce(cronApp, cronIds);
    assertNoErrors(app);
    assertNoErrors(cronApp);
    console.log(
      `deploy example, dispatch-to-start latency: drain after response ${
        latency(starts(app.lines).filter((start) => oneByOne.includes(start.fulfilling)))
      } one order at a time, ${
        latency(starts(app.lines).filter((start) => burst.includes(start.fulfilling)))
      } for 8 clients at once; cron ticks only ${latency(starts(cronApp.lines))}`,
    );
  },
});
