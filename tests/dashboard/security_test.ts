/**
 * The dashboard's security cases (RELIABILITY.md S04–S07) through its
 * handler: the gate on every route, read-only mode, CSRF, same-origin and
 * body checks on every action, escaping and the CSP on every page, and
 * clamped query numbers.
 */
import assert from "node:assert/strict";
import { dashboard, type DashboardHandler, isLoopbackAddress } from "../../src/dashboard.ts";
import { CsrfTokens } from "../../src/dashboard/csrf.ts";
import { escapeHtml, html } from "../../src/dashboard/html.ts";
import type { Queue } from "../../src/queue.ts";
import {
  connection,
  drainQueue,
  failedIds,
  fetchFrom,
  flaky,
  HOSTILE,
  hostile,
  LOCAL,
  openQueue,
  openSession,
  ORIGIN,
  plain,
  postForm,
  type Session,
} from "../_dashboard.ts";

/** Every GET route of the dashboard: pages, their JSON, and the asset. */
const GET_ROUTES = [
  "/",
  "/jobs",
  "/failed",
  "/failed/1",
  "/batches",
  "/job-types",
  "/api/overview",
  "/api/jobs",
  "/api/failed",
  "/api/failed/1",
  "/api/batches",
  "/api/job-types",
  "/favicon.svg",
];
/** Every action, with the id of failed job / batch 1. */
const ACTIONS = [
  "/failed/1/retry",
  "/failed/1/forget",
  "/failed/retry-all",
  "/failed/flush",
  "/batches/1/cancel",
  "/batches/1/retry",
  "/groups/resume",
];

/**
 * A queue with failed job 1 (hostile), batch 1 waiting and group "g" of
 * "plain" paused; returns what must not change.
 */
async function fixture(): Promise<{ queue: Queue; state: () => Promise<unknown> }> {
  const { queue } = await openQueue();
  await queue.dispatch(hostile, { note: HOSTILE.note });
  await drainQueue(queue);
  await queue.batch("b").push(plain, { n: 1 }, { delayMs: 60_000 }).dispatch();
  await queue.pauseGroup("plain", "g"); // by name: "plain" has no group of its own
  const state = async () => ({
    failed: await failedIds(queue),
    jobs: (await queue.jobs()).jobs.map((job) => job.id),
    batch: (await queue.batchStatus(1))?.cancelled,
    groups: (await queue.pausedGroups()).map((group) => group.key),
  });
  assert.deepEqual(await state(), { failed: [1], jobs: [2], batch: false, groups: ["g"] });
  return { queue, state };
}

/** POSTs every action with `send` and checks each gets `status` and nothing changes. */
async function refuseEveryAction(
  state: () => Promise<unknown>,
  status: number,
  send: (path: string) => Promise<Response>,
  why: RegExp,
) {
  const before = await state();
  for (const path of ACTIONS) {
    const response = await send(path);
    assert.equal(response.status, status, path);
    assert.match(await response.text(), why, path);
  }
  assert.deepEqual(await state(), before, "nothing changed");
}

