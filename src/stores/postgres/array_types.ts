/**
 * Arrays on the store's pools, which never ask the driver to look the
 * server's types up.
 *
 * postgres.js, left to itself, sends a `pg_type` query on each new
 * connection before its first call, and awaits it nowhere: a connection
 * lost during it (a server stopped or restarted, `pg_terminate_backend`)
 * rejects a promise nobody handles, which ends a Deno process. The pools
 * are opened with that lookup off (`fetch_types: false`), and arrays are
 * written and read here instead:
 *
 * - the store's own array parameters (`$n::text[]`, `int[]`, `bigint[]`)
 *   are written from a pool's first call, with no lookup at all;
 * - the server's other array types, for the app's statements (`tx.query`),
 *   are read once, awaited, on the connection of the first app statement
 *   ({@linkcode readArrayTypes}), and taught to every pool the store opens
 *   after ({@linkcode teachArrayTypes}).
 *
 * @module
 */
import type { Connection } from "./engine.ts";

/** One array type of the server. */
export interface ArrayType {
  /** The `pg_type` oid of its elements. */
  readonly element: number;
  /** Its own `pg_type` oid. */
  readonly array: number;
  /** The character between its elements in PostgreSQL's text form (`;` for `box`, `,` for the rest). */
  readonly delimiter: string;
}

/** The store's own array parameters: `text[]`, `int4[]` and `int8[]`. */
const STORE_ARRAYS: readonly ArrayType[] = [
  { element: 25, array: 1009, delimiter: "," },
  { element: 23, array: 1007, delimiter: "," },
  { element: 20, array: 1016, delimiter: "," },
];

/** Every array type of the server, with its element type and delimiter. */
const ARRAY_TYPES_QUERY = `
  SELECT e.oid AS element, a.oid AS array, e.typdelim AS delimiter
  FROM pg_catalog.pg_type a JOIN pg_catalog.pg_type e ON e.oid = a.typelem
  WHERE a.typcategory = 'A' AND a.typelem <> 0`;

/** What of a postgres.js client's options arrays are taught to. */
export interface TypeOptions {
  /** Writers of parameters, by `pg_type` oid. */
  readonly serializers: Record<number, (value: never) => unknown>;
  /** Readers of result columns, by `pg_type` oid. */
  readonly parsers: Record<number, (text: string) => unknown>;
}

/** Reads the server's array types on `connection`. */
export async function readArrayTypes(connection: Connection): Promise<readonly ArrayType[]> {
  const rows = await connection.unsafe<{ element: number; array: number; delimiter: string }[]>(
    ARRAY_TYPES_QUERY,
  );
  return rows.map(({ element, array, delimiter }) => ({
    element: Number(element),
    array: Number(array),
    delimiter: String(delimiter),
  }));
}

/**
 * Teaches a pool's `options` to write and read `types` (the store's own
 * when none are given), each through its element type's writer and reader
 * where the pool has one. A type the pool already knows is left as it is.
 */
export function teachArrayTypes(
  options: TypeOptions,
  types: readonly ArrayType[] = STORE_ARRAYS,
): void {
  for (const { element, array, delimiter } of types) {
    options.serializers[array] ??= (values: never) =>
      arrayLiteral(values, options.serializers[element], delimiter);
    options.parsers[array] ??= (text: string) =>
      parseArrayLiteral(text, options.parsers[element], delimiter);
  }
}

/**
 * `values` as PostgreSQL's array literal: each element written by `write`
 * (as text when none), quoted, with `"` and `\` escaped; `null` and
 * `undefined` are `NULL`, and nested arrays are nested literals. A value
 * that is not an array is passed through, as the driver does.
 */
export function arrayLiteral(
  values: unknown,
  write?: (value: never) => unknown,
  delimiter = ",",
): unknown {
  if (!Array.isArray(values)) return values;
  const elements = values.map((value): string => {
    if (Array.isArray(value)) return String(arrayLiteral(value, write, delimiter));
    if (value === null || value === undefined) return "NULL";
    const text = String(write === undefined ? value : write(value as never));
    return `"${text.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
  });
  return `{${elements.join(delimiter)}}`;
}

/**
 * PostgreSQL's text form of an array (`{1,2}`, `{"a b",NULL}`, `{{1},{2}}`)
 * as nested JavaScript arrays, each element read by `read` (kept as text
 * when none); an unquoted `NULL` is `null`. A lower bound the server writes
 * first (`[0:1]={…}`) is skipped.
 */
export function parseArrayLiteral(
  text: string,
  read?: (text: string) => unknown,
  delimiter = ",",
): unknown[] {
  let at = text.startsWith("[") ? text.indexOf("=") + 1 : 0;
  const element = (raw: string, quoted: boolean): unknown =>
    !quoted && raw === "NULL" ? null : read === undefined ? raw : read(raw);
  const list = (): unknown[] => {
    at++; // past "{"
    const items: unknown[] = [];
    while (at < text.length && text[at] !== "}") {
      if (text[at] === "{") {
        items.push(list());
      } else if (text[at] === '"') {
        let raw = "";
        for (at++; at < text.length && text[at] !== '"'; at++) {
          if (text[at] === "\\") at++;
          raw += text[at] ?? "";
        }
        at++; // past the closing quote
        items.push(element(raw, true));
      } else {
        const start = at;
        while (at < text.length && text[at] !== delimiter && text[at] !== "}") at++;
        items.push(element(text.slice(start, at).trim(), false));
      }
      if (text[at] === delimiter) at++;
    }
    at++; // past "}"
    return items;
  };
  if (text[at] !== "{") {
    throw new SyntaxError(`Not a PostgreSQL array: ${text.slice(0, 80)}`);
  }
  return list();
}
