/**
 * The settles' upkeep schedules (src/stores/sql/upkeep.ts), which the SQL
 * and Redis stores keep in process memory.
 *
 * @module
 */
import assert from "node:assert/strict";
import { HoldsPrune, PRUNE_EVERY_MS } from "../../../src/stores/sql/upkeep.ts";

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
