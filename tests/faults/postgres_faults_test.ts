/**
 * PostgreSQL faults, on a private server the test starts (never the shared
 * one): the server restarted twice while three `work` processes drain, and
 * every queue connection cut with `pg_terminate_backend` every 1.5 s. The
 * workers reconnect without a restart of their own, nothing is lost or
 * completed twice, a dispatch during the outage rejects saying the database
 * cannot be reached and works again after, and LISTEN is taken again.
 *
 * Handlers write their runs to a SQLite ledger beside the test, outside the
 * server that is broken. Skips, saying why, where PostgreSQL's binaries are
 * missing.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import postgres from "postgres";
import { z } from "zod";
import { defineJob, Queue } from "../../mod.ts";
import { PostgresStore } from "../../src/stores/postgres/mod.ts";
import { tempDir, waitUntil, within } from "../_helpers.ts";
import { checkDrain, JOBS_URL, serialPickups, startWork, topUp } from "../fixtures/faults/drain.ts";
import { tick } from "../fixtures/faults/jobs.ts";
import { awaitThroughOutage, held } from "../fixtures/faults/await_outage.ts";
import { privatePostgres } from "../fixtures/faults/private_postgres.ts";
import { all, one, openReader } from "../fixtures/reliability/harness.ts";
import { quantile, workerStarted } from "../fixtures/reliability_postgres/harness.ts";

const probe = await privatePostgres();
const refusal = typeof probe === "string" ? probe : null;
if (typeof probe !== "string") await probe[Symbol.asyncDispose]();
if (refusal !== null) console.log(`PostgreSQL fault tests skipped: ${refusal}`);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test({
  name:
    "PostgreSQL restarted twice while three work processes drain 5,000 jobs: they reconnect on their own, nothing lost or completed twice, dispatch during the outage rejects naming the cause and works after",
  ignore: refusal !== null,
  async fn() {
    const server = await privatePostgres();
    if (typeof server === "string") throw new Error(server);
    await using _server = server;
    await using tmp = await tempDir();
    const ledger = join(tmp.dir, "ledger.db");
    using ledgerDb = openReader(ledger);
    await using queue = await Queue.open({ url: server.url, jobs: JOBS_URL });
    const total = 10_000;
    const dispatched = await queue.dispatchMany(
      tick,
      Array.from({ length: total }, (_, n) => ({ n })),
    );
    const flags = ["--concurrency", "8", "--sleep-ms", "200"];
    const workers = [0, 1, 2].map(() => startWork(server.url, ledger, flags));
    try {
      await Promise.all(workers.map((child) => workerStarted(child)));
      const ran = () => one<{ n: number }>(ledgerDb, "SELECT COUNT(*) AS n FROM ledger").n;
      const restarts: { downMs: number; resumeMs: number; rejectMs: number; said: string }[] = [];
      for (const share of [0.25, 0.6]) {
        await waitUntil(() => ran() >= total * share, {
          what: `${share * 100} % of the jobs run`,
          timeoutMs: 120_000,
        });
        await server.stop();
        const downAt = Date.now();
        const started = performance.now();
        const said = await queue.dispatch(tick, { n: -1 }).then(
          (id) => `stored ${id}`,
          (error: Error) => error.message,
        );
        const rejectMs = performance.now() - started;
        assert.match(said, /Cannot reach the PostgreSQL database/);
        await sleep(2_000);
        await server.start();
        const upAt = Date.now();
        dispatched.push(await queue.dispatch(tick, { n: -2 }));
        const before = ran();
        await waitUntil(() => ran() > before, {
          what: "a job run after the restart",
          timeoutMs: 60_000,
        });
        const [first] = all<{ start: number }>(
          ledgerDb,
          "SELECT MIN(start) AS start FROM ledger WHERE start >= ?",
          upAt,
        );
        restarts.push({ downMs: upAt - downAt, resumeMs: first!.start - upAt, rejectMs, said });
      }
      await waitUntil(() => ran() >= dispatched.length, {
        what: "every job run",
        timeoutMs: 120_000,
      });
      // Let the last settles land, then check the table is empty.
      const reader = postgres(server.url, { max: 1, onnotice: () => {} });
      try {
        const deadline = Date.now() + 30_000;
        let left = -1;
        while (Date.now() < deadline) {
          left =
            (await reader<{ left: number }[]>`SELECT count(*)::int AS left FROM jobs`)[0]!.left;
          if (left === 0) break;
          await sleep(100);
        }
        assert.equal(left, 0, "jobs left in the table");
        const failed =
          (await reader<{ n: number }[]>`SELECT count(*)::int AS n FROM failed_jobs`)[0]!.n;
        assert.equal(failed, 0);
      } finally {
        await reader.end({ timeout: 5 });
      }
      const figures = checkDrain(ledgerDb, dispatched, workers);
      for (const [n, restart] of restarts.entries()) {
        console.log(
          `PostgreSQL restart ${n + 1}: down ${restart.downMs} ms, first job ${
            Math.round(restart.resumeMs)
          } ms after the server was back; dispatch while down rejected in ${
            Math.round(restart.rejectMs)
          } ms: ${restart.said.slice(0, 110)}`,
        );
      }
      console.log(
        `PostgreSQL restarts: lost ${figures.lost}, run twice ${figures.runTwice}, completed twice ${figures.completedTwice}; the 3 work processes never restarted`,
      );
      for (const restart of restarts) {
        assert.ok(restart.rejectMs < 15_000, `a dispatch waited ${restart.rejectMs} ms`);
      }
    } finally {
      for (const child of workers) child.kill("SIGTERM");
      for (const child of workers) await child.exit(20_000).catch(() => {});
      for (const child of workers) await child[Symbol.asyncDispose]();
    }
  },
});

Deno.test({
  name:
    "PostgreSQL: every queue connection cut with pg_terminate_backend every 1.5 s during a drain: nothing lost or completed twice, and LISTEN wakes idle workers again afterwards",
  ignore: refusal !== null,
  async fn() {
    const server = await privatePostgres();
    if (typeof server === "string") throw new Error(server);
    await using _server = server;
    await using tmp = await tempDir();
    const ledger = join(tmp.dir, "ledger.db");
    using ledgerDb = openReader(ledger);
    await using queue = await Queue.open({ url: server.url, jobs: JOBS_URL });
    const total = 5_000;
    const dispatched = await queue.dispatchMany(
      tick,
      Array.from({ length: total }, (_, n) => ({ n })),
    );
    // Idle workers look only every 2 s: a pick-up sooner than that came from LISTEN.
    const flags = ["--concurrency", "8", "--sleep-ms", "2000"];
    const workers = [0, 1, 2].map(() => startWork(server.url, ledger, flags));
    const admin = postgres(server.url, {
      max: 1,
      onnotice: () => {},
      connection: { application_name: "faults admin" },
    });
    try {
      await Promise.all(workers.map((child) => workerStarted(child)));
      const ran = () => one<{ n: number }>(ledgerDb, "SELECT COUNT(*) AS n FROM ledger").n;
      let rounds = 0;
      let cut = 0;
      // At least 3 rounds of cuts under a drain, however fast this machine drains: a drain
      // that ran out first gets more jobs (their dispatch may meet a cut of its own, and retries).
      while ((ran() < dispatched.length || rounds < 3) && rounds < 30) {
        if (ran() >= dispatched.length) dispatched.push(...await topUp(queue, dispatched.length));
        const rows = await admin<{ pid: number }[]>`
          SELECT pg_terminate_backend(pid), pid FROM pg_stat_activity
          WHERE application_name = '@renox/queue' AND pid <> pg_backend_pid()`;
        cut += rows.length;
        rounds++;
        await sleep(1_500);
      }
      await waitUntil(() => ran() >= dispatched.length, {
        what: "every job run",
        timeoutMs: 120_000,
      }).catch(
        async (error) => {
          const states =
            await admin`SELECT token IS NULL AS free, available_at - (extract(epoch from clock_timestamp()) * 1000)::bigint AS due_in, attempts, crashes, last_error FROM jobs LIMIT 5`;
          const tails = workers.map((child) =>
            `exited ${child.exitedAt}; ${child.stderr.slice(-1500)}; ${
              JSON.stringify(child.lines.slice(-3))
            }`
          );
          throw new Error(
            `${error.message}: ran ${ran()}; ${JSON.stringify(states)}; ${tails.join("\n")}`,
          );
        },
      );
      let left = -1;
      for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
        left = (await admin<{ left: number }[]>`SELECT count(*)::int AS left FROM jobs`)[0]!.left;
        if (left === 0) break;
        await sleep(100);
      }
      assert.equal(left, 0, "jobs left in the table");

      // After the storm: one job at a time, the time from dispatch to its handler's start.
      const pickups = await serialPickups(queue, ledgerDb, dispatched, 40);
      const figures = checkDrain(ledgerDb, dispatched, workers);
      const p50 = quantile(pickups, 0.5);
      console.log(
        `PostgreSQL connections cut: ${rounds} rounds, ${cut} connections terminated; lost ` +
          `${figures.lost}, run twice ${figures.runTwice}, completed twice ` +
          `${figures.completedTwice}; pick-up after: p50 ${p50.toFixed(1)} ms, p90 ${
            quantile(pickups, 0.9).toFixed(1)
          } ms`,
      );
      assert.ok(rounds >= 3 && cut > 0, `only ${rounds} rounds of cuts`);
      assert.ok(p50 < 500, `pick-up p50 ${p50} ms: idle workers were not woken by LISTEN`);
    } finally {
      await admin.end({ timeout: 5 });
      for (const child of workers) child.kill("SIGTERM");
      for (const child of workers) await child.exit(20_000).catch(() => {});
      for (const child of workers) await child[Symbol.asyncDispose]();
    }
  },
});

Deno.test({
  name:
    "PostgreSQL refusing connections: every call of a long outage rejects within connectTimeoutMs, and once the server is back the first dispatch goes through and an idle worker runs it, without waiting out a reconnect backoff",
  ignore: refusal !== null,
  async fn() {
    const server = await privatePostgres();
    if (typeof server === "string") throw new Error(server);
    await using _server = server;
    const ran: number[] = [];
    const note = defineJob({
      name: "faults.note",
      schema: z.object({ n: z.number().int() }),
      handle: ({ n }) => {
        ran.push(n);
      },
    });
    const store = await PostgresStore.open(server.url, { connectTimeoutMs: 1_000 });
    await using queue = await Queue.open({ store, jobs: [note] });
    const worker = queue.work({ executor: "isolate", pollMs: 60_000 });
    try {
      await queue.dispatch(note, { n: 0 });
      await waitUntil(() => ran.includes(0), { what: "the job before the outage ran" });
      await server.stop();
      // The driver's default backoff grows with each refused connection, to 10-20 s by about the
      // tenth: twenty calls in a row meet it. Each deadline is five times connectTimeoutMs.
      for (let call = 0; call < 20; call++) {
        const said = await within(
          queue.counts().then(() => "answered", (error: Error) => error.message),
          5_000,
          `counts() call ${call + 1} while the server refuses connections`,
        );
        assert.match(said, /Cannot reach the PostgreSQL database/);
        await sleep(100);
      }
      await server.start();
      await within(
        queue.dispatch(note, { n: 1 }),
        5_000,
        "the first dispatch after the server is back",
      );
      await waitUntil(() => ran.includes(1), {
        what: "the idle worker ran the job dispatched after the restart",
        timeoutMs: 5_000,
      });
    } finally {
      await worker.stop();
    }
  },
});

Deno.test({
  name:
    "PostgreSQL: dispatchAndWait() rides out the server stopped and started while its job runs, and resolves with the job's output",
  ignore: refusal !== null,
  async fn() {
    const server = await privatePostgres();
    if (typeof server === "string") throw new Error(server);
    await using _server = server;
    await using queue = await Queue.open({ url: server.url, jobs: [held] });
    await awaitThroughOutage(queue, { down: () => server.stop(), up: () => server.start() });
  },
});
