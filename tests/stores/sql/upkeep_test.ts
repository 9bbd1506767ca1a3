/**
 * The settles' upkeep schedules (src/stores/sql/upkeep.ts), which the SQL
 * and Redis stores keep in process memory.
 *
 * @module
 */
import assert from "node:assert/strict";
import { HoldsPrune, PRUNE_EVERY_MS, PruneSchedule } from "../../../src/stores/sql/upkeep.ts";

Deno.test("HoldsPrune: a walk starts at once, goes on chunk by chunk to its end, then starts again a minute after it ended", () => {
  const walk = new HoldsPrune<string>("0");
  assert.equal(walk.next(1_000), "0", "the first settle starts a walk");
  walk.walked(1_000, "17");
  assert.equal(walk.next(1_001), "17", "the next settle goes on where the chunk ended");
  assert.equal(walk.next(1_001), "17", "asking again changes nothing");
  walk.walked(1_001, null);
  assert.equal(walk.next(1_002), null, "between walks none is due");
  assert.equal(walk.next(1_001 + PRUNE_EVERY_MS - 1), null);
  assert.equal(walk.next(1_001 + PRUNE_EVERY_MS), "0", "a minute after the walk ended");
  assert.equal(walk.next(-5), null, "a settle at an earlier time waits for the minute too");
});

Deno.test("PruneSchedule: a prune is due at once, then a minute after the last; one cut short leaves the next due at once", () => {
  const schedule = new PruneSchedule();
  assert.equal(schedule.due(1_000), true, "the first tick prunes");
  assert.equal(schedule.due(1_001), false, "the next within a minute does not");
  assert.equal(schedule.due(1_000 + PRUNE_EVERY_MS - 1), false);
  assert.equal(schedule.due(1_000 + PRUNE_EVERY_MS), true, "a minute after the last prune");
  schedule.cutShort();
  assert.equal(schedule.due(1_000 + PRUNE_EVERY_MS + 1), true, "a prune cut short goes on");
  assert.equal(schedule.due(1_000 + PRUNE_EVERY_MS + 2), false, "and, through, waits again");
});
