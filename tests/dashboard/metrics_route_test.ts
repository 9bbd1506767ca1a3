/**
 * What the dashboard and the CLI show of observability: `GET /metrics`
 * (parsed with a real Prometheus text parser, matched against
 * `queue.metrics()` and `queue.counts()`, behind its gate, a failing queue
 * answered as on the other routes), job logs on the
 * job and failed-job pages (escaped, an encrypted job's never opened), and
 * the `logs` command.
 *
 * @module
 */
import assert from "node:assert/strict";
import parsePrometheus from "parse-prometheus-text-format";
import { z } from "zod";
import { defineJob, generateAppKey, PermanentError, Queue } from "../../mod.ts";
import { bearerToken, dashboard } from "../../src/dashboard.ts";
import { connection, fetchFrom, LOCAL, redisQueueToLose } from "../_dashboard.ts";
import { ManualClock, tempDir } from "../_helpers.ts";
import { runCli } from "../fixtures/cli/cli_process.ts";
import { redisTestUrl } from "../_redis.ts";
import { storeTest } from "../_stores.ts";
import { SqliteStore } from "../../src/stores/sqlite/mod.ts";

interface ParsedFamily {
  readonly name: string;
  readonly type: string;
  readonly metrics: readonly {
    readonly value?: string;
    readonly labels?: Record<string, string>;
    readonly count?: string;
    readonly sum?: string;
    readonly quantiles?: Record<string, string>;
  }[];
}

const HOSTILE_LOG = '<script>alert("log")</script>';

const works = defineJob({
  name: "works",
  queue: "mail",
  schema: z.object({ n: z.number() }),
  handle({ n }, ctx) {
    ctx.log(`handled ${n}`, { n });
  },
});
const retries = defineJob({
  name: "retries",
  schema: z.null(),
  maxAttempts: 2,
  backoff: [0],
  handle(_, ctx) {
    if (ctx.attempt === 1) throw new Error("once");
  },
});
const breaks = defineJob({
  name: "breaks",
  schema: z.null(),
  maxAttempts: 1,
  handle(_, ctx) {
    ctx.log(HOSTILE_LOG, { html: "<b>bold</b>" });
    throw new PermanentError("broken");
  },
});
const hidden = defineJob({
  name: "hidden",
  schema: z.object({ card: z.string() }),
  encrypted: true,
  maxAttempts: 1,
  handle({ card }, ctx) {
    ctx.log(`card ${card}`);
    throw new PermanentError("declined");
  },
});

async function openWorked(): Promise<
  { queue: Queue; ids: { [K in "works" | "retries" | "breaks" | "hidden"]: number } }
> {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 12));
  const queue = await Queue.open({
    path: ":memory:",
    jobs: [works, retries, breaks, hidden],
    clock,
    appKey: generateAppKey(),
  });
  const [first] = await queue.dispatchMany(works, [{ n: 1 }, { n: 2 }, { n: 3 }]);
  const ids = {
    works: first!,
    retries: await queue.dispatch(retries, null),
    breaks: await queue.dispatch(breaks, null),
    hidden: await queue.dispatch(hidden, { card: "4111-1111" }),
  };
  await queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 5 }).done;
  await queue.dispatch(works, { n: 4 }, { delayMs: 60_000 });
  return { queue, ids };
}

function family(families: readonly ParsedFamily[], name: string): ParsedFamily {
  const found = families.find((candidate) => candidate.name === name);
  assert.ok(found !== undefined, `no family ${name} in ${families.map((f) => f.name)}`);
  return found;
}

function sample(found: ParsedFamily, labels: Record<string, string>): number {
  const match = found.metrics.find((metric) =>
    Object.entries(labels).every(([key, value]) => metric.labels?.[key] === value)
  );
  assert.ok(match !== undefined, `${found.name} has no sample ${JSON.stringify(labels)}`);
  return Number(match.value ?? match.count);
}

