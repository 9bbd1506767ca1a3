/**
 * The contract of `StepStore`: the memos a handler's steps, sleeps and
 * waits leave on their job (written by `"step"` and `"park"` settlements),
 * the signals in a job's mailbox, and what `signal()` makes of them.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { Settlement, StepRow, StepWrite, Store } from "../../../src/stores/store.ts";
import {
  begin,
  claim,
  complete,
  type ContractArea,
  type ContractTest,
  fail,
  ids,
  LEASE_MS,
  newJob,
  plain,
  T0,
} from "./fixtures.ts";

/** Memos and signals. */
export const steps: ContractArea = {
  covers: ["jobSteps", "signal"],
  register,
};

/** A day: the timeout of the waits and the keep of the finished jobs, far past every case's times. */
const DAY_MS = 86_400_000;

/** A memo of a step that ran, at call position `seq`, with `overrides` applied. */
function stepWrite(seq: number, overrides: Partial<StepWrite> = {}): StepWrite {
  return {
    seq,
    key: `step-${seq}`,
    kind: "step",
    output: `{"seq":${seq}}`,
    until: null,
    done: true,
    attempt: 1,
    durationMs: 7,
    ...overrides,
  };
}

/** A step settlement of the attempt `token` holds on job `id`. */
const stepDone = (id: number, token: number, step: StepWrite, at = T0): Settlement => ({
  kind: "step",
  id,
  token,
  at,
  step,
});

/** A park in a sleep named `key` until `until`, of the attempt `token` holds on job `id`. */
const parkSleep = (id: number, token: number, seq: number, key: string, until: number, at = T0) =>
  ({
    kind: "park",
    id,
    token,
    at,
    availableAt: until,
    step: { seq, key, kind: "sleep", output: null, until, done: true, attempt: 1, durationMs: 0 },
  }) as const;

/** A park in a wait keyed `key` timing out at `until`, of the attempt `token` holds on job `id`. */
const parkWait = (id: number, token: number, seq: number, key: string, until: number, at = T0) =>
  ({
    kind: "park",
    id,
    token,
    at,
    availableAt: until,
    step: { seq, key, kind: "wait", output: null, until, done: false, attempt: 1, durationMs: 0 },
  }) as const;

/** A success of the attempt `token` holds on job `id`, kept for a day. */
const completeKept = (id: number, token: number, at: number): Settlement => ({
  kind: "complete",
  id,
  token,
  at,
  keepUntil: at + DAY_MS,
});

/** Pushes one job and claims it with `token` at `now`; its id. */
async function running(store: Store, token = 1, now = T0): Promise<number> {
  const [id] = await store.insertJobs([newJob({ availableAt: now, createdAt: now })]);
  const [job] = await claim(store, { limit: 1, token, now });
  assert.equal(job?.id, id);
  return id!;
}

/** Pushes one job and parks it in a wait keyed `key` (timing out in a day); its id. */
async function parkedInWait(store: Store, key: string): Promise<number> {
  const id = await running(store, 5);
  assert.deepEqual((await store.settle([parkWait(id, 5, 1, key, T0 + DAY_MS)])).applied, [true]);
  return id;
}

/** The memos of job `id`, as plain objects. */
async function memos(store: Store, id: number): Promise<StepRow[]> {
  return plain((await store.jobSteps(id)).steps);
}

/** The mailbox of job `id`, as `[name, payload]` pairs, oldest first. */
async function mailbox(store: Store, id: number): Promise<[string, string][]> {
  return (await store.jobSteps(id)).signals.map((signal) => [signal.name, signal.payload]);
}

/** The ids of the jobs claimable at `now`, claimed with `token`. */
async function claimableAt(store: Store, now: number, token: number): Promise<number[]> {
  return ids(await claim(store, { now, token }));
}

