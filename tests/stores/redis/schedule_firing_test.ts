/**
 * The firing of due schedule slots in the Redis store's claim: JS computes
 * the slots and one script applies them if the schedule's next slot is
 * still the one read, so two processes firing at once store each slot once.
 * (The feature tests of schedules run on the SQL stores; these are the
 * same rules at the store's level.) Runs when `QUEUE_TEST_REDIS_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { RedisStore } from "../../../src/stores/redis/mod.ts";
import type {
  ClaimRequest,
  FiredJobRow,
  ScheduleFiring,
  ScheduleRow,
  Store,
} from "../../../src/stores/store.ts";
import { openTestRedisStore, redisTestUrl } from "../../_redis.ts";
import { schedule as everyMinute } from "../contract/fixtures.ts";

const MINUTE = 60_000;
/** A whole minute, so `everyMs: MINUTE` slots fall on it. */
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);

const url = redisTestUrl();

/** The contract's schedule of job "tick" every minute in "default", named "every-minute". */
function schedule(overrides: Partial<ScheduleRow> = {}): ScheduleRow {
  return everyMinute("every-minute", overrides);
}

/** Fires the schedules named in `rows` (a row per slot: `{"slot":<slot>}`), or what `row` says. */
function firing(
  names: readonly string[],
  row?: (name: string, slot: number) => FiredJobRow | null | undefined,
): ScheduleFiring {
  return {
    names,
    row: (name, slot, now) =>
      row !== undefined ? row(name, slot) : {
        queue: "default",
        name: "tick",
        payload: JSON.stringify({ slot }),
        priority: 0,
        availableAt: slot,
        retryUntil: null,
        createdAt: now,
      },
  };
}

/** A claim at `now` that fires `schedules` and reads `scheduled`. */
function fireAndClaim(store: Store, now: number, schedules: ScheduleFiring, limit = 10) {
  const request: ClaimRequest = {
    queues: ["default"],
    limit,
    now,
    leaseMs: 10 * MINUTE,
    token: 1,
    schedules,
    readsScheduled: true,
  };
  return store.claim(request);
}

function redisTest(name: string, fn: (store: RedisStore, prefix: string) => Promise<void>) {
  Deno.test({
    name: `RedisStore schedules: ${name}`,
    ignore: url === null,
    async fn() {
      await using opened = await openTestRedisStore(url!, { clock: "caller" });
      await fn(opened.store, opened.prefix);
    },
  });
}

redisTest(
  "a due slot fires once in the claim, with scheduled, and not before it",
  async (store) => {
    await store.syncSchedules([schedule()], T0 + 1_000);
    const fires = firing(["every-minute"]);
    assert.deepEqual(await fireAndClaim(store, T0 + 2_000, fires), [], "nothing due yet");
    const slot = T0 + MINUTE;
    const [job, ...others] = await fireAndClaim(store, slot + 10, fires);
    assert.deepEqual(others, []);
    assert.equal(job?.payload, JSON.stringify({ slot }));
    assert.deepEqual(job?.scheduled, { name: "every-minute", slot });
    assert.deepEqual(await fireAndClaim(store, slot + 20, fires), [], "fired once");
    const [listed] = await store.schedules();
    assert.deepEqual(
      [listed?.lastSlot, listed?.lastJobId, listed?.lastFiredAt, listed?.nextSlot],
      [slot, job?.id, slot + 10, slot + MINUTE],
    );
  },
);

redisTest("a claim with limit 0 only fires", async (store) => {
  await store.syncSchedules([schedule()], T0);
  assert.deepEqual(await fireAndClaim(store, T0 + MINUTE, firing(["every-minute"]), 0), []);
  const [job] = await fireAndClaim(store, T0 + MINUTE, firing([]));
  assert.deepEqual(job?.scheduled, { name: "every-minute", slot: T0 + MINUTE });
});

redisTest("two processes firing the same slot at once store it once", async (store, prefix) => {
  await using another = await RedisStore.open(url!, { prefix, clock: "caller" });
  await store.syncSchedules([schedule()], T0);
  const fires = firing(["every-minute"]);
  const claims = await Promise.all([
    fireAndClaim(store, T0 + MINUTE, fires, 0),
    fireAndClaim(another, T0 + MINUTE, fires, 0),
    fireAndClaim(store, T0 + MINUTE, fires, 0),
  ]);
  assert.deepEqual(claims, [[], [], []]);
  const claimed = await fireAndClaim(another, T0 + MINUTE, firing([]));
  assert.deepEqual(claimed.map((job) => job.scheduled?.slot), [T0 + MINUTE]);
});

