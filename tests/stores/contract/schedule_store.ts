/**
 * The contract of `ScheduleStore`: syncing the jobs module's
 * schedules, listing and pausing them, and storing runs outside their tick.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { ScheduleFiring, ScheduleRow, Store } from "../../../src/stores/store.ts";
import {
  claim,
  complete,
  type ContractArea,
  type ContractTest,
  fail,
  ids,
  newJob,
  plain,
  schedule,
  T0,
} from "./fixtures.ts";

/** Stored schedules and their manual runs. */
export const scheduleStore: ContractArea = {
  covers: ["syncSchedules", "schedules", "setSchedulePaused", "forgetSchedule", "runSchedule"],
  register,
};

const MINUTE = 60_000;

/** What `schedules()` lists for `row` before it ever ran. */
function stored(row: ScheduleRow, nextSlot: number, paused = false) {
  const { definition: _, ...fields } = row;
  return { ...fields, nextSlot, paused, lastSlot: null, lastJobId: null, lastFiredAt: null };
}

/** A worker's firing of schedule `name`: each slot's job due when it fires. */
function firing(name: string): ScheduleFiring {
  return {
    names: [name],
    row: (_, slot, now) =>
      newJob({ payload: `{"slot":${slot}}`, availableAt: now, createdAt: now }),
  };
}

/** A worker's tick at `now` of schedule `name`: fires its due slots, then claims; the ids claimed. */
async function tick(store: Store, name: string, now: number, token: number): Promise<number[]> {
  const leaseMs = 60 * MINUTE; // no lease runs out in these cases
  return ids(await claim(store, { now, token, leaseMs, schedules: firing(name) }));
}

