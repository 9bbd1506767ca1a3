/**
 * Redis faults, on a private `redis-server` each test starts on a free port
 * (never the shared one): the server killed with SIGKILL twice under a drain
 * (AOF on), restarted without persistence, every client connection killed
 * every 1.5 s, its functions flushed mid-drain, and a `maxmemory` too small for
 * a dispatch. Three `work` processes of the real CLI drain while the test
 * dispatches; handlers write their runs to a SQLite ledger outside Redis.
 *
 * Skips, saying why, where `redis-server` is missing.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { Queue } from "../../mod.ts";
import { RedisStore } from "../../src/stores/redis/mod.ts";
import { tempDir, waitUntil } from "../_helpers.ts";
import { checkDrain, JOBS_URL, serialPickups, startWork, topUp } from "../fixtures/faults/drain.ts";
import { padded, tick } from "../fixtures/faults/jobs.ts";
import { awaitThroughOutage, held } from "../fixtures/faults/await_outage.ts";
import { privateRedisRefusal, startPrivateRedis } from "../fixtures/faults/private_redis.ts";
import { all, type ChildProcess, one, openReader } from "../fixtures/reliability/harness.ts";
import { cliEvents, quantile, workerStarted } from "../fixtures/reliability_postgres/harness.ts";

const refusal = await privateRedisRefusal();
if (refusal !== null) console.log(`Redis fault tests skipped: ${refusal}`);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Jobs left in the store: waiting, delayed or running, and failed. */
async function left(queue: Queue): Promise<{ unfinished: number; failed: number }> {
  const counts = await queue.counts();
  let unfinished = 0;
  let failed = 0;
  for (const row of Object.values(counts)) {
    unfinished += row.pending + row.delayed + row.reserved;
    failed += row.failed;
  }
  return { unfinished, failed };
}

/** Waits until every dispatched job ran and nothing is left in the store. */
async function drained(
  queue: Queue,
  ran: () => number,
  dispatched: readonly number[],
  workers: readonly ChildProcess[],
): Promise<void> {
  await waitUntil(() => ran() >= dispatched.length, {
    what: "every job run",
    timeoutMs: 180_000,
  }).catch((error) => {
    const tails = workers.map((child) => `exited ${child.exitedAt}; ${child.stderr.slice(-1500)}`);
    throw new Error(`${error.message}: ran ${ran()} of ${dispatched.length}; ${tails.join("\n")}`);
  });
  let state = await left(queue);
  for (const deadline = Date.now() + 30_000; Date.now() < deadline && state.unfinished > 0;) {
    await sleep(100);
    state = await left(queue);
  }
  assert.deepEqual(state, { unfinished: 0, failed: 0 }, "jobs left in the store");
}

/** Stops `work` processes and waits for them. */
async function stopAll(workers: readonly ChildProcess[]): Promise<void> {
  for (const child of workers) child.kill("SIGTERM");
  for (const child of workers) await child.exit(20_000).catch(() => {});
  for (const child of workers) await child[Symbol.asyncDispose]();
}

