/**
 * The store contract's own check: that it finds a `Store` method no area of
 * `tests/stores/contract/` covers, and names it.
 *
 * @module
 */
import assert from "node:assert/strict";
import { SqliteStore } from "../../src/stores/sqlite/mod.ts";
import { AREAS, methodsOf, STORE_MEMBERS, uncovered } from "./contract/mod.ts";

Deno.test("storeContract's coverage case names every Store method no area covers", async () => {
  await using store = await SqliteStore.open(":memory:");
  assert.deepEqual(uncovered(store), []);
  const withoutSchedules = AREAS.filter((area) => !area.covers.includes("runSchedule"));
  assert.deepEqual(uncovered(store, withoutSchedules), [
    "forgetSchedule",
    "runSchedule",
    "schedules",
    "setSchedulePaused",
    "syncSchedules",
  ]);
  // A store of the same class with one more method the contract has no case for.
  const widerPrototype = Object.create(Object.getPrototypeOf(store), {
    vacuum: { value: () => Promise.resolve() },
  });
  const wider = Object.create(widerPrototype) as object;
  assert.deepEqual(uncovered(wider), ["vacuum"], "a store's own extra method");
});

Deno.test("methodsOf() lists a store's methods from its whole prototype chain: every Store member for SqliteStore", async () => {
  await using store = await SqliteStore.open(":memory:");
  const methods = methodsOf(store);
  assert.deepEqual([...methods].sort(), Object.keys(STORE_MEMBERS).sort());
  assert.ok(methods.includes("claim") && methods.includes("close") && methods.includes("watch"));
  assert.ok(!methods.includes("constructor"));
});
