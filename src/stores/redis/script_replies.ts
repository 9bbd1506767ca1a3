/**
 * Reading the JSON a script replies: Lua's cjson encodes an empty table as
 * `{}`, so an array a script returns may come back as an object.
 *
 * The modules whose Lua joins the hooks' table (hooks.ts) read their
 * replies with this rather than with tick.ts's `list`: tick.ts imports the
 * hooks, and importing it back would evaluate the hooks before them.
 *
 * @internal
 * @module
 */

/** A JSON array from Lua: an empty Lua table is encoded as `{}`. */
export function list<T>(value: T[] | Record<string, never> | null): T[] {
  return Array.isArray(value) ? value : [];
}