function register(test: ContractTest): void {
  test("syncSchedules() adds and updates schedules and leaves the others; schedules() lists them by name", async (store) => {
    const every = schedule("b-every");
    const hourly = schedule("a-hourly", { cron: "0 * * * *", everyMs: null });
    await store.syncSchedules([every, hourly], T0 + 1);
    assert.deepEqual(plain(await store.schedules()), [
      stored(hourly, T0 + 60 * MINUTE),
      stored(every, T0 + MINUTE),
    ]);
    assert.equal(await store.setSchedulePaused("b-every", true, T0 + 2), true);
    const jittered = schedule("b-every", { jitterMs: 500 });
    await store.syncSchedules([jittered], T0 + 90_000);
    assert.deepEqual(
      plain(await store.schedules()),
      [stored(hourly, T0 + 60 * MINUTE), stored(jittered, T0 + MINUTE, true)],
      "a change that keeps its slots keeps its next slot and paused state; a schedule not synced stays",
    );
    const slower = schedule("b-every", { everyMs: 2 * MINUTE });
    await store.syncSchedules([slower], T0 + 90_000);
    assert.deepEqual(
      plain(await store.schedules()),
      [stored(hourly, T0 + 60 * MINUTE), stored(slower, T0 + 2 * MINUTE, true)],
      "a changed interval starts again at its first slot after now",
    );
    await store.syncSchedules([], T0 + 90_000);
    assert.equal((await store.schedules()).length, 2, "syncing nothing removes nothing");
  });

  test("forgetSchedule() removes a stored schedule and its pause; false for one not stored", async (store) => {
    await store.syncSchedules([schedule("gone"), schedule("kept")], T0);
    assert.equal(await store.setSchedulePaused("gone", true, T0), true);
    assert.equal(await store.forgetSchedule("gone"), true);
    assert.deepEqual((await store.schedules()).map((row) => row.name), ["kept"]);
    assert.equal(await store.forgetSchedule("gone"), false, "gone already");
    assert.equal(await store.forgetSchedule("missing"), false);
    await store.syncSchedules([schedule("gone")], T0 + 1);
    const again = (await store.schedules()).find((row) => row.name === "gone");
    assert.equal(again?.paused, false, "stored again, it starts unpaused: its pause went with it");
  });

  test("setSchedulePaused() pauses and resumes a stored schedule; false for one not stored", async (store) => {
    await store.syncSchedules([schedule("s")], T0);
    assert.equal(await store.setSchedulePaused("s", true, T0), true);
    assert.equal((await store.schedules())[0]?.paused, true);
    assert.equal(await store.setSchedulePaused("s", false, T0), true);
    assert.equal((await store.schedules())[0]?.paused, false);
    assert.equal(await store.setSchedulePaused("missing", true, T0), false);
    assert.deepEqual((await store.schedules()).map((row) => row.name), ["s"]);
  });

  test("runSchedule() stores a job per run, a slot once unless the run is manual, and records the last run", async (store) => {
    await store.syncSchedules([schedule("s")], T0);
    const run = (slot: number, manual: boolean, name = "tick") => ({
      slot,
      manual,
      row: newJob({ name, payload: `{"slot":${slot}}` }),
    });
    const [first] = await store.runSchedule("s", [run(T0, false)], T0 + 5);
    assert.ok(typeof first === "number");
    assert.deepEqual(await store.runSchedule("s", [run(T0, false)], T0 + 6), [null], "fired once");
    const [manual, next] = await store.runSchedule("s", [
      run(T0, true, "tick-manual"),
      run(T0 + MINUTE, false),
    ], T0 + 7);
    assert.ok(typeof manual === "number" && typeof next === "number");
    const listed = (await store.schedules())[0]!;
    assert.deepEqual(
      [listed.lastSlot, listed.lastJobId, listed.lastFiredAt, listed.nextSlot],
      [T0 + MINUTE, next, T0 + 7, T0 + MINUTE],
      "the next slot of the tick is not moved by a run outside it",
    );
    const claimed = await claim(store, { limit: 10, now: T0 + 7, readsScheduled: true });
    assert.deepEqual(ids(claimed), [first, manual, next]);
    assert.deepEqual(
      claimed.map((job) => [job.name, job.payload, job.scheduled]),
      [
        ["tick", `{"slot":${T0}}`, { name: "s", slot: T0 }],
        ["tick-manual", `{"slot":${T0}}`, { name: "s", slot: T0 }],
        ["tick", `{"slot":${T0 + MINUTE}}`, { name: "s", slot: T0 + MINUTE }],
      ],
    );
  });

  test("runSchedule() refuses a schedule not stored, naming it, and stores nothing", async (store) => {
    await assert.rejects(
      store.runSchedule("missing", [{ slot: T0, manual: true, row: newJob() }], T0),
      (error) =>
        error instanceof Error &&
        /Cannot run schedule "missing": it is not stored/.test(error.message),
    );
    assert.deepEqual(await store.counts(T0), []);
  });

  test("runSchedule() gives null for a run whose job's unique key is held", async (store) => {
    await store.syncSchedules([schedule("s")], T0);
    const key = {
      kind: "unique",
      key: "only-one",
      expiresAt: T0 + 10 * MINUTE,
      releaseOnStart: false,
    } as const;
    const [holder] = await store.insertKeyed([{ ...newJob(), key }]);
    const runs = await store.runSchedule("s", [{
      slot: T0,
      manual: true,
      row: { ...newJob(), key },
    }], T0);
    assert.deepEqual(runs, [null]);
    assert.deepEqual(ids(await claim(store)), [holder?.id]);
  });

  test("a tick fires the schedules its process defines however many due schedules no process defines are stored", async (store) => {
    // An older deploy's schedules, removed from the code but never forgotten: due for good, as no
    // process advances them. More than a tick reads at once.
    const stale = Array.from({ length: 1_001 }, (_, i) => schedule(`a-stale-${i}`));
    await store.syncSchedules([...stale, schedule("z-mine")], T0);
    for (let minute = 1; minute <= 3; minute++) {
      assert.equal(
        (await tick(store, "z-mine", T0 + minute * MINUTE, minute)).length,
        1,
        `slot ${minute} of the defined schedule fires`,
      );
    }
    const listed = await store.schedules();
    assert.equal(listed.find((row) => row.name === "a-stale-0")?.nextSlot, T0 + MINUTE);
    assert.equal(listed.find((row) => row.name === "z-mine")?.nextSlot, T0 + 4 * MINUTE);
  });

  test('overlap "skip": a slot job that failed for good and is retried holds the overlap again', async (store) => {
    await store.syncSchedules([schedule("s", { overlap: "skip" })], T0);
    const [first] = await tick(store, "s", T0 + MINUTE, 1);
    assert.ok(first !== undefined, "the first slot fires");
    assert.deepEqual((await store.settle([fail(first, 1, T0 + MINUTE + 1)])).applied, [true]);
    assert.deepEqual(await store.retry([first], T0 + MINUTE + 2), [first]);
    assert.deepEqual(
      await tick(store, "s", T0 + 2 * MINUTE, 2),
      [first],
      "the slot fires nothing while the retried job is pending",
    );
    assert.deepEqual((await store.settle([complete(first, 2, T0 + 2 * MINUTE + 1)])).applied, [
      true,
    ]);
    assert.equal(
      (await tick(store, "s", T0 + 3 * MINUTE, 3)).length,
      1,
      "it ended: the slot fires",
    );
  });

  test('overlap "skip": a retried slot job leaves the overlap to the newer job holding it', async (store) => {
    await store.syncSchedules([schedule("s", { overlap: "skip" })], T0);
    const [first] = await tick(store, "s", T0 + MINUTE, 1);
    assert.deepEqual((await store.settle([fail(first!, 1, T0 + MINUTE + 1)])).applied, [true]);
    const [second] = await tick(store, "s", T0 + 2 * MINUTE, 2);
    assert.ok(second !== undefined && second !== first, "the key was free: the next slot fired");
    assert.deepEqual(await store.retry([first!], T0 + 2 * MINUTE + 1), [first]);
    assert.deepEqual(ids(await claim(store, { now: T0 + 2 * MINUTE + 2, token: 3 })), [first]);
    assert.deepEqual((await store.settle([complete(first!, 3, T0 + 2 * MINUTE + 3)])).applied, [
      true,
    ]);
    assert.deepEqual(
      await tick(store, "s", T0 + 3 * MINUTE, 4),
      [],
      "the retried job's end did not free the running job's overlap",
    );
    assert.deepEqual((await store.settle([complete(second, 2, T0 + 3 * MINUTE + 1)])).applied, [
      true,
    ]);
    assert.equal((await tick(store, "s", T0 + 4 * MINUTE, 5)).length, 1);
  });

  test('overlap "skip": a forgotten schedule\'s job still holds its overlap when it is stored again', async (store) => {
    const s = schedule("s", { overlap: "skip" });
    await store.syncSchedules([s], T0);
    const [first] = await tick(store, "s", T0 + MINUTE, 1);
    assert.ok(first !== undefined);
    assert.equal(await store.forgetSchedule("s"), true);
    await store.syncSchedules([s], T0 + MINUTE + 1);
    assert.deepEqual(await tick(store, "s", T0 + 2 * MINUTE, 2), [], "its job is still running");
    assert.deepEqual((await store.settle([complete(first, 1, T0 + 2 * MINUTE + 1)])).applied, [
      true,
    ]);
    const [second] = await tick(store, "s", T0 + 3 * MINUTE, 3);
    assert.ok(second !== undefined, "its job ended: the slot fires");
    assert.equal(await store.forgetSchedule("s"), true);
    assert.deepEqual((await store.settle([complete(second, 3, T0 + 3 * MINUTE + 1)])).applied, [
      true,
    ]);
    await store.syncSchedules([s], T0 + 3 * MINUTE + 2);
    assert.equal(
      (await tick(store, "s", T0 + 4 * MINUTE, 4)).length,
      1,
      "a job that ended while its schedule was forgotten holds nothing",
    );
  });
}