Deno.test("S04: the default gate lets in loopback connections only, on every route", async () => {
  const { queue, state } = await fixture();
  await using _ = queue;
  const handler = dashboard(queue);
  const session = await openSession(handler);
  const refused: (Deno.ServeHandlerInfo | null)[] = [
    connection("10.0.0.7"),
    connection("192.168.1.20"),
    connection("::ffff:10.0.0.1"),
    connection("2001:db8::1"),
    { remoteAddr: { transport: "unix", path: "/tmp/app.sock" }, completed: Promise.resolve() },
    null,
  ];
  for (const info of refused) {
    for (const path of GET_ROUTES) {
      const response = await fetchFrom(handler, path, {}, info);
      assert.equal(response.status, 403, `${path} from ${JSON.stringify(info?.remoteAddr)}`);
      assert.equal(
        await response.text(),
        "403 Forbidden: this dashboard's gate refused the request\n",
      );
      assert.equal(response.headers.get("x-content-type-options"), "nosniff");
    }
    await refuseEveryAction(
      state,
      403,
      (path) => postForm(handler, path, session, { info }),
      /gate refused/,
    );
  }
  for (const hostname of ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"]) {
    for (const path of GET_ROUTES) {
      const response = await fetchFrom(handler, path, {}, connection(hostname));
      await response.body?.cancel();
      assert.equal(response.status, 200, `${path} from ${hostname}`);
    }
  }
  assert.deepEqual(
    ["127.0.0.1", "127.255.255.254", "::1", "0:0:0:0:0:0:0:1", "[::1]", "::ffff:127.0.0.1"]
      .filter((address) => !isLoopbackAddress(address)),
    [],
  );
  assert.deepEqual(
    ["128.0.0.1", "10.127.0.1", "::2", "::ffff:10.0.0.1", "fe80::1", "localhost", "1127.0.0.1"]
      .filter(isLoopbackAddress),
    [],
  );
});

Deno.test("S04: a gate that returns false, throws or rejects gives 403 on every route", async () => {
  const { queue, state } = await fixture();
  await using _ = queue;
  const session = await openSession(dashboard(queue));
  const gates = {
    false: () => false,
    throws: () => {
      throw new Error("no session");
    },
    rejects: () => Promise.reject(new Error("auth service down")),
    "an unknown answer": () => "admin" as never,
  };
  for (const [what, gate] of Object.entries(gates)) {
    const handler = dashboard(queue, { gate });
    for (const path of GET_ROUTES) {
      const response = await fetchFrom(handler, path);
      assert.equal(response.status, 403, `${what}: ${path}`);
      await response.body?.cancel();
    }
    await refuseEveryAction(state, 403, (path) => postForm(handler, path, session), /gate refused/);
  }
  const remote = dashboard(queue, { gate: (request) => request.headers.get("x-user") === "ada" });
  const let_in = await fetchFrom(remote, "/failed", { headers: { "x-user": "ada" } }, null);
  assert.equal(let_in.status, 200, "a gate may let in a request without connection info");
  await let_in.body?.cancel();
});

Deno.test('S04: readOnly, or a gate answering "read", shows pages without forms and refuses every action', async () => {
  const { queue, state } = await fixture();
  await using _ = queue;
  const roles = (request: Request) => request.headers.get("x-role") === "admin" ? true : "read";
  const mixed = dashboard(queue, { gate: roles });
  const admin = await openSession(mixed, "/failed", { "x-role": "admin" });
  for (const handler of [dashboard(queue, { readOnly: true }), mixed]) {
    for (const path of ["/", "/failed", "/failed/1", "/batches"]) {
      const response = await fetchFrom(handler, path);
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("set-cookie"), null, "no CSRF cookie: nothing to post");
      const page = await response.text();
      assert.doesNotMatch(page, /method="post"|name="_csrf"/, path);
      assert.match(page, /read-only ·/);
    }
    // Even with the admin's valid cookie and token, a read-only request acts on nothing.
    await refuseEveryAction(
      state,
      403,
      (path) => postForm(handler, path, admin),
      /read-only for this request/,
    );
  }
  const adminPost = await postForm(mixed, "/failed/1/retry", admin, {
    headers: { "x-role": "admin" },
  });
  assert.equal(adminPost.status, 303, "the same handler lets the admin act");
  assert.deepEqual(await failedIds(queue), []);
});