Deno.test({
  name:
    "Redis (AOF) killed with SIGKILL twice while three work processes drain and the test dispatches: nothing lost or completed twice, dispatch during the outage rejects naming the cause, workers resume without a restart",
  ignore: refusal !== null,
  async fn() {
    const password = "s3cret-pw";
    await using redis = await startPrivateRedis({ aof: true, password });
    await using tmp = await tempDir();
    const ledger = join(tmp.dir, "ledger.db");
    using ledgerDb = openReader(ledger);
    await using queue = await Queue.open({ url: redis.url, jobs: JOBS_URL });
    const total = 12_000;
    const dispatched = await queue.dispatchMany(
      tick,
      Array.from({ length: total }, (_, n) => ({ n })),
    );
    const workers = [0, 1, 2].map(() =>
      startWork(redis.url, ledger, ["--concurrency", "8", "--sleep-ms", "200"])
    );
    try {
      await Promise.all(workers.map((child) => workerStarted(child)));
      const ran = () => one<{ n: number }>(ledgerDb, "SELECT COUNT(*) AS n FROM ledger").n;
      const restarts: { resumeMs: number; rejectMs: number; said: string }[] = [];
      for (const share of [0.25, 0.6]) {
        await waitUntil(() => ran() >= total * share, {
          what: `${share * 100} % of the jobs run`,
          timeoutMs: 120_000,
        });
        await redis.kill();
        const started = performance.now();
        const said = await queue.dispatch(tick, { n: -1 }).then(
          (id) => `stored ${id}`,
          (error: Error) => error.message,
        );
        const rejectMs = performance.now() - started;
        const port = new URL(redis.url).port;
        assert.match(
          said,
          new RegExp(
            `^Cannot reach the Redis server at redis://:\\*\\*\\*@127\\.0\\.0\\.1:${port}: `,
          ),
        );
        assert.ok(!said.includes(password), `the message shows the password: ${said}`);
        await sleep(1_000);
        await redis.start();
        const upAt = Date.now();
        dispatched.push(await dispatchWhenBack(queue));
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
        restarts.push({ resumeMs: first!.start - upAt, rejectMs, said });
      }
      await drained(queue, ran, dispatched, workers);
      const figures = checkDrain(ledgerDb, dispatched, workers);
      for (const [n, restart] of restarts.entries()) {
        console.log(
          `Redis SIGKILL ${n + 1}: first job ${
            Math.round(restart.resumeMs)
          } ms after the server was back; dispatch while down rejected in ${
            Math.round(restart.rejectMs)
          } ms: ${restart.said.slice(0, 110)}`,
        );
      }
      for (const restart of restarts) {
        assert.ok(restart.rejectMs < 15_000, `a dispatch waited ${restart.rejectMs} ms`);
      }
      console.log(
        `Redis restarts (AOF): lost ${figures.lost}, run twice ${figures.runTwice}, completed twice ${figures.completedTwice}; the 3 work processes never restarted`,
      );
    } finally {
      await stopAll(workers);
    }
  },
});

Deno.test({
  name:
    "R04 on Redis (AOF): three work processes drain 20,000 jobs while the test dispatches 3,000 more and one process at a time is killed with SIGKILL, six times, and restarted: none lost, none completed twice, runs beyond the first only from killed processes and at most the jobs in flight at the kills",
  ignore: refusal !== null,
  async fn() {
    await using redis = await startPrivateRedis({ aof: true });
    await using tmp = await tempDir();
    const ledger = join(tmp.dir, "ledger.db");
    using ledgerDb = openReader(ledger);
    await using queue = await Queue.open({ url: redis.url, jobs: JOBS_URL });
    const first = 20_000;
    const kills = 6;
    const dispatched = await queue.dispatchMany(
      tick,
      Array.from({ length: first }, (_, n) => ({ n })),
    );
    // A short lease brings a killed process's jobs back soon.
    const flags = ["--concurrency", "8", "--sleep-ms", "200", "--lease-ms", "2000"];
    const slots = [0, 1, 2].map(() => startWork(redis.url, ledger, flags));
    const killed: ChildProcess[] = [];
    try {
      await Promise.all(slots.map((child) => workerStarted(child)));
      const ran = () => one<{ n: number }>(ledgerDb, "SELECT COUNT(*) AS n FROM ledger").n;
      const startedAt = Date.now();
      for (let kill = 0; kill < kills; kill++) {
        // A kill each time another tenth of the first jobs has run, so each lands mid-drain
        // at any speed, with a top-up dispatched in between.
        await waitUntil(() => ran() >= (first * (kill + 1)) / 10, {
          what: `${(kill + 1) * 10} % of the jobs run before kill ${kill + 1}`,
          timeoutMs: 180_000,
        });
        const slot = kill % slots.length;
        const victim = slots[slot]!;
        victim.kill("SIGKILL");
        await victim.status;
        killed.push(victim);
        slots[slot] = startWork(redis.url, ledger, flags);
        if (kill % 2 === 1) dispatched.push(...await topUp(queue, dispatched.length));
      }
      await drained(queue, ran, dispatched, [...slots, ...killed]);
      const seconds = (Date.now() - startedAt) / 1000;
      const figures = checkDrain(ledgerDb, dispatched, slots, killed);
      const inFlight = figures.inFlightAtKills.reduce((sum, n) => sum + n, 0);
      console.log(
        `R04 on Redis: ${killed.length} kills in ${seconds.toFixed(1)} s, ${dispatched.length} ` +
          `jobs; lost ${figures.lost}, completed twice ${figures.completedTwice}; duplicates ` +
          `(runs beyond the first) ${figures.extraRuns}, jobs in flight at the kills ${inFlight} ` +
          `(${figures.inFlightAtKills.join(", ")}); run twice without a kill ${figures.runTwice}`,
      );
      assert.ok(
        killed.every((child) =>
          one<{ n: number }>(
            ledgerDb,
            "SELECT COUNT(*) AS n FROM ledger WHERE pid = ?",
            child.pid,
          ).n > 0
        ),
        "a killed process had run nothing: its kill proves little",
      );
    } finally {
      await stopAll([...slots, ...killed]);
    }
  },
});

