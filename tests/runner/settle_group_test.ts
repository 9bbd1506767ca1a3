import assert from "node:assert/strict";
import type { FinishedJob } from "../../src/runner/attempts.ts";
import { SETTLE_GROUP, SettleGroup } from "../../src/runner/settle_group.ts";
import type { ClaimedJob } from "../../src/stores/store.ts";
import { waitUntil } from "../_helpers.ts";

/** A finished attempt of job `id`; the group only keeps and hands it back. */
function finished(id: number): FinishedJob {
  return { job: { id } as ClaimedJob, outcome: {} as FinishedJob["outcome"], durationMs: 0 };
}

const ids = (jobs: readonly FinishedJob[]) => jobs.map(({ job }) => job.id);

Deno.test("SettleGroup: an empty group is never due and take() hands out nothing", () => {
  const group = new SettleGroup();
  assert.equal(group.due(false), false);
  assert.equal(group.due(true), false);
  assert.deepEqual(group.take(), { jobs: [], since: Infinity, first: false });
});

Deno.test("SettleGroup: without grouping a finished job is due at once", () => {
  const group = new SettleGroup();
  group.add(finished(1), false);
  assert.equal(group.due(false), true);
});

Deno.test("SettleGroup: while grouping, a plain success waits; a job to be written first does not", () => {
  const group = new SettleGroup();
  group.add(finished(1), false);
  assert.equal(group.first, false);
  group.add(finished(2), true);
  assert.equal(group.first, true);
  assert.equal(group.due(true), true);
  const taken = group.take();
  assert.deepEqual(ids(taken.jobs), [1, 2]);
  assert.equal(taken.first, true);
  assert.equal(group.size, 0);
  assert.equal(group.first, false);
});

Deno.test("SettleGroup: while grouping, a full group is due", () => {
  const group = new SettleGroup();
  for (let id = 1; id < SETTLE_GROUP.jobs; id++) group.add(finished(id), false);
  // Due already if this machine took the group's whole time to add them: check the count alone
  // only while the time is not up.
  if (group.waitMs() > 0) assert.equal(group.due(true), false);
  group.add(finished(SETTLE_GROUP.jobs), false);
  assert.equal(group.due(true), true);
});

Deno.test("SettleGroup: while grouping, a plain success is due once the group's time is up", async () => {
  const group = new SettleGroup();
  group.add(finished(1), false);
  assert.ok(group.waitMs() <= SETTLE_GROUP.withinMs);
  await waitUntil(() => group.due(true), { what: "the group's time is up" });
  assert.equal(group.waitMs(), 0);
});

Deno.test("SettleGroup.restore() puts a failed tick's jobs back first, with their age and flag", async () => {
  const group = new SettleGroup();
  group.add(finished(1), true);
  const taken = group.take();
  await waitUntil(() => performance.now() - taken.since >= SETTLE_GROUP.withinMs, {
    what: "the taken group's time is up",
  });
  group.add(finished(2), false); // finished while the tick was written
  group.restore(taken);
  const again = group.take();
  assert.deepEqual(ids(again.jobs), [1, 2]);
  assert.equal(again.since, taken.since);
  assert.equal(again.first, true);
});

Deno.test("SettleGroup.restore() of jobs that waited long makes a plain group due at once", async () => {
  const group = new SettleGroup();
  group.add(finished(1), false);
  const taken = group.take();
  await waitUntil(() => performance.now() - taken.since >= SETTLE_GROUP.withinMs, {
    what: "the taken group's time is up",
  });
  group.add(finished(2), false);
  group.restore(taken);
  assert.equal(group.due(true), true);
  group.restore({ jobs: [], since: 0, first: true }); // nothing to put back: changes nothing
  assert.equal(group.first, false);
  assert.deepEqual(ids(group.take().jobs), [1, 2]);
});
