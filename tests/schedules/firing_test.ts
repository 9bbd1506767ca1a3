/**
 * Schedules on every store, with an injected clock: sync, firing, the
 * missed and overlap policies, daylight saving, pause, trigger, backfill.
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, type JobDefinition, type ScheduledRun } from "../../src/job.ts";
// The same croner module the schedules use, to count the slots it computes.
// deno-lint-ignore no-import-prefix
import { Cron } from "npm:croner@11";
import { withoutOverlapping } from "../../src/middleware.ts";
import { Queue } from "../../src/queue.ts";
import type { WorkOptions } from "../../src/runner/work_options.ts";
import { defineSchedule, type ScheduleConfig } from "../../src/schedule.ts";
import { ManualClock, unfinishedCount, waitUntil, within } from "../_helpers.ts";
import { storeTest } from "../_stores.ts";

const MINUTE = 60_000;
/** A whole minute, so `everyMs: MINUTE` slots fall on it. */
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);

interface Run {
  readonly payload: unknown;
  readonly scheduled: ScheduledRun | null;
}

/** A job that records its runs, and (when `gate` is set) waits for it before it returns. */
function recordingJob(name: string, gate?: { promise: Promise<void> }) {
  const runs: Run[] = [];
  const job = defineJob({
    name,
    schema: z.strictObject({ slot: z.string().optional(), kind: z.string().optional() }),
    async handle(payload, ctx) {
      runs.push({ payload, scheduled: ctx.scheduled });
      if (gate !== undefined) await gate.promise;
    },
  });
  return { job, runs };
}

function scheduleOf<J extends JobDefinition>(
  job: J,
  config: Partial<ScheduleConfig<J>> = {},
) {
  return defineSchedule({
    name: "every-minute",
    everyMs: MINUTE,
    job,
    payload: (slot: Date) => ({ slot: slot.toISOString() }),
    ...config,
  } as ScheduleConfig<J>);
}

/**
 * A worker for slots that overlap: with a lease longer than the clock moves,
 * so the running job is not taken for a dead one.
 */
function slotWorker(queue: Queue, more: WorkOptions = {}) {
  return queue.work({
    executor: "isolate",
    concurrency: 3,
    pollMs: 10,
    leaseMs: 60 * MINUTE,
    ...more,
  });
}

/** Runs a worker until nothing is due, firing what is due first. */
async function drain(queue: Queue): Promise<void> {
  await within(
    queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 10 }).done,
    30_000,
    "a worker that stops when empty",
  );
}

storeTest("a schedule fires its slot once, with ctx.scheduled, and not before it", async (db) => {
  const clock = new ManualClock(T0 + 1_000);
  const { job, runs } = recordingJob("report");
  const queue = await db.open({ jobs: [job, scheduleOf(job)], clock });
  await drain(queue);
  assert.equal(runs.length, 0, "nothing is due before the first slot");
  clock.advance(MINUTE);
  await drain(queue);
  await drain(queue);
  assert.equal(runs.length, 1);
  const slot = T0 + MINUTE;
  assert.deepEqual(runs[0]!.payload, { slot: new Date(slot).toISOString() });
  assert.equal(runs[0]!.scheduled!.name, "every-minute");
  assert.equal(runs[0]!.scheduled!.slot.getTime(), slot);
  const [info] = await queue.schedules();
  assert.equal(info!.lastSlot!.getTime(), slot);
  assert.equal(typeof info!.lastJobId, "number");
  assert.equal(info!.nextSlot!.getTime(), slot + MINUTE);
  assert.deepEqual(
    info!.nextRuns.map((date) => date.getTime()),
    [1, 2, 3, 4, 5].map((n) => slot + n * MINUTE),
  );
});

