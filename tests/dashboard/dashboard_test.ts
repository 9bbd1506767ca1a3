/**
 * The dashboard's pages, JSON and actions, through its handler with plain
 * `Request` objects, on a real queue in memory. Security cases are in
 * dashboard_security_test.ts.
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, Queue } from "../../mod.ts";
import { dashboard } from "../../src/dashboard.ts";
import { migrations } from "../../migrations/sqlite/mod.ts";
import { SqliteStore } from "../../src/stores/sqlite/mod.ts";
import {
  drainQueue,
  failedIds,
  fetchFrom,
  HOSTILE,
  hostile,
  LOCAL,
  NOON,
  openQueue,
  openSession,
  ORIGIN,
  plain,
  postForm,
  redisQueueToLose,
  secret,
} from "../_dashboard.ts";
import { DatabaseSync } from "node:sqlite";
import { ManualClock, tempDir, waitUntil } from "../_helpers.ts";
import { redisTestUrl } from "../_redis.ts";

/** The JSON of `path`, checked to be a 200 JSON response. */
async function json<T = Record<string, unknown>>(
  handler: ReturnType<typeof dashboard>,
  path: string,
): Promise<T> {
  const response = await fetchFrom(handler, path);
  assert.equal(response.status, 200, `${path}: ${response.status}`);
  assert.equal(response.headers.get("content-type"), "application/json; charset=utf-8");
  return await response.json() as T;
}

/** The HTML of `path`, checked to be a 200 page. */
async function page(handler: ReturnType<typeof dashboard>, path: string): Promise<string> {
  const response = await fetchFrom(handler, path);
  assert.equal(response.status, 200, `${path}: ${response.status}`);
  assert.equal(response.headers.get("content-type"), "text/html; charset=utf-8");
  return await response.text();
}

/** Collapses whitespace, so markup can be matched whatever its line breaks. */
const squash = (html: string) => html.replace(/\s+/g, " ").replace(/> </g, "><");

Deno.test("dashboard: the overview counts each queue's jobs by state and charts the last hour's minutes", async () => {
  const { queue, clock } = await openQueue();
  await using _ = queue;
  await queue.dispatch(plain, { n: 0 }, { expireInMs: 500 });
  clock.advance(1_000); // past its expiry, within the same minute
  await queue.dispatchMany(plain, [{ n: 1 }, { n: 2 }, { n: 3 }]);
  await queue.dispatch(hostile, { note: HOSTILE.note });
  await drainQueue(queue);
  await queue.dispatch(plain, { n: 4 }, { delayMs: 60_000 });
  await queue.dispatch(plain, { n: 5 });
  const handler = dashboard(queue);

  const data = await json<{
    counts: Record<string, unknown>;
    metrics: {
      perMinute: { minute: string; completed: number; failed: number }[];
      byQueue: Record<string, { completed: number; failed: number; runs: number }>;
    };
    workers: unknown[];
  }>(handler, "/api/overview");
  assert.deepEqual(data.counts, {
    default: { pending: 1, delayed: 1, reserved: 0, failed: 0, running: [] },
    [HOSTILE.queue]: { pending: 0, delayed: 0, reserved: 0, failed: 1, running: [] },
  });
  assert.equal(data.metrics.perMinute.length, 60);
  assert.deepEqual(data.metrics.perMinute.at(-1), {
    minute: new Date(NOON).toISOString(),
    completed: 3,
    failed: 1,
    retried: 0,
    expired: 1,
  });
  assert.deepEqual(
    data.metrics.perMinute.slice(0, -1).filter((minute) => minute.completed + minute.failed > 0),
    [],
  );
  assert.deepEqual(
    Object.fromEntries(
      Object.entries(data.metrics.byQueue).map((
        [name, q],
      ) => [name, [q.completed, q.failed, q.runs]]),
    ),
    { default: [3, 0, 3], [HOSTILE.queue]: [0, 1, 1] },
  );
  assert.deepEqual(data.workers, [], "the drained worker removed its row when it stopped");

  const html = squash(await page(handler, "/"));
  const cells = [["pending", 1], ["delayed", 1], ["reserved", 0], ["failed", 0]] as const;
  for (const [field, value] of cells) {
    assert.match(
      html,
      new RegExp(`data-live="counts/default/${field}" data-empty="0">${value}</td>`),
      field,
    );
  }
  assert.match(html, /data-live="counts\/javascript:void\/failed" data-empty="0">1<\/td>/);
  assert.match(html, /<a href="\/jobs\?queue=javascript%3Avoid">javascript:void<\/a>/);
  assert.match(html, /Jobs completed: 3/);
  assert.match(html, /Jobs failed for good: 1/);
  assert.match(html, /Jobs expired before they started: 1\./);
  assert.match(
    html,
    /<a href="\/jobs\?queue=default">default<\/a><\/th>(<td[^>]*>[^<]*<\/td>){7}<td class="num">1<\/td>/,
    "the default queue's row: 1 expired in the last hour, after pending, delayed, running, failed, completed, failed and retried",
  );
  assert.equal(html.match(/<svg class="chart"/g)?.length, 2, "two charts");
  assert.equal(html.match(/<rect class="bar ok"/g)?.length, 60, "a bar per minute");
  assert.match(html, /<title>12:00 UTC: 3<\/title>/, "the last minute's bar says its count");
  assert.match(html, /No worker has written a heartbeat in the last 30 s/);
});

