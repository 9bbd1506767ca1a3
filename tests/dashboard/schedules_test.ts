/**
 * The dashboard's Schedules page: next fire times, last run and paused
 * state, hostile names escaped, and the pause, resume and run-now actions
 * (POST with a CSRF token; without one nothing changes).
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, defineSchedule, Queue } from "../../mod.ts";
import { dashboard } from "../../src/dashboard.ts";
import { ManualClock, tempDir } from "../_helpers.ts";
import { fetchFrom, openSession, postForm } from "../_dashboard.ts";

const NAME = `<script>alert("schedule")</script>/x`;
const report = defineJob({ name: "report", schema: z.null(), handle() {} });
const nightly = defineSchedule({
  name: NAME,
  cron: "30 2 * * *",
  timezone: "Europe/Berlin",
  job: report,
  payload: null,
});

Deno.test("the Schedules page shows next runs, last run and state; pause, resume and run now are POST + CSRF", async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
  await using queue = await Queue.open({ path: ":memory:", jobs: [report, nightly], clock });
  const handler = dashboard(queue);
  const page = await (await fetchFrom(handler, "/schedules")).text();
  assert.ok(!page.includes("<script>alert"), "the name is escaped");
  assert.match(page, /&lt;script&gt;alert\(&quot;schedule&quot;\)&lt;\/script&gt;\/x/);
  assert.match(page, /30 2 \* \* \* \(Europe\/Berlin\)/);
  assert.match(page, /2026-01-02 01:30/, "the first next run (02:30 in Berlin) in UTC");
  assert.match(page, /never/);
  const api = await (await fetchFrom(handler, "/api/schedules")).json();
  assert.equal(api.schedules[0].name, NAME);
  assert.equal(api.schedules[0].nextRuns.length, 5);

  const path = `/schedules/${encodeURIComponent(NAME)}`;
  const session = await openSession(handler, "/schedules");
  const forged = await postForm(handler, `${path}/pause`, { ...session, token: "forged" });
  assert.equal(forged.status, 403);
  assert.equal((await queue.schedules())[0]!.paused, false, "nothing changed");
  assert.equal((await fetchFrom(handler, `${path}/pause`)).status, 405, "actions are POST only");

  const paused = await postForm(handler, `${path}/pause`, session);
  assert.equal(paused.status, 303);
  assert.match(paused.headers.get("location")!, /\/schedules\?notice=schedule-paused/);
  assert.equal((await queue.schedules())[0]!.paused, true);
  assert.match(await (await fetchFrom(handler, "/schedules")).text(), />paused</);

  const resumed = await postForm(handler, `${path}/resume`, session);
  assert.match(resumed.headers.get("location")!, /notice=schedule-resumed/);
  assert.equal((await queue.schedules())[0]!.paused, false);

  const ran = await postForm(handler, `${path}/run`, session);
  assert.match(ran.headers.get("location")!, /notice=schedule-run/);
  const [info] = await queue.schedules();
  assert.equal(typeof info!.lastJobId, "number");
  assert.match(await (await fetchFrom(handler, "/schedules")).text(), /2026-01-01 12:00/);

  const gone = await postForm(handler, "/schedules/nope/pause", session);
  assert.match(gone.headers.get("location")!, /notice=schedule-gone/);
});

const single = defineJob({
  name: "single",
  schema: z.null(),
  uniqueForMs: 3_600_000,
  handle() {},
});
const hourly = defineSchedule({ name: "hourly", cron: "0 * * * *", job: single, payload: null });

Deno.test("Run now of a schedule whose unique job is already queued tells that nothing was queued, in HTML and JSON (409)", async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
  await using queue = await Queue.open({ path: ":memory:", jobs: [single, hourly], clock });
  const handler = dashboard(queue);
  const session = await openSession(handler, "/schedules");
  const ran = await postForm(handler, "/schedules/hourly/run", session);
  assert.equal(ran.headers.get("location"), "/schedules?notice=schedule-run&count=1");
  assert.equal((await queue.jobs()).total, 1);

  const held = await postForm(handler, "/schedules/hourly/run", session);
  assert.equal(held.headers.get("location"), "/schedules?notice=schedule-held&count=0");
  const told = await (await fetchFrom(handler, held.headers.get("location")!)).text();
  assert.match(
    told,
    /<p class="notice bad" role="status">Nothing queued: the schedule&#39;s job is unique and one is already queued.<\/p>/,
  );
  assert.doesNotMatch(told, /Queued one job/);
  const json = await postForm(handler, "/schedules/hourly/run", session, {
    headers: { accept: "application/json" },
  });
  assert.equal(json.status, 409);
  assert.deepEqual(await json.json(), {
    ok: false,
    notice: "schedule-held",
    count: 0,
    back: "/schedules",
  });
  assert.equal((await queue.jobs()).total, 1, "still one job");
});

Deno.test("Run now of a schedule not stored answers 404 (schedule-gone); of one stored that the dashboard's jobs module does not define, 409", async () => {
  await using tmp = await tempDir();
  {
    await using _ = await Queue.open({ path: tmp.dbPath, jobs: [single, hourly] });
  }
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [] });
  const handler = dashboard(queue);
  const session = await openSession(handler, "/schedules");
  const json = { headers: { accept: "application/json" } };
  const missing = await postForm(handler, "/schedules/nope/run", session, json);
  assert.equal(missing.status, 404);
  assert.equal((await missing.json()).notice, "schedule-gone");
  const undefinedHere = await postForm(handler, "/schedules/hourly/run", session, json);
  assert.equal(undefinedHere.status, 409);
  assert.equal((await undefinedHere.json()).notice, "schedule-not-defined");
  assert.equal((await queue.jobs()).total, 0);
  const malformed = await postForm(handler, "/schedules/%ZZ/pause", session, json);
  assert.equal(malformed.status, 400, "a name that is not valid percent-encoding, as for a queue");
});
