/**
 * The Redis store's function library (src/stores/redis/lua.ts): one library
 * per version of the code, whatever order its modules were imported in.
 *
 * @module
 */
import assert from "node:assert/strict";
import "../../../src/stores/redis/mod.ts";
import { functionLibrary, libraryOf, type LuaScript } from "../../../src/stores/redis/lua.ts";

Deno.test("libraryOf() builds one library, one name, from the same rules defined in any order", async () => {
  const library = await functionLibrary();
  const rules = [...library.functions.keys()];
  assert.ok(rules.length > 2, `${rules.length} rules`);
  const reversed = await libraryOf(rules.toReversed());
  const rotated = await libraryOf([...rules.slice(1), rules[0]!]);
  assert.equal(reversed.name, library.name);
  assert.equal(rotated.code, library.code);
  for (const rule of rules) {
    assert.equal(reversed.functions.get(rule), library.functions.get(rule), rule.name);
  }
  const fewer: LuaScript[] = rules.slice(1);
  assert.notEqual((await libraryOf(fewer)).name, library.name, "other code, another name");
});