const gate = { started: Promise.withResolvers<void>(), finish: Promise.withResolvers<void>() };
const slow = defineJob({
  name: "slow",
  queue: "media",
  schema: z.object({ file: z.string() }),
  async handle(_, ctx) {
    ctx.progress(40);
    gate.started.resolve();
    await gate.finish.promise;
  },
});

Deno.test("dashboard: the jobs page lists pending, delayed and running jobs with filters and pages; running ones with progress; the overview shows the worker", async () => {
  const clock = new ManualClock(NOON);
  await using queue = await Queue.open({ path: ":memory:", jobs: [plain, slow], clock });
  const handler = dashboard(queue);
  const [runningId] = await queue.dispatchMany(slow, [{ file: "a.mov" }]);
  const worker = queue.work({ executor: "isolate", queues: ["media"], pollMs: 5, leaseMs: 600 });
  try {
    await gate.started.promise;
    await waitUntil(async () => {
      const [job] = (await queue.jobs({ state: "running" })).jobs;
      return job?.progress === 40;
    }, { what: "progress written" });
    const pendingIds = await queue.dispatchMany(
      plain,
      Array.from({ length: 30 }, (_, n) => ({ n })),
    );
    const [delayedId] = await queue.dispatchMany(plain, [{ n: 99 }], { delayMs: 5_000 });

    const all = await json<{ total: number; limit: number; page: number; jobs: { id: number }[] }>(
      handler,
      "/api/jobs",
    );
    assert.deepEqual([all.total, all.limit, all.page], [32, 25, 1]);
    assert.deepEqual(all.jobs.map((job) => job.id), [runningId, ...pendingIds.slice(0, 24)]);
    const second = await json<{ jobs: { id: number }[] }>(handler, "/api/jobs?page=2");
    assert.deepEqual(second.jobs.map((job) => job.id), [...pendingIds.slice(24), delayedId]);

    const running = await json<{ total: number; jobs: Record<string, unknown>[] }>(
      handler,
      "/api/jobs?state=running&queue=media&name=slow",
    );
    assert.equal(running.total, 1);
    const { availableAt, createdAt, ...fields } = running.jobs[0]!;
    assert.deepEqual(fields, {
      id: runningId,
      queue: "media",
      name: "slow",
      state: "running",
      priority: 0,
      attempts: 1,
      progress: 40,
      batchId: null,
      lastError: null,
    });
    assert.equal(availableAt, new Date(NOON + 600).toISOString(), "the lease's end");
    assert.equal(createdAt, new Date(NOON).toISOString());
    const delayed = await json<{ total: number; jobs: { id: number }[] }>(
      handler,
      "/api/jobs?state=delayed",
    );
    assert.deepEqual([delayed.total, delayed.jobs.map((job) => job.id)], [1, [delayedId]]);

    const html = squash(await page(handler, "/jobs?state=running"));
    assert.match(html, /<option value="running" selected>Running<\/option>/);
    assert.match(html, /<progress max="100" value="40" data-live="jobs\/0\/progress"><\/progress>/);
    assert.match(html, /data-format="percent">40%<\/span>/);
    assert.match(html, /1–1 of 1/);
    const first = squash(await page(handler, "/jobs?limit=10&page=2"));
    assert.match(first, /11–20 of 32/);
    assert.match(first, /<a href="\/jobs\?limit=10&amp;page=1" rel="prev">/);
    assert.match(first, /<a href="\/jobs\?limit=10&amp;page=3" rel="next">/);

    const overview = await json<{ workers: Record<string, unknown>[] }>(handler, "/api/overview");
    assert.equal(overview.workers.length, 1);
    const { id, startedAt, lastSeenAt, running: runningSeen, ...seen } = overview.workers[0]!;
    assert.match(String(id), /^[0-9a-f-]{36}$/);
    // Its first heartbeat, before it claimed, says 0; a later one (on a slow machine) says 1.
    assert.ok(runningSeen === 0 || runningSeen === 1, `running: ${runningSeen}`);
    assert.deepEqual(seen, {
      host: Deno.hostname(),
      pid: Deno.pid,
      queues: ["media"],
      concurrency: 1,
      names: ["plain", "slow"],
      schemaStep: migrations.at(-1)!.version,
    });
    assert.equal(startedAt, new Date(NOON).toISOString());
    assert.equal(lastSeenAt, new Date(NOON).toISOString());
    await waitUntil(async () => {
      const [seen] = await queue.workers();
      return seen?.running === 1;
    }, { what: "a heartbeat counting the running job" });
    const overviewHtml = squash(await page(handler, "/"));
    assert.match(overviewHtml, /<span data-live="workers\/0\/running">1<\/span> \/ 1/);
    assert.match(
      overviewHtml,
      /data-live="workers\/length" data-empty="0">1<\/span> in the last 30 s/,
    );
  } finally {
    gate.finish.resolve();
    await worker.stop();
  }
  assert.deepEqual(await queue.workers(), [], "a stopped worker removes its row");
});