function register(test: ContractTest): void {
  test("jobSteps() of a job with no memos, and of no job, is empty", async (store) => {
    const [id] = await store.insertJobs([newJob()]);
    assert.deepEqual(plain([await store.jobSteps(id!)]), [{ steps: [], signals: [] }]);
    assert.deepEqual(plain([await store.jobSteps(987_654)]), [{ steps: [], signals: [] }]);
  });

  test("settle() writes a step's memo, fenced by the token; the job stays leased", async (store) => {
    const id = await running(store, 1);
    const write = stepWrite(1, {
      key: "charge",
      output: '{"receipt":"r-1","note":"✓ \\"quoted\\""}',
      durationMs: 42,
    });
    const lost = await store.settle([stepDone(id, 2, write, T0 + 5)]);
    assert.deepEqual(lost.applied, [false], "a token that does not hold the job writes nothing");
    assert.deepEqual(await memos(store, id), []);
    assert.deepEqual((await store.settle([stepDone(id, 1, write, T0 + 5)])).applied, [true]);
    assert.deepEqual(await memos(store, id), [{ ...write, at: T0 + 5 }]);
    assert.deepEqual(await claimableAt(store, T0 + 10, 3), [], "still leased");
    assert.deepEqual(
      (await store.settle([complete(id, 1, T0 + 20)])).applied,
      [true],
      "the token still holds the job",
    );
  });

  test("jobSteps() gives memos by seq, and a memo of the same seq replaces the one before", async (store) => {
    const id = await running(store, 1);
    const settled = await store.settle([
      stepDone(id, 1, stepWrite(3), T0 + 3),
      stepDone(id, 1, stepWrite(1), T0 + 1),
      stepDone(id, 1, stepWrite(2, { output: null, kind: "wait", done: false }), T0 + 2),
    ]);
    assert.deepEqual(settled.applied, [true, true, true]);
    assert.deepEqual((await memos(store, id)).map((row) => row.seq), [1, 2, 3]);
    const resumed = stepWrite(2, { kind: "wait", output: '{"answer":"yes"}', durationMs: 0 });
    assert.deepEqual((await store.settle([stepDone(id, 1, resumed, T0 + 9)])).applied, [true]);
    assert.deepEqual(
      (await memos(store, id)).map(({ seq, kind, output, done, at }) => ({
        seq,
        kind,
        output,
        done,
        at,
      })),
      [
        { seq: 1, kind: "step", output: '{"seq":1}', done: true, at: T0 + 1 },
        { seq: 2, kind: "wait", output: '{"answer":"yes"}', done: true, at: T0 + 9 },
        { seq: 3, kind: "step", output: '{"seq":3}', done: true, at: T0 + 3 },
      ],
    );
  });

  test("a step that takes a signal deletes exactly that signal from the mailbox", async (store) => {
    const id = await running(store, 1);
    for (
      const [name, payload] of [["approve", '"first"'], ["approve", '"second"'], ["other", "1"]]
    ) {
      assert.equal(
        await store.signal({ jobId: id, name: name!, payload: payload!, now: T0 }),
        "buffered",
      );
    }
    const { signals } = await store.jobSteps(id);
    assert.deepEqual(signals.map((signal) => [signal.name, signal.payload]), [
      ["approve", '"first"'],
      ["approve", '"second"'],
      ["other", "1"],
    ]);
    const [first, second, other] = signals;
    assert.ok(first!.id < second!.id && second!.id < other!.id, "ids in the order sent");
    const takes = stepWrite(1, {
      key: "approve",
      kind: "wait",
      output: first!.payload,
      durationMs: 0,
      takesSignal: first!.id,
    });
    assert.deepEqual((await store.settle([stepDone(id, 9, takes)])).applied, [false]);
    assert.equal((await store.jobSteps(id)).signals.length, 3, "a lost write takes nothing");
    assert.deepEqual((await store.settle([stepDone(id, 1, takes)])).applied, [true]);
    assert.deepEqual(plain((await store.jobSteps(id)).signals), plain([second!, other!]));
    const { takesSignal: _, ...memo } = takes;
    assert.deepEqual(await memos(store, id), [{ ...memo, at: T0 }]);
  });

  test("a park gives the job back unleased, due at availableAt, its attempt given back, crashes and last error kept", async (store) => {
    const [id] = await store.insertJobs([newJob()]);
    // A first worker dies: the second claim counts a crash and says so in the last error.
    await claim(store, { limit: 1, token: 1, leaseMs: 50 });
    await begin(store, 1, id!);
    const [recovered] = await claim(store, { limit: 1, token: 2, now: T0 + 51 });
    assert.deepEqual(
      [recovered?.id, recovered?.attempts, recovered?.crashes, recovered?.lastError],
      [id, 2, 1, "worker died during attempt 1"],
    );
    const wake = T0 + 10_000;
    const park = parkSleep(id!, 2, 1, "nap", wake, T0 + 100);
    assert.deepEqual((await store.settle([{ ...park, token: 1 }])).applied, [false]);
    assert.deepEqual(await memos(store, id!), [], "a lost park writes nothing");
    assert.deepEqual((await store.settle([park])).applied, [true]);
    assert.deepEqual(await memos(store, id!), [{ ...park.step, at: T0 + 100 }]);
    assert.deepEqual(
      (await store.settle([complete(id!, 2, T0 + 200)])).applied,
      [false],
      "the parked attempt no longer holds the job",
    );
    assert.deepEqual(await claimableAt(store, wake - 1, 3), [], "not due before its wake time");
    const [again] = await claim(store, { now: wake, token: 4 });
    assert.deepEqual(
      [again?.id, again?.attempts, again?.crashes, again?.recovered, again?.lastError],
      [id, 2, 1, false, "worker died during attempt 1"],
      "the park charged no attempt, no crash, and wrote no error",
    );
  });

  test("a park in a wait whose signal is in the mailbox already is due at once; another name's is not", async (store) => {
    const [a, b] = await store.insertJobs([newJob(), newJob()]);
    assert.deepEqual(ids(await claim(store, { limit: 2, token: 1 })).sort((x, y) => x - y), [a, b]);
    // Sent while the attempts ran: kept for the waits to come.
    assert.equal(
      await store.signal({ jobId: a!, name: "approve", payload: "1", now: T0 }),
      "buffered",
    );
    assert.equal(
      await store.signal({ jobId: b!, name: "other", payload: "1", now: T0 }),
      "buffered",
    );
    const parked = await store.settle([
      parkWait(a!, 1, 1, "approve#2", T0 + DAY_MS, T0 + 100),
      parkWait(b!, 1, 1, "approve", T0 + DAY_MS, T0 + 100),
    ]);
    assert.deepEqual(parked.applied, [true, true]);
    assert.deepEqual(await claimableAt(store, T0 + 100, 2), [a], "the wait's signal came already");
    assert.deepEqual((await store.settle([complete(a!, 2, T0 + 100)])).applied, [true]);
    assert.deepEqual(await claimableAt(store, T0 + DAY_MS - 1, 3), []);
    assert.deepEqual(await claimableAt(store, T0 + DAY_MS, 4), [b], "due at its timeout");
  });

  test("a park releases the overlap locks its attempt took, as a release does", async (store) => {
    const [a, b] = await store.insertJobs([newJob(), newJob()]);
    await claim(store, { limit: 2, token: 1 });
    const lock = (id: number) => ({
      id,
      token: 1,
      locks: [{ key: "k", limit: 1, expiresAt: T0 + DAY_MS, retryAt: T0 + 1_000 }],
      rates: [],
    });
    assert.deepEqual(await store.acquire([lock(a!)], T0), [null]);
    assert.deepEqual(await store.acquire([lock(b!)], T0), [T0 + 1_000], "a holds the lock");
    const parked = await store.settle([parkSleep(a!, 1, 1, "nap", T0 + 10_000, T0 + 1)]);
    assert.deepEqual(parked.applied, [true]);
    assert.deepEqual(await store.acquire([lock(b!)], T0 + 2), [null], "released by the park");
  });

  test("a park of a batch job whose batch was cancelled meanwhile skips it, as a release does", async (store) => {
    const { id: batchId, jobIds: [member] } = await store.insertBatch({
      name: "steps",
      allowFailures: false,
      createdAt: T0,
      jobs: [newJob()],
      then: [],
      catch: [],
      finally: [],
    });
    const [job] = await claim(store, { limit: 1, token: 1 });
    assert.deepEqual([job?.id, job?.batchId], [member, batchId]);
    assert.equal(await store.cancelBatch(batchId, T0 + 1), true);
    const parked = await store.settle([parkSleep(member!, 1, 1, "nap", T0 + 10_000, T0 + 2)]);
    assert.deepEqual(parked.applied, [true]);
    const batch = await store.batch(batchId);
    assert.deepEqual(
      [batch?.pending, batch?.skipped, batch?.finishedAt],
      [0, 1, T0 + 2],
      "skipped, and its batch finished",
    );
    assert.deepEqual(await claimableAt(store, T0 + 10_000, 2), [], "the job is gone");
  });

  test('signal() answers "not-found" for no job and "finished" for an ended one, storing nothing', async (store) => {
    const send = (jobId: number) => store.signal({ jobId, name: "approve", payload: "1", now: T0 });
    assert.equal(await send(987_654), "not-found");
    assert.deepEqual(await mailbox(store, 987_654), []);
    const kept = await running(store, 1);
    const settled = await store.settle([completeKept(kept, 1, T0 + 1)]);
    assert.deepEqual(settled.applied, [true]);
    assert.equal(await send(kept), "finished");
    assert.deepEqual(await mailbox(store, kept), []);
    const failed = await running(store, 2);
    assert.deepEqual((await store.settle([fail(failed, 2, T0 + 1)])).applied, [true]);
    assert.equal(await send(failed), "finished");
    assert.deepEqual(await mailbox(store, failed), []);
  });

  test("signal() buffers a signal for a pending job and for a running one, in its mailbox", async (store) => {
    const [pending] = await store.insertJobs([newJob({ availableAt: T0 + 1_000 })]);
    const leased = await running(store, 1);
    assert.equal(
      await store.signal({
        jobId: pending!,
        name: "approve",
        payload: '{"by":"ann"}',
        now: T0 + 3,
      }),
      "buffered",
    );
    assert.equal(
      await store.signal({ jobId: leased, name: "approve", payload: '"yes"', now: T0 + 4 }),
      "buffered",
    );
    const { signals: [signal] } = await store.jobSteps(pending!);
    assert.deepEqual(
      { name: signal?.name, payload: signal?.payload, sentAt: signal?.sentAt },
      { name: "approve", payload: '{"by":"ann"}', sentAt: T0 + 3 },
    );
    assert.deepEqual(await mailbox(store, leased), [["approve", '"yes"']]);
    assert.deepEqual(await claimableAt(store, T0 + 999, 2), [], "the pending job stays delayed");
    assert.deepEqual(
      (await store.settle([complete(leased, 1, T0 + 5)])).applied,
      [true],
      "the running job keeps its lease",
    );
  });

  test("signal() delivers to a job parked in a wait of that name: it is due at once", async (store) => {
    const id = await parkedInWait(store, "approve");
    assert.deepEqual(await claimableAt(store, T0 + 50, 1), []);
    assert.equal(
      await store.signal({ jobId: id, name: "approval", payload: "1", now: T0 + 50 }),
      "buffered",
      "another name, even one that starts with the wait's",
    );
    assert.equal(
      await store.signal({ jobId: id, name: "appro", payload: "2", now: T0 + 50 }),
      "buffered",
    );
    assert.deepEqual(await claimableAt(store, T0 + 50, 2), []);
    assert.equal(
      await store.signal({ jobId: id, name: "approve", payload: '"yes"', now: T0 + 60 }),
      "delivered",
    );
    assert.deepEqual(await mailbox(store, id), [
      ["approval", "1"],
      ["appro", "2"],
      ["approve", '"yes"'],
    ]);
    const [resumed] = await claim(store, { now: T0 + 60, token: 3 });
    assert.deepEqual([resumed?.id, resumed?.attempts], [id, 1], "a wait counts no attempt");
  });

  test("signal() delivers once per wait: a second signal of the name while the first waits to be taken is buffered", async (store) => {
    const id = await parkedInWait(store, "approve");
    assert.equal(
      await store.signal({ jobId: id, name: "approve", payload: '"first"', now: T0 + 60 }),
      "delivered",
    );
    assert.equal(
      await store.signal({ jobId: id, name: "approve", payload: '"second"', now: T0 + 61 }),
      "buffered",
      "the wait is answered by the first",
    );
    assert.deepEqual(await mailbox(store, id), [["approve", '"first"'], ["approve", '"second"']]);
    assert.deepEqual(await claimableAt(store, T0 + 61, 2), [id]);
  });

  test("signal() delivers by name to a wait keyed with its number (survey#2 waits for survey)", async (store) => {
    const id = await parkedInWait(store, "survey#2");
    assert.equal(
      await store.signal({ jobId: id, name: "survey", payload: "1", now: T0 + 60 }),
      "delivered",
    );
    assert.deepEqual(await claimableAt(store, T0 + 60, 2), [id]);
  });

  test("signal() only buffers for a job parked in a sleep, which stays due at its wake time", async (store) => {
    const id = await running(store, 1);
    const wake = T0 + 10_000;
    // A wait of the signal's name that already ended, then the sleep.
    const waited = stepWrite(1, { key: "approve", kind: "wait", output: '"yes"', durationMs: 0 });
    const settled = await store.settle([
      stepDone(id, 1, waited),
      parkSleep(id, 1, 2, "nap", wake, T0 + 1),
    ]);
    assert.deepEqual(settled.applied, [true, true]);
    for (const name of ["nap", "approve"]) {
      assert.equal(
        await store.signal({ jobId: id, name, payload: "1", now: T0 + 60 }),
        "buffered",
        name,
      );
    }
    assert.deepEqual(await claimableAt(store, wake - 1, 2), []);
    assert.deepEqual(await claimableAt(store, wake, 3), [id]);
    assert.deepEqual(await mailbox(store, id), [["nap", "1"], ["approve", "1"]]);
  });

  test("memos and signals outlive a failure for good, and retry() resumes the job with them", async (store) => {
    const id = await running(store, 1);
    assert.deepEqual((await store.settle([stepDone(id, 1, stepWrite(1))])).applied, [true]);
    assert.equal(
      await store.signal({ jobId: id, name: "approve", payload: "1", now: T0 }),
      "buffered",
    );
    const before = plain([await store.jobSteps(id)]);
    assert.equal(before[0]!.steps.length, 1);
    assert.deepEqual((await store.settle([fail(id, 1, T0 + 1)])).applied, [true]);
    assert.deepEqual(plain([await store.jobSteps(id)]), before, "kept with the failed job");
    assert.deepEqual(await store.retry([id], T0 + 2), [id]);
    assert.deepEqual(plain([await store.jobSteps(id)]), before, "kept through the retry");
    assert.deepEqual(await claimableAt(store, T0 + 2, 2), [id]);
  });

  test("memos and signals go once their job is in no table: completed unkept, or forgotten", async (store) => {
    const [gone, kept, forgotten, failed] = await store.insertJobs([
      newJob(),
      newJob(),
      newJob(),
      newJob(),
    ]);
    await claim(store, { limit: 4, token: 1 });
    const all = [gone!, kept!, forgotten!, failed!];
    const settled = await store.settle(all.map((id) => stepDone(id, 1, stepWrite(1))));
    assert.deepEqual(settled.applied, [true, true, true, true]);
    for (const id of all) {
      assert.equal(await store.signal({ jobId: id, name: "s", payload: "1", now: T0 }), "buffered");
    }
    const ended = await store.settle([
      complete(gone!, 1, T0 + 1),
      completeKept(kept!, 1, T0 + 1),
      fail(forgotten!, 1, T0 + 1),
      fail(failed!, 1, T0 + 1),
    ]);
    assert.deepEqual(ended.applied, [true, true, true, true]);
    assert.equal(await store.forget(forgotten!), true);
    // A later tick, past the upkeep's minute: a store that prunes in its settles has pruned by then.
    const later = T0 + 5 * 60_000;
    const other = await running(store, 2, later);
    assert.deepEqual((await store.settle([complete(other, 2, later)])).applied, [true]);
    for (const id of [gone!, forgotten!]) {
      assert.deepEqual(
        plain([await store.jobSteps(id)]),
        [{ steps: [], signals: [] }],
        `job ${id}`,
      );
    }
    for (const id of [kept!, failed!]) {
      const { steps, signals } = await store.jobSteps(id);
      assert.deepEqual([steps.length, signals.length], [1, 1], `job ${id}`);
    }
  });

  test("jobSteps() of a job removed for good is empty at once, whichever way it went", async (store) => {
    const { removed, kept } = await removeForGood(store);
    for (const [how, id] of Object.entries(removed)) {
      assert.deepEqual(plain([await store.jobSteps(id)]), [{ steps: [], signals: [] }], how);
    }
    for (const [how, id] of Object.entries(kept)) {
      const { steps, signals } = await store.jobSteps(id);
      assert.ok(steps.length > 0 && signals.length === 1, how);
    }
  });

  test(
    "an admin command that removes jobs for good deletes their memos and signals with them",
    async (store) => {
      const { removed, kept } = await removeForGood(store);
      const { completed: _, ...byAdmin } = removed;
      const rows = await store.transaction((tx) =>
        tx.query<{ job_id: number }>(
          "SELECT job_id FROM job_steps UNION ALL SELECT job_id FROM job_signals",
        )
      );
      const left = new Set(rows.map((row) => Number(row.job_id)));
      for (const [how, id] of Object.entries(byAdmin)) assert.ok(!left.has(id), how);
      for (const [how, id] of Object.entries(kept)) assert.ok(left.has(id), how);
    },
    { sql: true },
  );

  test("a memo's until keeps its distance from the settlement's at, on the store's clock", async (store) => {
    // The caller's real now, so a store on its own clock sees a time close to its own.
    const now = Date.now();
    const [id] = await store.insertJobs([newJob({ availableAt: now, createdAt: now })]);
    const [job] = await claim(store, { limit: 1, token: 1, now });
    assert.equal(job?.id, id);
    const sleepMs = 3_600_000;
    const park = parkSleep(id!, 1, 1, "nap", now + sleepMs, now);
    assert.deepEqual((await store.settle([park])).applied, [true]);
    const [memo] = await memos(store, id!);
    const tolerance = 60_000; // generous: the store's clock and the caller's may differ a little
    assert.ok(
      Math.abs(memo!.until! - memo!.at - sleepMs) <= 1_000,
      `until ${memo!.until} is ${sleepMs} ms after the write (${memo!.at})`,
    );
    assert.ok(Math.abs(memo!.at - now) <= tolerance, `written at ${memo!.at}, caller's now ${now}`);
    assert.deepEqual(await claimableAt(store, now + LEASE_MS, 2), [], "asleep for an hour");
  });
}