Deno.test("S05: an action without the right CSRF token, from another site, as text/plain or by GET is refused and changes nothing", async () => {
  const { queue, state } = await fixture();
  await using _ = queue;
  const handler = dashboard(queue);
  const session = await openSession(handler);
  const other = await openSession(handler);
  const restarted = await openSession(dashboard(queue));
  const cases: [string, number, (path: string) => Promise<Response>, RegExp][] = [
    ["no token", 403, (path) => postForm(handler, path, { ...session, token: "" }), /CSRF/],
    [
      "a wrong token",
      403,
      (path) => postForm(handler, path, { ...session, token: "x".repeat(43) }),
      /CSRF/,
    ],
    [
      "another browser's token",
      403,
      (path) => postForm(handler, path, { ...session, token: other.token }),
      /CSRF/,
    ],
    ["no cookie", 403, (path) => postForm(handler, path, { ...session, cookie: "" }), /CSRF/],
    ["a token from before a restart", 403, (path) => postForm(handler, path, restarted), /CSRF/],
    [
      "a cross-site Origin",
      403,
      (path) => postForm(handler, path, session, { headers: { origin: "https://evil.example" } }),
      /another site: origin "https:\/\/evil.example"/,
    ],
    [
      "Origin null",
      403,
      (path) => postForm(handler, path, session, { headers: { origin: "null" } }),
      /another site/,
    ],
    [
      "Sec-Fetch-Site cross-site",
      403,
      (path) => postForm(handler, path, session, { headers: { "sec-fetch-site": "cross-site" } }),
      /Sec-Fetch-Site is "cross-site"/,
    ],
    [
      "a foreign Referer and no Origin",
      403,
      (path) =>
        fetchFrom(handler, path, {
          method: "POST",
          body: new URLSearchParams({ _csrf: session.token }),
          headers: { cookie: session.cookie, referer: "https://evil.example/page" },
        }),
      /another site: referer/,
    ],
    [
      "a text/plain body",
      415,
      (path) => postForm(handler, path, session, { headers: { "content-type": "text/plain" } }),
      /415 Unsupported Media Type/,
    ],
    [
      "no body type",
      415,
      (path) => fetchFrom(handler, path, { method: "POST", headers: { cookie: session.cookie } }),
      /415/,
    ],
    [
      "GET",
      405,
      (path) =>
        fetchFrom(handler, `${path}?_csrf=${session.token}`, {
          headers: { cookie: session.cookie },
        }),
      /actions are POST requests/,
    ],
  ];
  for (const [what, status, send, why] of cases) {
    await refuseEveryAction(state, status, send, why).catch((error) => {
      throw new Error(`${what}: ${error.message}`, { cause: error });
    });
  }
  const get = await fetchFrom(handler, "/failed/1/retry");
  assert.equal(get.headers.get("allow"), "POST");
  await get.body?.cancel();
  const ok = await postForm(handler, "/failed/1/retry", session);
  assert.equal(ok.status, 303, "the same request with everything right goes through");
  assert.deepEqual(await failedIds(queue), []);
});

Deno.test("S05: a script (no Origin) may act with the cookie and the token in a header, as JSON", async () => {
  const { queue } = await fixture();
  await using _ = queue;
  const handler = dashboard(queue);
  const session: Session = await openSession(handler);
  const response = await fetchFrom(handler, "/batches/1/cancel", {
    method: "POST",
    body: "{}",
    headers: {
      cookie: session.cookie,
      "x-csrf-token": session.token,
      "content-type": "application/json",
      accept: "application/json",
    },
  });
  assert.equal(response.status, 200);
  assert.deepEqual(await response.json(), {
    ok: true,
    notice: "cancelled",
    count: 1,
    back: "/batches",
  });
  assert.equal((await queue.batchStatus(1))?.cancelled, true);
  const again = await fetchFrom(handler, "/batches/1/cancel", {
    method: "POST",
    body: "[]",
    headers: {
      cookie: session.cookie,
      "x-csrf-token": session.token,
      "content-type": "application/json",
    },
  });
  assert.equal(again.status, 400, "a JSON body must be an object");
  await again.body?.cancel();
});

