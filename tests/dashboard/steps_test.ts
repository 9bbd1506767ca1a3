/**
 * The durable steps on the dashboard: a job's page and a failed job's page
 * list the steps the job recorded (seq, key, kind, state, attempt,
 * duration, output escaped; an encrypted output only named), and their
 * JSON carries them, on every store. Steps are recorded through the store,
 * as a worker records them; requests go straight to the handler.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, generateAppKey } from "../../mod.ts";
import { stepSealedAs } from "../../src/admin/steps.ts";
import { dashboard } from "../../src/dashboard.ts";
import { fetchFrom, HOSTILE } from "../_dashboard.ts";
import { cipherOf } from "../_helpers.ts";
import { type StoreContext, storeTest } from "../_stores.ts";
import { recordSteps, stepMemo, TOKEN } from "../fixtures/steps/recorded_steps.ts";

const onboard = defineJob({ name: "onboard", schema: z.null(), queue: "a", handle() {} });
const sealed = defineJob({
  name: "sealed-steps",
  schema: z.null(),
  queue: "b",
  encrypted: true,
  handle() {},
});
const HOUR_MS = 3_600_000;

async function setup(db: StoreContext) {
  const appKey = generateAppKey();
  const queue = await db.open({ jobs: [onboard, sealed], appKey });
  const store = await db.store();
  const cipher = await cipherOf(appKey);
  return { store, queue, cipher, handler: dashboard(queue) };
}

storeTest(
  "a job's page lists its steps: seq, key, kind, state, attempt, duration, output escaped",
  async (db) => {
    const { store, queue, handler } = await setup(db);
    const id = await queue.dispatch(onboard, null);
    await recordSteps(store, "a", id, [
      stepMemo(1, "create-account", JSON.stringify({ note: HOSTILE.note }), 1_500),
      stepMemo(2, HOSTILE.name, "2"),
    ], { kind: "sleep", seq: 3, key: "cool-off", until: Date.now() + HOUR_MS });

    const page = await (await fetchFrom(handler, `/jobs/${id}`)).text();
    assert.match(page, /<h2>Steps<\/h2>/);
    const rows = [...page.matchAll(/<tr class="step-(\w+)">([\s\S]*?)<\/tr>/g)].map((
      [, kind, row],
    ) => [kind, [...row!.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map(([, cell]) => cell!.trim())]);
    assert.deepEqual(rows[0], [
      "step",
      [
        "1",
        "create-account",
        "step",
        "done",
        "1",
        "1.5 s",
        `<code>${
          JSON.stringify({ note: HOSTILE.note }).replaceAll("&", "&amp;")
            .replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll('"', "&quot;")
            .replaceAll("'", "&#39;")
        }</code>`,
      ],
    ]);
    assert.deepEqual(rows[1]?.[1]?.slice(0, 2), [
      "2",
      "&lt;script&gt;alert(&quot;name&quot;)&lt;/script&gt;",
    ]);
    assert.equal(rows[2]?.[0], "sleep");
    assert.match(rows[2]![1]![3]!, /^sleeping until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
    assert.deepEqual(rows[2]![1]!.slice(4), ["1", "–", ""]);
    assert.equal(rows.length, 3);
    assert.ok(!page.includes(HOSTILE.note), "the output is escaped");
    assert.ok(!page.includes(HOSTILE.name), "the key is escaped");

    const api = await (await fetchFrom(handler, `/api/jobs/${id}`)).json();
    assert.deepEqual(
      api.steps.map((step: { key: string; kind: string; state: string }) => [step.key, step.kind]),
      [["create-account", "step"], [HOSTILE.name, "step"], ["cool-off", "sleep"]],
    );
    assert.deepEqual(api.steps[0].output, { note: HOSTILE.note });
  },
);

storeTest(
  "an encrypted job's step output is only named, and a wait shows until when it waits",
  async (db) => {
    const { store, queue, cipher, handler } = await setup(db);
    const id = await queue.dispatch(sealed, null);
    const secret = await cipher.encrypt(stepSealedAs(id, "pin"), '{"pin":"0000-secret"}');
    await recordSteps(store, "b", id, [stepMemo(1, "pin", secret)], {
      kind: "wait",
      seq: 2,
      key: "survey",
      until: Date.now() + 24 * HOUR_MS,
    });
    const page = await (await fetchFrom(handler, `/jobs/${id}`)).text();
    assert.match(page, /<td><strong>encrypted<\/strong> <span class="muted">/);
    assert.match(page, /<td>parked until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC<\/td>/);
    assert.ok(!page.includes("0000-secret") && !page.includes(secret), "never opened nor shown");
    const api = await (await fetchFrom(handler, `/api/jobs/${id}`)).json();
    assert.equal(api.steps[0].encrypted, true);
    assert.equal("output" in api.steps[0], false);
    assert.equal(api.steps[1].state, "parked");
    assert.ok(!JSON.stringify(api).includes(secret));
  },
);

storeTest(
  "a failed job's page lists the steps a retry resumes from; a job without steps shows no table",
  async (db) => {
    const { store, queue, handler } = await setup(db);
    const id = await queue.dispatch(onboard, null);
    await recordSteps(store, "a", id, [stepMemo(1, "create-account", '{"ok":true}')], null);
    const failed = await store.settle([{
      kind: "fail",
      id,
      token: TOKEN, // the fixture's claim still holds the job
      attempts: 1,
      at: Date.now(),
      error: { message: "Error: boom", stack: null },
    }]);
    assert.deepEqual(failed.applied, [true]);
    const page = await (await fetchFrom(handler, `/failed/${id}`)).text();
    assert.match(page, /<h2>Steps<\/h2>/);
    assert.match(page, /<td>create-account<\/td>/);
    const api = await (await fetchFrom(handler, `/api/failed/${id}`)).json();
    assert.deepEqual(api.steps.map((step: { key: string }) => step.key), ["create-account"]);

    const bare = await queue.dispatch(onboard, null, { delayMs: HOUR_MS });
    const barePage = await (await fetchFrom(handler, `/jobs/${bare}`)).text();
    assert.doesNotMatch(barePage, /<h2>Steps<\/h2>/);
    assert.deepEqual((await (await fetchFrom(handler, `/api/jobs/${bare}`)).json()).steps, []);
  },
);
