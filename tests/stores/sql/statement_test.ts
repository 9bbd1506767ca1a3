/**
 * How one statement text becomes SQLite's: its placeholders, macros'
 * included, become bare `?` when they come as `?1` to `?N` once each in
 * order (`node:sqlite` binds those far faster in a statement of many
 * parameters), `?n` otherwise or when a comment might hide one, and a
 * placeholder inside a quoted literal is left alone. Each translation is
 * also run on a real `node:sqlite` database, so that a wrong binding shows
 * as a wrong value, not only as a different text.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { statement } from "../../../src/stores/sql/statement.ts";

const CASES: readonly {
  readonly text: string;
  readonly sqlite: string;
  readonly params: readonly (number | string)[];
  readonly row: readonly (number | string)[];
}[] = [
  {
    text: "SELECT json_array($1, $2, $3) AS v",
    sqlite: "SELECT json_array(?, ?, ?) AS v",
    params: [1, 2, 3],
    row: [1, 2, 3],
  },
  {
    text: "SELECT json_array($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) AS v",
    sqlite: "SELECT json_array(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) AS v",
    params: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
    row: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
  },
  {
    text: "SELECT json_array($2, $1) AS v",
    sqlite: "SELECT json_array(?2, ?1) AS v",
    params: [1, 2],
    row: [2, 1],
  },
  {
    text: "SELECT json_array($1, $1, $2) AS v",
    sqlite: "SELECT json_array(?1, ?1, ?2) AS v",
    params: [7, 8],
    row: [7, 7, 8],
  },
  {
    text: "SELECT json_array($1, $3) AS v",
    sqlite: "SELECT json_array(?1, ?3) AS v",
    params: [1, 2, 3],
    row: [1, 3],
  },
  {
    text: "SELECT json_array('$1', $1, $2) AS v",
    sqlite: "SELECT json_array('$1', ?, ?) AS v",
    params: [4, 5],
    row: ["$1", 4, 5],
  },
  {
    text: "SELECT json_array($1, (SELECT count(*) FROM {{ids $2}})) AS v",
    sqlite: "SELECT json_array(?, (SELECT count(*) FROM (SELECT value FROM json_each(?)))) AS v",
    params: [9, "[1,2,3]"],
    row: [9, 3],
  },
  {
    text: "SELECT json_array((SELECT count(*) FROM {{ids $2}}), $1) AS v",
    sqlite: "SELECT json_array((SELECT count(*) FROM (SELECT value FROM json_each(?2))), ?1) AS v",
    params: [9, "[1,2]"],
    row: [2, 9],
  },
  {
    text: "SELECT json_array('?1', $1) AS v",
    sqlite: "SELECT json_array('?1', ?) AS v",
    params: [3],
    row: ["?1", 3],
  },
  {
    text: "SELECT json_array($1, $2) AS v /* a comment */",
    sqlite: "SELECT json_array(?1, ?2) AS v /* a comment */",
    params: [1, 2],
    row: [1, 2],
  },
];

for (const { text, sqlite, params, row } of CASES) {
  Deno.test(`statement(${JSON.stringify(text)}) runs on SQLite as ${JSON.stringify(sqlite)}`, () => {
    const translated = statement(text).sqlite;
    assert.equal(translated, sqlite);
    const db = new DatabaseSync(":memory:");
    try {
      const { v } = db.prepare(translated).get(...params) as { v: string };
      assert.deepEqual(JSON.parse(v), row);
    } finally {
      db.close();
    }
  });
}