for (
  const [missed, maxCatchUp, expected] of [
    ["skip", 100, 0],
    ["once", 100, 1],
    ["all", 100, 10],
    ["all", 4, 4],
  ] as const
) {
  storeTest(
    `after 10 missed slots, missed "${missed}" (maxCatchUp ${maxCatchUp}) fires ${expected}`,
    async (db) => {
      const clock = new ManualClock(T0 + 1_000);
      const { job, runs } = recordingJob("report");
      const queue = await db.open({
        jobs: [job, scheduleOf(job, { missed, maxCatchUp, overlap: "allow" })],
        clock,
      });
      clock.advance(10 * MINUTE); // slots T0+1min … T0+10min all passed with no worker
      await drain(queue);
      assert.equal(runs.length, expected);
      const slots = runs.map((run) => run.scheduled!.slot.getTime());
      const latest = Array.from(
        { length: expected },
        (_, i) => T0 + (10 - expected + 1 + i) * MINUTE,
      );
      assert.deepEqual(slots, latest, "the latest missed slots, oldest first");
      const [info] = await queue.schedules();
      assert.equal(info!.nextSlot!.getTime(), T0 + 11 * MINUTE, "resumes at the next slot");
      clock.advance(MINUTE);
      await drain(queue);
      assert.equal(runs.length, expected + 1, "the next slot fires on time");
    },
  );
}

storeTest(
  'overlap "skip": a job spanning 3 slots yields 1 run; "allow" fires each',
  async (db) => {
    for (const overlap of ["skip", "allow"] as const) {
      const clock = new ManualClock(T0 + MINUTE);
      let open!: () => void;
      const gate = { promise: new Promise<void>((resolve) => open = resolve) };
      const { job, runs } = recordingJob(`slow-${overlap}`, gate);
      const name = `slow-${overlap}`;
      const queue = await db.open({ jobs: [job, scheduleOf(job, { name, overlap })], clock });
      // The first slot after opening is T0 + 2 min.
      clock.advance(MINUTE);
      const worker = slotWorker(queue);
      await waitUntil(() => Promise.resolve(runs.length === 1), { what: "the first run" });
      for (const slot of [3, 4]) {
        clock.advance(MINUTE);
        worker.notify();
        await waitUntil(async () => {
          const [info] = (await queue.schedules()).filter((each) => each.name === name);
          return info!.nextSlot!.getTime() === T0 + (slot + 1) * MINUTE;
        }, { what: `slot ${slot} handled` });
      }
      if (overlap === "allow") {
        await waitUntil(() => Promise.resolve(runs.length === 3), { what: "3 runs" });
      }
      open();
      await worker.stop();
      assert.equal(runs.length, overlap === "skip" ? 1 : 3, `overlap ${overlap}`);
      assert.equal((await db.scheduleSlots(name)).length, overlap === "skip" ? 1 : 3);
      // Once the run settled, the key is free: the next slot fires.
      clock.advance(MINUTE);
      await drain(queue);
      assert.equal(runs.length, overlap === "skip" ? 2 : 4);
      await queue.close();
    }
  },
);

storeTest(
  'overlap "skip" waits for a running job whose cancel was asked until it ends (a dispatch of a unique key does not)',
  async (db) => {
    const clock = new ManualClock(T0 + MINUTE);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => open = resolve);
    const runs: number[] = [];
    const job = defineJob({
      name: "deaf",
      schema: z.strictObject({ slot: z.string() }),
      // With a lock, a cancelled attempt keeps its slot, lease and key until its handler stops
      // (graceMs), however soon the worker sees the cancel: the overlap is held throughout.
      middleware: () => [withoutOverlapping("deaf")],
      async handle() {
        runs.push(runs.length + 1);
        await gate; // does not watch ctx.signal
      },
    });
    const queue = await db.open({ jobs: [job, scheduleOf(job, { overlap: "skip" })], clock });
    clock.advance(MINUTE);
    const worker = slotWorker(queue, { graceMs: 60 * MINUTE });
    try {
      await waitUntil(() => Promise.resolve(runs.length === 1), { what: "the first run" });
      const [first] = await queue.schedules();
      assert.equal(await queue.cancel(first!.lastJobId!), "cancelling");
      clock.advance(MINUTE);
      worker.notify();
      await waitUntil(async () => {
        const [info] = await queue.schedules();
        return info!.nextSlot!.getTime() === T0 + 4 * MINUTE;
      }, { what: "slot 3 handled" });
      assert.equal(runs.length, 1, "the slot was skipped: the cancelled job still runs");
      assert.equal((await db.scheduleSlots("every-minute")).length, 1);
    } finally {
      open();
      await worker.stop();
      await queue.close();
    }
  },
);

/** Steps the clock every 10 minutes from `from` to `to`, draining at each step. */
async function stepThrough(queue: Queue, clock: ManualClock, to: number): Promise<void> {
  while (clock.now() < to) {
    clock.advance(10 * MINUTE);
    await drain(queue);
  }
}