Deno.test("dashboard: the failed page lists failed jobs; a job's page shows its error, stack, attempts and payload, or only that it is encrypted", async () => {
  const { queue } = await openQueue();
  await using _ = queue;
  const [hostileId] = await queue.dispatchMany(hostile, [{ note: HOSTILE.note }]);
  const [secretId] = await queue.dispatchMany(secret, [{ card: "4242-SECRET" }]);
  await drainQueue(queue);
  const handler = dashboard(queue);

  const list = await json<{ total: number; hasMore: boolean; jobs: Record<string, unknown>[] }>(
    handler,
    "/api/failed",
  );
  assert.equal(list.total, 2);
  assert.equal(list.hasMore, false);
  assert.deepEqual(list.jobs.map((job) => [job.id, job.name, job.attempts]), [
    [secretId, "secret", 1],
    [hostileId, HOSTILE.name, 1],
  ]);
  assert.ok(list.jobs.every((job) => !("payload" in job) && !("stack" in job)));
  const listHtml = squash(await page(handler, "/failed"));
  assert.match(listHtml, new RegExp(`<tr id="failed-${hostileId}">`));
  assert.match(listHtml, /action="\/failed\/retry-all"/);
  assert.match(listHtml, new RegExp(`action="/failed/${secretId}/retry"`));
  assert.match(listHtml, /<td class="error">PermanentError: card declined<\/td>/);

  const detail = await json<{ job: Record<string, unknown>; encrypted: boolean; payload: unknown }>(
    handler,
    `/api/failed/${hostileId}`,
  );
  assert.equal(detail.encrypted, false);
  assert.deepEqual(detail.payload, { note: HOSTILE.note });
  assert.equal(detail.job.error, `PermanentError: ${HOSTILE.error}`);
  assert.match(String(detail.job.stack), /^PermanentError: /);
  const hostileHtml = await page(handler, `/failed/${hostileId}`);
  assert.ok(
    hostileHtml.includes(
      "{\n  &quot;note&quot;: &quot;&lt;script&gt;alert(&#39;payload&#39;)&lt;/script&gt;\\&quot;&gt;&lt;img src=x onerror=alert(2)&gt;&quot;\n}",
    ),
    "the payload, pretty-printed and escaped",
  );
  assert.match(squash(hostileHtml), /<dt>Attempts<\/dt><dd>1<\/dd>/);

  const secretData = await json<{ encrypted: boolean; payload: unknown }>(
    handler,
    `/api/failed/${secretId}`,
  );
  assert.deepEqual([secretData.encrypted, secretData.payload], [true, null]);
  const secretHtml = await page(handler, `/failed/${secretId}`);
  assert.match(secretHtml, /<strong>encrypted<\/strong>/);
  const stored = (await queue.failedJob(secretId!))!.payload;
  assert.ok(!secretHtml.includes("4242-SECRET"), "no plaintext");
  assert.ok(!secretHtml.includes(stored.slice(5, 30)), "no ciphertext either");
});

Deno.test("dashboard: retry, forget, retry all and flush change the queue and go back to the list with a notice", async () => {
  const { queue } = await openQueue();
  await using _ = queue;
  await queue.dispatchMany(hostile, Array.from({ length: 5 }, (_, n) => ({ note: `${n}` })));
  await drainQueue(queue);
  const [e, d, c, b, a] = await failedIds(queue) as [number, number, number, number, number];
  const handler = dashboard(queue);
  const session = await openSession(handler);

  const retried = await postForm(handler, `/failed/${a}/retry`, session);
  assert.equal(retried.status, 303);
  assert.equal(retried.headers.get("location"), "/failed?notice=retried&count=1");
  assert.deepEqual(await failedIds(queue), [e, d, c, b]);
  assert.equal((await queue.jobs({ state: "pending" })).jobs[0]?.id, a, "back on its queue");
  const after = squash(await page(handler, retried.headers.get("location")!));
  assert.match(after, /<p class="notice" role="status">Put 1 failed job back on its queue.<\/p>/);
  assert.doesNotMatch(after, new RegExp(`<tr id="failed-${a}">`));

  const forgotten = await postForm(handler, `/failed/${b}/forget`, session);
  assert.equal(forgotten.headers.get("location"), "/failed?notice=forgotten&count=1");
  assert.deepEqual(await failedIds(queue), [e, d, c]);
  const gone = await postForm(handler, `/failed/${b}/retry`, session);
  assert.equal(gone.headers.get("location"), "/failed?notice=gone&count=0");

  const unconfirmed = await postForm(handler, "/failed/flush", session);
  assert.equal(unconfirmed.headers.get("location"), "/failed?notice=flush-unconfirmed&count=0");
  assert.deepEqual(await failedIds(queue), [e, d, c]);

  const all = await postForm(handler, "/failed/retry-all", session, {
    headers: { accept: "application/json" },
  });
  assert.equal(all.status, 200);
  assert.deepEqual(await all.json(), { ok: true, notice: "retried", count: 3, back: "/failed" });
  assert.deepEqual(await failedIds(queue), []);

  await drainQueue(queue);
  assert.equal((await failedIds(queue)).length, 4);
  const flushed = await postForm(handler, "/failed/flush", session, { fields: { confirm: "yes" } });
  assert.equal(flushed.headers.get("location"), "/failed?notice=flushed&count=4");
  assert.deepEqual(await failedIds(queue), []);
});

