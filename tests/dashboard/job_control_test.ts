/**
 * The dashboard's job control: the Completed page (filters, duration,
 * output escaped, encrypted output only named), a job's page with its output
 * or error and a Cancel button, and pause/resume buttons with a banner on
 * the overview, and the banner of paused and held groups with their resume
 * buttons. Requests go straight to the handler.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, generateAppKey, Queue } from "../../mod.ts";
import { dashboard } from "../../src/dashboard.ts";
import { fetchFrom, HOSTILE, openSession, postForm } from "../_dashboard.ts";
import { storeTest } from "../_stores.ts";

const shout = defineJob({
  name: "shout",
  schema: z.object({ text: z.string() }),
  output: z.object({ text: z.string() }),
  handle: ({ text }) => ({ text }),
});
const sealed = defineJob({
  name: "sealed",
  schema: z.null(),
  encrypted: true,
  output: z.object({ pin: z.string() }),
  handle: () => ({ pin: "0000-secret" }),
});
const later = defineJob({ name: "later", schema: z.null(), queue: "mail", handle() {} });

async function setup() {
  const queue = await Queue.open({
    path: ":memory:",
    jobs: [shout, sealed, later],
    appKey: generateAppKey(),
  });
  const shouted = await queue.dispatch(shout, { text: HOSTILE.note });
  const hidden = await queue.dispatch(sealed, null);
  await queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 5 }).done;
  return { queue, shouted, hidden, handler: dashboard(queue) };
}

Deno.test("the Completed page lists finished jobs with duration, output escaped or 'encrypted'", async () => {
  const { queue, shouted, hidden, handler } = await setup();
  await using _ = queue;
  const page = await (await fetchFrom(handler, "/completed")).text();
  assert.ok(page.includes(`/jobs/${shouted}`) && page.includes(`/jobs/${hidden}`));
  assert.ok(!page.includes("<script>alert('payload')</script>"), "the output is escaped");
  assert.ok(page.includes("&lt;script&gt;alert("), "and still shown");
  assert.ok(page.includes("<strong>encrypted</strong>"));
  assert.ok(!page.includes("0000-secret"), "the dashboard never decrypts");
  const filtered = await (await fetchFrom(handler, "/completed?name=sealed")).text();
  assert.ok(!filtered.includes(`/jobs/${shouted}"`) && filtered.includes(`/jobs/${hidden}`));
  const json = await (await fetchFrom(handler, "/api/completed?queue=default")).json();
  assert.equal(json.jobs.length, 2);
  assert.deepEqual(json.jobs.find((job: { id: number }) => job.id === shouted).output, {
    text: HOSTILE.note,
  });
  assert.equal((await fetchFrom(handler, "/completed?queue=bad%20name")).status, 400);
});

Deno.test("a job's page shows its output; Cancel removes a waiting job", async () => {
  const { queue, shouted, handler } = await setup();
  await using _ = queue;
  const done = await (await fetchFrom(handler, `/jobs/${shouted}`)).text();
  assert.match(done, /<dd>completed<\/dd>/);
  assert.ok(done.includes("&lt;script&gt;"));
  assert.equal((await fetchFrom(handler, "/jobs/424242")).status, 404);
  const waiting = await queue.dispatch(later, null, { delayMs: 60_000 });
  const session = await openSession(handler, `/jobs/${waiting}`);
  const pending = await (await fetchFrom(handler, `/jobs/${waiting}`, {
    headers: { cookie: session.cookie },
  })).text();
  assert.ok(pending.includes(`/jobs/${waiting}/cancel`), "a Cancel button");
  const response = await postForm(handler, `/jobs/${waiting}/cancel`, session);
  assert.equal(response.status, 303);
  assert.match(response.headers.get("location")!, /notice=job-cancelled/);
  assert.equal((await queue.result(waiting))?.state, "cancelled");
  const after = await (await fetchFrom(handler, `/jobs/${waiting}`)).text();
  assert.match(after, /cancelled from the dashboard/);
  const refused = await fetchFrom(handler, `/jobs/${waiting}/cancel`, { method: "POST" });
  assert.equal(refused.status, 415, "no CSRF token, no form: refused");
});

Deno.test("the overview pauses and resumes a queue and names paused queues in a banner", async () => {
  const { queue, handler } = await setup();
  await using _ = queue;
  const session = await openSession(handler, "/");
  const paused = await postForm(handler, "/queues/mail/pause", session);
  assert.equal(paused.status, 303);
  assert.equal((await queue.paused())[0]?.queue, "mail");
  const page = await (await fetchFrom(handler, "/", { headers: { cookie: session.cookie } }))
    .text();
  assert.match(page, /Paused: no worker claims the jobs of/);
  assert.ok(page.includes("/queues/mail/resume"));
  assert.equal((await postForm(handler, "/queues/mail/resume", session)).status, 303);
  assert.deepEqual(await queue.paused(), []);
  const bad = await postForm(handler, "/queues/bad%20name/pause", session);
  assert.equal(bad.status, 400);
  assert.deepEqual(await queue.paused(), []);
});

Deno.test("the overview names the paused and held groups with their ends, escaped, the first 20 of them", async () => {
  const { queue, handler } = await setup();
  await using _ = queue;
  const page = async () => await (await fetchFrom(handler, "/")).text();
  assert.doesNotMatch(await page(), /Paused groups/);
  await queue.pauseGroup(HOSTILE.name, HOSTILE.note);
  await queue.pauseGroup("shout", "tenant-7", { until: new Date("2090-01-01T00:00:00Z") });
  const shown = await page();
  assert.match(shown, /Paused groups: no worker claims the jobs of/);
  assert.ok(!shown.includes(HOSTILE.note) && !shown.includes(HOSTILE.name), "escaped");
  assert.ok(shown.includes("&lt;script&gt;alert(&quot;name&quot;)"), "and still shown");
  assert.match(shown, /<strong>shout<\/strong> tenant-7 until 2090-01-01 00:00:00 UTC/);
  assert.match(
    shown,
    /&lt;\/script&gt;&quot;&gt;&lt;img src=x onerror=alert\(2\)&gt; until resumed/,
  );
  const json = await (await fetchFrom(handler, "/api/overview")).json();
  assert.deepEqual(json.pausedGroups[1], {
    name: "shout",
    key: "tenant-7",
    pausedAt: json.pausedGroups[1].pausedAt,
    until: "2090-01-01T00:00:00.000Z",
  });
  for (let n = 0; n < 20; n++) await queue.pauseGroup("shout", `t${String(n).padStart(2, "0")}`);
  const many = await page();
  assert.equal(many.match(/<li><strong>/g)?.length, 20);
  assert.match(many, /and more \(the <code>paused-groups<\/code> command lists them\)/);
});

Deno.test("the overview resumes a paused or held group from its banner, its name and key escaped; POST + CSRF as the queue's resume", async () => {
  const { queue, handler } = await setup();
  await using _ = queue;
  await queue.pauseGroup(HOSTILE.name, HOSTILE.note);
  await queue.pauseGroup("shout", "tenant-7", { forMs: 3_600_000 });
  const keys = async () => (await queue.pausedGroups()).map((group) => group.key);
  const session = await openSession(handler, "/");
  const page = await (await fetchFrom(handler, "/", { headers: { cookie: session.cookie } }))
    .text();
  assert.equal(page.match(/action="\/groups\/resume"/g)?.length, 2, "a Resume button per group");
  assert.ok(!page.includes(HOSTILE.note) && !page.includes(HOSTILE.name), "escaped");
  const encoded = (text: string) =>
    new TextEncoder().encode(text).toBase64({ alphabet: "base64url", omitPadding: true });
  assert.ok(
    page.includes(`<input type="hidden" name="key_b64" value="${encoded(HOSTILE.note)}">`),
    "the hostile key is carried base64url-encoded",
  );
  const hostileGroup = { name: HOSTILE.name, key: HOSTILE.note };
  const forged = await postForm(handler, "/groups/resume", { ...session, token: "forged" }, {
    fields: hostileGroup,
  });
  assert.equal(forged.status, 403);
  assert.equal((await fetchFrom(handler, "/groups/resume")).status, 405, "POST only");
  assert.equal(
    (await postForm(dashboard(queue, { readOnly: true }), "/groups/resume", session, {
      fields: hostileGroup,
    })).status,
    403,
    "read-only refuses it",
  );
  assert.deepEqual(await keys(), [HOSTILE.note, "tenant-7"], "nothing changed");
  const resumed = await postForm(handler, "/groups/resume", session, { fields: hostileGroup });
  assert.equal(resumed.status, 303);
  assert.match(resumed.headers.get("location")!, /^\/\?notice=group-resumed&count=1$/);
  assert.deepEqual(await keys(), ["tenant-7"]);
  const again = await postForm(handler, "/groups/resume", session, { fields: hostileGroup });
  assert.match(again.headers.get("location")!, /notice=group-gone/);
  const told = await (await fetchFrom(handler, again.headers.get("location")!)).text();
  assert.match(told, /Nothing changed: that group is not paused, or its hold has ended/);
  const held = await postForm(handler, "/groups/resume", session, {
    fields: { name: "shout", key: "tenant-7" },
    headers: { accept: "application/json" },
  });
  assert.deepEqual(await held.json(), { ok: true, notice: "group-resumed", count: 1, back: "/" });
  assert.deepEqual(await keys(), [], "a hold ends early too");
  const noKey = await postForm(handler, "/groups/resume", session, { fields: { name: "shout" } });
  assert.equal(noKey.status, 400);
  assert.match(await noKey.text(), /takes the form fields name and key/);
  const empty = await postForm(handler, "/groups/resume", session, {
    fields: { name: "shout", key: "" },
  });
  assert.equal(empty.status, 400, "the queue checks the key");
  await empty.body?.cancel();
});

Deno.test("resuming a group takes its name and key base64url-encoded (name_b64, key_b64), as the page sends them, or as plain fields", async () => {
  const { queue, handler } = await setup();
  await using _ = queue;
  const keys = ["a\nb", "a\r\nb", "a\rb", "\uFEFFbom", "emoji🦀\u2028"];
  for (const key of keys) await queue.pauseGroup("shout", key);
  await queue.pauseGroup("multi\nline name", "k");
  const session = await openSession(handler, "/");
  const page = await (await fetchFrom(handler, "/", { headers: { cookie: session.cookie } }))
    .text();
  const forms = [
    ...page.matchAll(
      /<input type="hidden" name="name_b64" value="([A-Za-z0-9_-]*)">\s*<input type="hidden" name="key_b64" value="([A-Za-z0-9_-]*)">/g,
    ),
  ].map(([, name, key]) => ({ name_b64: name!, key_b64: key! }));
  assert.equal(forms.length, keys.length + 1, "each group's form carries both fields encoded");
  const paused = async () => (await queue.pausedGroups()).map(({ name, key }) => [name, key]);
  for (const fields of forms) {
    const before = await paused();
    const resumed = await postForm(handler, "/groups/resume", session, { fields });
    assert.match(resumed.headers.get("location")!, /notice=group-resumed/);
    assert.deepEqual(await paused(), before.slice(1), "exactly the group of that form");
  }
  await queue.pauseGroup("shout", "a\r\nb");
  const json = await postForm(handler, "/groups/resume", session, {
    fields: { name: "shout", key_b64: "YQ0KYg" },
    headers: { accept: "application/json" },
  });
  assert.equal((await json.json()).notice, "group-resumed", "the plain field is read beside it");
  for (const bad of ["a+b", "YQ=x", "_w"]) {
    const refused = await postForm(handler, "/groups/resume", session, {
      fields: { name: "shout", key_b64: bad },
    });
    assert.equal(refused.status, 400, bad);
    assert.match(await refused.text(), /key_b64 is not base64url of UTF-8 text/);
  }
});

storeTest(
  "a job's page shows its payload escaped, attempts and last error; an encrypted one is only named",
  async (db) => {
    const flaky = defineJob({
      name: "flaky",
      schema: z.object({ note: z.string() }),
      maxAttempts: 3,
      backoff: [3_600_000],
      handle() {
        throw new Error(`boom ${HOSTILE.error}`);
      },
    });
    const queue = await db.open({ jobs: [shout, sealed, flaky], appKey: generateAppKey() });
    const handler = dashboard(queue);
    const waiting = await queue.dispatch(flaky, { note: HOSTILE.note });
    const hidden = await queue.dispatch(sealed, null, { delayMs: 3_600_000 });
    await queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 5 }).done;

    const page = await (await fetchFrom(handler, `/jobs/${waiting}`)).text();
    assert.ok(!page.includes("<script>alert('payload')"), "the payload is escaped");
    assert.ok(page.includes("&lt;script&gt;alert(&#39;payload&#39;)&lt;/script&gt;"), page);
    assert.match(page, /<dt>Attempts<\/dt>\s*<dd>1<\/dd>/);
    assert.match(page, /<h2>Last error<\/h2>\s*<pre class="error">Error: boom &quot;&gt;&lt;img/);
    const api = await (await fetchFrom(handler, `/api/jobs/${waiting}`)).json();
    assert.deepEqual(api.payload, { note: HOSTILE.note });
    assert.equal(api.encrypted, false);
    assert.match(api.error, /^Error: boom /);

    const sealedPage = await (await fetchFrom(handler, `/jobs/${hidden}`)).text();
    assert.match(sealedPage, /<h2>Payload<\/h2>\s*<p><strong>encrypted<\/strong>/);
    const sealedApi = await (await fetchFrom(handler, `/api/jobs/${hidden}`)).json();
    assert.equal(sealedApi.encrypted, true);
    assert.equal(sealedApi.payload, null);
    assert.ok(!JSON.stringify(sealedApi).includes("enc1:"), "no stored envelope either");

    const done = await queue.dispatch(shout, { text: "<b>kept</b>" });
    await queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 5 }).done;
    const donePage = await (await fetchFrom(handler, `/jobs/${done}`)).text();
    assert.match(
      donePage,
      /<h2>Payload<\/h2>\s*<pre>\{\n {2}&quot;text&quot;: &quot;&lt;b&gt;kept&lt;\/b&gt;&quot;\n\}<\/pre>/,
    );
  },
);
