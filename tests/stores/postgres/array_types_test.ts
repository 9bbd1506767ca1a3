/**
 * The store's array parameters on a real server, written by its own
 * serializers on a client that has not looked up the driver's (as a pool
 * swapped in after a lost connection has not): text of any content, numbers
 * and `NULL` arrive as they were sent.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { writeArraysWithoutLookup } from "../../../src/stores/postgres/array_types.ts";
import { postgresTestUrl } from "../../_postgres.ts";

const url = postgresTestUrl();

Deno.test({
  name:
    "PostgreSQL arrays: text, int and bigint arrays bound before any type lookup arrive unchanged, quotes, backslashes, braces and NULL included",
  ignore: url === null,
  async fn() {
    const sql = postgres(url!, { max: 1, onnotice: () => {}, fetch_types: false });
    try {
      writeArraysWithoutLookup(sql.options.serializers);
      const texts = ["default", "", 'a "quoted", {braced} \\ line', "NULL", "ünï ✓", null];
      const ints = [0, -1, 2_147_483_647, null];
      const bigints = [Number.MAX_SAFE_INTEGER, -9, null];
      const [row] = await sql.unsafe<{ texts: string; ints: string; bigints: string }[]>(
        `SELECT array_to_json($1::text[])::text AS texts, array_to_json($2::int[])::text AS ints,
          array_to_json($3::bigint[])::text AS bigints`,
        [texts, ints, bigints] as never[],
        { prepare: true },
      );
      assert.deepEqual(JSON.parse(row!.texts), texts);
      assert.deepEqual(JSON.parse(row!.ints), ints);
      assert.deepEqual(JSON.parse(row!.bigints), bigints);
      const [empty] = await sql.unsafe<{ n: number }[]>(
        "SELECT cardinality($1::text[]) AS n",
        [[]] as never[],
        { prepare: true },
      );
      assert.equal(empty!.n, 0);
    } finally {
      await sql.end({ timeout: 5 });
    }
  },
});