Deno.test("S04: the default gate refuses a loopback connection that asked for another host (DNS rebinding)", async () => {
  const { queue, state } = await fixture();
  await using _ = queue;
  const handler = dashboard(queue);
  const session = await openSession(handler);
  for (const host of ["attacker.example", "attacker.example:8080", "127.0.0.1.nip.example"]) {
    for (const path of GET_ROUTES) {
      const response = await fetchFrom(handler, path, { headers: { host } });
      assert.equal(response.status, 403, `${path} for Host ${host}`);
      assert.match(await response.text(), /gate refused/);
    }
    // The rebound page's own origin matches its Host: only the gate stands in the way.
    await refuseEveryAction(
      state,
      403,
      (path) => postForm(handler, path, session, { headers: { host, origin: `http://${host}` } }),
      /gate refused/,
    );
  }
  const byUrl = await handler(new Request("http://attacker.example:8080/failed"), LOCAL);
  assert.equal(byUrl.status, 403, "a request URL naming another host, without a Host header");
  await byUrl.body?.cancel();
  for (const host of ["localhost:8080", "localhost", "127.0.0.1:8080", "[::1]:8080"]) {
    const response = await fetchFrom(handler, "/failed", { headers: { host } });
    assert.equal(response.status, 200, `Host ${host}`);
    await response.body?.cancel();
  }
  const allowed = await postForm(handler, "/failed/1/retry", session, {
    headers: { host: "127.0.0.1:8080" },
  });
  assert.equal(allowed.status, 303, "a POST naming a loopback host goes through");
  assert.deepEqual(await failedIds(queue), []);
});

Deno.test("S05: an action whose streamed body passes the cap without a Content-Length gets 413 and changes nothing", async () => {
  const { queue, state } = await fixture();
  await using _ = queue;
  const handler = dashboard(queue);
  const session = await openSession(handler);
  const encoder = new TextEncoder();
  const kib = encoder.encode("a".repeat(1024));
  let pulled = 0;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(encoder.encode(`_csrf=${session.token}&pad=`));
    },
    pull(controller) {
      if (pulled === 200) return controller.close();
      pulled++;
      controller.enqueue(kib);
    },
  });
  const request = new Request(`${ORIGIN}/failed/1/retry`, {
    method: "POST",
    body,
    headers: {
      cookie: session.cookie,
      origin: ORIGIN,
      "sec-fetch-site": "same-origin",
      "content-type": "application/x-www-form-urlencoded",
    },
  });
  assert.equal(request.headers.get("content-length"), null);
  const before = await state();
  const response = await handler(request, LOCAL);
  assert.equal(response.status, 413);
  assert.match(
    await response.text(),
    /^413 Content Too Large: an action's body is at most 65536 bytes/,
  );
  assert.deepEqual(await state(), before, "the action did not run");
  assert.ok(pulled < 200, `reading stopped at the cap: ${pulled} KiB pulled`);
});

Deno.test("dashboard() refuses a basePath with . or .. segments", async () => {
  const { queue } = await openQueue();
  await using _ = queue;
  for (const basePath of ["/../x", "/a/./b", "/a/..", "/.", "/a/../"]) {
    assert.throws(
      () => dashboard(queue, { basePath }),
      (error: Error) => error instanceof TypeError && /basePath must be/.test(error.message),
      basePath,
    );
  }
  dashboard(queue, { basePath: "/a.b/..c/~d" }); // dots inside a segment are fine
});