Deno.test("dashboard: an action that changed nothing answers JSON 404 when its target is not there, 409 when its state refuses the action, 400 without the flush's confirmation", async () => {
  const { queue } = await openQueue();
  await using _ = queue;
  const done = await queue.dispatch(plain, { n: 1 });
  const batch = await queue.batch("finished").push(plain, { n: 2 }).dispatch();
  const flow = queue.flow("finished");
  flow.add(plain, { n: 3 }, { key: "a" });
  const flowId = await flow.dispatch();
  await drainQueue(queue);
  const handler = dashboard(queue);
  const session = await openSession(handler, "/");
  const answer = async (path: string, fields: Record<string, string> = {}) => {
    const response = await postForm(handler, path, session, {
      fields,
      headers: { accept: "application/json" },
    });
    const { notice } = await response.json();
    return [response.status, notice];
  };
  assert.deepEqual(await answer("/failed/424242/retry"), [404, "gone"]);
  assert.deepEqual(await answer("/jobs/424242/cancel"), [404, "gone"]);
  assert.deepEqual(await answer("/schedules/nope/pause"), [404, "schedule-gone"]);
  assert.deepEqual(await answer("/batches/424242/cancel"), [404, "gone"]);
  assert.deepEqual(await answer("/flows/424242/cancel"), [404, "gone"]);
  assert.deepEqual(await answer(`/jobs/${done}/cancel`), [409, "job-finished"]);
  assert.deepEqual(await answer(`/batches/${batch}/cancel`), [409, "batch-finished"]);
  assert.deepEqual(await answer(`/flows/${flowId}/cancel`), [409, "flow-finished"]);
  assert.deepEqual(await answer("/queues/default/resume"), [409, "queue-not-paused"]);
  assert.deepEqual(await answer("/groups/resume", { name: "plain", key: "k" }), [
    409,
    "group-gone",
  ]);
  assert.deepEqual(await answer("/failed/flush"), [400, "flush-unconfirmed"]);

  const resumed = await postForm(handler, "/queues/default/resume", session);
  assert.equal(resumed.headers.get("location"), "/?notice=queue-not-paused&count=0");
  const told = squash(await page(handler, resumed.headers.get("location")!));
  assert.match(
    told,
    /<p class="notice bad" role="status">Nothing changed: that queue is not paused.<\/p>/,
  );
  assert.doesNotMatch(told, /no longer there/);
});

Deno.test("dashboard: a page past the end of a list says so and links to the last page (the first where the list is not counted)", async () => {
  const { queue } = await openQueue();
  await using _ = queue;
  await queue.dispatchMany(hostile, [{ note: "a" }, { note: "b" }, { note: "c" }]);
  await drainQueue(queue);
  await queue.dispatchMany(plain, [{ n: 1 }, { n: 2 }], { delayMs: 60_000 });
  await queue.batch("one").push(plain, { n: 3 }).dispatch();
  const handler = dashboard(queue);
  const pager = async (path: string) => {
    const html = squash(await page(handler, path));
    return /<div class="pager">(.*?)<\/div>/.exec(html)?.[1]?.trim();
  };
  assert.equal(
    await pager("/failed?limit=2&page=50"),
    '<a href="/failed?limit=2&amp;page=2">← Last page</a><span class="muted">Page 50 is past the end: 3 failed jobs in 2 pages.</span>',
  );
  assert.equal(
    await pager("/jobs?page=100000&state=delayed"),
    '<a href="/jobs?page=1&amp;state=delayed">← First page</a><span class="muted">Page 100000 is past the end: 2 jobs in 1 page.</span>',
  );
  assert.equal(
    await pager("/jobs?page=4&name=nope"),
    '<a href="/jobs?page=1&amp;name=nope">← First page</a><span class="muted">Page 4 is past the end: no jobs.</span>',
  );
  assert.equal(
    await pager("/jobs?limit=1&page=3"),
    '<a href="/jobs?limit=1&amp;page=2" rel="prev">← Previous</a><span class="muted">3–3 of 3</span>',
    "the last page itself is not past the end",
  );
  for (const [path, shown] of [["/batches", 1], ["/completed", 0], ["/flows", 0]] as const) {
    assert.equal(
      await pager(`${path}?page=7`),
      `<a href="${path}?page=1">← First page</a><span class="muted">Page 7 is past the end of the list.</span>`,
      path,
    );
    assert.doesNotMatch((await pager(path))!, /past the end/, `${path}: ${shown} rows`);
  }
});

