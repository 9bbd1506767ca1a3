/**
 * The contract of `JobControlStore`: results and the kept finished
 * jobs, awaiting, cancelling (and the cancels a worker sees through
 * `WorkerStore.cancelsAsked`), and pausing queues.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { Store } from "../../../src/stores/store.ts";
import {
  BOOM,
  claim,
  type ContractArea,
  type ContractTest,
  countsAt,
  fail,
  ids,
  LEASE_MS,
  newJob,
  plain,
  T0,
} from "./fixtures.ts";

/** Kept finished jobs, and what stops or holds back a job. */
export const jobControlStore: ContractArea = {
  covers: [
    "result",
    "results",
    "finished",
    "finishedJob",
    "pruneFinished",
    "markAwaited",
    "cancel",
    "cancelsAsked",
    "pause",
    "resume",
    "paused",
  ],
  register,
};

const KEEP = T0 + 3_600_000;

/** Claims job `id` alone (by its name from `pushNamed`) with `token` and completes it at `at`, kept with `output`. */
async function completeKept(store: Store, id: number, token: number, at: number, output: string) {
  const [job] = await claim(store, { queues: ["default", "mail"], token, names: [nameOf(id)] });
  assert.equal(job?.id, id);
  const settled = await store.settle([
    { kind: "complete", id, token, at, durationMs: 5, output, keepUntil: KEEP },
  ]);
  assert.deepEqual(settled.applied, [true]);
}

/** The name each job `pushNamed` stored was given, by id. */
const namesById = new Map<number, string>();
let lastName = 0;

/** Pushes a job with a name of its own (see `nameOf`), to be claimed alone by name; its id. */
async function pushNamed(store: Store, queue = "default"): Promise<number> {
  const name = `job-${++lastName}`;
  const [id] = await store.insertJobs([newJob({ queue, name })]);
  namesById.set(id!, name);
  return id!;
}

/** The name `pushNamed` gave job `id`. */
function nameOf(id: number): string {
  const name = namesById.get(id);
  if (name === undefined) throw new Error(`job ${id} was not pushed by pushNamed()`);
  return name;
}