/** Dispatches one job once the server answers again (the client reconnects on its own). */
async function dispatchWhenBack(queue: Queue): Promise<number> {
  for (let attempt = 1;; attempt++) {
    try {
      return await queue.dispatch(tick, { n: -2 });
    } catch (error) {
      if (attempt >= 100) throw error;
      await sleep(100);
    }
  }
}

Deno.test({
  name:
    "Redis without persistence restarted empty: the store notices (every call fails saying it lost its data) instead of running on an empty queue, its workers stop (work exits 1), and a supervised work starts a worker that runs the jobs of the empty store",
  ignore: refusal !== null,
  async fn() {
    await using redis = await startPrivateRedis({ aof: false });
    await using tmp = await tempDir();
    const ledger = join(tmp.dir, "ledger.db");
    using ledgerDb = openReader(ledger);
    await using queue = await Queue.open({ url: redis.url, jobs: JOBS_URL });
    await queue.dispatchMany(tick, Array.from({ length: 100 }, (_, n) => ({ n })));
    const flags = ["--concurrency", "4", "--sleep-ms", "200"];
    const worker = startWork(redis.url, ledger, flags);
    // Under a prefix of its own: its next worker writes the empty store's keys there.
    const ownPrefix = `${redis.url}?prefix=supervised`;
    const supervised = startWork(ownPrefix, ledger, flags, { supervised: true });
    try {
      await workerStarted(worker);
      await workerStarted(supervised);
      await redis.kill();
      await redis.start();
      let said = "";
      await waitUntil(async () => {
        said = await queue.dispatch(tick, { n: -1 }).then(
          (id) => `stored ${id}`,
          (error: Error) => `${error.name}: ${error.message}`,
        );
        return /lost its data/.test(said);
      }, { what: "a dispatch refused for the lost data", timeoutMs: 30_000 });
      assert.match(said, /^QueueLostError: the Redis store lost its data: /);
      const status = await worker.exit(60_000);
      const stopped = cliEvents(worker, "worker:stop");
      assert.deepEqual(
        { code: status.code, reason: stopped.map((line) => line.reason) },
        { code: 1, reason: ["lost"] },
        worker.stderr.slice(-1_500),
      );
      assert.match(
        worker.stderr,
        /queue work: stopped: the Redis store lost its data: .*\(exit code 1\)/,
      );
      const keys = (await redis.command(["KEYS", "{renox}*"]) as unknown[]).length;
      console.log(`Redis restarted empty: dispatch said "${said.slice(0, 100)}"; keys now ${keys}`);
      assert.ok(keys <= 1, `the store wrote ${keys} keys on an empty server`);
      // A process that opens the queue again starts on the empty store; the supervisor's new
      // worker runs what it dispatches (ids start again from 1: told apart by the time).
      await using reopened = await Queue.open({ url: ownPrefix, jobs: JOBS_URL });
      const dispatchedAt = Date.now();
      await reopened.dispatch(tick, { n: 1_000 });
      await waitUntil(
        () =>
          one<{ n: number }>(
            ledgerDb,
            "SELECT COUNT(*) AS n FROM ledger WHERE start >= ?",
            dispatchedAt,
          )
            .n > 0,
        { what: "the job dispatched on the empty store run", timeoutMs: 60_000 },
      ).catch((error) => {
        throw new Error(
          `${error.message}; the supervised work said: ${supervised.stderr.slice(-1_500)}`,
        );
      });
      assert.match(supervised.stderr, /the worker exited with code 1; starting another/);
    } finally {
      await stopAll([worker, supervised]);
    }
  },
});

