/**
 * An isolate that dies mid-drain (kill -9 of `deno serve`) loses nothing:
 * the next drain runs its jobs once their lease has run out.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { z } from "zod";
import { defineJob } from "../../src/job.ts";
import { Queue, type QueueOptions } from "../../src/queue.ts";
import { DatabaseSync } from "node:sqlite";
import postgres from "postgres";
import { tempDir, waitUntil } from "../_helpers.ts";
import { postgresTestUrl } from "../_postgres.ts";
import { freshDatabase, ServeProcess } from "../fixtures/deploy/serve_process.ts";

const ORDERS = 5;
const url = postgresTestUrl();
if (url === null) {
  console.log("deploy kill test on PostgreSQL skipped: QUEUE_TEST_POSTGRES_URL is not set");
}

/**
 * Serves the slow app, places the orders, kills it once all are running and
 * their begin is recorded (`begun` counts the leased jobs marked so: a
 * death charges an attempt only to those); then drains here.
 */
async function killMidDrain(
  flags: (port: number) => string[],
  env: Record<string, string>,
  open: (jobs: QueueOptions["jobs"]) => Promise<Queue>,
  begun: () => Promise<number>,
): Promise<void> {
  {
    await using app = await ServeProcess.start("tests/fixtures/deploy/slow_app.ts", flags, env);
    const response = await fetch(`${app.origin}/orders?count=${ORDERS}`, { method: "POST" });
    assert.equal(response.status, 202, await response.text());
    await app.until(
      `all ${ORDERS} orders to start`,
      (lines) => lines.filter((line) => line.startsWith("started ")).length === ORDERS,
      30_000,
    );
    await waitUntil(async () => (await begun()) === ORDERS, {
      what: `the begin marks of all ${ORDERS} orders`,
    });
    app.kill("SIGKILL");
    const { signal } = await app.status;
    assert.equal(signal, "SIGKILL");
  }

  const runs: { order: number; attempt: number }[] = [];
  const slowOrder = defineJob({
    name: "slow-order",
    schema: z.object({ order: z.number().int() }),
    handle({ order }, ctx) {
      runs.push({ order, attempt: ctx.attempt });
    },
  });
  await using queue = await open([slowOrder]);
  const left = (await queue.counts()).default!;
  assert.equal(
    left.pending + left.reserved + left.delayed,
    ORDERS,
    "a job of the dead drain is gone",
  );
  assert.equal(left.failed, 0);
  const deadline = performance.now() + 30_000;
  while (runs.length < ORDERS) {
    assert.ok(performance.now() < deadline, `only ${runs.length} jobs ran again within 30 s`);
    const result = await queue.drain({ maxTimeMs: 10_000, concurrency: ORDERS });
    assert.equal(result.failed, 0);
    if (runs.length < ORDERS) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.deepEqual(runs.map(({ order }) => order).sort(), [0, 1, 2, 3, 4]);
  assert.ok(runs.every(({ attempt }) => attempt === 2), JSON.stringify(runs));
  const counts = (await queue.counts()).default!;
  assert.deepEqual(
    [counts.pending, counts.delayed, counts.reserved, counts.failed],
    [0, 0, 0, 0],
  );
}

Deno.test("SQLite: kill -9 of deno serve mid-drain loses nothing: the next drain runs the jobs after their lease", async () => {
  await using tmp = await tempDir();
  const path = join(tmp.dir, "queue.db");
  await killMidDrain(
    (port) => [
      `--allow-net=127.0.0.1:${port}`,
      `--allow-read=${tmp.dir}`,
      `--allow-write=${tmp.dir}`,
      "--allow-env",
    ],
    { QUEUE_DB: path },
    (jobs) => Queue.open({ path, jobs }),
    () => {
      const db = new DatabaseSync(path);
      try {
        const row = db.prepare(
          "SELECT COUNT(*) AS n FROM jobs WHERE token IS NOT NULL AND begun = 1",
        )
          .get() as { n: number };
        return Promise.resolve(row.n);
      } finally {
        db.close();
      }
    },
  );
});

Deno.test({
  name:
    "PostgreSQL: kill -9 of deno serve mid-drain loses nothing: the next drain runs the jobs after their lease",
  ignore: url === null,
  async fn() {
    await using database = await freshDatabase(url!);
    const { hostname, port: dbPort } = new URL(database.url);
    await killMidDrain(
      (port) => [`--allow-net=${hostname}:${dbPort || "5432"},127.0.0.1:${port}`, "--allow-env"],
      { DATABASE_URL: database.url },
      (jobs) => Queue.open({ url: database.url, jobs }),
      async () => {
        const sql = postgres(database.url, { max: 1, onnotice: () => {} });
        try {
          const [row] = await sql<{ n: number }[]>`
            SELECT COUNT(*)::int AS n FROM jobs WHERE token IS NOT NULL AND begun = 1`;
          return row?.n ?? 0;
        } finally {
          await sql.end();
        }
      },
    );
  },
});