/** Checks a page's headers and that its only script and style carry the CSP's nonce. */
function assertSafePage(response: Response, page: string, where: string): void {
  const csp = response.headers.get("content-security-policy") ?? "";
  const nonce = /script-src 'nonce-([A-Za-z0-9+/=]+)'/.exec(csp)?.[1];
  assert.ok(nonce !== undefined, `${where}: a script nonce in ${csp}`);
  assert.match(csp, new RegExp(`style-src 'nonce-${nonce.replace(/[+/]/g, "\\$&")}'`));
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /frame-ancestors 'none'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*/, where);
  assert.equal(response.headers.get("x-content-type-options"), "nosniff", where);
  assert.equal(response.headers.get("content-type"), "text/html; charset=utf-8", where);
  const tags = page.match(/<(script|style)\b[^>]*>/gi) ?? [];
  for (const tag of tags) assert.ok(tag.includes(`nonce="${nonce}"`), `${where}: ${tag}`);
  assert.ok(tags.length <= 2, `${where}: one style and at most one script`);
  // Escaped text may say "onerror=": only real tags (a "<" that is markup) must be clean.
  for (const tag of page.match(/<[a-zA-Z][^>]*>/g) ?? []) {
    assert.doesNotMatch(
      tag,
      /^<(img|iframe|object|embed|base|meta http-equiv)/i,
      `${where}: ${tag}`,
    );
    // Values are escaped, so a `"` always ends one: without them, only attribute names are left.
    const names = tag.replace(/"[^"]*"/g, '""');
    assert.doesNotMatch(names, /\son[a-z]+\s*=/i, `${where}: an event handler attribute in ${tag}`);
    assert.doesNotMatch(names, /\sstyle\s*=/i, `${where}: an inline style in ${tag}`);
    assert.doesNotMatch(
      tag,
      /(href|src|action|formaction)="\s*javascript:/i,
      `${where}: a javascript: URL in ${tag}`,
    );
  }
}