Deno.test({
  name:
    "Redis: every client connection killed every 1.5 s, and the functions flushed, during a drain: nothing lost or completed twice, wake-ups work again afterwards",
  ignore: refusal !== null,
  async fn() {
    await using redis = await startPrivateRedis({ aof: true });
    await using tmp = await tempDir();
    const ledger = join(tmp.dir, "ledger.db");
    using ledgerDb = openReader(ledger);
    await using queue = await Queue.open({ url: redis.url, jobs: JOBS_URL });
    const dispatched = await queue.dispatchMany(
      tick,
      Array.from({ length: 5_000 }, (_, n) => ({ n })),
    );
    // Idle workers look only every 2 s: a pick-up sooner than that came from a wake-up.
    const workers = [0, 1, 2].map(() =>
      startWork(redis.url, ledger, ["--concurrency", "8", "--sleep-ms", "2000"])
    );
    try {
      await Promise.all(workers.map((child) => workerStarted(child)));
      const ran = () => one<{ n: number }>(ledgerDb, "SELECT COUNT(*) AS n FROM ledger").n;
      let rounds = 0;
      let killed = 0;
      while ((ran() < dispatched.length || rounds < 3) && rounds < 30) {
        if (ran() >= dispatched.length) dispatched.push(...await topUp(queue, dispatched.length));
        killed += Number(await redis.command(["CLIENT", "KILL", "TYPE", "normal"]));
        killed += Number(await redis.command(["CLIENT", "KILL", "TYPE", "pubsub"]));
        if (rounds === 1) await redis.command(["FUNCTION", "FLUSH"]);
        rounds++;
        await sleep(1_500);
      }
      await drained(queue, ran, dispatched, workers);
      const pickups = await serialPickups(queue, ledgerDb, dispatched, 20);
      const figures = checkDrain(ledgerDb, dispatched, workers);
      const p50 = quantile(pickups, 0.5);
      console.log(
        `Redis connections killed: ${rounds} rounds, ${killed} connections; functions flushed once; ` +
          `lost ${figures.lost}, run twice ${figures.runTwice}, completed twice ${figures.completedTwice}; ` +
          `pick-up after: p50 ${p50.toFixed(1)} ms`,
      );
      assert.ok(killed > 0, "no connection was killed");
      // Polling alone would take up to 2 s: most pick-ups came from a wake-up.
      assert.ok(pickups.filter((ms) => ms < 1_000).length >= 10, `pick-ups ${pickups.join(", ")}`);
    } finally {
      await stopAll(workers);
    }
  },
});

