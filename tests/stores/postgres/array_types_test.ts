/**
 * Arrays on the store's pools, which never let the driver look types up:
 * the built-in array types from a pool's first call (the store's own
 * parameters, and the app's through `tx.query`), and no promise left for
 * nobody when a connection is lost right after its login (the driver's own
 * lookup, unawaited, ended the process).
 *
 * @module
 */
import assert from "node:assert/strict";
import process from "node:process";
import postgres from "postgres";
import {
  arrayLiteral,
  BUILT_IN_ARRAYS,
  parseArrayLiteral,
  teachArrayTypes,
  type TypeOptions,
} from "../../../src/stores/postgres/array_types.ts";
import { PostgresStore } from "../../../src/stores/postgres/mod.ts";
import { loginCuttingProxy } from "../../fixtures/faults/login_cutting_proxy.ts";
import {
  freshSchema,
  openTestPostgresStore,
  postgresTestUrl,
  schemaClient,
} from "../../_postgres.ts";

const url = postgresTestUrl();

Deno.test("PostgreSQL array literals: nested, quoted, escaped, NULL and a lower bound read back as written", () => {
  const texts = ["default", "", 'a "quoted", {braced} \\ line', "NULL", "ünï ✓", null];
  const literal = arrayLiteral(texts) as string;
  assert.equal(literal, '{"default","","a \\"quoted\\", {braced} \\\\ line","NULL","ünï ✓",NULL}');
  assert.deepEqual(parseArrayLiteral(literal), texts);
  assert.deepEqual(parseArrayLiteral("{{1,2},{3,NULL}}", Number), [[1, 2], [3, null]]);
  assert.deepEqual(parseArrayLiteral("[0:1]={7,8}", Number), [7, 8]);
  assert.deepEqual(parseArrayLiteral("{}"), []);
  assert.deepEqual(parseArrayLiteral("{(1,1),(0,0);(2,2),(1,1)}", undefined, ";"), [
    "(1,1),(0,0)",
    "(2,2),(1,1)",
  ]);
  assert.equal(arrayLiteral([[1, null], [2, 3]], undefined, ","), '{{"1",NULL},{"2","3"}}');
  assert.equal(arrayLiteral("not an array"), "not an array");
  assert.throws(() => parseArrayLiteral("1,2"), /Not a PostgreSQL array: 1,2/);
});

Deno.test({
  name:
    "PostgreSQL arrays: text, int and bigint arrays bound before any type lookup arrive unchanged, quotes, backslashes, braces and NULL included",
  ignore: url === null,
  async fn() {
    const sql = postgres(url!, { max: 1, onnotice: () => {}, fetch_types: false });
    try {
      teachArrayTypes(sql.options as unknown as TypeOptions);
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

Deno.test({
  name:
    "PostgreSQL: the built-in array types the pools are taught are the server's own, element and array oids alike",
  ignore: url === null,
  async fn() {
    const sql = postgres(url!, { max: 1, onnotice: () => {}, fetch_types: false });
    try {
      teachArrayTypes(sql.options as unknown as TypeOptions);
      const rows = await sql.unsafe<{ element: number; array: number }[]>(
        "SELECT oid::int AS element, typarray::int AS array FROM pg_catalog.pg_type WHERE oid = ANY($1::int[]) ORDER BY oid",
        [BUILT_IN_ARRAYS.map(({ element }) => element)] as never[],
      );
      const known = [...BUILT_IN_ARRAYS].sort((a, b) => a.element - b.element);
      assert.deepEqual(rows.map((row) => ({ ...row })), known);
    } finally {
      await sql.end({ timeout: 5 });
    }
  },
});

Deno.test({
  name:
    "PostgreSQL tx.query: arrays of built-in types are written from and read into JavaScript arrays; an enum's array reads as its text form, and as an array once cast to text[]",
  ignore: url === null,
  async fn() {
    const schema = freshSchema();
    const setup = schemaClient(url!, schema);
    try {
      await setup.unsafe(`CREATE SCHEMA "${schema}"`);
      await setup.unsafe(`CREATE TYPE "${schema}".mood AS ENUM ('calm', 'busy')`);
    } finally {
      await setup.end({ timeout: 5 });
    }
    await using pg = await openTestPostgresStore(url!, { schema, maxConnections: 1 });
    const uuid = crypto.randomUUID();
    const [row] = await pg.store.transaction((tx) =>
      tx.query<Record<string, unknown>>(
        `SELECT ARRAY[1, NULL]::int[] AS ints, ARRAY['x', 'y "z", {w}', '', 'NULL']::text[] AS texts,
          ARRAY[true, false] AS flags, ARRAY['{"k": 1}'::jsonb] AS docs,
          ARRAY[ARRAY[1.5, 2], ARRAY[3, 4]]::float8[] AS grid, ARRAY['calm'::mood] AS moods,
          ARRAY['calm'::mood]::text[] AS mood_texts, $1::uuid[] AS uuids, $2::float8[] AS floats,
          $3::text[]::mood[] AS moods_in`,
        [[uuid], [0.25, -1], ["busy"]],
      )
    );
    assert.deepEqual(row, {
      ints: [1, null],
      texts: ["x", 'y "z", {w}', "", "NULL"],
      flags: [true, false],
      docs: [{ k: 1 }],
      grid: [[1.5, 2], [3, 4]],
      moods: "{calm}",
      mood_texts: ["calm"],
      uuids: [uuid],
      floats: [0.25, -1],
      moods_in: "{busy}",
    });
  },
});

Deno.test({
  name:
    "PostgreSQL: a connection lost right after its login leaves no promise rejected for nobody: the store's calls reject, and nothing ends the process",
  ignore: url === null,
  async fn() {
    const unhandled: unknown[] = [];
    let heard: () => void = () => {};
    const unhandledHeard = new Promise<string>((resolve) =>
      heard = () => resolve(`a rejection nobody handled: ${unhandled[0]}`)
    );
    const onProcess = (reason: unknown) => {
      unhandled.push(reason);
      heard();
    };
    const onGlobal = (event: PromiseRejectionEvent) => {
      onProcess(event.reason);
      event.preventDefault();
    };
    // Deno hands a rejection of the driver's code to process listeners, not to the global event.
    process.on("unhandledRejection", onProcess);
    globalThis.addEventListener("unhandledrejection", onGlobal);
    try {
      await using proxy = loginCuttingProxy(url!);
      const schema = freshSchema();
      for (let open = 0; open < 3; open++) {
        const opening = PostgresStore.open(proxy.url, { schema, connectTimeoutMs: 2_000 }).then(
          async (store) => {
            await store.close();
            return "opened";
          },
          (error: Error) => error.message,
        );
        // Before the fix the open never settled: the driver cut at its own lookup tried again.
        const said = await Promise.race([opening, unhandledHeard]);
        assert.match(said, /could not connect to PostgreSQL|Cannot reach the PostgreSQL database/);
      }
      assert.ok(proxy.cuts >= 3, `only ${proxy.cuts} connections cut`);
      // A rejection nobody handles is reported once the tasks queued with it have run.
      for (let turn = 0; turn < 20; turn++) await new Promise((done) => setTimeout(done, 0));
      assert.deepEqual(unhandled.map(String), []);
    } finally {
      process.off("unhandledRejection", onProcess);
      globalThis.removeEventListener("unhandledrejection", onGlobal);
    }
  },
});