function register(test: ContractTest): void {
  test("result() and results() say where jobs stand: pending, running, completed, failed or cancelled; null when no table holds it", async (store) => {
    const base = { attempts: 0, output: null, error: null, cancelRequested: null };
    const pending = await pushNamed(store);
    const running = await pushNamed(store);
    const completed = await pushNamed(store);
    const failed = await pushNamed(store);
    const cancelled = await pushNamed(store);
    const unkept = await pushNamed(store);
    assert.equal((await claim(store, { token: 2, names: [nameOf(running)] })).length, 1);
    await completeKept(store, completed, 3, T0 + 10, '{"sent":true}');
    await claim(store, { token: 4, names: [nameOf(failed)] });
    assert.deepEqual((await store.settle([fail(failed, 4, T0 + 20)])).applied, [true]);
    assert.equal(
      await store.cancel({ id: cancelled, reason: "not needed", now: T0, keepUntil: KEEP }),
      "cancelled",
    );
    await claim(store, { token: 5, names: [nameOf(unkept)] });
    await store.settle([{ kind: "complete", id: unkept, token: 5, at: T0 + 30 }]);
    const at = T0 + 40;
    const results = {
      pending: { ...await store.result(pending, at) },
      running: { ...await store.result(running, at) },
      completed: { ...await store.result(completed, at) },
      failed: { ...await store.result(failed, at) },
      cancelled: { ...await store.result(cancelled, at) },
    };
    assert.deepEqual(results, {
      pending: { ...base, state: "pending", name: nameOf(pending) },
      running: { ...base, state: "running", name: nameOf(running), attempts: 1 },
      completed: {
        ...base,
        state: "completed",
        name: nameOf(completed),
        attempts: 1,
        output: '{"sent":true}',
      },
      failed: { ...base, state: "failed", name: nameOf(failed), attempts: 1, error: BOOM.message },
      cancelled: { ...base, state: "cancelled", name: nameOf(cancelled), error: "not needed" },
    });
    assert.equal(await store.result(unkept, at), null, "a success not kept leaves nothing");
    assert.equal(await store.result(987_654, at), null);
    const many = await store.results(
      [pending, running, completed, failed, cancelled, unkept, 987_654],
      at,
    );
    assert.deepEqual(
      Object.fromEntries([...many].map(([id, row]) => [id, { ...row }])),
      {
        [pending]: results.pending,
        [running]: results.running,
        [completed]: results.completed,
        [failed]: results.failed,
        [cancelled]: results.cancelled,
      },
      "results() reads the same rows in one call, and leaves out the ids no table holds",
    );
    assert.equal((await store.results([], at)).size, 0);
    assert.equal(
      (await store.result(running, T0 + LEASE_MS))?.state,
      "pending",
      "a job whose lease ran out is pending again",
    );
  });

  test("finished() lists kept jobs last finished first, by name and queue, paged; finishedJob() finds one", async (store) => {
    const a = await pushNamed(store, "mail");
    const b = await pushNamed(store);
    const c = await pushNamed(store, "mail");
    await completeKept(store, a, 1, T0 + 30, "1");
    await claim(store, { queues: ["default"], token: 1 });
    await completeKept(store, c, 1, T0 + 10, "3");
    await store.settle([
      { kind: "complete", id: b, token: 1, at: T0 + 20, output: "2", keepUntil: KEEP },
    ]);
    const list = async (filter: { name?: string; queue?: string }, limit = 10, offset = 0) =>
      ids(await store.finished(filter, { limit, offset }));
    assert.deepEqual(await list({}), [a, b, c]);
    assert.deepEqual(await list({}, 2, 1), [b, c]);
    assert.deepEqual(await list({ queue: "mail" }), [a, c]);
    assert.deepEqual(await list({ name: nameOf(b) }), [b]);
    assert.deepEqual(await list({ name: nameOf(b), queue: "mail" }), []);
    assert.deepEqual({ ...await store.finishedJob(c) }, {
      id: c,
      queue: "mail",
      name: nameOf(c),
      state: "completed",
      payload: '{"n":0}',
      output: "3",
      error: null,
      attempts: 1,
      createdAt: new Date(T0),
      startedAt: new Date(T0 + 5),
      finishedAt: new Date(T0 + 10),
      durationMs: 5,
    });
    assert.equal(await store.finishedJob(987_654), null);
    const [queued] = await store.insertJobs([newJob()]);
    assert.equal(await store.finishedJob(queued!), null, "a queued job is not finished");
  });

  test("finished() lists the kept jobs of one settle under their own queue and name: names shared across queues, queues across names", async (store) => {
    const rows: [string, string][] = [
      ["mail", "send"],
      ["mail", "bounce"],
      ["default", "send"],
      ["mail", "send"],
    ];
    const kept = await store.insertJobs(rows.map(([queue, name]) => newJob({ queue, name })));
    await claim(store, { queues: ["default", "mail"], token: 1 });
    const settled = await store.settle(kept.map((id, index) => ({
      kind: "complete",
      id,
      token: 1,
      at: T0 + 10 + index,
      keepUntil: KEEP,
    })));
    assert.deepEqual(settled.applied, [true, true, true, true]);
    const list = async (filter: { name?: string; queue?: string }) =>
      ids(await store.finished(filter, { limit: 10, offset: 0 }));
    const [sendMail, bounce, sendDefault, sendMailAgain] = kept as [number, number, number, number];
    assert.deepEqual(await list({ queue: "mail", name: "send" }), [sendMailAgain, sendMail]);
    assert.deepEqual(await list({ queue: "mail", name: "bounce" }), [bounce]);
    assert.deepEqual(await list({ queue: "default", name: "send" }), [sendDefault]);
    assert.deepEqual(await list({ queue: "default", name: "bounce" }), []);
    assert.deepEqual(await list({ name: "send" }), [sendMailAgain, sendDefault, sendMail]);
    assert.deepEqual(await list({ queue: "mail" }), [sendMailAgain, bounce, sendMail]);
    assert.deepEqual(await list({}), [sendMailAgain, sendDefault, bounce, sendMail]);
  });

  test("pruneFinished(before) deletes kept jobs finished strictly before and says how many", async (store) => {
    const [a, b, c] = [await pushNamed(store), await pushNamed(store), await pushNamed(store)];
    await completeKept(store, a, 1, T0 + 10, "a");
    await completeKept(store, b, 2, T0 + 20, "b");
    await completeKept(store, c, 3, T0 + 30, "c");
    assert.equal(await store.pruneFinished(T0 + 20, T0 + 100), 1, "only what finished before");
    assert.equal(await store.finishedJob(a), null);
    assert.deepEqual(ids(await store.finished({}, { limit: 10, offset: 0 })), [c, b]);
    assert.equal(await store.pruneFinished(T0 + 20, T0 + 100), 0);
    assert.equal(await store.pruneFinished(T0 + 31, T0 + 100), 2);
    assert.deepEqual(await store.finished({}, { limit: 10, offset: 0 }), []);
  });

  test("settle() prunes kept jobs whose keepUntil passed, at most once a minute of its time", async (store) => {
    let token = 0;
    const completeAt = async (at: number, keepUntil: number) => {
      const id = await pushNamed(store);
      const [job] = await claim(store, { token: ++token, now: at, names: [nameOf(id)] });
      assert.equal(job?.id, id);
      await store.settle([{ kind: "complete", id, token, at, keepUntil }]);
      return id;
    };
    const short = await completeAt(T0, T0 + 10); // a prune here finds nothing past its time
    const later = await completeAt(T0 + 30_000, KEEP);
    assert.notEqual(await store.finishedJob(short), null, "within a minute of the last prune");
    const last = await completeAt(T0 + 60_000, KEEP);
    assert.equal(await store.finishedJob(short), null, "a minute later, its time having run out");
    assert.deepEqual(ids(await store.finished({}, { limit: 10, offset: 0 })), [last, later]);
  });

  test("markAwaited() marks a job still stored, waiting or running, and says false for one gone", async (store) => {
    const [waiting, running] = await store.insertJobs([newJob(), newJob()]);
    await claim(store, { limit: 1, token: 1 });
    assert.equal(await store.markAwaited(waiting!), true);
    assert.equal(await store.markAwaited(running!), true);
    assert.equal(await store.markAwaited(987_654), false);
    await store.settle([{ kind: "complete", id: waiting!, token: 1, at: T0 + 1, keepUntil: KEEP }]);
    assert.equal(await store.markAwaited(waiting!), false, "a finished job is no longer stored");
    assert.deepEqual(await countsAt(store, T0), { default: [1, 0, 0, 0] }, "nothing else moved");
  });

  test("cancel() deletes a job not running, keeps it as cancelled, releases its unique key and stops its batch member", async (store) => {
    const key = { kind: "unique", key: "order:7", expiresAt: KEEP, releaseOnStart: false } as const;
    const [keyed] = await store.insertKeyed([{ ...newJob(), key }]);
    assert.equal(keyed?.outcome, "stored");
    const request = { id: keyed!.id, reason: "customer left", now: T0 + 5, keepUntil: KEEP };
    assert.equal(await store.cancel(request), "cancelled");
    assert.deepEqual(await claim(store), [], "a cancelled job is never claimed");
    const kept = await store.finishedJob(keyed!.id);
    assert.deepEqual([kept?.state, kept?.error, kept?.finishedAt], [
      "cancelled",
      "customer left",
      new Date(T0 + 5),
    ]);
    assert.equal(await store.cancel(request), "finished", "cancelling it again");
    const [again] = await store.insertKeyed([{ ...newJob(), key }]);
    assert.equal(again?.outcome, "stored", "its unique key was released");

    const { id: batchId, jobIds: [member] } = await store.insertBatch({
      name: "b",
      allowFailures: false,
      createdAt: T0,
      jobs: [newJob({ queue: "batch" })],
      then: [],
      catch: [],
      finally: [{
        queue: "cb",
        name: "fin",
        payload: "{}",
        priority: 0,
        delayMs: 0,
        retryForMs: null,
      }],
    });
    assert.equal(
      await store.cancel({ id: member!, reason: "stop", now: T0 + 6, keepUntil: T0 }),
      "cancelled",
    );
    const batch = await store.batch(batchId);
    assert.deepEqual([batch?.pending, batch?.skipped, batch?.finishedAt], [0, 1, T0 + 6]);
    assert.deepEqual((await claim(store, { queues: ["cb"], now: T0 + 6 })).map((job) => job.name), [
      "fin",
    ]);
    assert.equal(await store.result(member!, T0 + 6), null, "a cancel not kept leaves nothing");
    assert.equal(
      await store.cancel({ id: member!, reason: "x", now: T0 + 7, keepUntil: KEEP }),
      "not-found",
    );
    assert.equal(
      await store.cancel({ id: 987_654, reason: "x", now: T0, keepUntil: KEEP }),
      "not-found",
    );
  });

  test("cancel() of a running job asks its worker, and cancelsAsked() tells only the lease that holds it", async (store) => {
    const [id, other] = await store.insertJobs([newJob(), newJob()]);
    await claim(store, { token: 5 });
    const request = { id: id!, reason: "too slow", now: T0 + 1, keepUntil: KEEP };
    assert.equal(await store.cancel(request), "cancelling");
    assert.deepEqual(
      await countsAt(store, T0 + 1),
      { default: [0, 0, 2, 0] },
      "it is still leased",
    );
    assert.equal((await store.result(id!, T0 + 1))?.cancelRequested, "too slow");
    assert.deepEqual(
      plain(await store.cancelsAsked([{ id: id!, token: 5 }, { id: other!, token: 5 }])),
      [
        { id: id!, token: 5, reason: "too slow" },
      ],
    );
    assert.deepEqual(
      await store.cancelsAsked([{ id: id!, token: 6 }]),
      [],
      "another lease's token",
    );
    assert.deepEqual(await store.cancelsAsked([]), []);
    const later = { ...request, now: T0 + LEASE_MS };
    assert.equal(await store.cancel(later), "cancelled", "its worker died: nothing runs it");
    assert.deepEqual(await store.cancelsAsked([{ id: id!, token: 5 }]), []);
    assert.deepEqual(
      (await store.settle([{ kind: "complete", id: id!, token: 5, at: T0 + LEASE_MS }])).applied,
      [false],
      "the dead worker's late settle",
    );
  });

  test("pause() stops claims from a queue until resumed or until its end; paused() lists pauses in effect", async (store) => {
    const [a1, a2] = await store.insertJobs([newJob({ queue: "a" }), newJob({ queue: "a" })]);
    const [b1] = await store.insertJobs([newJob({ queue: "b" })]);
    await store.pause("a", T0, null, "deploy");
    assert.deepEqual(plain(await store.paused(T0)), [
      { queue: "a", pausedAt: new Date(T0), until: null, reason: "deploy" },
    ]);
    assert.deepEqual(ids(await claim(store, { queues: ["a", "b"], limit: 1, token: 1 })), [b1]);
    assert.deepEqual(await store.nextDueAt(["a"], T0), null);
    assert.equal(await store.resume("a", T0 + 1), true);
    assert.equal(await store.resume("a", T0 + 1), false, "not paused any more");
    assert.deepEqual(await store.paused(T0 + 1), []);
    assert.deepEqual(ids(await claim(store, { queues: ["a"], limit: 1, now: T0 + 1, token: 2 })), [
      a1,
    ]);

    await store.pause("a", T0 + 2, null, null);
    await store.pause("a", T0 + 3, T0 + 1_000, "until the hour");
    assert.deepEqual(plain(await store.paused(T0 + 999)), [
      {
        queue: "a",
        pausedAt: new Date(T0 + 3),
        until: new Date(T0 + 1_000),
        reason: "until the hour",
      },
    ], "a second pause replaces the first");
    assert.deepEqual(await claim(store, { queues: ["a"], now: T0 + 999, token: 3 }), []);
    assert.deepEqual(await store.paused(T0 + 1_000), [], "a pause ends at its until");
    assert.deepEqual(ids(await claim(store, { queues: ["a"], now: T0 + 1_000, token: 4 })), [a2]);
    assert.equal(await store.resume("a", T0 + 1_000), false, "an ended pause was not in effect");
    assert.equal(await store.resume("never-paused", T0), false);
  });
}