Deno.test({
  name:
    "Redis out of memory (noeviction): a dispatch is refused whole, naming the cause, while workers keep draining",
  ignore: refusal !== null,
  async fn() {
    await using redis = await startPrivateRedis({
      aof: false,
      settings: ["--maxmemory", "8mb", "--maxmemory-policy", "noeviction"],
    });
    await using tmp = await tempDir();
    const ledger = join(tmp.dir, "ledger.db");
    using ledgerDb = openReader(ledger);
    await using queue = await Queue.open({ url: redis.url, jobs: JOBS_URL });
    const big = "x".repeat(2_000);
    const dispatched: number[] = [];
    let refusal = "";
    for (let round = 0; round < 200 && refusal === ""; round++) {
      await queue.dispatchMany(padded, Array.from({ length: 200 }, (_, n) => ({ n, pad: big })))
        .then((ids) => dispatched.push(...ids), (error: Error) => refusal = error.message);
    }
    assert.match(refusal, /OOM|memory/i, "no dispatch was refused");
    const before = await left(queue);
    assert.equal(
      before.unfinished,
      dispatched.length,
      "a refused dispatch stored part of its jobs",
    );
    const worker = startWork(redis.url, ledger, ["--concurrency", "8", "--sleep-ms", "200"]);
    try {
      await workerStarted(worker);
      const ran = () => one<{ n: number }>(ledgerDb, "SELECT COUNT(*) AS n FROM ledger").n;
      await drained(queue, ran, dispatched, [worker]);
      const id = await queue.dispatch(tick, { n: -1 });
      dispatched.push(id);
      await drained(queue, ran, dispatched, [worker]);
      const figures = checkDrain(ledgerDb, dispatched, [worker]);
      console.log(
        `Redis out of memory: ${dispatched.length - 1} jobs stored before the refusal ("${
          refusal.slice(0, 80)
        }"), all drained while full; lost ${figures.lost}, run twice ${figures.runTwice}`,
      );
    } finally {
      await stopAll([worker]);
    }
  },
});

