/**
 * The contract of fair scheduling by group (docs/groups.md): the claim
 * takes due grouped jobs round robin across groups, holds each group to
 * its limit (every leased job of it, started or claimed ahead, holds a
 * slot), runs an ordered group's jobs one at a time in dispatch order,
 * skips a paused group, and holds each group to its rate limit (claims per
 * window), waking an idle worker when the window turns.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { JobGroup, NewJobRow } from "../../../src/stores/store.ts";
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
  release,
  sorted,
  T0,
} from "./fixtures.ts";

/** Grouped jobs: the claim's fair part, and pausing a group. */
export const groups: ContractArea = {
  covers: ["pauseGroup", "resumeGroup", "pausedGroups"],
  register,
};

/** `count` job rows of group `key`, each with `n` in its payload. */
function grouped(key: string, count: number, group: Partial<JobGroup> = {}): NewJobRow[] {
  return Array.from(
    { length: count },
    (_, n) =>
      newJob({ payload: `{"n":${n}}`, group: { key, limit: null, ordered: false, ...group } }),
  );
}

function register(test: ContractTest): void {
  test("claim() takes due grouped jobs round robin: a group of 10 progresses beside a backlog of 100", async (store) => {
    const backlog = await store.insertJobs(grouped("a", 100));
    const few = await store.insertJobs(grouped("b", 10));
    const taken: number[] = [];
    for (let token = 1; token <= 5; token++) {
      const jobs = await claim(store, { limit: 4, token });
      assert.equal(jobs.length, 4, `claim ${token}`);
      taken.push(...ids(jobs));
      await store.settle(jobs.map((job) => complete(job.id, token)));
    }
    const fromFew = taken.filter((id) => few.includes(id)).length;
    const fromBacklog = taken.filter((id) => backlog.includes(id)).length;
    assert.deepEqual([fromFew, fromBacklog], [10, 10], "each claim takes from both groups alike");
  });

  test("claim() gives its grouped jobs in the order its rounds took them, the order they start in: a group's second job after every group's first", async (store) => {
    const backlog = await store.insertJobs(grouped("a", 40));
    const few = await store.insertJobs(grouped("b", 3));
    const jobs = await claim(store, { limit: 6, aheadFrom: 1 });
    const order = [0, 1, 2].flatMap((n) => [backlog[n]!, few[n]!]);
    assert.deepEqual(ids(jobs), order);
    assert.deepEqual(jobs.map((job) => job.ahead === true), [false, true, true, true, true, true]);
  });

  test("claim() takes jobs without a group beside grouped ones", async (store) => {
    const plain = await store.insertJobs([newJob(), newJob(), newJob()]);
    const group = await store.insertJobs(grouped("g", 3, { limit: 1 }));
    const jobs = await claim(store, { limit: 10 });
    assert.deepEqual(
      [...ids(jobs)].sort((a, b) => a - b),
      [...plain, group[0]!].sort((a, b) => a - b),
    );
  });

  test("claim() counts the jobs without a group as one more turn of the round robin, after the groups, within a claim as across claims, whatever its token", async (store) => {
    const p = await store.insertJobs(
      Array.from({ length: 10 }, (_, n) => newJob({ payload: `{"n":${n}}` })),
    );
    const x = await store.insertJobs(grouped("x", 3));
    const y = await store.insertJobs(grouped("y", 2));
    // The turns: x, y, then the plain jobs; a queue's first claim starts with its first group.
    assert.deepEqual(ids(await claim(store, { limit: 1, token: 2 })), [x[0]]);
    assert.deepEqual(
      ids(await claim(store, { limit: 5, token: 3 })),
      [y[0], p[0], x[1], y[1], p[1]],
      "one of each turn, then a second of each: the plain jobs' turn is one turn",
    );
    assert.deepEqual(
      ids(await claim(store, { limit: 4, token: 4 })),
      [x[2], p[2], p[3], p[4]],
      "the next claim goes on with the turn its last round did not come to; y has nothing due",
    );
  });

  test("claim() one job at a time alternates between a group and a backlog of jobs without a group", async (store) => {
    const p = await store.insertJobs(
      Array.from({ length: 30 }, (_, n) => newJob({ payload: `{"n":${n}}` })),
    );
    const x = await store.insertJobs(grouped("x", 3));
    const taken: number[] = [];
    for (let token = 1; token <= 8; token++) {
      const jobs = await claim(store, { limit: 1, token });
      taken.push(...ids(jobs));
      await store.settle(jobs.map((job) => complete(job.id, token)));
    }
    assert.deepEqual(taken, [x[0], p[0], x[1], p[1], x[2], p[2], p[3], p[4]]);
  });

  test("claim() serves a group that emptied and got jobs again after a group listed before it: it comes last", async (store) => {
    const [first] = await store.insertJobs(grouped("g1", 1));
    // A claim of one job: the turn stops at g1 (a larger one would go on to the plain jobs' turn).
    assert.deepEqual(ids(await claim(store, { limit: 1 })), [first]);
    await store.settle([complete(first!, 1)]);
    assert.deepEqual(await claim(store, { token: 2 }), [], "g1 is empty (and dropped)");
    const [other] = await store.insertJobs(grouped("g0", 1));
    const [again] = await store.insertJobs(grouped("g1", 1));
    assert.deepEqual(ids(await claim(store, { limit: 1, token: 3 })), [other]);
    assert.deepEqual(ids(await claim(store, { limit: 1, token: 4 })), [again]);
  });

  test("claim() walks new groups in the order they were listed, not by job name or key, whether one insert listed them or several", async (store) => {
    const job = (name: string, key: string) =>
      newJob({ name, group: { key, limit: null, ordered: false } });
    // One call lists several groups (a dispatchMany), then one call each.
    const listed = await store.insertJobs([
      job("gamma", "k5"),
      job("alpha", "k1"),
      job("alpha", "k9"),
    ]);
    for (const [name, key] of [["beta", "k3"], ["alpha", "k0"], ["gamma", "j"]] as const) {
      listed.push(...await store.insertJobs([job(name, key)]));
    }
    const taken: number[] = [];
    for (let token = 1; token <= listed.length; token++) {
      taken.push(...ids(await claim(store, { limit: 1, token })));
    }
    assert.deepEqual(taken, listed);
  });

  test("retry() of failed jobs of several groups lists their groups again in the order of the jobs' ids, not by job name or key", async (store) => {
    const job = (name: string, key: string) =>
      newJob({ name, group: { key, limit: null, ordered: false } });
    const [first] = await store.insertJobs([job("zeta", "z")]);
    const [second] = await store.insertJobs([job("alpha", "a")]);
    const taken = await claim(store);
    assert.deepEqual(sorted(ids(taken)), [first, second]);
    await store.settle([fail(first!, 1), fail(second!, 1)]);
    assert.deepEqual(await claim(store, { token: 2 }), [], "both groups are empty (and dropped)");
    assert.deepEqual(sorted(await store.retry([first!, second!], T0)), [first, second]);
    assert.deepEqual(ids(await claim(store, { limit: 1, token: 3 })), [first]);
    assert.deepEqual(ids(await claim(store, { limit: 1, token: 4 })), [second]);
  });

  test("claim() holds a group to its limit: every leased job holds a slot, started or claimed ahead, until it settles or its lease runs out", async (store) => {
    const jobs = await store.insertJobs(grouped("g", 6, { limit: 2 }));
    const first = await claim(store, { limit: 10, aheadFrom: 1 });
    assert.deepEqual(ids(first), jobs.slice(0, 2), "two at most, one of them held ahead");
    assert.deepEqual(await claim(store, { limit: 10, token: 2 }), [], "no slot left");
    await store.insertJobs(grouped("other", 1));
    assert.equal((await claim(store, { limit: 10, token: 3 })).length, 1, "another group is apart");
    await store.settle([complete(jobs[0]!, 1)]);
    assert.deepEqual(
      ids(await claim(store, { limit: 10, token: 4 })),
      [jobs[2]],
      "a settle frees a slot",
    );
    // The leases of jobs[1] (held ahead) and jobs[2] run out: their slots are free again.
    const later = ids(await claim(store, { limit: 10, token: 5, now: T0 + LEASE_MS + 1 }))
      .filter((id) => jobs.includes(id));
    assert.equal(later.length, 2, `${later}`);
  });

  test("claim() past aheadFrom in groups starts the first and holds the others unstarted: a worker death charges only the one started", async (store) => {
    await store.insertJobs([...grouped("g", 1), ...grouped("h", 1), ...grouped("i", 1)]);
    const first = await claim(store, { limit: 3, aheadFrom: 1, token: 1 });
    assert.deepEqual(first.map((job) => job.ahead === true), [false, true, true]);
    await begin(store, 1, ...ids(first)); // only the first started: the others take no begin mark
    const recovered = await claim(store, { limit: 3, now: T0 + LEASE_MS + 1, token: 2 });
    const charged = new Map(recovered.map((job) => [job.id, [job.attempts, job.crashes]]));
    assert.deepEqual(first.map((job) => charged.get(job.id)), [[2, 1], [1, 0], [1, 0]]);
  });

  test("claim() runs an ordered group's jobs one at a time in dispatch order; a job put back holds the group until it runs again", async (store) => {
    const jobs = await store.insertJobs(grouped("o", 3, { limit: 1, ordered: true }));
    const other = await store.insertJobs(grouped("p", 1, { limit: 1, ordered: true }));
    const [head, also] = await claim(store, { limit: 10 });
    assert.deepEqual([head?.id, also?.id].sort(), [jobs[0], other[0]].sort());
    assert.deepEqual(await claim(store, { limit: 10, token: 2 }), [], "the group's head runs");
    await store.settle([release(jobs[0]!, 1, T0 + 5_000, "Error: boom")]);
    assert.deepEqual(
      await claim(store, { limit: 10, token: 3, now: T0 + 10 }),
      [],
      "its backoff blocks the group",
    );
    const again = await claim(store, { limit: 10, token: 4, now: T0 + 5_000 });
    assert.deepEqual(ids(again), [jobs[0]], "the same job again, not the next");
    await store.settle([complete(jobs[0]!, 4, T0 + 5_000)]);
    const second = await claim(store, { limit: 10, token: 5, now: T0 + 5_000 });
    assert.deepEqual(ids(second), [jobs[1]]);
    await store.settle([fail(jobs[1]!, 5, T0 + 5_000)]);
    assert.deepEqual(
      ids(await claim(store, { limit: 10, token: 6, now: T0 + 5_000 })),
      [jobs[2]],
      "a job failed for good lets the next one go",
    );
  });

  test("retry() brings a failed grouped job back to its group and its limit", async (store) => {
    const jobs = await store.insertJobs(grouped("g", 2, { limit: 1 }));
    assert.deepEqual(ids(await claim(store)), [jobs[0]]);
    await store.settle([fail(jobs[0]!, 1)]);
    assert.deepEqual(ids(await claim(store, { token: 2 })), [jobs[1]]);
    assert.deepEqual(await store.retry([jobs[0]!], T0), [jobs[0]]);
    assert.deepEqual(await claim(store, { token: 3 }), [], "the group's one slot is taken");
    await store.settle([complete(jobs[1]!, 2)]);
    assert.deepEqual(ids(await claim(store, { token: 4 })), [jobs[0]]);
  });

  test("a group keeps its latest dispatch's limit: a job of an older dispatch put back by a retry does not bring its own back", async (store) => {
    const older = await store.insertJobs(grouped("g", 2, { limit: 3 }));
    assert.deepEqual(sorted(ids(await claim(store))), sorted(older), "both under the limit of 3");
    const newer = await store.insertJobs(grouped("g", 2, { limit: 1 }));
    await store.settle([release(older[0]!, 1, T0), complete(older[1]!, 1)]);
    const taken = ids(await claim(store, { token: 2 }));
    assert.equal(taken.length, 1, `one at a time, the limit of the latest dispatch: took ${taken}`);
    assert.ok([older[0], ...newer].includes(taken[0]));
  });

  test("claim() takes only grouped jobs of the names asked for, and none of a paused queue", async (store) => {
    const mine = await store.insertJobs(grouped("g", 2));
    await store.insertJobs(grouped("g", 2).map((row) => ({ ...row, name: "someone-else" })));
    assert.deepEqual(ids(await claim(store, { names: ["contract-job"] })).sort(), mine.sort());
    await store.insertJobs(grouped("h", 1));
    await store.pause("default", T0, null, null);
    assert.deepEqual(await claim(store, { token: 2 }), []);
  });

  test("nextDueAt() sees when a delayed grouped job becomes due", async (store) => {
    await store.insertJobs(grouped("g", 1).map((row) => ({ ...row, availableAt: T0 + 5_000 })));
    assert.equal(await store.nextDueAt(["default"], T0), T0 + 5_000);
  });

  test("a batch may hold grouped jobs beside plain ones: each keeps its group", async (store) => {
    const { jobIds } = await store.insertBatch({
      name: "mixed",
      allowFailures: true,
      createdAt: T0,
      jobs: [newJob(), ...grouped("g", 2, { limit: 1 })],
      then: [],
      catch: [],
      finally: [],
    });
    assert.deepEqual(ids(await claim(store)).sort(), [jobIds[0]!, jobIds[1]!].sort());
  });

  test("counts() and clear() see grouped jobs as any other", async (store) => {
    await store.insertJobs([
      ...grouped("g", 2, { limit: 1 }),
      ...grouped("h", 1).map((row) => ({ ...row, availableAt: T0 + 60_000 })),
    ]);
    const [running] = await claim(store);
    assert.deepEqual(await countsAt(store, T0), { default: [1, 1, 1, 0] });
    assert.equal(await store.clear("default", T0), 2, "the running job stays");
    assert.deepEqual((await store.settle([complete(running!.id, 1)])).applied, [true]);
    assert.deepEqual(await claim(store, { token: 2, now: T0 + 60_000 }), []);
  });

  test("a queue named like another queue's group plus a key ending (`default:g:12:contract-job` beside the group `lv` of `contract-job` in `default`) keeps its own jobs", async (store) => {
    const other = "default:g:12:contract-job";
    const [plain] = await store.insertJobs([newJob({ queue: other })]);
    const [inGroup] = await store.insertJobs(grouped("lv", 1));
    assert.deepEqual(await countsAt(store, T0), { default: [1, 0, 0, 0], [other]: [1, 0, 0, 0] });
    assert.deepEqual(ids(await claim(store, { queues: [other] })), [plain]);
    assert.deepEqual(ids(await claim(store, { token: 2 })), [inGroup]);
  });

  test("pauseGroup() stops claims of a group's jobs, not its running ones; resumeGroup() lets them go", async (store) => {
    const jobs = await store.insertJobs(grouped("g", 3));
    const [running] = await claim(store, { limit: 1 });
    const others = await store.insertJobs(grouped("h", 1));
    await store.pauseGroup("contract-job", "g", T0, null);
    assert.deepEqual(ids(await claim(store, { token: 2 })), others, "only the other group");
    await store.settle([complete(running!.id, 1)]);
    assert.equal(await store.resumeGroup("contract-job", "g", T0), true);
    assert.equal(await store.resumeGroup("contract-job", "g", T0), false, "not paused any more");
    assert.deepEqual(ids(await claim(store, { token: 3 })).sort(), jobs.slice(1).sort());
  });

  registerHolds(test);
  registerRates(test);
}

