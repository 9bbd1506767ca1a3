/**
 * defineSchedule's refusals, and schedules of encrypted and unique jobs:
 * they go through the normal path (sealed payloads, unique keys).
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, generateAppKey } from "../../mod.ts";
import { defineSchedule } from "../../src/schedule.ts";
import { ManualClock, within } from "../_helpers.ts";
import { storeTest } from "../_stores.ts";

const job = defineJob({ name: "report", schema: z.null(), handle() {} });

Deno.test("defineSchedule refuses wrong settings, a misspelt one by name, with an error naming the schedule", () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ cron: "61 * * * *" }, /Schedule "s": cron "61 \* \* \* \*" does not parse: .*minute/],
    [{ cron: "* * * *" }, /Schedule "s": cron must have 5 fields .* got 4/],
    [{ cron: "   " }, /Schedule "s": cron must have 5 fields .* got 0/],
    // croner reads the day of the month and the month one less than written: told as written.
    [{ cron: "0 0 32 * *" }, /its day of the month field "32" is out of range: 1 to 31$/],
    [{ cron: "0 0 * 0 *" }, /its month field "0" is out of range: 1 to 12/],
    [
      { cron: "0 0 1 1 * 2030" },
      /its weekday field "2030" is out of range: .*\(6 fields are read with seconds first\)$/,
    ],
    [{ cron: "0 0 0 * * * 2030" }, /got 7/],
    [
      { cron: "* * * * *", timezone: "Mars/Olympus" },
      /Schedule "s": timezone "Mars\/Olympus" is not an IANA time zone/,
    ],
    [{ everyMs: 999 }, /Schedule "s": everyMs must be a whole number of ms from 1000/],
    [{ everyMs: 1_500.5 }, /everyMs must be a whole number/],
    [{}, /give either cron or everyMs, not neither/],
    [{ cron: "* * * * *", everyMs: 60_000 }, /not both/],
    [{ everyMs: 60_000, missed: "later" }, /missed must be "skip", "once" or "all"/],
    [{ everyMs: 60_000, overlap: "queue" }, /overlap must be "skip" or "allow"/],
    [{ everyMs: 60_000, maxCatchUp: 0 }, /maxCatchUp must be a whole number from 1/],
    [{ everyMs: 60_000, jitterMs: -1 }, /jitterMs must be a number of ms from 0/],
    [{ everyMs: 60_000, job: { name: "fake" } }, /job must be a job made with defineJob/],
    [
      { cron: "30 2 * * *", timeZone: "Europe/Berlin" },
      /Schedule "s": unknown option "timeZone" \(it takes .*"timezone"/,
    ],
    [{ everyMs: 60_000, mised: "skip" }, /Schedule "s": unknown option "mised"/],
  ];
  for (const [config, message] of cases) {
    assert.throws(() => defineSchedule({ name: "s", job, ...config } as never), message);
  }
  assert.throws(() => defineSchedule({ name: "", everyMs: 60_000, job }), /name must be a string/);
  for (const name of [".", ".."]) {
    assert.throws(
      () => defineSchedule({ name, everyMs: 60_000, job }),
      new RegExp(
        `^TypeError: defineSchedule: name must not be "\\." or "\\.\\.": got "${
          name.replaceAll(".", "\\.")
        }"$`,
      ),
      "a URL resolves the path segment away",
    );
  }
  assert.equal(defineSchedule({ name: "...", everyMs: 60_000, job }).name, "...");
  const six = defineSchedule({ name: "six", cron: "*/10 * * * * *", job, payload: null });
  assert.equal(six.cron, "*/10 * * * * *");
  assert.equal(six.timezone, "UTC");
});

Deno.test("defineSchedule refuses a cron that can never fire, naming it", () => {
  for (const cron of ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4 *", "0 0 0 31 11 *"]) {
    assert.throws(
      () => defineSchedule({ name: "never", cron, job }),
      new RegExp(`Schedule "never": cron "${cron.replaceAll("*", "\\*")}" never fires`),
    );
  }
  // Rare is not never: the 29th of February, and the 31st of February OR any Monday.
  for (const cron of ["0 0 29 2 *", "0 0 31 2 1"]) {
    assert.equal(defineSchedule({ name: "rare", cron, job }).cron, cron);
  }
});

Deno.test('defineSchedule refuses missed "all" with overlap "skip", saying what to set', () => {
  for (const config of [{ missed: "all" }, { missed: "all", overlap: "skip" }]) {
    assert.throws(
      () => defineSchedule({ name: "catch-up", everyMs: 60_000, job, ...config } as never),
      /Schedule "catch-up": missed "all" fires a job for each missed slot at once, which overlap "skip" \(the default\) forbids: set overlap: "allow", or missed: "once"/,
    );
  }
  const allowed = defineSchedule({
    name: "catch-up",
    everyMs: 60_000,
    job,
    missed: "all",
    overlap: "allow",
  });
  assert.deepEqual([allowed.missed, allowed.overlap], ["all", "allow"]);
});