/**
 * Jobs with a memo and a signal each, then removed for good in every way
 * there is (a success not kept, a forget, a prune and a flush of failed
 * jobs, a clear, a cancel, a prune of kept finished jobs), with no settle
 * after the removals; and the jobs beside them that stay.
 */
async function removeForGood(store: Store): Promise<{
  removed: Record<string, number>;
  kept: Record<string, number>;
}> {
  const names = [
    "completed",
    "forgotten",
    "prunedFailed",
    "flushed",
    "cleared",
    "cancelled",
    "prunedFinished",
    "finished",
    "cancelledKept",
  ] as const;
  const inserted = await store.insertJobs(
    names.map((name) => newJob({ queue: name === "cleared" ? "other" : "default" })),
  );
  const job = Object.fromEntries(names.map((name, n) => [name, inserted[n]!])) as Record<
    (typeof names)[number],
    number
  >;
  await claim(store, { queues: ["default", "other"], limit: names.length, token: 1 });
  const written = await store.settle(inserted.map((id) => stepDone(id, 1, stepWrite(1))));
  assert.ok(written.applied.every(Boolean));
  for (const id of inserted) {
    assert.equal(await store.signal({ jobId: id, name: "s", payload: "1", now: T0 }), "buffered");
  }
  const parked = (id: number) => parkSleep(id, 1, 2, "nap", T0 + DAY_MS, T0 + 1);
  const ended = await store.settle([
    complete(job.completed, 1, T0 + 1),
    fail(job.forgotten, 1, T0 + 1),
    fail(job.prunedFailed, 1, T0 + 1),
    fail(job.flushed, 1, T0 + 5),
    parked(job.cleared),
    parked(job.cancelled),
    parked(job.cancelledKept),
    completeKept(job.prunedFinished, 1, T0 + 1),
    completeKept(job.finished, 1, T0 + 5),
  ]);
  assert.ok(ended.applied.every(Boolean));
  assert.equal(await store.forget(job.forgotten), true);
  assert.equal(await store.pruneFailed(T0 + 2, T0 + 10), 1);
  assert.equal(await store.flushFailed(), 1);
  assert.equal(await store.clear("other", T0 + 10), 1);
  const cancel = (id: number, keepUntil: number) =>
    store.cancel({ id, reason: "not needed", now: T0 + 10, keepUntil });
  assert.equal(await cancel(job.cancelled, T0 + 10), "cancelled");
  assert.equal(await cancel(job.cancelledKept, T0 + DAY_MS), "cancelled");
  assert.equal(await store.pruneFinished(T0 + 2, T0 + 10), 1);
  const { finished, cancelledKept, ...removed } = job;
  return { removed, kept: { finished, cancelledKept } };
}