/** Every paused group, as one page. */
const ALL = { limit: 10_000, offset: 0 } as const;

/** Timed group pauses (holds): `pauseGroup()` with an end. */
function registerHolds(test: ContractTest): void {
  const HOLD_ENDS = T0 + 10_000;

  test("pauseGroup() with an end holds a group until then, while other groups go on; nextDueAt() wakes at its end; a hold that has passed holds nothing", async (store) => {
    const held = await store.insertJobs(grouped("g", 2));
    const others = await store.insertJobs(grouped("h", 1));
    await store.pauseGroup("contract-job", "g", T0, HOLD_ENDS);
    assert.deepEqual(ids(await claim(store)), others, "only the other group");
    await store.settle([complete(others[0]!, 1)]);
    assert.equal(await store.nextDueAt(["default"], T0 + 1), HOLD_ENDS, "due when the hold ends");
    assert.deepEqual(await claim(store, { token: 2, now: HOLD_ENDS - 1 }), [], "still held");
    assert.deepEqual(
      sorted(ids(await claim(store, { token: 3, now: HOLD_ENDS }))),
      sorted(held),
      "the hold has passed",
    );
    assert.equal(await store.nextDueAt(["default"], HOLD_ENDS), HOLD_ENDS + LEASE_MS, "leases");
    assert.equal(
      await store.resumeGroup("contract-job", "g", HOLD_ENDS),
      false,
      "a hold that has passed is no pause",
    );
  });

  test("resumeGroup() ends a hold early and says it held", async (store) => {
    const held = await store.insertJobs(grouped("g", 1));
    await store.pauseGroup("contract-job", "g", T0, HOLD_ENDS);
    assert.deepEqual(await claim(store), []);
    assert.equal(await store.resumeGroup("contract-job", "g", T0 + 1), true);
    assert.deepEqual(ids(await claim(store, { token: 2, now: T0 + 1 })), held);
    assert.equal(await store.nextDueAt(["default"], T0 + 2), T0 + 1 + LEASE_MS, "no hold left");
  });

  test("pauseGroup() never shortens a pause in force: a pause without an end keeps none, the later of two ends wins, and a passed hold is replaced", async (store) => {
    const [g] = await store.insertJobs(grouped("g", 1));
    const [k] = await store.insertJobs(grouped("k", 1));
    const [m] = await store.insertJobs(grouped("m", 1));
    const [n] = await store.insertJobs(grouped("n", 1));
    // g: paused until resumed, then held: still paused past the hold's end.
    await store.pauseGroup("contract-job", "g", T0, null);
    await store.pauseGroup("contract-job", "g", T0, T0 + 1_000);
    // k: held, then held again for less: the later end holds.
    await store.pauseGroup("contract-job", "k", T0, HOLD_ENDS);
    await store.pauseGroup("contract-job", "k", T0 + 1, T0 + 2_000);
    // m: a hold that has passed is replaced by a new one.
    await store.pauseGroup("contract-job", "m", T0, T0 + 1_000);
    await store.pauseGroup("contract-job", "m", T0 + 2_000, T0 + 3_000);
    // n: held, then paused without an end: paused until resumed.
    await store.pauseGroup("contract-job", "n", T0, T0 + 1_000);
    await store.pauseGroup("contract-job", "n", T0, null);
    assert.equal(await store.nextDueAt(["default"], T0 + 2_001), T0 + 3_000, "m's new hold");
    assert.deepEqual(ids(await claim(store, { now: T0 + 3_000 })), [m]);
    await store.settle([complete(m!, 1)]);
    assert.equal(await store.nextDueAt(["default"], T0 + 3_001), HOLD_ENDS, "k's later end");
    assert.deepEqual(ids(await claim(store, { token: 2, now: HOLD_ENDS })), [k]);
    await store.settle([complete(k!, 2)]);
    assert.deepEqual(await claim(store, { token: 3, now: HOLD_ENDS + 60_000 }), []);
    assert.equal(await store.resumeGroup("contract-job", "g", HOLD_ENDS), true, "g still paused");
    assert.equal(await store.resumeGroup("contract-job", "n", HOLD_ENDS), true, "n still paused");
    assert.deepEqual(
      sorted(ids(await claim(store, { token: 4, now: HOLD_ENDS + 60_000 }))),
      sorted([g!, n!]),
    );
  });

  test("settle() of a release that holds its group pauses the job's group until the job is due, its attempt given back; a job without a group holds nothing", async (store) => {
    const [a, b] = await store.insertJobs(grouped("g", 2));
    const [first] = await claim(store, { limit: 1 });
    assert.equal(first?.id, a);
    const [plain] = await store.insertJobs([newJob()]);
    const others = await store.insertJobs(grouped("h", 1));
    const hold = (id: number, token: number) => ({
      kind: "release" as const,
      id,
      token,
      at: T0,
      availableAt: HOLD_ENDS,
      error: null,
      refundAttempt: true,
      started: true as const,
      holdsGroup: true as const,
    });
    assert.deepEqual((await store.settle([hold(a!, 1)])).applied, [true]);
    const next = await claim(store, { token: 2 });
    assert.deepEqual(sorted(ids(next)), sorted([plain!, ...others]), "g is held; b waits");
    await store.settle([hold(plain!, 2)]);
    assert.equal(await store.nextDueAt(["default"], T0 + 1), HOLD_ENDS, "the hold's end");
    assert.deepEqual(await claim(store, { token: 3, now: HOLD_ENDS - 1, names: ["other"] }), []);
    const after = await claim(store, { token: 4, now: HOLD_ENDS });
    assert.deepEqual(
      sorted(after.map((job) => job.id)),
      sorted([a!, b!, plain!]),
      "the held job, its group and the plain job are due at the end",
    );
    assert.equal(after.find((job) => job.id === a)?.attempts, 1, "its attempt was given back");
    assert.equal(await store.resumeGroup("contract-job", "h", HOLD_ENDS), false, "h never held");
  });

  test("pausedGroups() lists the groups paused or held now, by job name then key, with their ends, a page at a time; a hold that has passed and a resumed group are not listed", async (store) => {
    assert.deepEqual(await store.pausedGroups(T0, ALL), []);
    await store.pauseGroup("contract-job", "b", T0, null);
    await store.pauseGroup("contract-job", "a", T0, HOLD_ENDS);
    await store.pauseGroup("other-job", "1:a:b", T0 + 1, T0 + 1_000);
    const at = (time: number | null) => time === null ? null : new Date(time);
    const listed = async (now: number) =>
      (await store.pausedGroups(now, ALL)).map((group) => [
        group.name,
        group.key,
        group.pausedAt.getTime(),
        group.until?.getTime() ?? null,
      ]);
    assert.deepEqual(await listed(T0 + 1), [
      ["contract-job", "a", T0, HOLD_ENDS],
      ["contract-job", "b", T0, null],
      ["other-job", "1:a:b", T0 + 1, T0 + 1_000],
    ]);
    assert.deepEqual((await store.pausedGroups(T0 + 1, ALL))[1], {
      name: "contract-job",
      key: "b",
      pausedAt: at(T0),
      until: null,
    });
    assert.deepEqual(
      (await store.pausedGroups(T0 + 1, { limit: 1, offset: 1 })).map((group) => group.key),
      ["b"],
      "a page of them",
    );
    assert.deepEqual(await listed(T0 + 1_000), [
      ["contract-job", "a", T0, HOLD_ENDS],
      ["contract-job", "b", T0, null],
    ], "other-job's hold has passed");
    await store.resumeGroup("contract-job", "b", T0 + 1_000);
    assert.deepEqual(await listed(T0 + 1_000), [["contract-job", "a", T0, HOLD_ENDS]]);
  });

  test("settle() deletes the group holds that ended a minute ago or more; pauses without an end and later holds stay, and the claim takes the same jobs as before", async (store) => {
    const [passed] = await store.insertJobs(grouped("passed", 1));
    const [recent] = await store.insertJobs(grouped("recent", 1));
    await store.insertJobs(grouped("live", 1));
    await store.insertJobs(grouped("paused", 1));
    const [plain] = await store.insertJobs([newJob()]);
    const AT = T0 + 120_000;
    await store.pauseGroup("contract-job", "passed", T0, AT - 60_000);
    await store.pauseGroup("contract-job", "recent", T0, AT - 59_999);
    await store.pauseGroup("contract-job", "live", T0, AT + 1);
    await store.pauseGroup("contract-job", "paused", T0, null);
    const stored = async () =>
      (await store.pausedGroups(T0, ALL)).map((
        group,
      ) => [group.key, group.until?.getTime() ?? null]);
    assert.deepEqual(await stored(), [
      ["live", AT + 1],
      ["passed", AT - 60_000],
      ["paused", null],
      ["recent", AT - 59_999],
    ]);
    const { claimed } = await store.settle([], {
      queues: ["default"],
      limit: 10,
      now: AT,
      leaseMs: LEASE_MS,
      token: 1,
    });
    assert.deepEqual(sorted(ids(claimed)), sorted([passed!, recent!, plain!]), "as before");
    assert.deepEqual(
      await stored(),
      [["live", AT + 1], ["paused", null], ["recent", AT - 59_999]],
      "the hold that ended a minute ago is deleted",
    );
    assert.equal(await store.resumeGroup("contract-job", "passed", AT), false);
    assert.deepEqual(await claim(store, { token: 2, now: AT }), [], "live and paused still hold");
    assert.equal(await store.resumeGroup("contract-job", "paused", AT), true);
    assert.equal(await store.resumeGroup("contract-job", "live", AT), true);
  });

  test("settle() deletes passed group holds a chunk at a time: a settle reads a bounded part of them, the next settles go on without waiting a minute", async (store) => {
    const keys = Array.from({ length: 1_100 }, (_, n) => `k${String(n).padStart(4, "0")}`);
    for (let from = 0; from < keys.length; from += 100) {
      await Promise.all(
        keys.slice(from, from + 100).map((key) =>
          store.pauseGroup("contract-job", key, T0, T0 + 1_000)
        ),
      );
    }
    const AT = T0 + 120_000;
    const left = async () => (await store.pausedGroups(T0, ALL)).length;
    let settles = 0;
    const counts: number[] = [];
    do {
      await store.settle([], {
        queues: ["default"],
        limit: 1,
        now: AT + settles,
        leaseMs: LEASE_MS,
        token: 1,
      });
      settles++;
      counts.push(await left());
    } while (counts.at(-1)! > 0 && settles < 10);
    assert.ok(
      counts[0]! > 0 && counts[0]! < keys.length,
      `the first settle deleted a part: ${counts}`,
    );
    assert.deepEqual(counts.at(-1), 0, `every passed hold is deleted: ${counts}`);
  });

  test("settle() refuses the start of a job claimed ahead whose group is held, and gives it back charged nothing", async (store) => {
    const [a, b] = await store.insertJobs(grouped("g", 2));
    await claim(store, { limit: 2, aheadFrom: 1, token: 1 });
    await store.pauseGroup("contract-job", "g", T0, HOLD_ENDS);
    const starts = { leases: [{ id: b!, token: 1 }], leaseMs: LEASE_MS, now: T0 };
    assert.deepEqual((await store.settle([complete(a!, 1)], undefined, { starts })).started, []);
    assert.deepEqual(await claim(store, { token: 2, now: HOLD_ENDS - 1 }), []);
    const again = await claim(store, { token: 3, now: HOLD_ENDS });
    assert.deepEqual(again.map((job) => [job.id, job.attempts]), [[b, 1]]);
  });
}