for (
  const [zone, cron, from, to, slot, what] of [
    [
      "Europe/Berlin",
      "30 2 * * *",
      "2026-03-28T20:00:00Z",
      "2026-03-29T04:00:00Z",
      "2026-03-29T01:00:00.000Z",
      "spring forward: 02:30 does not exist, fires once at 03:00 CEST",
    ],
    [
      "Europe/Berlin",
      "30 2 * * *",
      "2026-10-24T20:00:00Z",
      "2026-10-25T04:00:00Z",
      "2026-10-25T00:30:00.000Z",
      "fall back: 02:30 exists twice, fires once at the first (CEST)",
    ],
    [
      "America/New_York",
      "30 2 * * *",
      "2026-03-08T03:00:00Z",
      "2026-03-08T10:00:00Z",
      "2026-03-08T07:00:00.000Z",
      "spring forward: 02:30 does not exist, fires once at 03:00 EDT",
    ],
    [
      "America/New_York",
      "30 1 * * *",
      "2026-11-01T03:00:00Z",
      "2026-11-01T09:00:00Z",
      "2026-11-01T05:30:00.000Z",
      "fall back: 01:30 exists twice, fires once at the first (EDT)",
    ],
  ] as const
) {
  storeTest(`DST, ${zone} "${cron}": ${what}`, async (db) => {
    const clock = new ManualClock(Date.parse(from));
    const { job, runs } = recordingJob("nightly");
    const schedule = defineSchedule({
      name: "nightly",
      cron,
      timezone: zone,
      job,
      payload: { kind: "nightly" },
      missed: "skip", // a slot fires only when a tick sees it on time
    });
    const queue = await db.open({ jobs: [job, schedule], clock });
    await stepThrough(queue, clock, Date.parse(to));
    assert.deepEqual(runs.map((run) => run.scheduled!.slot.toISOString()), [slot]);
  });
}

storeTest(
  "a pause survives a restart and a sync; resume fires by the missed policy; pause, resume and forget refuse a name no schedule can have, naming it",
  async (db) => {
    const clock = new ManualClock(T0 + 1_000);
    const { job, runs } = recordingJob("report");
    const jobs = [job, scheduleOf(job, { missed: "all", overlap: "allow" })];
    let queue = await db.open({ jobs, clock });
    assert.equal(await queue.pauseSchedule("every-minute"), true);
    assert.equal(await queue.pauseSchedule("no-such-schedule"), false);
    for (const name of ["", "a\0b", "\ud800", "x".repeat(256)]) {
      for (const method of ["pauseSchedule", "resumeSchedule", "forgetSchedule"] as const) {
        await assert.rejects(queue[method](name), {
          name: "TypeError",
          message:
            `${method}: the schedule name must be a string of 1 to 255 characters, without NUL or lone surrogates: got ${
              JSON.stringify(name.slice(0, 64))
            }`,
        });
      }
    }
    await queue.close();
    // A changed definition syncs, and the pause is kept.
    const changed = [
      job,
      scheduleOf(job, { missed: "all", overlap: "allow", jitterMs: 0, maxCatchUp: 50 }),
    ];
    queue = await db.open({ jobs: changed, clock });
    const [info] = await queue.schedules();
    assert.equal(info!.paused, true);
    assert.equal(info!.maxCatchUp, 50);
    clock.advance(3 * MINUTE);
    await drain(queue);
    assert.equal(runs.length, 0, "a paused schedule fires nothing");
    assert.equal(await queue.resumeSchedule("every-minute"), true);
    await drain(queue);
    assert.equal(runs.length, 3, 'missed "all" fires the 3 slots missed while paused');
  },
);