Deno.test("S06: hostile names, errors and payloads are escaped on every page, and every page carries a nonce CSP", async () => {
  const { queue } = await openQueue();
  await using _ = queue;
  await queue.dispatch(hostile, { note: HOSTILE.note });
  await queue.batch(`"><img src=x onerror=alert('batch')>`).allowFailures()
    .push(hostile, { note: "in a batch" }).dispatch();
  await drainQueue(queue);
  await queue.dispatch(flaky, null);
  await drainQueue(queue); // flaky waits a minute for its retry, with its hostile error
  const handler = dashboard(queue);
  const escapedName = escapeHtml(HOSTILE.name);
  const pages: [string, string[]][] = [
    ["/", [HOSTILE.queue]],
    ["/jobs", [escapeHtml(`Error: ${HOSTILE.error}`)]],
    [`/jobs?queue=${HOSTILE.queue}`, [`value="${HOSTILE.queue}"`]],
    ["/failed", [escapedName, escapeHtml(`PermanentError: ${HOSTILE.error}`)]],
    ["/failed/2", [escapedName, escapeHtml(`PermanentError: ${HOSTILE.error}`)]],
    ["/batches", [escapeHtml(`"><img src=x onerror=alert('batch')>`)]],
    ["/job-types", [escapedName]],
    [`/failed?notice=<script>&count=<b>1</b>`, []],
    ["/failed/99", []],
    [`/jobs?name=${encodeURIComponent(`"><svg onload=alert(1)>`)}`, [
      "&quot;&gt;&lt;svg onload=alert(1)&gt;",
    ]],
    ["/jobs?queue=%22%3E%3Cscript%3E", ["&quot;&gt;&lt;script&gt;"]],
  ];
  for (const [path, shown] of pages) {
    const response = await fetchFrom(handler, path);
    const page = await response.text();
    assertSafePage(response, page, path);
    for (const text of shown) assert.ok(page.includes(text), `${path} shows ${text}`);
  }
  const detail = await (await fetchFrom(handler, "/failed/2")).text();
  assert.ok(detail.includes(escapeHtml(JSON.stringify({ note: "in a batch" }, null, 2))));
  for (const path of ["/api/jobs", "/api/failed/2", "/favicon.svg", "/nope"]) {
    const response = await fetchFrom(handler, path);
    await response.body?.cancel();
    assert.equal(response.headers.get("x-content-type-options"), "nosniff", path);
    assert.match(response.headers.get("content-security-policy") ?? "", /default-src 'none'/);
  }
  const api = await (await fetchFrom(handler, "/api/failed/2")).json();
  assert.equal(api.job.name, HOSTILE.name, "JSON carries the text as it is");

  assert.equal(
    escapeHtml(`<a href="x" title='y'>&amp;</a>`),
    "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;amp;&lt;/a&gt;",
  );
  const nested = html`<p title="${`"><script>`}">${[html`<b>${"<i>"}</b>`, "&", null, 7]}</p>`;
  assert.equal(nested.text, `<p title="&quot;&gt;&lt;script&gt;"><b>&lt;i&gt;</b>&amp;7</p>`);
});

Deno.test("S07: queue names like default'); DROP TABLE jobs;-- are refused at dispatch and as filters; query numbers are clamped", async () => {
  const { queue } = await openQueue();
  await using _ = queue;
  const evil = "default'); DROP TABLE jobs;--";
  await assert.rejects(
    queue.dispatch(plain, { n: 1 }, { queue: evil }),
    /queue name "default'\); DROP TABLE jobs;--" is invalid/,
  );
  await queue.dispatchMany(plain, Array.from({ length: 3 }, (_, n) => ({ n })));
  const handler: DashboardHandler = dashboard(queue);
  const filtered = await fetchFrom(handler, `/api/jobs?queue=${encodeURIComponent(evil)}`);
  assert.equal(filtered.status, 400);
  assert.match((await filtered.json()).error, /queue name .* is invalid/);
  assert.equal((await queue.jobs()).total, 3, "the jobs table is still there");

  const paging = async (query: string) => {
    const { page, limit } = await (await fetchFrom(handler, `/api/jobs?${query}`)).json();
    return [page, limit];
  };
  assert.deepEqual(await paging("limit=1e9&page=-1"), [1, 200]);
  assert.deepEqual(await paging("limit=0&page=0"), [1, 1]);
  assert.deepEqual(await paging("limit=abc&page=x"), [1, 25]);
  assert.deepEqual(await paging("limit=2.9&page=2.5"), [2, 2]);
  assert.deepEqual(await paging("limit=-1e400&page=1e400"), [100_000, 1]);
  const far = await (await fetchFrom(handler, "/api/jobs?page=1e400&limit=200")).json();
  assert.deepEqual([far.total, far.jobs], [3, []], "a page past the end is empty, not an error");
  const hours = async (query: string) =>
    (await (await fetchFrom(handler, `/api/job-types?${query}`)).json()).hours;
  assert.deepEqual(
    [await hours("hours=1e9"), await hours("hours=-5"), await hours("hours=NaN"), await hours("")],
    [168, 1, 24, 24],
  );
  const failedPage = await (await fetchFrom(handler, "/api/failed?limit=99999")).json();
  assert.equal(failedPage.limit, 200);
});

Deno.test("CsrfTokens: a token verifies only for its own nonce and its own dashboard's secret", async () => {
  const tokens = new CsrfTokens();
  const nonce = CsrfTokens.newNonce();
  const token = await tokens.token(nonce);
  assert.match(nonce, /^[A-Za-z0-9_-]{22}$/);
  assert.match(token, /^[A-Za-z0-9_-]{43}$/);
  assert.equal(await tokens.verify(nonce, token), true);
  assert.equal(await tokens.verify(CsrfTokens.newNonce(), token), false);
  assert.equal(await new CsrfTokens().verify(nonce, token), false);
  assert.equal(await tokens.verify(nonce, token.slice(1)), false);
  assert.equal(await tokens.verify(null, token), false);
  assert.equal(await tokens.verify(nonce, null), false);
  const request = (cookie: string) => new Request("http://x/", { headers: { cookie } });
  assert.equal(CsrfTokens.nonceOf(request(`a=1; renox_queue_csrf=${nonce}; b=2`)), nonce);
  assert.equal(CsrfTokens.nonceOf(request("renox_queue_csrf=short")), null);
  assert.equal(CsrfTokens.nonceOf(request(`renox_queue_csrf=${nonce}!`)), null);
  assert.equal(
    CsrfTokens.cookie(nonce, "/admin", true),
    `renox_queue_csrf=${nonce}; Path=/admin; HttpOnly; SameSite=Strict; Secure`,
  );
});
