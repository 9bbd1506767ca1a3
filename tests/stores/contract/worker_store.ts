/**
 * The contract of `WorkerStore`: a worker's claim, settle, lease renewal,
 * next due time and middleware locks, fenced by the claim's token, and the
 * watch that wakes it. Heartbeats are in `stats_store.ts`, cancels asked in
 * `job_control_store.ts`.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { ClaimedJob } from "../../../src/stores/store.ts";
import {
  begin,
  claim,
  complete,
  type ContractArea,
  type ContractTest,
  countsAt,
  fail,
  ids,
  LEASE_MS,
  newJob,
  plain,
  release,
  sorted,
  T0,
} from "./fixtures.ts";
import { waitUntil } from "../../_helpers.ts";

/** A worker's tick: claiming, settling, renewing, waking. */
export const workerStore: ContractArea = {
  covers: ["claim", "claimPassedOver", "settle", "nextDueAt", "renew", "acquire", "watch"],
  register,
};

function register(test: ContractTest): void {
  test("claimPassedOver() is false where the claim finds nothing it could take: no job, or only delayed, leased, grouped, paused or other names' jobs", async (store) => {
    const asked = { queues: ["default"], names: ["contract-job"], now: T0 };
    assert.equal(await store.claimPassedOver(asked), false);
    await store.insertJobs([newJob()]);
    assert.equal((await claim(store)).length, 1); // leased
    await store.insertJobs([
      newJob({ availableAt: T0 + 1 }),
      newJob({ name: "other-job" }),
      newJob({ queue: "paused" }),
      newJob({ group: { key: "g", limit: null, ordered: false } }),
    ]);
    await store.pause("paused", T0, null, null);
    assert.equal(await store.claimPassedOver(asked), false);
    assert.equal(await store.claimPassedOver({ ...asked, queues: ["default", "paused"] }), false);
    assert.equal(await store.claimPassedOver({ ...asked, queues: ["elsewhere"] }), false);
  });

  test("nextDueAt() gives the earliest due time after now of the queues asked for, leases' ends included", async (store) => {
    assert.equal(await store.nextDueAt(["default"], T0), null);
    await store.insertJobs([
      newJob({ availableAt: T0 - 5 }), // due already: not "next"
      newJob({ availableAt: T0 + 900, priority: 9 }),
      newJob({ availableAt: T0 + 300 }),
      newJob({ queue: "other", availableAt: T0 + 100 }),
    ]);
    assert.equal(await store.nextDueAt(["default"], T0), T0 + 300);
    assert.equal(await store.nextDueAt(["default", "other"], T0), T0 + 100);
    assert.equal(await store.nextDueAt(["default"], T0 + 300), T0 + 900);
    assert.equal(await store.nextDueAt(["default"], T0 + 900), null);
    assert.equal(await store.nextDueAt(["empty"], T0), null);
    // A leased job is due again when its lease runs out (a dead worker's job is recovered then).
    const [leased] = await claim(store, { limit: 1, leaseMs: 50 });
    assert.equal(leased?.id !== undefined, true);
    assert.equal(await store.nextDueAt(["default"], T0), T0 + 50);
  });

  test("claim() hands over the job's fields, leased, at attempt 1, with no crash", async (store) => {
    const row = newJob({
      queue: "mail",
      name: "send-receipt",
      payload: '{"to":"zoë@example.com","note":"✓ \\"quoted\\""}',
      priority: 3,
      retryUntil: T0 + 60_000,
      expireAt: T0 + 30_000,
      createdAt: T0 - 10,
    });
    const [id] = await store.insertJobs([row]);
    const claimed = await claim(store, { queues: ["mail"], token: 42 });
    const { availableAt: _, ...fields } = row;
    const leased = {
      attempts: 1,
      crashes: 0,
      recovered: false,
      lastError: null,
      token: 42,
      batchId: null,
      trace: null,
      lastSpan: null,
    };
    const [{ waitedMs, ...rest }] = plain(claimed) as [ClaimedJob];
    assert.ok(typeof waitedMs === "number" && waitedMs >= 0, `waitedMs: ${waitedMs}`);
    assert.deepEqual(rest, { id: id!, ...fields, ...leased });
  });

  test("claim() hands back the expiry stored at dispatch, null for none; a park (the job started) clears it", async (store) => {
    const [expiring, plainJob] = await store.insertJobs([
      newJob({ expireAt: T0 + 5_000 }),
      newJob(),
    ]);
    const claimed = await claim(store, { token: 7 });
    assert.deepEqual(claimed.map((job) => [job.id, job.expireAt]), [
      [expiring, T0 + 5_000],
      [plainJob, null],
    ]);
    const step = { seq: 0, key: "nap", kind: "sleep", output: null, until: T0 + 10, done: true };
    const parked = await store.settle([{
      kind: "park",
      id: expiring!,
      token: 7,
      at: T0,
      availableAt: T0 + 10,
      step: { ...step, kind: "sleep", attempt: 1, durationMs: 0 },
    }]);
    assert.deepEqual(parked.applied, [true]);
    const again = await claim(store, { token: 8, now: T0 + 10 });
    assert.deepEqual(again.map((job) => [job.id, job.expireAt]), [[expiring, null]]);
  });

  test("settle() of a release clears the expiry when the handler started (a retry, or a put back marked started), not otherwise", async (store) => {
    const [retried, cut, unstarted] = await store.insertJobs([
      newJob({ expireAt: T0 + 5_000 }),
      newJob({ expireAt: T0 + 5_000 }),
      newJob({ expireAt: T0 + 5_000 }),
    ]);
    await claim(store, { token: 4 });
    const release = (id: number, refundAttempt: boolean) => ({
      kind: "release" as const,
      id,
      token: 4,
      at: T0,
      availableAt: T0,
      error: "Error: back",
      refundAttempt,
    });
    const settled = await store.settle([
      release(retried!, false),
      { ...release(cut!, true), started: true },
      release(unstarted!, true),
    ]);
    assert.deepEqual(settled.applied, [true, true, true]);
    const again = await claim(store, { token: 5 });
    assert.deepEqual(again.map((job) => [job.id, job.expireAt]), [
      [retried, null],
      [cut, null],
      [unstarted, T0 + 5_000],
    ]);
  });

  test("settle() of an expired cancel deletes the job unrun, keeps it as expired and counts it in the metrics", async (store) => {
    const [id] = await store.insertJobs([newJob({ expireAt: T0 - 1 })]);
    await claim(store, { token: 3 });
    const reason = "expired: not started by 2025-12-31T23:59:59.999Z";
    const settled = await store.settle([
      {
        kind: "cancel",
        id: id!,
        token: 3,
        at: T0,
        reason,
        keepUntil: T0 + 60_000,
        refundAttempt: true,
        expired: true,
      },
    ]);
    assert.deepEqual(settled.applied, [true]);
    const result = await store.result(id!, T0 + 1);
    assert.equal(result?.state, "expired");
    assert.equal(
      result?.attempts,
      0,
      "the attempt its claim counted is taken off: it never started",
    );
    assert.equal(result?.error, reason);
    const rows = await store.metrics(T0 - 60_000, T0 + 60_000);
    assert.deepEqual(rows.map((row) => [row.name, row.expired, row.completed, row.failed]), [
      ["contract-job", 1, 0, 0],
    ]);
  });

  test("settle() of a cancel whose claim never started the handler keeps the attempts it started: the claim's is given back", async (store) => {
    const [unstarted, running] = await store.insertJobs([newJob(), newJob()]);
    await claim(store, { token: 1 });
    const keepUntil = T0 + 60_000;
    for (const id of [unstarted!, running!]) {
      assert.equal(await store.cancel({ id, reason: "asked", now: T0, keepUntil }), "cancelling");
    }
    // The first attempt of `unstarted` ends before its worker saw the cancel; the next claim sees it.
    await store.settle([release(unstarted!, 1, T0, "Error: boom")]);
    const [again] = await claim(store, { token: 2 });
    assert.deepEqual([again?.id, again?.attempts, again?.cancelRequested], [unstarted, 2, "asked"]);
    const settled = await store.settle([
      {
        kind: "cancel",
        id: unstarted!,
        token: 2,
        at: T0,
        reason: "asked",
        keepUntil,
        refundAttempt: true,
      },
      { kind: "cancel", id: running!, token: 1, at: T0, reason: "asked", keepUntil, durationMs: 5 },
    ]);
    assert.deepEqual(settled.applied, [true, true]);
    const kept = await Promise.all([unstarted!, running!].map((id) => store.result(id, T0 + 1)));
    assert.deepEqual(kept.map((result) => [result?.state, result?.attempts]), [
      ["cancelled", 1],
      ["cancelled", 1],
    ], "each handler started once");
    const listed = await store.finished({}, { limit: 10, offset: 0 });
    assert.deepEqual(listed.map((job) => job.attempts), [1, 1], "the kept history says the same");
  });

  test("claim() past aheadFrom holds jobs ahead unstarted: a worker death charges them nothing", async (store) => {
    const [a, b, c] = await store.insertJobs([newJob(), newJob(), newJob()]);
    // One attempt and one crash allowed: held ahead all the same, since a death costs them nothing.
    const oneOfEach = { "contract-job": { attempts: 1, crashes: 1 } };
    const first = await claim(store, {
      limit: 3,
      aheadFrom: 1,
      spendLimits: oneOfEach,
      token: 1,
    });
    assert.deepEqual(first.map((job) => [job.id, job.ahead === true]), [
      [a, false],
      [b, true],
      [c, true],
    ]);
    await begin(store, 1, a!, b!, c!); // only a started: b and c, held ahead, take no begin mark
    // Token 1's worker dies: the job it started counts a crash and an attempt; the others nothing.
    const later = T0 + LEASE_MS + 1;
    const recovered = await claim(store, { limit: 3, now: later, token: 2 });
    assert.deepEqual(
      recovered.map((job) => [job.id, job.attempts, job.crashes, job.recovered, job.lastError]),
      [[a, 2, 1, true, "worker died during attempt 1"], [b, 1, 0, false, null], [
        c,
        1,
        0,
        false,
        null,
      ]],
    );
  });

  test("a job held ahead has started no attempt: result(), jobs() and a cancel's kept record count only the attempts its handler started", async (store) => {
    const [a, b, c] = await store.insertJobs([
      newJob({ availableAt: T0 - 2 }),
      newJob({ availableAt: T0 - 3 }),
      newJob(),
    ]);
    // b ran once and failed: its next claim holds it ahead at attempt 2, not yet started.
    assert.deepEqual(ids(await claim(store, { limit: 1, token: 1 })), [b]);
    await store.settle([release(b!, 1, T0 - 1, "Error: boom")]);
    const held = await claim(store, { limit: 3, aheadFrom: 1, token: 2 });
    assert.deepEqual(held.map((job) => [job.id, job.attempts, job.ahead === true]), [
      [a, 1, false],
      [b, 2, true],
      [c, 1, true],
    ]);
    const attempts = async (now: number) => {
      const results = await store.results([b!, c!], now);
      const listing = await store.jobs({ state: null, queue: null, name: null }, {
        limit: 10,
        offset: 0,
      }, now);
      return {
        results: [b!, c!].map((id) => results.get(id)?.attempts),
        listed: listing.jobs.filter((job) => job.id !== a).map((job) => job.attempts),
      };
    };
    assert.deepEqual(await attempts(T0), { results: [1, 0], listed: [1, 0] }, "not started");
    // Its worker died (the lease ran out, unconfirmed): still started nothing, as R18 charges it.
    assert.deepEqual(await attempts(T0 + LEASE_MS + 1), { results: [1, 0], listed: [1, 0] });
    const keepUntil = T0 + 60_000;
    for (const id of [b!, c!]) {
      assert.equal(await store.cancel({ id, reason: "asked", now: T0, keepUntil }), "cancelled");
    }
    const kept = await Promise.all([b!, c!].map((id) => store.result(id, T0 + 1)));
    assert.deepEqual(kept.map((row) => [row?.state, row?.attempts]), [
      ["cancelled", 1],
      ["cancelled", 0],
    ]);
    const listed = await store.finished({}, { limit: 10, offset: 0 });
    assert.deepEqual(
      listed.map((job) => [job.id, job.attempts]).sort(([x], [y]) => x! - y!),
      [[b, 1], [c, 0]],
      "the kept history says the same",
    );
  });

  test("claim() with room to hold jobs ahead that finds no more than aheadFrom starts them all: a worker death charges each", async (store) => {
    const [a, b] = await store.insertJobs([newJob(), newJob()]);
    const first = await claim(store, { limit: 5, aheadFrom: 2, token: 1 });
    assert.deepEqual(first.map((job) => [job.id, job.ahead === true]), [[a, false], [b, false]]);
    await begin(store, 1, a!, b!);
    const recovered = await claim(store, { limit: 5, now: T0 + LEASE_MS + 1, token: 2 });
    assert.deepEqual(recovered.map((job) => [job.id, job.attempts, job.crashes]), [
      [a, 2, 1],
      [b, 2, 1],
    ]);
  });

  test("settle() confirms the starts of jobs claimed ahead, and refuses one cancelled meanwhile", async (store) => {
    const [a, b, c] = await store.insertJobs([newJob(), newJob(), newJob()]);
    await claim(store, { limit: 3, aheadFrom: 1, token: 1 });
    const cancel = { id: b!, reason: "not wanted", now: T0, keepUntil: T0 };
    assert.equal(await store.cancel(cancel), "cancelled", "a job claimed ahead has not started");
    assert.equal(await store.result(c!, T0).then((row) => row?.state), "pending");
    const starts = {
      leases: [{ id: b!, token: 1 }, { id: c!, token: 1 }],
      leaseMs: LEASE_MS,
      now: T0,
    };
    const { applied, started } = await store.settle([complete(a!, 1)], undefined, { starts });
    assert.deepEqual([applied, started], [[true], [c]]);
    assert.equal(await store.result(c!, T0).then((row) => row?.state), "running");
    assert.equal(await store.cancel({ ...cancel, id: c! }), "cancelling");
  });

  test("settle() with start confirmations alone refuses a job cancelled meanwhile and leases the one it confirms from the confirmation", async (store) => {
    const [a, b, c] = await store.insertJobs([newJob(), newJob(), newJob()]);
    await claim(store, { limit: 3, aheadFrom: 1, token: 1 });
    const cancel = { id: b!, reason: "not wanted", now: T0, keepUntil: T0 };
    assert.equal(await store.cancel(cancel), "cancelled", "a job claimed ahead has not started");
    const at = T0 + 1_000;
    const starts = {
      leases: [{ id: b!, token: 1 }, { id: c!, token: 1 }],
      leaseMs: LEASE_MS,
      now: at,
    };
    const { applied, claimed, started } = await store.settle([], undefined, { starts });
    assert.deepEqual([applied, claimed, started], [[], [], [c]]);
    assert.equal(await store.result(c!, at).then((row) => row?.state), "running");
    const afterClaimLease = await claim(store, { limit: 3, now: T0 + LEASE_MS + 1, token: 2 });
    assert.deepEqual(afterClaimLease.map((job) => job.id), [a], "c's lease runs from its start");
    const afterStartLease = await claim(store, { limit: 3, now: at + LEASE_MS + 1, token: 3 });
    assert.deepEqual(afterStartLease.map((job) => job.id), [c]);
  });

  test("settle() with start confirmations alone refuses a job another claim took over", async (store) => {
    const [a, b] = await store.insertJobs([newJob(), newJob()]);
    await claim(store, { limit: 2, aheadFrom: 1, token: 1 });
    const taken = await claim(store, { limit: 2, now: T0 + LEASE_MS + 1, token: 2 });
    assert.deepEqual(taken.map((job) => job.id), [a, b]);
    const starts = { leases: [{ id: b!, token: 1 }], leaseMs: LEASE_MS, now: T0 + LEASE_MS + 2 };
    assert.deepEqual((await store.settle([], undefined, { starts })).started, []);
    assert.deepEqual((await store.settle([complete(b!, 2)])).applied, [true], "token 2 holds it");
  });

  test("settle() confirms a start again when asked again (an earlier reply was lost), whatever pause came since; the job stays started and its key released", async (store) => {
    const key = {
      kind: "unique",
      key: "k",
      expiresAt: T0 + 600_000,
      releaseOnStart: true,
    } as const;
    const [a] = await store.insertJobs([newJob()]);
    const [b] = await store.insertKeyed([{ ...newJob(), key }]);
    await claim(store, { limit: 2, aheadFrom: 1, token: 1 });
    const confirm = (now: number) => ({
      leases: [{ id: b!.id, token: 1 }],
      leaseMs: LEASE_MS,
      now,
    });
    const first = await store.settle([], undefined, { starts: confirm(T0) });
    assert.deepEqual(first.started, [b!.id]);
    await store.pause("default", T0 + 1_000, null, null);
    const again = await store.settle([complete(a!, 1, T0 + 1_000)], undefined, {
      starts: confirm(T0 + 1_000),
    });
    assert.deepEqual([again.applied, again.started], [[true], [b!.id]], "started already");
    assert.equal(await store.result(b!.id, T0 + 1_000).then((row) => row?.state), "running");
    const [next] = await store.insertKeyed([{ ...newJob({ createdAt: T0 + 1_000 }), key }]);
    assert.equal(next?.outcome, "stored", "its key was released at its start");
    await store.resume("default", T0 + 1_000);
    const taken = await claim(store, { limit: 5, now: T0 + 1_000 + LEASE_MS - 1, token: 2 });
    assert.deepEqual(taken.map((job) => job.id), [next!.id], "b's lease runs from the second try");
  });

  test("settle() refuses the start of a job claimed ahead whose queue is paused, and gives it back charged nothing", async (store) => {
    const [a, b] = await store.insertJobs([newJob(), newJob({ availableAt: T0 - 5 })]);
    const [first] = await claim(store, { limit: 2, aheadFrom: 1, token: 1 });
    assert.equal(first?.id, b, "the job due earlier is claimed first");
    await store.pause("default", T0, null, null);
    const starts = { leases: [{ id: a!, token: 1 }], leaseMs: LEASE_MS, now: T0 };
    assert.deepEqual((await store.settle([], undefined, { starts })).started, []);
    await store.resume("default", T0);
    // Given back unleased, due when it was, its attempt not counted.
    const again = await claim(store, { limit: 2, token: 2 });
    assert.deepEqual(again.map((job) => [job.id, job.attempts, job.crashes]), [[a, 1, 0]]);
  });

  test("settle() gives back jobs claimed and never started (unclaimedLeaseMs) due when their claim found them due: one still held ahead exactly, one confirmed at the worker's availableAt", async (store) => {
    const [a, b, c, d] = await store.insertJobs([
      newJob({ availableAt: T0 - 30 }),
      newJob({ availableAt: T0 - 20 }),
      newJob({ availableAt: T0 - 10 }),
      newJob({ availableAt: T0 }),
    ]);
    const claimedAt = T0 + 1_000;
    const first = await claim(store, { limit: 3, aheadFrom: 1, token: 1, now: claimedAt });
    assert.deepEqual(first.map((job) => [job.id, job.waitedMs]), [[a, 1_030], [b, 1_020], [
      c,
      1_010,
    ]]);
    const starts = { leases: [{ id: b!, token: 1 }], leaseMs: LEASE_MS, now: claimedAt };
    assert.deepEqual((await store.settle([], undefined, { starts })).started, [b]);
    const stoppedAt = T0 + 2_000;
    const givenBack = (id: number, availableAt: number) => ({
      ...release(id, 1, availableAt, "worker stopped before the attempt began"),
      at: stoppedAt,
      refundAttempt: true,
      unclaimedLeaseMs: LEASE_MS,
    });
    // b's start was confirmed: the worker's reckoning stands. c is still held ahead: the store
    // reads its due time from the row, whatever the worker reckoned.
    const { applied } = await store.settle([
      complete(a!, 1, stoppedAt),
      givenBack(b!, T0 - 20),
      givenBack(c!, stoppedAt),
    ]);
    assert.deepEqual(applied, [true, true, true]);
    const again = await claim(store, { limit: 3, token: 2, now: stoppedAt });
    assert.deepEqual(again.map((job) => [job.id, job.waitedMs, job.attempts]), [
      [b, 2_020, 1],
      [c, 2_010, 1],
      [d, 2_000, 1],
    ]);
  });

  test("a start refused for a pause releases the overlap lock the job claimed ahead took", async (store) => {
    const [a, b, c] = await store.insertJobs([
      newJob({ availableAt: T0 - 2 }),
      newJob({ availableAt: T0 - 1 }),
      newJob(),
    ]);
    await claim(store, { limit: 2, aheadFrom: 1, token: 1 });
    const lock = (id: number, token: number) => ({
      id,
      token,
      locks: [{ key: "k", limit: 1, expiresAt: T0 + 60_000, retryAt: T0 + 1_000 }],
      rates: [],
    });
    assert.deepEqual(await store.acquire([lock(b!, 1)], T0), [null]);
    await store.pause("default", T0, null, null);
    const starts = { leases: [{ id: b!, token: 1 }], leaseMs: LEASE_MS, now: T0 };
    assert.deepEqual((await store.settle([complete(a!, 1)], undefined, { starts })).started, []);
    await store.resume("default", T0);
    const [next] = await claim(store, { limit: 1, token: 2 });
    assert.equal(next?.id, b, "given back due when it was");
    assert.deepEqual(await store.acquire([lock(c!, 3)], T0), [null], "the lock was released");
  });

  test("claim() past aheadFrom keeps a recovered job that has spent its attempts, to fail it as recovered", async (store) => {
    const [a, b] = await store.insertJobs([newJob(), newJob()]);
    await claim(store, { limit: 2, token: 1 });
    await begin(store, 1, a!, b!);
    // Its worker died: with one attempt allowed, both have spent theirs and will fail unrun.
    const oneAttempt = { "contract-job": { attempts: 1, crashes: 2 } };
    const recovered = await claim(store, {
      limit: 2,
      now: T0 + LEASE_MS + 1,
      aheadFrom: 1,
      spendLimits: oneAttempt,
      token: 2,
    });
    assert.deepEqual(
      recovered.map((job) => [job.id, job.attempts, job.crashes, job.recovered]),
      [[a, 2, 1, true], [b, 2, 1, true]],
    );
  });

  test("claim() takes at most `limit` jobs, every due job of the first queue before the second", async (store) => {
    const [low1, low2] = await store.insertJobs([
      newJob({ queue: "low" }),
      newJob({ queue: "low" }),
    ]);
    const [high1, high2, high3] = await store.insertJobs(
      [1, 2, 3].map(() => newJob({ queue: "high" })),
    );
    await store.insertJobs([newJob({ queue: "other" })]);
    const take = (token: number) => claim(store, { queues: ["high", "low"], limit: 2, token });
    assert.deepEqual(sorted(ids(await take(1))), [high1, high2]);
    assert.deepEqual(sorted(ids(await take(2))), sorted([high3!, low1!]));
    assert.deepEqual(ids(await take(3)), [low2]);
    assert.deepEqual(await take(4), [], "a queue not asked for is never claimed from");
  });

  test("claim() takes the higher priority first, then the earlier due time, then the earlier push", async (store) => {
    const [a] = await store.insertJobs([newJob({ priority: 0, availableAt: T0 - 3_000 })]);
    const [b] = await store.insertJobs([newJob({ priority: 5, availableAt: T0 - 1_000 })]);
    const [c] = await store.insertJobs([newJob({ priority: 5, availableAt: T0 - 2_000 })]);
    const [d] = await store.insertJobs([newJob({ priority: -1, availableAt: T0 - 9_000 })]);
    const [e] = await store.insertJobs([newJob({ priority: 0, availableAt: T0 - 3_000 })]);
    const order: number[] = [];
    for (let token = 1; token <= 5; token++) {
      order.push(...ids(await claim(store, { limit: 1, token })));
    }
    assert.deepEqual(order, [c, b, a, e, d]);
  });

  test("claim() takes due jobs past delayed ones at higher priorities, with few or many priority levels", async (store) => {
    // 20 levels: more than a claim seeks one by one, so the claim walks the queue's index instead.
    for (const levels of [3, 20]) {
      const queue = `levels-${levels}`;
      await store.insertJobs(
        Array.from(
          { length: levels },
          (_, level) => newJob({ queue, priority: 100 + level, availableAt: T0 + 60_000 }),
        ),
      );
      const [late] = await store.insertJobs([
        newJob({ queue, priority: 1, availableAt: T0 - 1_000 }),
      ]);
      const [early] = await store.insertJobs([
        newJob({ queue, priority: 1, availableAt: T0 - 2_000 }),
      ]);
      const [top] = await store.insertJobs([newJob({ queue, priority: 2, availableAt: T0 })]);
      const order: number[] = [];
      for (let token = 1; token <= 4; token++) {
        order.push(...ids(await claim(store, { queues: [queue], limit: 2, token })));
      }
      assert.deepEqual(order, [top, early, late], `${levels} levels`);
    }
  });

  test("claim() returns the jobs it took in claim order", async (store) => {
    const [low] = await store.insertJobs([newJob({ queue: "low", priority: 9 })]);
    const [highLow] = await store.insertJobs([newJob({ queue: "high", priority: 0 })]);
    const [highTop] = await store.insertJobs([newJob({ queue: "high", priority: 7 })]);
    const [highLater] = await store.insertJobs([newJob({ queue: "high", priority: 0 })]);
    const claimed = await claim(store, { queues: ["high", "low"] });
    assert.deepEqual(ids(claimed), [highTop, highLow, highLater, low]);
  });

  test("claim() skips jobs not yet due and takes a job due exactly now", async (store) => {
    const [later] = await store.insertJobs([newJob({ availableAt: T0 + 1_000 })]);
    const [due] = await store.insertJobs([newJob({ availableAt: T0 })]);
    assert.deepEqual(ids(await claim(store, { now: T0, token: 1 })), [due]);
    assert.deepEqual(await claim(store, { now: T0 + 999, token: 2 }), []);
    assert.deepEqual(ids(await claim(store, { now: T0 + 1_000, token: 3 })), [later]);
  });

  test("a claimed job is not claimed again until its lease expires", async (store) => {
    const [id] = await store.insertJobs([newJob()]);
    assert.deepEqual(ids(await claim(store, { token: 1 })), [id]);
    assert.deepEqual(await claim(store, { now: T0 + LEASE_MS - 1, token: 2 }), []);
    const [counts] = await store.counts(T0 + LEASE_MS - 1);
    assert.equal(counts?.reserved, 1);
    assert.deepEqual(ids(await claim(store, { now: T0 + LEASE_MS, token: 3 })), [id]);
  });

  test("claims running at once never hand out the same job", async (store) => {
    const pushed = await store.insertJobs(Array.from({ length: 10 }, () => newJob()));
    const batches = await Promise.all(
      [1, 2, 3, 4].map((token) => claim(store, { limit: 3, token })),
    );
    const claimed = batches.flatMap(ids);
    assert.equal(new Set(claimed).size, claimed.length, "no job claimed twice");
    assert.deepEqual(sorted(claimed), pushed);
  });

  test("a job whose lease expired is claimed again as recovered, counting a crash and an attempt", async (store) => {
    const [id] = await store.insertJobs([newJob()]);
    await claim(store, { token: 1 });
    await begin(store, 1, id!);
    const [second] = await claim(store, { now: T0 + LEASE_MS, token: 2 });
    const { attempts, crashes, recovered, token } = second!;
    assert.deepEqual([second?.id, attempts, crashes, recovered, token], [id, 2, 1, true, 2]);
    await begin(store, 2, id!);
    const [third] = await claim(store, { now: T0 + 2 * LEASE_MS, token: 3 });
    assert.deepEqual([third?.attempts, third?.crashes, third?.recovered], [3, 2, true]);
    const now = T0 + 2 * LEASE_MS;
    assert.deepEqual((await store.settle([release(id!, 3, now)])).applied, [true]);
    const [fourth] = await claim(store, { now, token: 4 });
    assert.deepEqual([fourth?.attempts, fourth?.crashes, fourth?.recovered], [4, 2, false]);
  });

  test("a dead worker's job whose handler begin was not recorded is charged nothing and becomes suspect: its next start counts as begun, and a death then is charged for both", async (store) => {
    const [id] = await store.insertJobs([newJob({ expireAt: T0 + 10 })]);
    await claim(store, { token: 1 });
    // Token 1's worker dies before it records that the handler began.
    const [second] = await claim(store, { now: T0 + LEASE_MS, token: 2 });
    assert.deepEqual(
      [second?.id, second?.attempts, second?.crashes, second?.recovered, second?.lastError],
      [id, 1, 0, false, null],
      "not charged an attempt or a crash",
    );
    assert.equal(second?.expireAt ?? null, null, "its start was written: it no longer expires");
    // Token 2's worker dies too, without recording a begin: the start counted as begun.
    const [third] = await claim(store, { now: T0 + 2 * LEASE_MS, token: 3 });
    assert.deepEqual(
      [third?.attempts, third?.crashes, third?.recovered, third?.lastError],
      [2, 2, true, "worker died during attempt 1"],
      "charged this death and the one it was suspected of",
    );
    // No longer suspect: a death before the begin mark is charged nothing again.
    const [fourth] = await claim(store, { now: T0 + 3 * LEASE_MS, token: 4 });
    assert.deepEqual([fourth?.attempts, fourth?.crashes, fourth?.recovered], [2, 2, false]);
  });

  test("a suspect job claimed ahead keeps its start mark held until confirmed, then counts as begun", async (store) => {
    const [id] = await store.insertJobs([newJob()]);
    await claim(store, { token: 1 });
    // Token 1 died before a begin mark: suspect. Token 2 holds it ahead, then dies: free.
    const [held] = await claim(store, { now: T0 + LEASE_MS, aheadFrom: 0, token: 2 });
    assert.equal(held?.ahead, true);
    const [again] = await claim(store, { now: T0 + 2 * LEASE_MS, aheadFrom: 0, token: 3 });
    assert.deepEqual([again?.attempts, again?.crashes], [1, 0], "held ahead: charged nothing");
    // Token 3 confirms its start, then dies without a begin mark: as suspect, it counted as begun.
    const now = T0 + 2 * LEASE_MS;
    const starts = { leases: [{ id: id!, token: 3 }], leaseMs: LEASE_MS, now };
    assert.deepEqual((await store.settle([], undefined, { starts })).started, [id]);
    const [charged] = await claim(store, { now: now + LEASE_MS, token: 4 });
    assert.deepEqual([charged?.attempts, charged?.crashes, charged?.recovered], [2, 2, true]);
  });

  test("a suspect job whose next attempt ends without a death is no longer suspect", async (store) => {
    const [id] = await store.insertJobs([newJob()]);
    await claim(store, { token: 1 });
    await claim(store, { now: T0 + LEASE_MS, token: 2 }); // token 1 died: suspect
    const now = T0 + LEASE_MS;
    assert.deepEqual((await store.settle([release(id!, 2, now, "Error: later")])).applied, [true]);
    await claim(store, { now, token: 3 });
    const [next] = await claim(store, { now: now + LEASE_MS, token: 4 }); // token 3 died
    assert.deepEqual(
      [next?.attempts, next?.crashes, next?.recovered],
      [2, 0, false],
      "its retry's death before a begin mark is charged nothing",
    );
  });

  test("settle() records handler begins only for jobs the claim still holds and started", async (store) => {
    const [a, b, c] = await store.insertJobs([newJob(), newJob(), newJob()]);
    await claim(store, { limit: 3, aheadFrom: 2, token: 1 });
    // b's mark names another claim; c is held ahead.
    await store.settle([], undefined, {
      begun: [{ id: a!, token: 1 }, { id: b!, token: 9 }, { id: c!, token: 1 }],
    });
    const recovered = await claim(store, { limit: 3, now: T0 + LEASE_MS, token: 2 });
    assert.deepEqual(
      recovered.map((job) => [job.id, job.attempts, job.crashes, job.recovered]),
      [[a, 2, 1, true], [b, 1, 0, false], [c, 1, 0, false]],
    );
  });

  test("release puts the job back, due at availableAt, with its error; refundAttempt gives the attempt back", async (store) => {
    const [id] = await store.insertJobs([newJob()]);
    await claim(store, { token: 1 });
    assert.deepEqual((await store.settle([release(id!, 1, T0 + 5_000, "Error: later")])).applied, [
      true,
    ]);
    assert.deepEqual(await countsAt(store, T0), { default: [0, 1, 0, 0] });
    assert.deepEqual(
      (await store.settle([complete(id!, 1)])).applied,
      [false],
      "the released token is void",
    );
    assert.deepEqual(await claim(store, { now: T0 + 4_999, token: 2 }), []);
    const [job] = await claim(store, { now: T0 + 5_000, token: 3 });
    assert.deepEqual(
      [job?.id, job?.attempts, job?.crashes, job?.recovered, job?.lastError],
      [id, 2, 0, false, "Error: later"],
    );
    const refund = { ...release(id!, 3, T0 + 5_000), refundAttempt: true };
    assert.deepEqual((await store.settle([refund])).applied, [true]);
    const [again] = await claim(store, { now: T0 + 5_000, token: 4 });
    assert.deepEqual([again?.attempts, again?.lastError], [2, null], "refundAttempt gives it back");
  });

  test("fail moves the job to the failed jobs with its queue, name, payload, attempts, error and stack", async (store) => {
    const payload = '{"to":"zoë","list":[1,2]}';
    const [id] = await store.insertJobs([
      newJob({ queue: "mail", name: "send", payload, createdAt: T0 - 10 }),
    ]);
    await claim(store, { queues: ["mail"], token: 1 });
    await begin(store, 1, id!);
    await claim(store, { queues: ["mail"], now: T0 + LEASE_MS, token: 2 });
    const error = { message: "TypeError: nope", stack: "TypeError: nope\n    at x (y.ts:1:2)" };
    const failedAt = T0 + LEASE_MS + 1;
    assert.deepEqual((await store.settle([fail(id!, 2, failedAt, 2, error)])).applied, [true]);
    assert.deepEqual({ ...await store.failedJob(id!) }, {
      id: id!,
      queue: "mail",
      name: "send",
      payload,
      error: error.message,
      stack: error.stack,
      attempts: 2,
      crashes: 1,
      createdAt: new Date(T0 - 10),
      failedAt: new Date(failedAt),
      batchId: null,
      chainId: null,
    });
    assert.deepEqual(await claim(store, { queues: ["mail"], now: T0 + 99 * LEASE_MS }), []);
    assert.deepEqual(await countsAt(store, T0), { mail: [0, 0, 0, 1] });
  });

  test("a late settle from a worker that lost its lease changes nothing (R05)", async (store) => {
    const [id] = await store.insertJobs([newJob()]);
    const A = 1_001, B = 2_002;
    await claim(store, { token: A });
    const [taken] = await claim(store, { now: T0 + LEASE_MS, token: B });
    assert.equal(taken?.id, id);
    const now = T0 + LEASE_MS + 10;
    const stale = [complete(id!, A), release(id!, A, now, "Error: stale"), fail(id!, A, now)];
    for (const settlement of stale) {
      assert.deepEqual((await store.settle([settlement])).applied, [false], settlement.kind);
    }
    assert.deepEqual(await countsAt(store, now), { default: [0, 0, 1, 0] });
    assert.deepEqual(await store.failed({ limit: 10, offset: 0 }), []);
    assert.deepEqual(await store.renew([{ id: id!, token: A }], now + LEASE_MS, now), [id]);
    assert.deepEqual((await store.settle([complete(id!, B)])).applied, [true]);
    assert.deepEqual((await store.settle([complete(id!, A)])).applied, [false]);
    assert.deepEqual(await store.counts(now), []);
  });

  test("settle() with a claim request claims the next jobs in the same call, after settling", async (store) => {
    const [a, b, c] = await store.insertJobs([newJob(), newJob(), newJob()]);
    await claim(store, { limit: 1, token: 1 });
    const request = { queues: ["default"], limit: 5, now: T0, leaseMs: LEASE_MS, token: 2 };
    const { applied, claimed } = await store.settle([release(a!, 1, T0)], request);
    assert.deepEqual(applied, [true]);
    assert.deepEqual(ids(claimed), [a, b, c], "the job released in this call is claimable again");
    assert.ok(claimed.every((job) => job.token === 2));
    assert.deepEqual((await store.settle([complete(b!, 1)])).applied, [false], "b is leased to 2");
    assert.deepEqual((await store.settle([], request)).claimed, [], "nothing left to claim");
  });

  test("settle() applies a batch, reporting each settlement; complete deletes the job", async (store) => {
    const [a, b, c, d] = await store.insertJobs([newJob(), newJob(), newJob(), newJob()]);
    await claim(store, { token: 1 });
    const { applied } = await store.settle([
      complete(a!, 1),
      complete(b!, 999),
      release(c!, 1, T0 + 1_000),
      fail(d!, 1),
    ]);
    assert.deepEqual(applied, [true, false, true, true]);
    assert.deepEqual(await countsAt(store, T0), { default: [0, 1, 1, 1] });
    assert.deepEqual(
      (await store.settle([complete(a!, 1)])).applied,
      [false],
      "a completed job is gone",
    );
    assert.deepEqual(sorted(ids(await claim(store, { now: T0 + 9 * LEASE_MS, token: 2 }))), [b, c]);
  });

  test("one settle keeps each kept success and cancel with its own output, times and fence, across claims", async (store) => {
    const [a, b, c, d] = await store.insertJobs([
      newJob({ payload: '{"n":1}' }),
      newJob({ payload: '{"n":2}' }),
      newJob(),
      newJob(),
    ]);
    const big = Number.MAX_SAFE_INTEGER;
    await claim(store, { limit: 2, token: 1 });
    await claim(store, { limit: 2, token: big });
    const keepUntil = T0 + 60_000;
    const output = '{"text":"quote \\" backslash \\\\ newline \\n ünïcødé 🚀","n":-1.5e-7}';
    const reason = `stop "now"\n— 'please' 🛑`;
    const { applied } = await store.settle([
      { kind: "complete", id: a!, token: 1, at: T0 + 20, durationMs: 12.4, output, keepUntil },
      { kind: "complete", id: b!, token: 1, at: T0 + 30, keepUntil },
      { kind: "cancel", id: c!, token: big, at: T0 + 40, reason, keepUntil, durationMs: 3 },
      { kind: "complete", id: d!, token: 1, at: T0 + 50, output: "lost", keepUntil },
    ]);
    assert.deepEqual(applied, [true, true, true, false], "d is leased to the other claim");
    const kept = new Map((await store.finished({}, { limit: 10, offset: 0 })).map((row) => [
      row.id,
      { ...row },
    ]));
    assert.deepEqual([...kept.keys()].sort((x, y) => x - y), [a, b, c]);
    assert.deepEqual(kept.get(a!), {
      id: a,
      queue: "default",
      name: "contract-job",
      state: "completed",
      payload: '{"n":1}',
      output,
      error: null,
      attempts: 1,
      createdAt: new Date(T0),
      startedAt: new Date(T0 + 8),
      finishedAt: new Date(T0 + 20),
      durationMs: 12,
    });
    assert.deepEqual(
      [kept.get(b!)?.state, kept.get(b!)?.output, kept.get(b!)?.startedAt, kept.get(b!)?.payload],
      ["completed", null, null, '{"n":2}'],
    );
    assert.deepEqual(
      [kept.get(c!)?.state, kept.get(c!)?.error, kept.get(c!)?.durationMs],
      ["cancelled", reason, 3],
    );
    assert.deepEqual(await countsAt(store, T0), { default: [0, 0, 1, 0] });
  });

  test("settles are fenced exactly, even with tokens up to 2^53 - 1", async (store) => {
    const [id] = await store.insertJobs([newJob()]);
    const token = Number.MAX_SAFE_INTEGER;
    await claim(store, { token });
    assert.deepEqual((await store.settle([complete(id!, token - 1)])).applied, [false]);
    assert.deepEqual(await store.renew([{ id: id!, token }], T0 + 2 * LEASE_MS, T0), []);
    assert.deepEqual((await store.settle([complete(id!, token)])).applied, [true]);
  });

  test("renew() extends leases and reports the ids whose lease was lost", async (store) => {
    const [a, b] = await store.insertJobs([newJob(), newJob()]);
    const [waiting] = await store.insertJobs([newJob({ availableAt: T0 + 1 })]);
    assert.deepEqual(sorted(ids(await claim(store, { token: 1 }))), [a, b]);
    const lost = await store.renew(
      [
        { id: a!, token: 1 },
        { id: b!, token: 2 },
        { id: waiting!, token: 1 },
        { id: 987_654, token: 1 },
      ],
      T0 + 3 * LEASE_MS,
      T0,
    );
    assert.deepEqual(sorted(lost), sorted([b!, waiting!, 987_654]));
    const atOldEnd = await claim(store, { now: T0 + LEASE_MS, token: 3 });
    assert.deepEqual(sorted(ids(atOldEnd)), sorted([b!, waiting!]), "a's lease was extended");
    await begin(store, 1, a!);
    const again = await claim(store, { now: T0 + 3 * LEASE_MS, token: 4 });
    assert.equal(again.find((job) => job.id === a)?.recovered, true, "a's renewed lease ran out");
  });

  test("acquire() lets jobs take an overlap lock up to its limit, in order, and tells the rest when to try again", async (store) => {
    const [a, b, c] = await store.insertJobs([newJob(), newJob(), newJob()]);
    await claim(store, { token: 1 });
    const lock = (limit: number, retryAt: number) => ({
      key: "order:7",
      limit,
      expiresAt: T0 + 10_000,
      retryAt,
    });
    const request = (id: number, token = 1, limit = 1, retryAt = T0 + 500) => ({
      id,
      token,
      locks: [lock(limit, retryAt)],
      rates: [],
    });
    assert.deepEqual(
      await store.acquire([request(a!), request(b!), request(c!, 1, 1, T0 + 700)], T0),
      [
        null,
        T0 + 500,
        T0 + 700,
      ],
    );
    assert.deepEqual(
      await store.acquire([request(b!, 1, 2)], T0),
      [null],
      "a limit of 2 lets a second in",
    );
    assert.deepEqual(await store.acquire([request(c!, 1, 2)], T0), [T0 + 500]);
    assert.deepEqual((await store.settle([complete(a!, 2)])).applied, [false]);
    assert.deepEqual(
      await store.acquire([request(c!, 1, 2)], T0),
      [T0 + 500],
      "a stale settle frees no lock",
    );
    assert.deepEqual((await store.settle([release(a!, 1, T0 + 60_000)])).applied, [true]);
    assert.deepEqual(
      await store.acquire([request(c!, 1, 2)], T0 + 1),
      [null],
      "any settle frees its lock",
    );
    assert.deepEqual(await store.acquire([request(a!, 1, 2)], T0 + 10_000), [null], "locks expire");
    assert.deepEqual(await store.acquire([], T0), []);
  });

  test("acquire() counts starts per rate window and refuses past max until the window turns; a refused job takes nothing", async (store) => {
    const [a, b, c] = await store.insertJobs([newJob(), newJob(), newJob()]);
    await claim(store, { token: 1 });
    const rate = { key: "mailer", max: 2, perMs: 60_000 };
    const lock = { key: "l", limit: 1, expiresAt: T0 + 120_000, retryAt: T0 + 1 };
    const request = (id: number) => ({ id, token: 1, locks: [lock], rates: [rate] });
    const onlyRate = (id: number) => ({ id, token: 1, locks: [], rates: [rate] });
    assert.deepEqual(await store.acquire([onlyRate(a!), request(b!), onlyRate(c!)], T0 + 5), [
      null,
      null,
      T0 + 60_000,
    ]);
    assert.deepEqual(await store.acquire([request(c!)], T0 + 59_999), [T0 + 60_000]);
    assert.deepEqual((await store.settle([complete(b!, 1)])).applied, [true]);
    assert.deepEqual(
      await store.acquire([request(c!)], T0 + 60_000),
      [null],
      "the window turned, and a refused request took no lock",
    );
  });

  test("acquire() never moves a rate window back: a request whose now falls in an earlier window than the stored one takes nothing", async (store) => {
    const [a, b, c] = await store.insertJobs([newJob(), newJob(), newJob()]);
    await claim(store, { token: 1 });
    const rate = { key: "mailer", max: 1, perMs: 60_000 };
    const request = (id: number) => ({ id, token: 1, locks: [], rates: [rate] });
    assert.deepEqual(await store.acquire([request(a!)], T0 + 60_000), [null], "the newer window");
    assert.deepEqual(
      await store.acquire([request(b!)], T0 + 59_999),
      [T0 + 60_000],
      "a now read before that start counted: refused, nothing counted",
    );
    assert.deepEqual(
      await store.acquire([request(c!)], T0 + 60_001),
      [T0 + 120_000],
      "the newer window still holds its one start",
    );
  });

  test("acquire() drops a rate window a minute after it ends, never while it can still limit", async (store) => {
    const [a, b] = await store.insertJobs([newJob(), newJob()]);
    await claim(store, { token: 1 });
    const perSecond = { key: "user:1", max: 1, perMs: 1_000 };
    const perHour = { key: "mailer", max: 1, perMs: 3_600_000 };
    const request = (id: number, rates: (typeof perSecond)[]) => ({
      id,
      token: 1,
      locks: [],
      rates,
    });
    assert.deepEqual(await store.acquire([request(a!, [perSecond, perHour])], T0), [null]);
    // A settle with a claim (of a queue with no jobs) prunes on SQL, at most once a minute of its
    // time; Redis expires the window's HASH on its own timer.
    const settleAt = (now: number) =>
      store.settle([], { queues: ["elsewhere"], limit: 1, now, leaseMs: LEASE_MS, token: 2 });
    await settleAt(T0 + 30_000);
    assert.equal(await store.countRows("rate_windows"), 2, "ended less than a minute ago: kept");
    await waitUntil(async () => {
      await settleAt(T0 + 120_000);
      return await store.countRows("rate_windows") === 1;
    }, { what: "the per-second window is dropped", timeoutMs: 180_000, everyMs: 500 });
    assert.deepEqual(
      await store.acquire([request(b!, [perHour])], T0 + 120_000),
      [T0 + 3_600_000],
      "the window that still limits is kept and still full",
    );
  });

  test(
    "watch() calls its listener after another connection pushes, until disposed",
    async (store, opened) => {
      if (opened.another === undefined) {
        using watching = store.watch(() => {});
        assert.equal(typeof watching[Symbol.dispose], "function", "a store that cannot watch");
        return;
      }
      await using other = {
        store: await opened.another(),
        [Symbol.asyncDispose]: () => other.store.close(),
      };
      let [kept, dropped] = [0, 0];
      using _kept = store.watch(() => kept++);
      const droppedWatch = store.watch(() => dropped++);
      // A watch may start listening after it returns: push until the first call.
      await waitUntil(async () => {
        await other.store.insertJobs([newJob()]);
        return kept > 0 && dropped > 0;
      }, { what: "both listeners called after another connection's push", everyMs: 200 });
      droppedWatch[Symbol.dispose]();
      const [keptBefore, droppedBefore] = [kept, dropped];
      await waitUntil(async () => {
        await other.store.insertJobs([newJob()]);
        return kept > keptBefore;
      }, { what: "the listener still watching called again", everyMs: 200 });
      assert.equal(dropped, droppedBefore, "a disposed listener is called no more");
    },
  );
}
