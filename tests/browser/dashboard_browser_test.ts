/**
 * The dashboard in a real browser: Debian's Chromium, headless, driven by
 * playwright-core. It opens the overview (whose styles and live-refresh
 * script must run under the page's CSP), goes to the failed jobs, retries
 * one by clicking, sees it leave the list, and saves a screenshot to
 * `.renox/browser/dashboard_failed.png`; then a job's page shows its durable
 * steps (a step, and a wait still parked for its signal), names escaped.
 *
 * Skips, saying why, when `chromium` is not installed (`.ci/run` installs
 * it with apt-get). Run alone with `deno task test:browser`.
 */
import assert from "node:assert/strict";
import { chromium, type Page } from "playwright-core";
import { z } from "zod";
import { defineJob, defineSchedule, Queue } from "../../mod.ts";
import { tempDir, waitUntil } from "../_helpers.ts";
import { dashboard } from "../../src/dashboard.ts";
import { drainQueue, HOSTILE, hostile, openQueue, plain } from "../_dashboard.ts";

/** Where the screenshot goes, from the project's root. */
const SCREENSHOT = new URL("../../.renox/browser/dashboard_failed.png", import.meta.url);

/** Flags for a headless Chromium on a machine without network or GPU. */
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** The path `which chromium` prints, or null when there is none. */
function findChromium(): string | null {
  try {
    const { success, stdout } = new Deno.Command("which", { args: ["chromium"], stderr: "null" })
      .outputSync();
    const path = new TextDecoder().decode(stdout).trim();
    return success && path !== "" ? path : null;
  } catch {
    return null;
  }
}

const executablePath = findChromium();

/** A job whose step and wait are named with markup, which the page must show as text. */
const stepped = defineJob({
  name: "stepped",
  schema: z.object({ n: z.number() }),
  async handle({ n }, ctx) {
    await ctx.step("<b>charge</b>", () => ({ cents: n }));
    await ctx.waitFor("approve", { timeoutMs: 3_600_000 });
  },
});
/** A headless Chromium page with its script errors collected; `close()` ends it and its profile. */
async function openPage(): Promise<{
  page: Page;
  problems: string[];
  close: () => Promise<void>;
}> {
  const profile = await Deno.makeTempDir({ prefix: "renox-chromium-" });
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: executablePath!,
    headless: true,
    args: CHROMIUM_ARGS,
    timeout: 20_000,
  });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  const problems: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  return {
    page,
    problems,
    close: async () => {
      await context.close();
      await Deno.remove(profile, { recursive: true });
    },
  };
}

const report = defineJob({ name: "report", schema: z.null(), handle() {} });
const nightly = defineSchedule({ name: "nightly", cron: "0 2 * * *", job: report, payload: null });
const hourly = defineSchedule({ name: "hourly", cron: "0 * * * *", job: report, payload: null });

/**
 * Each `[data-live]` cell of the page open in the browser, as the server drew
 * it (the page fetched again and parsed, no script run) and as it shows now.
 */
const LIVE_CELLS = String.raw`(async () => {
  const text = await (await fetch(location.href)).text();
  // Without its nonce'd style (the CSP refuses a parsed copy of it): only the cells are read.
  const drawn = new DOMParser().parseFromString(text.replace(/<style[^]*?<\/style>/, ""), "text/html");
  const cells = (doc) => [...doc.querySelectorAll("[data-live]")].map((el) =>
    el.dataset.live + " = " + (el.tagName === "PROGRESS" ? String(el.value) : el.textContent.trim())
  );
  return { drawn: cells(drawn), live: cells(document) };
})()`;

const name =
  "dashboard in Chromium: the overview opens under its CSP, a failed job is retried by a click and leaves the failed list";