Deno.test({
  name:
    "Redis: open() fails at once, with the server's answer, when the server refuses the password or the database number the URL gives",
  ignore: refusal !== null,
  async fn() {
    await using redis = await startPrivateRedis({ aof: false, password: "right-one" });
    const base = new URL(redis.url);
    const withAuth = (password: string, path: string) => {
      const url = new URL(base);
      url.password = password;
      url.pathname = path;
      return url.href;
    };
    for (
      const [url, answer] of [
        [withAuth("wrong-one", "/0"), /the server refused it: WRONGPASS /],
        [withAuth("", "/0"), /the server refused it: NOAUTH /],
        [withAuth("right-one", "/99"), /the server refused it: ERR DB index is out of range/],
      ] as const
    ) {
      // Without the refusal seen, open() would wait out connectTimeoutMs and say so instead.
      await assert.rejects(
        RedisStore.open(url, { prefix: "refused", connectTimeoutMs: 30_000 }),
        (error: Error) => {
          assert.match(error.message, /^could not connect to Redis at redis:\/\//);
          assert.match(error.message, answer);
          assert.ok(!error.message.includes("wrong-one"), error.message);
          return true;
        },
      );
    }
    const store = await RedisStore.open(withAuth("right-one", "/3"), { prefix: "refused" });
    await store.close();
  },
});

Deno.test({
  name:
    "Redis: clear() of 100,000 jobs goes in bounded chunks; the calls and the slowest command the server saw are printed",
  ignore: refusal !== null,
  async fn() {
    await using redis = await startPrivateRedis({ aof: false });
    await using queue = await Queue.open({ url: redis.url, jobs: JOBS_URL });
    for (let n = 0; n < 10; n++) {
      await queue.dispatchMany(
        tick,
        Array.from({ length: 10_000 }, (_, i) => ({ n: n * 10_000 + i })),
      );
    }
    // Redis 7 logs the commands a function runs in SLOWLOG too: count calls in the command stats,
    // and take the slowest from the latency monitor (whole ms, commands of 1 ms or more).
    await redis.command(["CONFIG", "SET", "latency-monitor-threshold", "1"]);
    await redis.command(["CONFIG", "RESETSTAT"]);
    await redis.command(["LATENCY", "RESET"]);
    const cleared = await queue.clear();
    assert.equal(cleared, 100_000);
    const stats = String(await redis.command(["INFO", "commandstats"]));
    const calls = Number(stats.match(/^cmdstat_fcall:calls=(\d+)/m)?.[1] ?? 0);
    const perCall = Number(stats.match(/^cmdstat_fcall:.*usec_per_call=([\d.]+)/m)?.[1] ?? 0);
    const latest = await redis.command(["LATENCY", "LATEST"]) as [string, number, number, number][];
    const slowest = latest.find(([event]) => event === "command")?.[3];
    console.log(
      `Redis clear of 100,000 jobs: ${calls} script calls, ${
        (perCall / 1000).toFixed(1)
      } ms each ` +
        `on average on the server, the slowest ${slowest === undefined ? "under 1" : slowest} ms`,
    );
    assert.ok(calls >= 100, `clear ran in ${calls} calls: chunks are too large`);
    assert.deepEqual(await left(queue), { unfinished: 0, failed: 0 });
  },
});

Deno.test({
  name:
    "Redis (AOF) killed and started again while a dispatchAndWait() job runs: the wait rides it out and resolves with the job's output",
  ignore: refusal !== null,
  async fn() {
    await using redis = await startPrivateRedis({ aof: true });
    await using queue = await Queue.open({ url: redis.url, jobs: [held] });
    await awaitThroughOutage(queue, { down: () => redis.kill(), up: () => redis.start() });
  },
});

Deno.test({
  name:
    "Redis down: every call (counts, result, failed, a transaction, dispatch) waits for the connection up to connectTimeoutMs, rejecting after it, and a call made while the server is down resolves once it is back",
  ignore: refusal !== null,
  async fn() {
    await using redis = await startPrivateRedis({ aof: true });
    const shortWait = await RedisStore.open(redis.url, { connectTimeoutMs: 1_000 });
    await using queue = await Queue.open({ store: shortWait, jobs: [tick] });
    const longWait = await RedisStore.open(redis.url, { connectTimeoutMs: 60_000 });
    await using patient = await Queue.open({ store: longWait, jobs: [tick] });
    const id = await queue.dispatch(tick, { n: 1 });
    await redis.kill();
    const calls: Record<string, () => Promise<unknown>> = {
      counts: () => queue.counts(),
      result: () => queue.result(id),
      failed: () => queue.failed(),
      transaction: () => queue.transaction((tx) => tx.dispatch(tick, { n: 2 })),
      dispatch: () => queue.dispatch(tick, { n: 3 }),
    };
    for (const [name, call] of Object.entries(calls)) {
      // The first call after the kill may go out on the dead connection and lose its reply;
      // the next ones find the client reconnecting.
      let said = "";
      for (let tries = 0; tries < 3 && !said.includes("no answer within"); tries++) {
        said = await call().then(() => "answered", (error: Error) => error.message);
      }
      assert.match(said, /Cannot reach the Redis server at .*: no answer within 1000 ms/, name);
    }
    const waiting = [
      patient.counts(),
      patient.result(id),
      patient.failed(),
      patient.transaction((tx) => tx.dispatch(tick, { n: 4 })),
    ];
    await redis.start();
    const [, result] = await Promise.all(waiting);
    assert.equal((result as { state: string } | null)?.state, "pending");
  },
});

Deno.test({
  name:
    "Redis restarted and still loading its data: every call (counts, result, signal, dispatch, failed, cancel) waits for the load up to connectTimeoutMs, rejecting after it saying the server is still loading",
  ignore: refusal !== null,
  async fn() {
    // Each key takes 100 ms to load, and the server answers between keys: a load of seconds.
    await using redis = await startPrivateRedis({
      aof: false,
      settings: ["--key-load-delay", "100000", "--loading-process-events-interval-bytes", "1024"],
    });
    const shortWait = await RedisStore.open(redis.url, { connectTimeoutMs: 1_000 });
    await using queue = await Queue.open({ store: shortWait, jobs: [tick, padded] });
    const longWait = await RedisStore.open(redis.url, { connectTimeoutMs: 120_000 });
    await using patient = await Queue.open({ store: longWait, jobs: [tick, padded] });
    const ids = await patient.dispatchMany(
      padded,
      Array.from({ length: 40 }, (_, n) => ({ n, pad: "x".repeat(2_000) })),
      { delayMs: 3_600_000 },
    );
    await redis.command(["SAVE"]);
    await redis.kill();
    await redis.start({ whileLoading: true });
    assert.match(String(await redis.command(["INFO", "persistence"])), /^loading:1/m);
    const answer = (call: Promise<unknown>) =>
      call.then(() => "answered", (error: Error) => `rejected: ${error.message}`);
    const waiting = {
      counts: answer(patient.counts()),
      result: answer(patient.result(ids[0]!)),
      signal: answer(patient.signal(ids[1]!, "go", 1)),
      dispatch: answer(patient.dispatch(tick, { n: 1 })),
      failed: answer(patient.failed()),
      cancel: answer(patient.cancel(ids[2]!)),
    };
    // The first call may find the client still reconnecting; the next ones find the server loading.
    let said = "";
    for (let tries = 0; tries < 5 && !said.includes("still loading"); tries++) {
      said = await queue.counts().then(() => "answered", (error: Error) => error.message);
    }
    const answers = Object.fromEntries(
      await Promise.all(
        Object.entries(waiting).map(async ([name, outcome]) => [name, await outcome]),
      ),
    );
    assert.deepEqual(answers, {
      counts: "answered",
      result: "answered",
      signal: "answered",
      dispatch: "answered",
      failed: "answered",
      cancel: "answered",
    });
    assert.match(
      said,
      /^The Redis server at redis:\/\/127\.0\.0\.1:\d+ is still loading its data: no answer within 1000 ms \(LOADING /,
    );
    assert.equal((await patient.result(ids[0]!))?.state, "pending");
  },
});

Deno.test({
  name:
    "Redis: a socket that connects and never answers (a frozen server, a proxy without a backend) has its unanswered handshake given up, and calls reach the server once it is back",
  ignore: refusal !== null,
  async fn() {
    // Every write in the AOF before its reply: the restart below loses nothing.
    await using redis = await startPrivateRedis({
      aof: true,
      settings: ["--appendfsync", "always"],
    });
    const store = await RedisStore.open(redis.url, { prefix: "mute", connectTimeoutMs: 1_000 });
    await using queue = await Queue.open({ store, jobs: [tick] });
    await queue.dispatch(tick, { n: 1 });
    await redis.kill();
    // In the server's place, a listener that accepts and keeps connections but reads and answers
    // nothing: the client reconnects to it and waits for its handshake's reply.
    const port = Number(new URL(redis.url).port);
    const mute = Deno.listen({ hostname: "127.0.0.1", port });
    const held: Deno.Conn[] = [];
    const accepting = (async () => {
      for await (const conn of mute) held.push(conn);
    })();
    try {
      await waitUntil(() => held.length > 0, { what: "the client connected to the mute listener" });
      mute.close();
      await accepting;
      // The real server is back, but the client's socket is still the mute one, kept open.
      await redis.start();
      const waited = Date.now();
      let id: number | null = null;
      await waitUntil(async () => {
        id = await queue.dispatch(tick, { n: 2 }).catch(() => null);
        return id !== null;
      }, { what: "a dispatch through once the server is back", timeoutMs: 60_000 });
      console.log(
        `Redis after a mute socket: a dispatch went through ${
          Date.now() - waited
        } ms after the server was back`,
      );
      assert.equal((await queue.counts()).default?.pending, 2);
    } finally {
      for (const conn of held) conn.close();
    }
  },
});