storeTest(
  "Queue.open syncs the schedules it defines (added, changed: new slots start after now) and leaves the others",
  async (db) => {
    const clock = new ManualClock(T0 + 1_000);
    const { job } = recordingJob("report");
    const a = scheduleOf(job, { name: "a" });
    const b = scheduleOf(job, { name: "b" });
    let queue = await db.open({ jobs: [job, a, b], clock });
    assert.deepEqual((await queue.schedules()).map((each) => each.name), ["a", "b"]);
    assert.equal(await queue.pauseSchedule("b"), true);
    await queue.close();
    clock.advance(30 * MINUTE);
    const hourly = scheduleOf(job, { name: "a", everyMs: 60 * MINUTE });
    queue = await db.open({ jobs: [job, hourly], clock });
    const list = await queue.schedules();
    assert.deepEqual(list.map((each) => [each.name, each.paused]), [["a", false], ["b", true]]);
    assert.equal(list[0]!.everyMs, 60 * MINUTE);
    assert.equal(list[0]!.nextSlot!.getTime(), T0 + 60 * MINUTE, "the first hourly slot after now");
    await queue.close();
    // A dispatch-only process with another job, and one with no jobs, change nothing.
    const other = defineJob({ name: "other", schema: z.null(), handle() {} });
    await (await db.open({ jobs: [other], mode: "external", clock })).close();
    queue = await db.open({ jobs: [], clock });
    assert.deepEqual(
      (await queue.schedules()).map((each) => [each.name, each.paused, each.everyMs]),
      [["a", false, 60 * MINUTE], ["b", true, MINUTE]],
    );
  },
);

storeTest(
  "Queue.forgetSchedule() removes a schedule no process defines; the jobs it stored stay",
  async (db) => {
    const clock = new ManualClock(T0 + 1_000);
    const { job, runs } = recordingJob("report");
    let queue = await db.open({ jobs: [job, scheduleOf(job)], clock });
    clock.advance(MINUTE);
    await queue.work({ executor: "isolate", queues: ["elsewhere"], stopWhenEmpty: true }).done;
    assert.deepEqual(
      await db.scheduleSlots("every-minute"),
      [T0 + MINUTE],
      "a slot fired, its job waits",
    );
    await assert.rejects(
      queue.forgetSchedule("every-minute"),
      /Cannot forget schedule "every-minute": this queue's jobs module still defines it/,
    );
    await queue.close();
    queue = await db.open({ jobs: [job], clock });
    assert.equal(await queue.forgetSchedule("every-minute"), true);
    assert.equal(await queue.forgetSchedule("every-minute"), false, "gone already");
    assert.deepEqual(await queue.schedules(), []);
    assert.deepEqual(
      await db.scheduleSlots("every-minute"),
      [T0 + MINUTE],
      "the run of a stored job is kept",
    );
    await drain(queue);
    assert.deepEqual(
      runs.map((run) => run.payload),
      [{ slot: new Date(T0 + MINUTE).toISOString() }],
      "the job it stored ran",
    );
  },
);

storeTest("Queue.open refuses a wrong schedule, naming it, and writes nothing", async (db) => {
  const { job } = recordingJob("report");
  const other = defineJob({ name: "other", schema: z.null(), handle() {} });
  const cases: [unknown[], RegExp][] = [
    [[job, scheduleOf(other)], /Schedule "every-minute": its job "other" is not registered/],
    [
      [job, scheduleOf(job, { payload: { slot: 7 } as never })],
      /Schedule "every-minute": .*slot/,
    ],
    [
      [job, scheduleOf(job, { payload: () => ({ nope: true }) as never })],
      /Schedule "every-minute"/,
    ],
    [
      [job, scheduleOf(job), scheduleOf(job)],
      /Schedule "every-minute": two schedules have this name/,
    ],
  ];
  for (const [jobs, message] of cases) {
    await assert.rejects(db.open({ jobs: jobs as never }), message);
  }
  // A queue that defines none lists every stored schedule: none was written.
  const queue = await db.open({ jobs: [job] });
  assert.deepEqual(await queue.schedules(), []);
});

storeTest(
  "backfillSchedule of slots more than 7 days old remembers them 7 days from the backfill: asked again, after a firing tick too, it skips them, and their jobs see their slots",
  async (db) => {
    const DAY = 24 * 60 * MINUTE;
    const clock = new ManualClock(T0 + 10 * DAY);
    const { job, runs } = recordingJob("report");
    const queue = await db.open({
      jobs: [job, scheduleOf(job, { overlap: "allow", maxCatchUp: 5 })],
      clock,
    });
    const range = { from: new Date(T0 + 2 * MINUTE), to: new Date(T0 + 4 * MINUTE) };
    assert.equal((await queue.backfillSchedule("every-minute", range)).jobIds.length, 3);
    clock.advance(MINUTE);
    await drain(queue); // runs the backfilled jobs, and a tick fires the slot due now
    const again = await queue.backfillSchedule("every-minute", range);
    assert.deepEqual([again.jobIds.length, again.skipped], [0, 3], "fired already");
    assert.deepEqual(
      runs.map((run) => (run.scheduled!.slot.getTime() - T0) / MINUTE).sort((a, b) => a - b),
      [2, 3, 4, 10 * 24 * 60 + 1],
    );
  },
);