/** A rate limit of 2 claims per second for each group of the contract's job name. */
const RATES = { "contract-job": { max: 2, perMs: 1_000 } } as const;
/** The start of the window after the one that holds T0. */
const NEXT_WINDOW = Math.floor(T0 / 1_000) * 1_000 + 1_000;

function registerRates(test: ContractTest): void {
  test("claim() with groupRates takes at most max jobs per window from each group, the groups' windows apart, while other jobs go on", async (store) => {
    const a = await store.insertJobs(grouped("a", 5));
    const b = await store.insertJobs(grouped("b", 5));
    const free = () => grouped("c", 3).map((row) => ({ ...row, name: "other-job" }));
    const c = await store.insertJobs(free());
    const plain = await store.insertJobs([newJob({ name: "plain-job" })]);
    const first = ids(await claim(store, { limit: 20, groupRates: RATES }));
    assert.deepEqual(sorted(first), sorted([...a.slice(0, 2), ...b.slice(0, 2), ...c, ...plain]));
    await store.settle(first.map((id) => complete(id, 1)));
    const c2 = await store.insertJobs(free());
    const second = ids(await claim(store, { limit: 20, token: 2, now: T0 + 1, groupRates: RATES }));
    assert.deepEqual(sorted(second), sorted(c2), "a and b wait for their windows; c goes on");
    await store.settle(second.map((id) => complete(id, 2, T0 + 1)));
    assert.equal(
      await store.nextDueAt(["default"], T0 + 1, RATES),
      NEXT_WINDOW,
      "an idle worker wakes when the windows turn",
    );
    assert.equal(await store.nextDueAt(["default"], T0 + 1), null, "no limit, nothing later due");
    const third = ids(
      await claim(store, { limit: 20, token: 3, now: NEXT_WINDOW, groupRates: RATES }),
    );
    assert.deepEqual(sorted(third), sorted([...a.slice(2, 4), ...b.slice(2, 4)]));
    assert.deepEqual(
      await claim(store, { limit: 20, token: 4, now: NEXT_WINDOW + 999, groupRates: RATES }),
      [],
      "full again until the next window",
    );
    assert.equal(await store.nextDueAt(["default"], NEXT_WINDOW + 999, RATES), NEXT_WINDOW + 1_000);
    assert.deepEqual(
      sorted(ids(await claim(store, { limit: 20, token: 5, now: T0 + 1, groupRates: {} }))),
      sorted([a[4]!, b[4]!]),
      "a claimer that knows no limit is not held by the windows",
    );
  });

  test("claim() with groupRates: a claim whose now is in an earlier window than the group's stored one takes nothing from it and leaves its count", async (store) => {
    const jobs = await store.insertJobs(grouped("g", 6));
    const later = ids(await claim(store, { limit: 10, now: NEXT_WINDOW, groupRates: RATES }));
    assert.deepEqual(later, jobs.slice(0, 2));
    assert.deepEqual(
      await claim(store, { limit: 10, token: 2, now: NEXT_WINDOW - 1, groupRates: RATES }),
      [],
      "a claim that read its clock before the window turned",
    );
    assert.deepEqual(
      await claim(store, { limit: 10, token: 3, now: NEXT_WINDOW + 1, groupRates: RATES }),
      [],
      "the window it counted is still full",
    );
    assert.equal(await store.nextDueAt(["default"], NEXT_WINDOW - 1, RATES), NEXT_WINDOW);
    assert.deepEqual(
      ids(await claim(store, { limit: 10, token: 4, now: NEXT_WINDOW + 1_000, groupRates: RATES })),
      jobs.slice(2, 4),
    );
  });

  test("claim() with groupRates: a settle's prune keeps a group's window a minute after it ends, so a claim whose now is still in it takes nothing more from it", async (store) => {
    await store.insertJobs([...grouped("g", 4), ...grouped("h", 4)]);
    assert.equal((await claim(store, { limit: 20, groupRates: RATES })).length, 4, "2 of each");
    // Just after the windows end, a worker's settle prunes ended windows (a store's first prune is
    // due at once) and claims one job in the next window.
    const { claimed } = await store.settle([], {
      queues: ["default"],
      limit: 1,
      now: NEXT_WINDOW + 10,
      leaseMs: LEASE_MS,
      token: 2,
      groupRates: RATES,
    });
    assert.equal(claimed.length, 1);
    assert.deepEqual(
      await claim(store, { limit: 20, token: 3, now: NEXT_WINDOW - 1, groupRates: RATES }),
      [],
      "a claim that read its clock before the windows turned finds them full",
    );
  });

  test("claim() with groupRates: a group's window counts each claim, a retry's and a lease run out's included; nextDueAt() of a group with nothing due ignores its window", async (store) => {
    const jobs = await store.insertJobs(grouped("g", 2));
    const [first] = await claim(store, { limit: 1, groupRates: RATES });
    assert.equal(first?.id, jobs[0]);
    await store.settle([release(jobs[0]!, 1, T0 + 1, "Error: boom")]);
    const again = ids(await claim(store, { limit: 1, token: 2, now: T0 + 1, groupRates: RATES }));
    assert.deepEqual(again.length, 1, "the retry counts as the second claim");
    assert.deepEqual(
      await claim(store, { limit: 10, token: 3, now: T0 + 2, groupRates: RATES }),
      [],
      "the window is full",
    );
    // The lease of the second claim runs out in a later window: the job taken over counts there.
    const later = NEXT_WINDOW + LEASE_MS;
    const taken = ids(await claim(store, { limit: 10, token: 4, now: later, groupRates: RATES }));
    assert.equal(taken.length, 2, "the job whose lease ran out and the one left");
    assert.deepEqual(
      await claim(store, { limit: 10, token: 5, now: later, groupRates: RATES }),
      [],
    );
    await store.settle(taken.map((id) => complete(id, 4, later)));
    assert.equal(
      await store.nextDueAt(["default"], later, RATES),
      null,
      "a full window with no job due wakes no one",
    );
  });

  test("claim() with groupRates and a group limit: both hold, and jobs claimed ahead count", async (store) => {
    const jobs = await store.insertJobs(grouped("g", 4, { limit: 1 }));
    const rates = { "contract-job": { max: 2, perMs: 1_000 } };
    assert.deepEqual(ids(await claim(store, { limit: 10, groupRates: rates })), [jobs[0]]);
    assert.deepEqual(
      await claim(store, { limit: 10, token: 2, groupRates: rates }),
      [],
      "the group's one slot is taken",
    );
    await store.settle([complete(jobs[0]!, 1)]);
    assert.deepEqual(ids(await claim(store, { limit: 10, token: 3, groupRates: rates })), [
      jobs[1],
    ]);
    await store.settle([complete(jobs[1]!, 3)]);
    assert.deepEqual(
      await claim(store, { limit: 10, token: 4, groupRates: rates }),
      [],
      "a free slot, but the window is full",
    );
    assert.equal(await store.nextDueAt(["default"], T0, rates), NEXT_WINDOW);
    const more = await store.insertJobs(grouped("h", 4));
    const ahead = await claim(store, { limit: 10, token: 5, aheadFrom: 1, groupRates: rates });
    assert.deepEqual(sorted(ids(ahead)), sorted(more.slice(0, 2)), "held ahead or not, 2 a window");
    assert.equal(ahead.filter((job) => job.ahead).length, 1);
    assert.deepEqual(await claim(store, { limit: 10, token: 6, groupRates: rates }), []);
  });

  test("claim() with groupRates: a paused group counts nothing and its window waits; an ordered group's head counts", async (store) => {
    const paused = await store.insertJobs(grouped("p", 3));
    const ordered = await store.insertJobs(grouped("o", 3, { limit: 1, ordered: true }));
    await store.pauseGroup("contract-job", "p", T0, null);
    const first = ids(await claim(store, { limit: 10, groupRates: RATES }));
    assert.deepEqual(first, [ordered[0]], "only the ordered group's head");
    await store.settle([complete(ordered[0]!, 1)]);
    assert.deepEqual(ids(await claim(store, { limit: 10, token: 2, groupRates: RATES })), [
      ordered[1],
    ]);
    await store.settle([complete(ordered[1]!, 2)]);
    assert.deepEqual(
      await claim(store, { limit: 10, token: 3, groupRates: RATES }),
      [],
      "the ordered group's window is full; the paused group gives nothing",
    );
    await store.resumeGroup("contract-job", "p", T0);
    assert.deepEqual(
      sorted(ids(await claim(store, { limit: 10, token: 4, groupRates: RATES }))),
      sorted(paused.slice(0, 2)),
      "its window counted nothing while it was paused",
    );
  });
}