Deno.test("dashboard: the batches page shows progress and status; cancel and retry-failed act on a batch", async () => {
  const { queue } = await openQueue();
  await using _ = queue;
  const done = await queue.batch(`<b>import</b>`).allowFailures()
    .push(plain, { n: 1 }).push(plain, { n: 2 }).push(plain, { n: 3 })
    .push(hostile, { note: "x" })
    .dispatch();
  await drainQueue(queue);
  const waiting = await queue.batch("later").push(plain, { n: 9 }, { delayMs: 60_000 }).dispatch();
  const handler = dashboard(queue);

  const data = await json<{ batches: Record<string, unknown>[]; hasMore: boolean }>(
    handler,
    "/api/batches",
  );
  assert.deepEqual(
    data.batches.map(({ id, name, total, succeeded, failed, pending, progress, status }) => ({
      id,
      name,
      total,
      succeeded,
      failed,
      pending,
      progress,
      status,
    })),
    [
      {
        id: waiting,
        name: "later",
        total: 1,
        succeeded: 0,
        failed: 0,
        pending: 1,
        progress: 0,
        status: "running",
      },
      {
        id: done,
        name: "<b>import</b>",
        total: 4,
        succeeded: 3,
        failed: 1,
        pending: 0,
        progress: 100,
        status: "finished",
      },
    ],
  );
  const html = squash(await page(handler, "/batches"));
  assert.match(html, new RegExp(`<tr id="batch-${done}">`));
  assert.match(html, /<td>&lt;b&gt;import&lt;\/b&gt;<\/td>/);
  assert.match(html, /<progress max="100" value="100" data-live="batches\/1\/progress">/);
  assert.match(html, new RegExp(`action="/batches/${waiting}/cancel"`));
  assert.doesNotMatch(html, new RegExp(`action="/batches/${done}/cancel"`), "finished: no cancel");
  assert.match(html, new RegExp(`action="/batches/${done}/retry"`));
  assert.doesNotMatch(html, new RegExp(`action="/batches/${waiting}/retry"`), "nothing failed");

  const session = await openSession(handler, "/batches");
  const cancelled = await postForm(handler, `/batches/${waiting}/cancel`, session);
  assert.equal(cancelled.headers.get("location"), "/batches?notice=cancelled&count=1");
  const later = (await queue.batchStatus(waiting))!;
  assert.deepEqual([later.cancelled, later.skipped, later.pending], [true, 1, 0]);
  const again = await postForm(handler, `/batches/${waiting}/cancel`, session);
  assert.equal(again.headers.get("location"), "/batches?notice=batch-finished&count=0");
  assert.match(
    squash(await page(handler, again.headers.get("location")!)),
    /<p class="notice bad" role="status">Nothing changed: the batch has already finished or was cancelled.<\/p>/,
  );

  const retried = await postForm(handler, `/batches/${done}/retry`, session);
  assert.equal(retried.headers.get("location"), "/batches?notice=batch-retried&count=1");
  const status = (await queue.batchStatus(done))!;
  assert.deepEqual([status.failed, status.pending, status.finished], [0, 1, false]);
  const twice = await postForm(handler, `/batches/${done}/retry`, session, {
    headers: { accept: "application/json" },
  });
  assert.equal(twice.status, 200, "a batch with no failed job left: done, nothing to do");
  assert.deepEqual(await twice.json(), {
    ok: true,
    notice: "batch-retried",
    count: 0,
    back: "/batches",
  });
  assert.match(
    squash(await page(handler, "/batches?notice=batch-retried&count=0")),
    /Nothing changed: the batch has no failed job to put back./,
  );
  const missing = await postForm(handler, `/batches/424242/retry`, session, {
    headers: { accept: "application/json" },
  });
  assert.equal(missing.status, 404);
});