storeTest(
  "triggerSchedule runs one job now; backfillSchedule fires each slot of a range once",
  async (db) => {
    const clock = new ManualClock(T0 + 1_000);
    const { job, runs } = recordingJob("report");
    const queue = await db.open({
      jobs: [job, scheduleOf(job, { overlap: "allow", maxCatchUp: 5 })],
      clock,
    });
    await queue.pauseSchedule("every-minute");
    const id = await queue.triggerSchedule("every-minute");
    assert.equal(typeof id, "number", "a paused schedule can still be triggered");
    await drain(queue);
    assert.equal(runs.length, 1);
    assert.equal(
      runs[0]!.scheduled!.slot.getTime(),
      T0 + 1_000,
      "its slot is the time it was triggered",
    );
    await assert.rejects(queue.triggerSchedule("nope"), /Cannot trigger schedule "nope"/);

    clock.advance(10 * MINUTE);
    const range = { from: new Date(T0 + 2 * MINUTE), to: new Date(T0 + 4 * MINUTE) };
    const first = await queue.backfillSchedule("every-minute", range);
    assert.equal(first.jobIds.length, 3);
    const again = await queue.backfillSchedule("every-minute", {
      from: new Date(T0 + 3 * MINUTE),
      to: new Date(T0 + 5 * MINUTE),
    });
    assert.deepEqual(
      [again.jobIds.length, again.skipped],
      [1, 2],
      "slots fired already are skipped",
    );
    await assert.rejects(
      queue.backfillSchedule("every-minute", { from: new Date(T0), to: new Date(T0 + 9 * MINUTE) }),
      /more than 5 slots/,
    );
    await assert.rejects(
      queue.backfillSchedule("every-minute", {
        from: new Date(T0),
        to: new Date(T0 + 99 * MINUTE),
      }),
      /to is in the future/,
    );
    await drain(queue);
    assert.deepEqual(
      runs.slice(1).map((run) => (run.scheduled!.slot.getTime() - T0) / MINUTE),
      [2, 3, 4, 5],
    );
    // Resumed, the schedule does not fire the backfilled slots again.
    await queue.resumeSchedule("every-minute");
    await drain(queue);
    assert.deepEqual(
      await db.scheduleSlots("every-minute"),
      [2, 3, 4, 5, 10].map((n) => T0 + n * MINUTE),
      'the backfilled slots, then the latest missed one (missed "once")',
    );
  },
);

storeTest("work({ schedules: false }) fires nothing; another worker fires", async (db) => {
  const clock = new ManualClock(T0 + 1_000);
  const { job, runs } = recordingJob("report");
  const queue = await db.open({ jobs: [job, scheduleOf(job)], clock });
  clock.advance(MINUTE);
  await within(
    queue.work({ executor: "isolate", stopWhenEmpty: true, schedules: false }).done,
    30_000,
    "a worker without schedules",
  );
  assert.equal(runs.length, 0);
  await drain(queue);
  assert.equal(runs.length, 1);
});

storeTest(
  "dispatchByName checks the payload by the job's schema; dispatch { at } is due then",
  async (db) => {
    const clock = new ManualClock(T0);
    const { job, runs } = recordingJob("report");
    const queue = await db.open({ jobs: [job], clock });
    await assert.rejects(queue.dispatchByName("nope", {}), /no job of that name is registered/);
    await assert.rejects(queue.dispatchByName("report", { slot: 1 }), /slot/);
    await queue.dispatchByName("report", { kind: "by-name" }, { at: new Date(T0 + MINUTE) });
    await assert.rejects(
      queue.dispatch(job, { kind: "x" }, { at: new Date(T0), delayMs: 5 }),
      /either at or delayMs/,
    );
    await assert.rejects(
      queue.dispatch(job, { kind: "x" }, { at: new Date(NaN) }),
      /at must be a valid Date/,
    );
    await drain(queue);
    assert.equal(runs.length, 0, "not due before its time");
    clock.advance(MINUTE);
    await drain(queue);
    assert.deepEqual(runs.map((run) => [run.payload, run.scheduled]), [[
      { kind: "by-name" },
      null,
    ]]);
  },
);