redisTest(
  "a schedule this process does not define, or a paused one, fires nothing",
  async (store) => {
    await store.syncSchedules([schedule()], T0);
    assert.deepEqual(await fireAndClaim(store, T0 + MINUTE, firing(["other"])), []);
    assert.equal(await store.setSchedulePaused("every-minute", true, T0), true);
    assert.deepEqual(await fireAndClaim(store, T0 + 3 * MINUTE, firing(["every-minute"])), []);
    assert.equal((await store.schedules())[0]?.nextSlot, T0 + MINUTE, "paused, it stays");
    await store.setSchedulePaused("every-minute", false, T0);
    const claimed = await fireAndClaim(store, T0 + 3 * MINUTE + 5, firing(["every-minute"]));
    assert.deepEqual(
      claimed.map((job) => job.scheduled?.slot),
      [T0 + 3 * MINUTE],
      'resumed, "once" fires the latest slot it missed',
    );
    assert.equal((await store.schedules())[0]?.nextSlot, T0 + 4 * MINUTE);
  },
);

redisTest(
  'missed slots: "skip" fires none, "all" the latest maxCatchUp oldest first',
  async (store) => {
    await store.syncSchedules([
      schedule({ name: "skip", missed: "skip" }),
      schedule({ name: "all", missed: "all", maxCatchUp: 3 }),
    ], T0);
    const claimed = await fireAndClaim(store, T0 + 5 * MINUTE + 1, firing(["skip", "all"]));
    assert.deepEqual(
      claimed.map((job) => [job.scheduled?.name, job.scheduled?.slot]),
      [["all", T0 + 3 * MINUTE], ["all", T0 + 4 * MINUTE], ["all", T0 + 5 * MINUTE]],
    );
    assert.deepEqual(
      (await store.schedules()).map((row) => [row.name, row.nextSlot]),
      [["all", T0 + 6 * MINUTE], ["skip", T0 + 6 * MINUTE]],
    );
  },
);

redisTest('overlap "skip": no slot fires while the last job is stored', async (store) => {
  await store.syncSchedules([schedule({ overlap: "skip" })], T0);
  const fires = firing(["every-minute"]);
  const [first] = await fireAndClaim(store, T0 + MINUTE, fires);
  assert.deepEqual(await fireAndClaim(store, T0 + 2 * MINUTE, fires), [], "the first still runs");
  const result = await store.settle(
    [{ kind: "complete", id: first!.id, token: 1, at: T0 + 2 * MINUTE + 5 }],
    undefined,
  );
  assert.deepEqual(result.applied, [true]);
  const [third] = await fireAndClaim(store, T0 + 3 * MINUTE, fires);
  assert.deepEqual(third?.scheduled?.slot, T0 + 3 * MINUTE);
});

redisTest(
  "a slot whose row is not built yet waits; a refused payload is passed over",
  async (store) => {
    await store.syncSchedules([schedule()], T0);
    assert.deepEqual(
      await fireAndClaim(store, T0 + MINUTE, firing(["every-minute"], () => undefined)),
      [],
    );
    assert.equal((await store.schedules())[0]?.nextSlot, T0 + MINUTE, "it waits");
    assert.deepEqual(
      await fireAndClaim(store, T0 + MINUTE, firing(["every-minute"], () => null)),
      [],
    );
    assert.equal((await store.schedules())[0]?.nextSlot, T0 + 2 * MINUTE, "passed over");
  },
);