Deno.test("GET /metrics parses as Prometheus text, and its figures match queue.metrics() and queue.counts()", async () => {
  const { queue } = await openWorked();
  await using _ = queue;
  const response = await fetchFrom(dashboard(queue, { metrics: true }), "/metrics");
  assert.equal(response.status, 200);
  assert.match(response.headers.get("content-type")!, /^text\/plain; version=0\.0\.4/);
  const families = parsePrometheus(await response.text()) as ParsedFamily[];
  const metrics = await queue.metrics({ windowMs: 7 * 24 * 60 * 60 * 1_000 });
  assert.ok(metrics.byJob.length >= 4);
  for (const job of metrics.byJob) {
    const labels = { queue: job.queue, job: job.name };
    assert.equal(sample(family(families, "renox_jobs_completed_total"), labels), job.completed);
    assert.equal(sample(family(families, "renox_jobs_failed_total"), labels), job.failed);
    assert.equal(sample(family(families, "renox_jobs_retried_total"), labels), job.retried);
    assert.equal(sample(family(families, "renox_jobs_expired_total"), labels), job.expired);
    const duration = family(families, "renox_job_duration_seconds");
    assert.equal(duration.type, "SUMMARY");
    assert.equal(sample(duration, labels), job.runs);
  }
  assert.equal(family(families, "renox_jobs_completed_total").type, "COUNTER");
  assert.equal(
    sample(family(families, "renox_jobs_completed_total"), { queue: "mail", job: "works" }),
    3,
  );
  assert.equal(
    sample(family(families, "renox_jobs_retried_total"), { queue: "default", job: "retries" }),
    1,
  );
  const counts = await queue.counts();
  for (const [name, figures] of Object.entries(counts)) {
    assert.equal(sample(family(families, "renox_jobs_pending"), { queue: name }), figures.pending);
    assert.equal(sample(family(families, "renox_jobs_delayed"), { queue: name }), figures.delayed);
    assert.equal(sample(family(families, "renox_failed_jobs"), { queue: name }), figures.failed);
  }
  assert.equal(sample(family(families, "renox_jobs_delayed"), { queue: "mail" }), 1);
  assert.equal(family(families, "renox_jobs_pending").type, "GAUGE");
});

Deno.test("GET /metrics: a summary's sum never reads less than the scrape before (no float error of mean × runs)", async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 12));
  await using queue = await Queue.open({ path: ":memory:", jobs: [works], clock });
  const handler = dashboard(queue, { metrics: true });
  const waitSum = async () => {
    const families = parsePrometheus(await (await fetchFrom(handler, "/metrics")).text());
    const found = family(families as ParsedFamily[], "renox_job_wait_seconds").metrics
      .find((metric) => metric.labels?.job === "works");
    return [Number(found?.sum), Number(found?.count)];
  };
  await queue.dispatch(works, { n: 0 });
  clock.advance(29); // claimed 29 ms after it was due
  await queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 5 }).done;
  assert.deepEqual(await waitSum(), [0.029, 1]);
  // 49 more claimed as they came due: the mean is 0.58 ms, and 0.58 × 50 is 28.999999999999996.
  await queue.dispatchMany(works, Array.from({ length: 49 }, (_, n) => ({ n })));
  await queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 5 }).done;
  assert.deepEqual(await waitSum(), [0.029, 50]);
});

Deno.test("GET /metrics: a counter never falls as minutes leave the rollup's 7 days (their counts are carried)", async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 12));
  await using queue = await Queue.open({ path: ":memory:", jobs: [works], clock });
  const handler = dashboard(queue, { metrics: true });
  const completed = async () => {
    const text = await (await fetchFrom(handler, "/metrics")).text();
    return sample(
      family(parsePrometheus(text) as ParsedFamily[], "renox_jobs_completed_total"),
      { queue: "mail", job: "works" },
    );
  };
  const workAll = () => queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 5 }).done;
  await queue.dispatchMany(works, [{ n: 1 }, { n: 2 }]);
  await workAll();
  assert.equal(await completed(), 2);
  clock.advance(8 * 24 * 60 * 60 * 1_000); // the first minute left the 7 days; the next settle prunes it
  await queue.dispatch(works, { n: 3 });
  await workAll();
  assert.equal(await completed(), 3);
  assert.equal(
    (await queue.metrics({ windowMs: 7 * 24 * 60 * 60 * 1_000 })).byJob[0]?.completed,
    1,
  );
  assert.equal((await queue.metrics({ windowMs: Infinity })).byJob[0]?.completed, 3);
});