storeTest(
  'a manual run beside a running slot job keeps overlap "skip": the next slot does not start',
  async (db) => {
    const clock = new ManualClock(T0 + MINUTE);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => open = resolve);
    const started: number[] = [];
    const job = defineJob({
      name: "slow-slot",
      schema: z.null(),
      async handle(_payload, ctx) {
        const slot = ctx.scheduled!.slot.getTime();
        started.push(slot);
        if (slot % MINUTE === 0) await gate; // slot jobs run long; a manual run is short
      },
    });
    const schedule = defineSchedule({ name: "slow", everyMs: MINUTE, job, payload: null });
    const queue = await db.open({ jobs: [job, schedule], clock });
    clock.advance(MINUTE); // the slot T0 + 2 min is due
    const worker = queue.work({
      executor: "isolate",
      concurrency: 3,
      pollMs: 10,
      leaseMs: 60 * MINUTE,
    });
    await waitUntil(() => Promise.resolve(started.length === 1), { what: "the slot job started" });
    clock.advance(1_000);
    const manual = await queue.triggerSchedule("slow");
    await waitUntil(async () => (await queue.result(manual!))?.state === "completed", {
      what: "the manual run ended",
    });
    clock.advance(MINUTE); // the slot T0 + 3 min is due while the slot job still runs
    worker.notify();
    await waitUntil(async () => {
      const [info] = await queue.schedules();
      return info!.nextSlot!.getTime() === T0 + 4 * MINUTE;
    }, { what: "the slot T0 + 3 min handled" });
    open();
    await worker.stop();
    assert.deepEqual(started, [T0 + 2 * MINUTE, T0 + 2 * MINUTE + 1_000], "no second slot job");
    assert.deepEqual(await db.scheduleSlots("slow"), [T0 + 2 * MINUTE]);
  },
);

storeTest(
  "an on-time slot computes a few slots, however large maxCatchUp is",
  async (db) => {
    const clock = new ManualClock(T0 + 500);
    const { job, runs } = recordingJob("report");
    const schedule = defineSchedule({
      name: "every-second",
      cron: "* * * * * *",
      job,
      payload: { kind: "tick" },
      maxCatchUp: 10_000,
    });
    const queue = await db.open({ jobs: [job, schedule], clock });
    // Count the slots croner computes while the worker fires the one slot due.
    let computed = 0;
    const { nextRun, previousRuns } = Cron.prototype;
    Cron.prototype.nextRun = function (...args) {
      computed++;
      return nextRun.apply(this, args);
    };
    Cron.prototype.previousRuns = function (...args) {
      const slots = previousRuns.apply(this, args);
      computed += slots.length;
      return slots;
    };
    try {
      for (let second = 1; second <= 3; second++) {
        clock.advance(1_000);
        await drain(queue);
        assert.equal(runs.length, second);
      }
    } finally {
      Object.assign(Cron.prototype, { nextRun, previousRuns });
    }
    console.log(`3 on-time slots (maxCatchUp 10000) computed ${computed} slots`);
    assert.ok(computed <= 60, `3 on-time slots computed ${computed} slots`);
    clock.advance(5_000); // 4 slots missed and one due: missed "once" fires the latest
    await drain(queue);
    assert.deepEqual(
      runs.slice(3).map((run) => run.scheduled!.slot.getTime()),
      [T0 + 8_000],
    );
  },
);