Deno.test("dashboard: the flows page lists flows with their node counts; a flow's page shows each node, its job and its edges, escaped; cancel acts on a running flow", async () => {
  const { queue } = await openQueue();
  await using _ = queue;
  const broken = queue.flow("<b>nightly</b>");
  const a = broken.add(plain, { n: 1 }, { key: "a" });
  const b = broken.add(hostile, { note: "x" }, { key: "<i>b</i>", after: [a] });
  broken.add(plain, { n: 2 }, { key: "c", after: [b] });
  const brokenId = await broken.dispatch();
  await drainQueue(queue);
  const later = queue.flow("later");
  const x = later.add(plain, { n: 3 }, { key: "x", delayMs: 60_000 });
  later.add(plain, { n: 4 }, { key: "y", after: [x] });
  const laterId = await later.dispatch();
  const handler = dashboard(queue);

  const data = await json<{ flows: { id: number; state: string; nodes: unknown[] }[] }>(
    handler,
    "/api/flows",
  );
  assert.deepEqual(data.flows.map(({ id, state, nodes }) => [id, state, nodes.length]), [
    [laterId, "running", 2],
    [brokenId, "failed", 3],
  ]);
  const list = squash(await page(handler, "/flows"));
  assert.match(list, new RegExp(`<tr id="flow-${brokenId}">`));
  assert.match(list, /<td>&lt;b&gt;nightly&lt;\/b&gt;<\/td><td>failed<\/td>/);
  assert.match(list, new RegExp(`action="/flows/${laterId}/cancel"`));
  assert.doesNotMatch(
    list,
    new RegExp(`action="/flows/${brokenId}/cancel"`),
    "finished: no cancel",
  );

  const one = squash(await page(handler, `/flows/${brokenId}`));
  assert.match(one, /State: <strong>failed<\/strong>/);
  assert.match(
    one,
    /<tr id="node-a" class="node-succeeded"><td>a<\/td><td>plain<\/td><td>succeeded<\/td>/,
  );
  assert.match(
    one,
    /<td>&lt;i&gt;b&lt;\/i&gt;<\/td><td>&lt;script&gt;/,
    "a hostile key and name are escaped",
  );
  assert.match(one, /<li>a → &lt;i&gt;b&lt;\/i&gt;<\/li><li>&lt;i&gt;b&lt;\/i&gt; → c<\/li>/);
  assert.doesNotMatch(one, /<script>alert/);
  const failedJob = (await queue.flowStatus(brokenId))!.nodes[1]!.jobId;
  assert.match(one, new RegExp(`href="/failed/${failedJob}"`));
  assert.equal((await fetchFrom(handler, "/flows/999")).status, 404);

  const session = await openSession(handler, "/flows");
  const cancelled = await postForm(handler, `/flows/${laterId}/cancel`, session);
  assert.equal(cancelled.headers.get("location"), "/flows?notice=flow-cancelled&count=1");
  assert.equal((await queue.flowStatus(laterId))?.state, "cancelled");
  const again = await postForm(handler, `/flows/${laterId}/cancel`, session);
  assert.equal(again.headers.get("location"), "/flows?notice=flow-finished&count=0");
  assert.match(
    squash(await page(handler, again.headers.get("location")!)),
    /<p class="notice bad" role="status">Nothing changed: the flow has already finished or was cancelled.<\/p>/,
  );
});

Deno.test("dashboard: the job types page shows runs, failures, average and p95 runtime and average wait from the rollup", async () => {
  const store = await SqliteStore.open(":memory:");
  const clock = new ManualClock(NOON + 30_000);
  await using queue = await Queue.open({ store, jobs: [], clock });
  const ids = await store.insertJobs(Array.from({ length: 21 }, (_, n) => ({
    queue: n < 20 ? "mail" : "default",
    name: n < 20 ? "send" : "report",
    payload: "{}",
    priority: 0,
    availableAt: NOON,
    retryUntil: null,
    createdAt: NOON,
  })));
  const claimed = await store.claim({
    queues: ["mail", "default"],
    limit: 50,
    now: NOON + 200,
    leaseMs: 60_000,
    token: 1,
  });
  assert.equal(claimed.length, 21);
  await store.settle(
    ids.map((id, n) =>
      n < 19 ? { kind: "complete", id, token: 1, at: NOON + 1_000, durationMs: 30 } : n === 19
        ? {
          kind: "fail",
          id,
          token: 1,
          at: NOON + 1_000,
          durationMs: 900,
          attempts: 1,
          error: { message: "Error: x", stack: null },
        }
        : {
          kind: "release",
          id,
          token: 1,
          at: NOON - 2 * 3_600_000, // outside the last hour
          availableAt: NOON,
          error: "Error: y",
          refundAttempt: false,
          durationMs: 4,
        }
    ),
  );
  const handler = dashboard(queue);
  const lastHour = await json<{ hours: number; jobTypes: Record<string, unknown>[] }>(
    handler,
    "/api/job-types?hours=1",
  );
  assert.equal(lastHour.hours, 1);
  assert.deepEqual(lastHour.jobTypes, [{
    queue: "mail",
    name: "send",
    completed: 19,
    failed: 1,
    retried: 0,
    expired: 0,
    runs: 20,
    averageRuntimeMs: (19 * 30 + 900) / 20,
    p95RuntimeMs: 50, // rank 19 of 20 is the last run in (20, 50]
    averageWaitMs: 200,
  }]);
  const day = await json<{ hours: number; jobTypes: { name: string; retried: number }[] }>(
    handler,
    "/api/job-types",
  );
  assert.equal(day.hours, 24);
  assert.deepEqual(day.jobTypes.map((type) => [type.name, type.retried]), [["report", 1], [
    "send",
    0,
  ]]);
  const html = squash(await page(handler, "/job-types?hours=1"));
  assert.match(
    html,
    /<td>mail<\/td><td>send<\/td><td class="num">20<\/td><td class="num">19<\/td><td class="num">0<\/td><td class="num">1<\/td><td class="num">0<\/td><td class="num">74 ms<\/td><td class="num">50 ms<\/td><td class="num">200 ms<\/td>/,
  );
  assert.match(html, /Last <strong>hour<\/strong>/);
});