if (executablePath === null) {
  console.log(
    "Dashboard browser test skipped: chromium is not installed (apt-get install -y chromium)",
  );
  Deno.test({ name, ignore: true, fn() {} });
} else {
  Deno.test(name, async () => {
    const { queue } = await openQueue();
    await using _ = queue;
    const [keep, retry] = await queue.dispatchMany(hostile, [
      { note: "stays failed" },
      { note: "retried from the browser" },
    ]);
    await drainQueue(queue);
    await using server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      dashboard(queue, { title: "Browser test" }),
    );
    const origin = `http://127.0.0.1:${server.addr.port}`;
    const { page, problems, close } = await openPage();
    try {
      await page.goto(`${origin}/`);
      assert.equal(await page.title(), "Overview · Browser test");
      // The live-refresh script ran (it fetched /api/overview and stamped the time) and the
      // stylesheet applied: both inline, allowed only by the CSP's nonce.
      // (Expressions as text: they run in the page, whose DOM types this file does not load.)
      await page.waitForFunction(
        'document.getElementById("live-at").textContent.startsWith("updated")',
      );
      const headerBackground = await page.evaluate(
        'getComputedStyle(document.querySelector("header")).backgroundColor',
      );
      assert.notEqual(headerBackground, "rgba(0, 0, 0, 0)", "the stylesheet applied");
      assert.equal(
        await page.locator(`td[data-live="counts/${HOSTILE.queue}/failed"]`).textContent(),
        "2",
      );

      await page.click('nav a:has-text("Failed")');
      await page.waitForURL(`${origin}/failed`);
      assert.equal(await page.locator("tbody tr").count(), 2);
      const name = await page.locator(`#failed-${retry} td:nth-child(3)`).textContent();
      assert.equal(name, HOSTILE.name, "the hostile name shows as text");

      await page.click(`#failed-${retry} button:has-text("Retry")`);
      await page.waitForURL(`${origin}/failed?notice=retried&count=1`);
      assert.equal(
        (await page.locator('p.notice[role="status"]').textContent())?.trim(),
        "Put 1 failed job back on its queue.",
      );
      assert.equal(await page.locator(`#failed-${retry}`).count(), 0, "it left the list");
      assert.equal(await page.locator(`#failed-${keep}`).count(), 1, "the other one stays");
      assert.deepEqual((await queue.failed()).map((job) => job.id), [keep]);
      assert.deepEqual((await queue.jobs({ state: "pending" })).jobs.map((job) => job.id), [retry]);

      await Deno.mkdir(new URL(".", SCREENSHOT), { recursive: true });
      await page.screenshot({ path: SCREENSHOT.pathname, fullPage: true });
      assert.ok((await Deno.stat(SCREENSHOT)).size > 1_000, "a screenshot was saved");
      console.log(`screenshot: ${SCREENSHOT.pathname}`);
      assert.deepEqual(problems, [], "no script error and no CSP violation");
    } finally {
      await close();
    }
  });

  Deno.test("dashboard in Chromium: a job's page shows its durable steps, a wait parked for its signal, names as text", async () => {
    await using tmp = await tempDir();
    await using queue = await Queue.open({ path: tmp.dbPath, jobs: [stepped] });
    const id = await queue.dispatch(stepped, { n: 1_250 });
    const worker = queue.work({ pollMs: 20 });
    try {
      await waitUntil(async () => (await queue.steps(id)).length === 2, { what: "it parked" });
    } finally {
      await worker.stop();
    }
    await using server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      dashboard(queue, { title: "Browser test" }),
    );
    const { page, problems, close } = await openPage();
    try {
      await page.goto(`http://127.0.0.1:${server.addr.port}/jobs/${id}`);
      const rows = page.locator("table.steps tbody tr");
      assert.equal(await rows.count(), 2);
      const cells = async (row: number) =>
        (await rows.nth(row).locator("td").allTextContents()).map((text) => text.trim());
      const [step, wait] = [await cells(0), await cells(1)];
      assert.deepEqual(step.slice(0, 3), ["1", "<b>charge</b>", "step"], "the name shows as text");
      assert.equal(step[3], "done");
      assert.equal(step[6], '{"cents":1250}');
      assert.deepEqual(wait.slice(0, 3), ["2", "approve", "wait"]);
      assert.match(wait[3]!, /^parked until /);
      assert.equal(await page.locator("table.steps b").count(), 0, "no markup from a name");
      assert.deepEqual(problems, []);
    } finally {
      await close();
    }
  });

  Deno.test("dashboard in Chromium: Resume on the overview resumes exactly its group, whose name or key holds CR, LF or CRLF", async () => {
    const { queue } = await openQueue();
    await using _ = queue;
    for (const key of ["plain", "a\nb", "a\r\nb", "a\rb", " padded\t"]) {
      await queue.pauseGroup("ok", key);
    }
    await queue.pauseGroup("multi\nline name", "k");
    await using server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      dashboard(queue),
    );
    const origin = `http://127.0.0.1:${server.addr.port}`;
    const paused = async () => (await queue.pausedGroups()).map(({ name, key }) => [name, key]);
    const browser = await openPage();
    try {
      const { page } = browser;
      // The banner lists the groups in the order pausedGroups() reads them: click the first each time.
      for (let left = (await paused()).length; left > 0; left--) {
        const before = await paused();
        await page.goto(`${origin}/`);
        const forms = page.locator('form[action="/groups/resume"]');
        assert.equal(await forms.count(), left);
        await forms.first().locator("button").click();
        await page.waitForURL(/\?notice=/);
        const what = JSON.stringify(before[0]);
        assert.equal(new URL(page.url()).search, "?notice=group-resumed&count=1", what);
        assert.deepEqual(await paused(), before.slice(1), `resumed ${what}`);
      }
      assert.deepEqual(browser.problems, []);
    } finally {
      await browser.close();
    }
  });

  Deno.test("dashboard in Chromium: the live refresh writes every cell as the server drew it (a schedule's State stays paused or active)", async () => {
    await using queue = await Queue.open({
      path: ":memory:",
      jobs: [hostile, plain, report, nightly, hourly],
    });
    await queue.pauseSchedule("nightly");
    await queue.dispatchMany(hostile, [{ note: "one" }, { note: "two" }]);
    await drainQueue(queue);
    await queue.batch("import").push(plain, { n: 1 }).push(plain, { n: 2 }).dispatch();
    await queue.dispatch(plain, { n: 3 }, { delayMs: 3_600_000 });
    await using server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      dashboard(queue),
    );
    const origin = `http://127.0.0.1:${server.addr.port}`;
    const browser = await openPage();
    try {
      const { page } = browser;
      for (const path of ["/", "/failed", "/batches", "/schedules"]) {
        await page.goto(`${origin}${path}`);
        await page.waitForFunction(
          'document.getElementById("live-at").textContent.startsWith("updated")',
        );
        const { drawn, live } = await page.evaluate(LIVE_CELLS) as {
          drawn: string[];
          live: string[];
        };
        assert.ok(drawn.length > 0, `${path} has live cells`);
        assert.deepEqual(live, drawn, path);
      }
      const states = await page.locator('td[data-live$="/paused"]').allTextContents();
      assert.deepEqual(states, ["active", "paused"], "hourly, then nightly");
      assert.deepEqual(browser.problems, []);
    } finally {
      await browser.close();
    }
  });
}