// A cron with a wildcard, step, list or range in its second, minute or hour field: a local time
// that exists twice fires at both, one that does not exist is skipped (croner's rule, Vixie cron's).
for (
  const [transition, from, to, expected] of [
    [
      // 02:00–03:00 local exists twice: 00:00–01:00 UTC (CEST), then 01:00–02:00 UTC (CET).
      "fall back fires both copies of the repeated hour",
      "2026-10-24T23:10:00Z",
      "2026-10-25T02:40:00Z",
      {
        "0 * * * *": ["00:00", "01:00", "02:00"],
        "*/30 * * * *": ["23:30", "00:00", "00:30", "01:00", "01:30", "02:00", "02:30"],
        "30 2,3 * * *": ["00:30", "01:30", "02:30"],
      },
    ],
    [
      // 02:00–03:00 local does not exist: 01:00 UTC is 03:00 CEST.
      "spring forward skips the hour that does not exist",
      "2026-03-28T23:10:00Z",
      "2026-03-29T02:40:00Z",
      {
        "0 * * * *": ["00:00", "01:00", "02:00"],
        "*/30 * * * *": ["23:30", "00:00", "00:30", "01:00", "01:30", "02:00", "02:30"],
        "30 2,3 * * *": ["01:30"],
      },
    ],
  ] as const
) {
  storeTest(`DST, Europe/Berlin crons of many hours or minutes: ${transition}`, async (db) => {
    const clock = new ManualClock(Date.parse(from));
    const { job, runs } = recordingJob("many");
    const crons = Object.keys(expected);
    const schedules = crons.map((cron, index) =>
      defineSchedule({
        name: `cron-${index}`,
        cron,
        timezone: "Europe/Berlin",
        job,
        payload: { kind: cron },
        missed: "skip",
      })
    );
    const queue = await db.open({ jobs: [job, ...schedules], clock });
    await stepThrough(queue, clock, Date.parse(to));
    for (const cron of crons) {
      const slots = runs.filter((run) => (run.payload as { kind: string }).kind === cron)
        .map((run) => run.scheduled!.slot.toISOString().slice(11, 16));
      assert.deepEqual(slots, expected[cron as keyof typeof expected], cron);
    }
  });
}

storeTest(
  "backfillSchedule refuses a range from before the Unix epoch, naming the limit",
  async (db) => {
    const clock = new ManualClock(T0 + 1_000);
    const { job } = recordingJob("report");
    const schedule = defineSchedule({
      name: "nightly",
      cron: "30 2 * * *",
      job,
      payload: { kind: "nightly" },
    });
    const queue = await db.open({ jobs: [job, schedule], clock });
    for (const from of [new Date(-8.64e15), new Date("1969-12-31T23:59:59Z")]) {
      await assert.rejects(
        queue.backfillSchedule("nightly", { from, to: new Date(T0) }),
        /Cannot backfill schedule "nightly": from must be at or after 1970-01-01T00:00:00\.000Z \(the Unix epoch\): got /,
      );
    }
    assert.equal(await unfinishedCount(queue), 0);
  },
);

Deno.test("an inline queue's triggerSchedule runs the job now, with ctx.scheduled; backfill is refused", async () => {
  const { job, runs } = recordingJob("report");
  const clock = new ManualClock(T0 + 1_000);
  await using queue = await Queue.open({
    mode: "inline",
    jobs: [job, scheduleOf(job)],
    clock,
  });
  assert.equal(await queue.triggerSchedule("every-minute"), 0);
  assert.deepEqual(runs.map((run) => [run.payload, run.scheduled]), [[
    { slot: new Date(T0 + 1_000).toISOString() },
    { name: "every-minute", slot: new Date(T0 + 1_000) },
  ]]);
  await assert.rejects(queue.triggerSchedule("nope"), /Cannot trigger schedule "nope"/);
  await assert.rejects(
    queue.backfillSchedule("every-minute", { from: new Date(T0), to: new Date(T0) }),
    /Cannot backfill schedule "every-minute": an inline queue \(mode "inline"\) stores no record of the slots fired/,
  );
});

storeTest(
  "a stored schedule whose cron no longer reads is listed without next runs; the others fire",
  async (db) => {
    const clock = new ManualClock(T0 + 1_000);
    const { job, runs } = recordingJob("report");
    const queue = await db.open({
      jobs: [job, scheduleOf(job, { name: "a" }), scheduleOf(job, { name: "old" })],
      clock,
    });
    // As an older version stored it, before such a cron was refused; no process defines it now.
    await db.setScheduleRule("old", { cron: "0 0 31 2 *", everyMs: null });
    const current = await db.open({ jobs: [job, scheduleOf(job, { name: "a" })], clock });
    const list = await current.schedules();
    assert.deepEqual(list.map((each) => [each.name, each.nextRuns.length]), [["a", 5], ["old", 0]]);
    clock.advance(MINUTE);
    await drain(current);
    await drain(current);
    assert.deepEqual(runs.map((run) => run.scheduled!.name), ["a"]);
    await queue.close();
  },
);