Deno.test("a schedule without payload dispatches null; a schema that refuses null is named", () => {
  for (const schema of [z.null(), z.null().optional(), z.unknown(), z.object({}).nullable()]) {
    const each = defineJob({ name: "no-payload", schema, handle() {} });
    assert.equal(defineSchedule({ name: "s", everyMs: 60_000, job: each }).payload, null);
  }
  for (const schema of [z.undefined(), z.void(), z.object({}).optional()]) {
    const each = defineJob({ name: "no-payload", schema, handle() {} });
    assert.throws(
      () => defineSchedule({ name: "s", everyMs: 60_000, job: each }),
      /Schedule "s": no payload given, so each job gets null, which the schema of job "no-payload" refuses: give a payload, or a schema that takes null \(z\.null\(\); z\.undefined\(\) and z\.void\(\) take no value JSON can store\)/,
    );
  }
});

storeTest("a schedule without payload opens and fires its job with null", async (db) => {
  const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
  const clock = new ManualClock(T0 + 1_000);
  const seen: unknown[] = [];
  const ping = defineJob({
    name: "ping",
    schema: z.null(),
    handle(payload) {
      seen.push(payload);
    },
  });
  const queue = await db.open({
    jobs: [ping, defineSchedule({ name: "ping", everyMs: 60_000, job: ping })],
    clock,
  });
  clock.advance(60_000);
  await within(queue.work({ executor: "isolate", stopWhenEmpty: true }).done, 30_000, "a worker");
  await within(queue.work({ executor: "isolate", stopWhenEmpty: true }).done, 30_000, "a worker");
  assert.deepEqual(seen, [null]);
});

storeTest(
  "Queue.open refuses a jobs module whose schedule's cron does not parse, naming it",
  async (db) => {
    const jobs = new URL("../fixtures/schedules/bad_cron_jobs.ts", import.meta.url).href;
    await assert.rejects(
      db.open({ jobs }),
      /Schedule "broken-cron": cron "61 \* \* \* \*" does not parse/,
    );
  },
);

storeTest(
  "an encrypted job's schedule stores sealed payloads; a unique job's fires only while none is queued",
  async (db) => {
    const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
    const clock = new ManualClock(T0 + 1_000);
    const seen: unknown[] = [];
    const secret = defineJob({
      name: "secret",
      schema: z.object({ card: z.string() }),
      encrypted: true,
      handle(payload, ctx) {
        seen.push([payload, ctx.scheduled!.slot.getTime()]);
      },
    });
    const unique = defineJob({
      name: "unique",
      schema: z.null(),
      uniqueForMs: 3_600_000,
      handle() {},
    });
    const schedules = [
      defineSchedule({
        name: "secret",
        everyMs: 60_000,
        job: secret,
        payload: { card: "4111 1111" },
      }),
      defineSchedule({
        name: "unique",
        everyMs: 60_000,
        job: unique,
        payload: null,
        overlap: "allow",
      }),
    ];
    const queue = await db.open({
      jobs: [secret, unique, ...schedules],
      clock,
      appKey: generateAppKey(),
    });
    clock.advance(60_000);
    // The first tick seals the secret's payload; a worker that stops when empty ticks until it ran.
    const worker = queue.work({
      executor: "isolate",
      stopWhenEmpty: true,
      pollMs: 10,
      queues: ["elsewhere"],
    });
    await within(worker.done, 30_000, "a worker that fires and runs nothing");
    const rows = (await queue.jobs({ limit: 100 })).jobs.sort((a, b) =>
      a.name.localeCompare(b.name)
    );
    assert.deepEqual(rows.map((row) => row.name), ["secret", "unique"]);
    const sealed = await db.stored("jobs", rows[0]!.id, "payload");
    assert.ok(sealed !== null && !sealed.includes("4111"), "the stored payload is sealed");
    clock.advance(60_000);
    await within(
      queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 10, queues: ["elsewhere"] })
        .done,
      30_000,
      "a second worker",
    );
    assert.equal(
      (await queue.jobs({ name: "unique", limit: 1 })).total,
      1,
      "the unique job's key kept the second slot's out",
    );
    assert.equal(
      (await queue.jobs({ name: "secret", limit: 1 })).total,
      1,
      "overlap skip kept the second secret out",
    );
    await within(queue.work({ executor: "isolate", stopWhenEmpty: true }).done, 30_000, "a worker");
    assert.deepEqual(seen, [[{ card: "4111 1111" }, T0 + 60_000]]);
  },
);