redisTest("a cron fires in its time zone; a changed cron starts again after now", async (store) => {
  const berlin = schedule({ cron: "0 9 * * *", everyMs: null, timezone: "Europe/Berlin" });
  await store.syncSchedules([berlin], T0);
  const nine = Date.UTC(2026, 0, 2, 8, 0, 0); // 09:00 in Berlin, in winter
  assert.equal((await store.schedules())[0]?.nextSlot, nine);
  const [job] = await fireAndClaim(store, nine + 1, firing(["every-minute"]));
  assert.deepEqual(job?.scheduled, { name: "every-minute", slot: nine });
  const ten = schedule({ cron: "0 10 * * *", everyMs: null, timezone: "Europe/Berlin" });
  await store.syncSchedules([ten], nine + 2);
  assert.equal((await store.schedules())[0]?.nextSlot, nine + 60 * MINUTE);
});

redisTest(
  "forgetSchedule() keeps the runs of stored jobs, which keep their scheduled",
  async (store) => {
    await store.syncSchedules([schedule()], T0);
    await fireAndClaim(store, T0 + MINUTE, firing(["every-minute"]), 0);
    assert.equal(await store.forgetSchedule("every-minute"), true);
    const [job] = await fireAndClaim(store, T0 + MINUTE, firing([]));
    assert.deepEqual(job?.scheduled, { name: "every-minute", slot: T0 + MINUTE });
    assert.deepEqual(await store.schedules(), []);
  },
);

Deno.test({
  name:
    "RedisStore schedules: on the server's clock, slots are the server's and job times the caller's",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!);
    const { store } = opened;
    // The caller's clock is months off the server's: slots go by the server's.
    await store.syncSchedules([schedule({ everyMs: 200 })], T0);
    const [listed] = await store.schedules();
    const serverNow = Date.now();
    assert.ok(Math.abs(listed!.nextSlot! - serverNow) < 5_000, "the next slot is the server's");
    const deadline = serverNow + 5_000;
    let claimed: Awaited<ReturnType<typeof fireAndClaim>> = [];
    while (claimed.length === 0 && Date.now() < deadline) {
      claimed = await fireAndClaim(store, T0, firing(["every-minute"]));
    }
    const [job] = claimed;
    assert.ok(job !== undefined, "a slot fired within 5 s");
    assert.equal(job.scheduled!.slot % 200, 0);
    assert.ok(Math.abs(job.createdAt - T0) < 5_000, "its times come back on the caller's clock");
  },
});

Deno.test({
  name:
    "RedisStore schedules(): on the server's clock, lastFiredAt is the time the store recorded (as its export gives it), whatever the caller's clock",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!);
    const { store } = opened;
    await store.syncSchedules([schedule()], T0);
    const row = { queue: "default", name: "tick", payload: "{}", priority: 0 };
    const run = { availableAt: T0, retryUntil: null, createdAt: T0, ...row };
    const [id] = await store.runSchedule("every-minute", [
      { slot: T0, manual: true, row: run },
    ], T0);
    assert.ok(typeof id === "number");
    const [exported] = (await store.exportRows("schedules", null, 10)).rows;
    const recorded = exported?.last_fired_at;
    assert.ok(typeof recorded === "number" && Math.abs(recorded - Date.now()) < 60_000);
    // A host whose clock is an hour behind the server's reads the same time, as PostgreSQL's
    // reads give the database's: lastFiredAt is shown, not computed with.
    const clock = Date.now;
    Date.now = () => clock() - 60 * MINUTE;
    let listed: Awaited<ReturnType<Store["schedules"]>>;
    try {
      listed = await store.schedules();
    } finally {
      Date.now = clock;
    }
    assert.equal(listed[0]?.lastFiredAt, recorded);
  },
});

redisTest(
  "a settle that claims fires first, and its claimed jobs carry scheduled",
  async (store) => {
    await store.syncSchedules([schedule()], T0);
    const fires = firing(["every-minute"]);
    const [first] = await fireAndClaim(store, T0 + MINUTE, fires);
    const then: ClaimRequest = {
      queues: ["default"],
      limit: 10,
      now: T0 + 2 * MINUTE,
      leaseMs: 10 * MINUTE,
      token: 2,
      schedules: fires,
      readsScheduled: true,
    };
    const result = await store.settle(
      [{ kind: "complete", id: first!.id, token: 1, at: T0 + 2 * MINUTE }],
      then,
    );
    assert.deepEqual(result.applied, [true]);
    assert.deepEqual(
      result.claimed.map((job) => job.scheduled),
      [{ name: "every-minute", slot: T0 + 2 * MINUTE }],
    );
  },
);