Deno.test("dashboard: mounted under basePath, its links, forms and cookie stay under it, and other paths are 404", async () => {
  const { queue } = await openQueue();
  await using _ = queue;
  await queue.dispatch(hostile, { note: "x" });
  await drainQueue(queue);
  const [id] = await failedIds(queue);
  const handler = dashboard(queue, { basePath: "/admin/queue/", title: "Acme <jobs>" });
  const response = await fetchFrom(handler, "/admin/queue");
  assert.equal(response.status, 200);
  assert.match(
    response.headers.get("set-cookie")!,
    /; Path=\/admin\/queue; HttpOnly; SameSite=Strict$/,
  );
  const html = squash(await response.text());
  assert.match(html, /<title>Overview · Acme &lt;jobs&gt;<\/title>/);
  assert.match(html, /<a href="\/admin\/queue\/failed"\s*>Failed<\/a>/);
  assert.match(html, /data-api="\/admin\/queue\/api\/overview"/);
  const failed = squash(await page(handler, "/admin/queue/failed/"));
  assert.match(failed, new RegExp(`action="/admin/queue/failed/${id}/retry"`));
  const session = await openSession(handler, "/admin/queue/failed");
  const retried = await postForm(handler, `/admin/queue/failed/${id}/retry`, session);
  assert.equal(retried.headers.get("location"), "/admin/queue/failed?notice=retried&count=1");
  for (const path of ["/", "/failed", "/admin", "/admin/queuex", "/admin/queue/nope"]) {
    assert.equal((await fetchFrom(handler, path)).status, 404, path);
  }
  assert.throws(() => dashboard(queue, { basePath: "admin" }), /basePath must be/);
  assert.throws(() => dashboard(queue, { basePath: "/a b" }), /basePath must be/);
  assert.throws(() => dashboard(queue, { title: "" }), /title must be/);
});

Deno.test("dashboard: the 'list has changed: reload' link is the page's route path, never a protocol-relative //path", async () => {
  const { queue } = await openQueue();
  await using _ = queue;
  const reload = async (handler: ReturnType<typeof dashboard>, path: string) => {
    const html = await page(handler, path);
    const href = /id="live-changed"[^]*?<a href="([^"]*)">reload<\/a>/.exec(html)?.[1];
    assert.ok(href !== undefined, `${path}: a reload link`);
    assert.equal(new URL(href, `${ORIGIN}${path}`).origin, ORIGIN, `${path}: same origin`);
    return href;
  };
  const root = dashboard(queue);
  assert.equal(await reload(root, "/jobs?state=pending"), "/jobs?state=pending");
  assert.equal(await reload(root, "//jobs"), "/jobs");
  assert.equal(await reload(root, "///failed//?page=2"), "/failed?page=2");
  assert.equal(await reload(root, "//"), "/");
  const mounted = dashboard(queue, { basePath: "/adm" });
  assert.equal(await reload(mounted, "/adm//jobs"), "/adm/jobs");
  assert.equal(await reload(mounted, "/adm"), "/adm/");
});

Deno.test('dashboard() option errors quote a string value as JSON does, so "false" never reads as false', async () => {
  const { queue } = await openQueue();
  await using _ = queue;
  const refused = (options: Record<string, unknown>, message: RegExp) =>
    assert.throws(() => dashboard(queue, options), (error: Error) => {
      assert.ok(error instanceof TypeError);
      assert.match(error.message, message);
      return true;
    });
  refused({ readOnly: "false" }, /^dashboard: readOnly must be true or false: got "false"$/);
  refused({ metrics: "true" }, /^dashboard: metrics must be true or false: got "true"$/);
  refused({ title: "" }, /^dashboard: title must be a string of 1 to 100 characters: got ""$/);
  refused({ title: 7 }, /title must be .*: got 7$/);
  refused({ basePath: 5 }, /^dashboard: basePath must be a string: got 5$/);
  refused({ gate: "admin" }, /^dashboard: gate must be a function: got "admin"$/);
  refused({ metricsGate: true }, /^dashboard: metricsGate must be a function: got true$/);
});

