/**
 * Durable steps on PostgreSQL beyond the store contract: times on the
 * database's clock (a caller whose clock is far off still sleeps as long
 * as it asked), and a park and a signal committing at once on two
 * connections, which must never lose the wake-up. Runs when
 * `QUEUE_TEST_POSTGRES_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PostgresStore } from "../../../src/stores/postgres/mod.ts";
import type { Settlement, Store } from "../../../src/stores/store.ts";
import { claim, LEASE_MS, newJob, T0 } from "../contract/mod.ts";
import { openTestPostgresStore, postgresTestUrl } from "../../_postgres.ts";

const url = postgresTestUrl();
if (url === null) console.log("PostgreSQL step tests skipped: QUEUE_TEST_POSTGRES_URL is not set");

const HOUR_MS = 3_600_000;

/** A park of the attempt `token` holds on job `id` at `at`: a sleep, or a wait for `approve`. */
function park(id: number, token: number, at: number, kind: "sleep" | "wait"): Settlement {
  const until = at + HOUR_MS;
  return {
    kind: "park",
    id,
    token,
    at,
    availableAt: until,
    step: {
      seq: 1,
      key: kind === "sleep" ? "nap" : "approve",
      kind,
      output: null,
      until,
      done: kind === "sleep",
      attempt: 1,
      durationMs: 0,
    },
  };
}

/** Pushes one job and claims it with `token` at `now`; its id. */
async function running(store: Store, token: number, now: number): Promise<number> {
  const [id] = await store.insertJobs([newJob({ availableAt: now, createdAt: now })]);
  const [job] = await claim(store, { limit: 1, token, now });
  assert.equal(job?.id, id);
  return id!;
}

Deno.test({
  name:
    "PostgresStore on the database's clock: a park, its memo and a signal are timed by the database, however far off the caller's clock",
  ignore: url === null,
  async fn() {
    await using opened = await openTestPostgresStore(url!);
    const { store } = opened;
    // The caller's clock is T0, months away from the database's (the machine's) now.
    const id = await running(store, 1, T0);
    assert.deepEqual((await store.settle([park(id, 1, T0, "sleep")])).applied, [true]);
    const { steps: [memo] } = await store.jobSteps(id);
    const tolerance = 60_000; // the database runs on this machine: its clock is close to Date.now()
    assert.ok(Math.abs(memo!.at - Date.now()) <= tolerance, `written at ${memo!.at}`);
    assert.ok(Math.abs(memo!.until! - memo!.at - HOUR_MS) <= 1_000, `until ${memo!.until}`);
    const dueAt = await store.nextDueAt(["default"], T0);
    assert.ok(dueAt !== null && Math.abs(dueAt - (T0 + HOUR_MS)) <= tolerance, `due ${dueAt}`);
    assert.equal(
      await store.signal({ jobId: id, name: "approve", payload: "1", now: T0 }),
      "buffered",
    );
    const { signals: [sent] } = await store.jobSteps(id);
    assert.ok(Math.abs(sent!.sentAt - Date.now()) <= tolerance, `sent at ${sent!.sentAt}`);

    const waiting = await running(store, 2, T0);
    assert.deepEqual((await store.settle([park(waiting, 2, T0, "wait")])).applied, [true]);
    assert.deepEqual(await claim(store, { token: 3, now: T0 }), []);
    assert.equal(
      await store.signal({ jobId: waiting, name: "approve", payload: "1", now: T0 }),
      "delivered",
    );
    const [resumed] = await claim(store, { token: 4, now: T0 });
    assert.equal(resumed?.id, waiting, "due by the database's now");
  },
});

Deno.test({
  name:
    "PostgresStore: a wait that parks while its signal is sent on another connection is due at once, whichever commits first",
  ignore: url === null,
  async fn() {
    await using opened = await openTestPostgresStore(url!, { clock: "caller" });
    const { store } = opened;
    await using other = await PostgresStore.open(url!, { schema: opened.schema, clock: "caller" });
    const outcomes = new Map<string, number>();
    for (let round = 1; round <= 40; round++) {
      const now = T0 + round * 10 * LEASE_MS;
      const id = await running(store, round, now);
      const [parked, outcome] = await Promise.all([
        store.settle([park(id, round, now, "wait")]),
        other.signal({ jobId: id, name: "approve", payload: `${round}`, now }),
      ]);
      assert.deepEqual(parked.applied, [true]);
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      const [resumed] = await claim(store, { token: 1_000 + round, now });
      assert.equal(resumed?.id, id, `round ${round}: the signal was ${outcome}, the job not due`);
      const done = { kind: "complete", id, token: 1_000 + round, at: now } as const;
      assert.deepEqual((await store.settle([done])).applied, [true]);
    }
    console.log(
      `park and signal at once, 40 rounds: ${JSON.stringify(Object.fromEntries(outcomes))}`,
    );
  },
});