Deno.test("GET /metrics speaks OpenMetrics when asked, and is off unless metrics: true", async () => {
  const { queue } = await openWorked();
  await using _ = queue;
  const off = await fetchFrom(dashboard(queue), "/metrics");
  assert.equal(off.status, 404);
  await off.body?.cancel();
  const response = await fetchFrom(dashboard(queue, { metrics: true }), "/metrics", {
    headers: { accept: "application/openmetrics-text; version=1.0.0" },
  });
  assert.match(response.headers.get("content-type")!, /^application\/openmetrics-text/);
  const text = await response.text();
  assert.ok(text.endsWith("# EOF\n"));
  assert.match(text, /^# TYPE renox_jobs_completed counter$/m);
  assert.match(text, /^renox_jobs_completed_total\{queue="mail",job="works"\} 3$/m);
  assert.match(text, /^# UNIT renox_job_duration_seconds seconds$/m);
});

Deno.test("GET /metrics is behind the dashboard's gate, or behind metricsGate for a scraper's token", async () => {
  const { queue } = await openWorked();
  await using _ = queue;
  const remote = connection("203.0.113.9");
  const gated = dashboard(queue, { metrics: true });
  const refused = await fetchFrom(gated, "/metrics", {}, remote);
  assert.equal(refused.status, 403);
  await refused.body?.cancel();
  const token = "scrape-token-0123456789";
  const scraped = dashboard(queue, { metrics: true, metricsGate: bearerToken(token) });
  for (
    const [authorization, status] of [
      [`Bearer ${token}`, 200],
      [`bearer ${token}`, 200], // the scheme's name is case-insensitive
      ["Bearer wrong", 403],
      [`Basic ${token}`, 403],
      [token, 403],
    ] as const
  ) {
    const response = await fetchFrom(scraped, "/metrics", { headers: { authorization } }, remote);
    assert.equal(response.status, status, authorization);
    await response.body?.cancel();
  }
  // The token opens /metrics only: the pages still answer to the dashboard's gate.
  const page = await fetchFrom(
    scraped,
    "/",
    { headers: { authorization: `Bearer ${token}` } },
    remote,
  );
  assert.equal(page.status, 403);
  await page.body?.cancel();
  assert.throws(() => bearerToken("short"), /at least 16 characters/);
  assert.throws(
    () => dashboard(queue, { metrics: "yes" as unknown as boolean }),
    /metrics must be true or false/,
  );
});

storeTest(
  "GET /metrics answers 503 on a closed queue, as the other routes do, and an unexpected error (a TypeError too: /metrics takes no input to refuse) 500 without details, reported as queue:error",
  async (db) => {
    const queue = await db.open({ jobs: [works] });
    try {
      const errors: string[] = [];
      queue.addEventListener("queue:error", ({ detail }) => errors.push(detail.during));
      const handler = dashboard(queue, { metrics: true });
      // A queue whose figures throw something unexpected: the answer must not leak it.
      const metrics = queue.metrics.bind(queue);
      for (
        const thrown of [new Error("disk on fire at /secret/path"), new TypeError("/secret/path")]
      ) {
        Object.defineProperty(queue, "metrics", {
          value: () => Promise.reject(thrown),
          configurable: true,
        });
        const broken = await fetchFrom(handler, "/metrics");
        assert.equal(broken.status, 500, thrown.name);
        const text = await broken.text();
        assert.doesNotMatch(text, /secret\/path/);
        assert.equal(text, "500 Internal Server Error: the dashboard failed; see the app's log\n");
      }
      assert.deepEqual(errors, ["dashboard GET /metrics", "dashboard GET /metrics"]);
      Object.defineProperty(queue, "metrics", { value: metrics });
      await queue.close();
      const closed = await fetchFrom(handler, "/metrics");
      assert.equal(closed.status, 503);
      assert.match(closed.headers.get("content-type")!, /^text\/plain/);
      assert.equal(await closed.text(), "503 Service Unavailable: the queue is closed\n");
      assert.equal(errors.length, 2, "a closed queue is no unexpected error");
    } finally {
      await queue.close();
    }
  },
);

Deno.test({
  name:
    "GET /metrics answers 503 naming the cause on a Redis store that lost its data, as the other routes do, not reported as unexpected",
  ignore: redisTestUrl() === null,
  async fn() {
    await using lost = await redisQueueToLose(redisTestUrl()!, works);
    const handler = dashboard(lost.queue, { metrics: true });
    const before = await fetchFrom(handler, "/metrics");
    assert.equal(before.status, 200);
    await before.body?.cancel();
    await lost.lose(); // as a restart without persistence leaves it
    const response = await fetchFrom(handler, "/metrics");
    assert.equal(response.status, 503);
    assert.match(
      await response.text(),
      /^503 Service Unavailable: the Redis store lost its data: /,
    );
    assert.deepEqual(lost.errors, []);
  },
});

Deno.test("the failed job page and the job page show its log, escaped; an encrypted job's lines stay closed", async () => {
  const { queue, ids } = await openWorked();
  await using _ = queue;
  const handler = dashboard(queue);
  const failedPage = await (await fetchFrom(handler, `/failed/${ids.breaks}`, {}, LOCAL)).text();
  assert.ok(!failedPage.includes(HOSTILE_LOG), "the log line is escaped");
  assert.ok(failedPage.includes("&lt;script&gt;alert(&quot;log&quot;)&lt;/script&gt;"));
  assert.ok(failedPage.includes("&lt;b&gt;bold&lt;/b&gt;"));
  const hiddenPage = await (await fetchFrom(handler, `/failed/${ids.hidden}`)).text();
  assert.ok(!hiddenPage.includes("4111-1111"));
  assert.match(hiddenPage, /encrypted — the dashboard never decrypts/);
  const jobPage = await (await fetchFrom(handler, `/jobs/${ids.works}`)).text();
  assert.match(jobPage, /handled 1/);
  const api = await (await fetchFrom(handler, `/api/jobs/${ids.works}`)).json();
  assert.equal(api.lines[0].message, "handled 1");
  assert.deepEqual(api.lines[0].fields, { n: 1 });
  // queue.logs() itself opens them, with the key.
  assert.equal((await queue.logs(ids.hidden!))[0]!.message, "card 4111-1111");
});

Deno.test("the logs command prints a job's log, control characters escaped", async () => {
  await using dir = await tempDir();
  const db = `${dir.dir}/queue.db`;
  const noisy = defineJob({
    name: "noisy",
    schema: z.null(),
    handle(_, ctx) {
      ctx.log("first\u001b[31m red", { step: 1 });
      ctx.log("second");
    },
  });
  {
    await using queue = await Queue.open({ path: db, jobs: [noisy] });
    await queue.dispatch(noisy, null);
    await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;
  }
  const result = await runCli(["logs", "1", "--db", db]);
  assert.equal(result.code, 0, result.stderr);
  const lines = result.stdout.trim().split("\n");
  assert.equal(lines.length, 2);
  assert.match(lines[0]!, /#1 info {2}first\\x1b\[31m red \{"step":1\}$/);
  assert.match(lines[1]!, /#1 info {2}second$/);
  const json = await runCli(["logs", "1", "--db", db, "--json"]);
  assert.equal(JSON.parse(json.stdout)[1].message, "second");
  const none = await runCli(["logs", "99", "--db", db]);
  assert.equal(none.code, 1, none.stdout);
  assert.match(none.stderr, /^queue logs: no job 99 \(it never was/);
  const bad = await runCli(["logs", "x", "--db", db]);
  assert.equal(bad.code, 2);
});

Deno.test("the logs command opens an encrypted job's lines with APP_KEY or APP_PREVIOUS_KEYS, and only with them", async () => {
  await using dir = await tempDir();
  const db = `${dir.dir}/queue.db`;
  const appKey = generateAppKey();
  const secret = defineJob({
    name: "secret",
    schema: z.null(),
    encrypted: true,
    handle(_, ctx) {
      ctx.log("card 4111-1111", { last4: "1111" });
    },
  });
  {
    await using queue = await Queue.open({ path: db, jobs: [secret], appKey });
    await queue.dispatch(secret, null);
    await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;
  }
  const opened = await runCli(["logs", "1", "--db", db], { APP_KEY: appKey });
  assert.equal(opened.code, 0, opened.stderr);
  assert.match(opened.stdout, /#1 info {2}card 4111-1111 \{"last4":"1111"\}$/m);
  const json = await runCli(["logs", "1", "--db", db, "--json"], { APP_KEY: appKey });
  assert.equal(JSON.parse(json.stdout)[0].message, "card 4111-1111");
  const rotatedAway = await runCli(["logs", "1", "--db", db], {
    APP_KEY: "",
    APP_PREVIOUS_KEYS: `${generateAppKey()},${appKey}`,
  });
  assert.equal(rotatedAway.code, 0, rotatedAway.stderr);
  assert.match(rotatedAway.stdout, /#1 info {2}card 4111-1111 \{"last4":"1111"\}$/m);
  const closed = await runCli(["logs", "1", "--db", db], { APP_KEY: "", APP_PREVIOUS_KEYS: "" });
  assert.equal(closed.code, 0, closed.stderr);
  assert.match(closed.stdout, /\(encrypted line, not opened\)/);
  assert.doesNotMatch(closed.stdout, /4111/);
  const wrong = await runCli(["logs", "1", "--db", db], { APP_KEY: generateAppKey() });
  assert.match(
    wrong.stdout,
    /cannot be opened: sealed with a key this queue does not have, or changed since/,
  );
  assert.doesNotMatch(wrong.stdout, /4111/);
});

Deno.test("the logs and signal commands refuse a set APP_KEY or APP_PREVIOUS_KEYS entry that is not a key, naming it as set, with APP_KEY or without", async () => {
  await using dir = await tempDir();
  const db = `${dir.dir}/queue.db`;
  const appKey = generateAppKey();
  const secret = defineJob({
    name: "secret",
    schema: z.null(),
    encrypted: true,
    handle(_, ctx) {
      ctx.log("card 4111-1111");
    },
  });
  let parked: number;
  {
    await using queue = await Queue.open({ path: db, jobs: [secret], appKey });
    await queue.dispatch(secret, null);
    await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;
    parked = await queue.dispatch(secret, null, { delayMs: 3_600_000 });
  }
  const short = "c2hvcnQ="; // base64 of 5 bytes
  const cases: [env: Record<string, string>, name: string][] = [
    // Before, the well-formed previous key beside a bad one was left unused with it: not opened.
    [{ APP_KEY: "", APP_PREVIOUS_KEYS: `${short},${appKey}` }, "APP_PREVIOUS_KEYS\\[0\\]"],
    [{ APP_KEY: "", APP_PREVIOUS_KEYS: `${appKey}, ,${short}` }, "APP_PREVIOUS_KEYS\\[2\\]"],
    [{ APP_KEY: appKey, APP_PREVIOUS_KEYS: `,${short}` }, "APP_PREVIOUS_KEYS\\[1\\]"],
    // Before, named as the option the CLI passed it as: appKey.
    [{ APP_KEY: short, APP_PREVIOUS_KEYS: appKey }, "APP_KEY"],
  ];
  for (const [env, name] of cases) {
    for (const args of [["logs", "1"], ["signal", String(parked), "go", '{"n":1}']]) {
      const label = `${args[0]} with ${JSON.stringify(env)}`;
      const result = await runCli([...args, "--db", db], env);
      assert.equal(result.code, 1, `${label}: ${result.stdout}${result.stderr}`);
      assert.match(
        result.stderr,
        new RegExp(`^queue ${args[0]}: ${name} must be the base64 of 32 random bytes .*\\n$`),
        label,
      );
      assert.equal(result.stdout, "", label);
      assert.ok(!result.stderr.includes(short) && !result.stderr.includes(appKey), label);
    }
  }
  await using store = await SqliteStore.open(db);
  assert.deepEqual((await store.jobSteps(parked)).signals, [], "no signal was stored");
});