Deno.test("dashboard: every page has its JSON under /api/; unknown routes, a gone failed job and a bad filter say why", async () => {
  const { queue } = await openQueue();
  await using _ = queue;
  const handler = dashboard(queue);
  for (const path of ["overview", "jobs", "failed", "batches", "job-types"]) {
    await json(handler, `/api/${path}`);
  }
  for (const path of ["/", "/jobs", "/failed", "/batches", "/job-types"]) await page(handler, path);
  const favicon = await fetchFrom(handler, "/favicon.svg");
  assert.equal(favicon.headers.get("content-type"), "image/svg+xml");
  assert.match(await favicon.text(), /^<svg /);

  const missing = await fetchFrom(handler, "/failed/12345");
  assert.equal(missing.status, 404);
  assert.match(
    await missing.text(),
    /Not found: no failed job 12345 \(a failed job that was retried or forgotten is gone\)/,
  );
  for (
    const [path, said] of [
      [
        "/api/failed/12345",
        "no failed job 12345 (a failed job that was retried or forgotten is gone)",
      ],
      ["/api/jobs/12345", "no job 12345 (none had that id, or its kept history was pruned)"],
      ["/api/flows/12345", "no flow 12345 (none had that id, or it ended and was pruned)"],
    ]
  ) {
    const missingJson = await fetchFrom(handler, path!);
    assert.equal(missingJson.status, 404, path);
    assert.equal((await missingJson.json()).error, `Not found: ${said}`, path);
  }
  for (
    const path of [
      "/nope",
      "/failed/abc",
      "/failed/0",
      "/jobs/abc",
      "/jobs/1/x",
      "/api",
      "/api/nope",
    ]
  ) {
    assert.equal((await fetchFrom(handler, path)).status, 404, path);
  }
  const badQueue = await fetchFrom(handler, "/jobs?queue=no%20spaces");
  assert.equal(badQueue.status, 400);
  assert.match(
    await badQueue.text(),
    /400 Bad Request: jobs: queue name &quot;no spaces&quot; is invalid/,
  );
  const badJson = await fetchFrom(handler, `/api/jobs?name=${"n".repeat(256)}`);
  assert.equal(badJson.status, 400);
  assert.match((await badJson.json()).error, /name must be a string of 1 to 255 characters/);
  assert.equal((await fetchFrom(handler, "/failed", { method: "DELETE" })).status, 405);
});

Deno.test("dashboard: a queue closed under it answers 503, and an unexpected error 500 without details, reported as queue:error", async () => {
  const { queue } = await openQueue();
  const handler = dashboard(queue);
  await queue.close();
  const closed = await fetchFrom(handler, "/api/failed");
  assert.equal(closed.status, 503);
  assert.deepEqual(await closed.json(), { error: "503 Service Unavailable: the queue is closed" });

  const { queue: broken } = await openQueue();
  await using _ = broken;
  const errors: string[] = [];
  broken.addEventListener("queue:error", ({ detail }) => errors.push(detail.during));
  const failing = dashboard(broken, { gate: () => true });
  // A queue whose listing throws something unexpected: the page must not leak it.
  Object.defineProperty(broken, "batches", {
    value: () => Promise.reject(new Error("disk on fire at /secret/path")),
  });
  const response = await fetchFrom(failing, "/batches", {}, LOCAL);
  assert.equal(response.status, 500);
  const text = await response.text();
  assert.doesNotMatch(text, /secret\/path/);
  assert.match(text, /500 Internal Server Error: the dashboard failed; see the app&#39;s log/);
  assert.deepEqual(errors, ["dashboard GET /batches"]);
});

Deno.test("dashboard: a stored payload too deep to show (stored before payloads were limited) answers 500 reported as queue:error, as any unexpected error", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [plain] });
  const id = await queue.dispatch(plain, { n: 1 });
  const db = new DatabaseSync(tmp.dbPath);
  db.prepare("UPDATE jobs SET payload = ? WHERE id = ?")
    .run(`${"[".repeat(20_000)}${"]".repeat(20_000)}`, id);
  db.close();
  const errors: string[] = [];
  queue.addEventListener("queue:error", ({ detail }) => errors.push(detail.during));
  const handler = dashboard(queue, { gate: () => true });
  const response = await fetchFrom(handler, `/jobs/${id}`, {}, LOCAL);
  assert.equal(response.status, 500);
  assert.match(await response.text(), /500 Internal Server Error: the dashboard failed/);
  assert.deepEqual(errors, [`dashboard GET /jobs/${id}`]);
  // Its JSON gives the payload as the stored text: nothing to overflow there.
  assert.equal((await fetchFrom(handler, `/api/jobs/${id}`, {}, LOCAL)).status, 200);
});

Deno.test({
  name:
    "dashboard: a Redis store that lost its data answers 503 naming the cause, to a page, the JSON API and an action, not a 500 reported as unexpected",
  ignore: redisTestUrl() === null,
  async fn() {
    await using lost = await redisQueueToLose(redisTestUrl()!, plain);
    const { queue, errors } = lost;
    const handler = dashboard(queue);
    const session = await openSession(handler, "/");
    await lost.lose(); // as a restart without persistence leaves it
    const cause = /^503 Service Unavailable: the Redis store lost its data: /;
    const api = await fetchFrom(handler, "/api/jobs");
    assert.equal(api.status, 503);
    assert.match((await api.json()).error, cause);
    const page = await fetchFrom(handler, "/failed");
    assert.equal(page.status, 503);
    assert.match(await page.text(), /503 Service Unavailable: the Redis store lost its data: /);
    const paused = await postForm(handler, "/queues/default/pause", session, {
      headers: { accept: "application/json" },
    });
    assert.equal(paused.status, 503);
    assert.match((await paused.json()).error, cause);
    assert.deepEqual(errors, []);
  },
});
