/**
 * Arrays on the store's pools, which never ask the driver to look the
 * server's types up.
 *
 * postgres.js, left to itself, sends a `pg_type` query on each new
 * connection before its first call, and awaits it nowhere: a connection
 * lost during it (a server stopped or restarted, `pg_terminate_backend`)
 * rejects a promise nobody handles, which ends a Deno process. The pools
 * are opened with that lookup off (`fetch_types: false`), and every pool is
 * taught, as it opens, to write and read the arrays of PostgreSQL's
 * built-in types ({@linkcode BUILT_IN_ARRAYS}): the store's own array
 * parameters, and the app's through `tx.query`. An array of a type the app
 * or an extension created (an enum, a domain) is written from and read as
 * PostgreSQL's text form: cast it in the statement (`$1::text[]::mood[]`,
 * `moods::text[]`).
 *
 * @module
 */

/** One array type of the server. */
export interface ArrayType {
  /** The `pg_type` oid of its elements. */
  readonly element: number;
  /** Its own `pg_type` oid. */
  readonly array: number;
}

/**
 * PostgreSQL's built-in types and their array types, by `pg_type` oid,
 * fixed by the server's own catalog (`pg_type.dat`) in every release;
 * tests/stores/postgres/array_types_test.ts checks each against the server.
 */
export const BUILT_IN_ARRAYS: readonly ArrayType[] = [
  { element: 16, array: 1000 }, // bool
  { element: 17, array: 1001 }, // bytea
  { element: 18, array: 1002 }, // char
  { element: 19, array: 1003 }, // name
  { element: 20, array: 1016 }, // int8
  { element: 21, array: 1005 }, // int2
  { element: 23, array: 1007 }, // int4
  { element: 25, array: 1009 }, // text
  { element: 26, array: 1028 }, // oid
  { element: 114, array: 199 }, // json
  { element: 142, array: 143 }, // xml
  { element: 600, array: 1017 }, // point
  { element: 601, array: 1018 }, // lseg
  { element: 602, array: 1019 }, // path
  { element: 603, array: 1020 }, // box, whose array literal alone puts ";" between elements
  { element: 604, array: 1027 }, // polygon
  { element: 628, array: 629 }, // line
  { element: 650, array: 651 }, // cidr
  { element: 700, array: 1021 }, // float4
  { element: 701, array: 1022 }, // float8
  { element: 718, array: 719 }, // circle
  { element: 774, array: 775 }, // macaddr8
  { element: 790, array: 791 }, // money
  { element: 829, array: 1040 }, // macaddr
  { element: 869, array: 1041 }, // inet
  { element: 1042, array: 1014 }, // bpchar
  { element: 1043, array: 1015 }, // varchar
  { element: 1082, array: 1182 }, // date
  { element: 1083, array: 1183 }, // time
  { element: 1114, array: 1115 }, // timestamp
  { element: 1184, array: 1185 }, // timestamptz
  { element: 1186, array: 1187 }, // interval
  { element: 1266, array: 1270 }, // timetz
  { element: 1560, array: 1561 }, // bit
  { element: 1562, array: 1563 }, // varbit
  { element: 1700, array: 1231 }, // numeric
  { element: 2950, array: 2951 }, // uuid
  { element: 3220, array: 3221 }, // pg_lsn
  { element: 3614, array: 3643 }, // tsvector
  { element: 3615, array: 3645 }, // tsquery
  { element: 3802, array: 3807 }, // jsonb
  { element: 3904, array: 3905 }, // int4range
  { element: 3906, array: 3907 }, // numrange
  { element: 3908, array: 3909 }, // tsrange
  { element: 3910, array: 3911 }, // tstzrange
  { element: 3912, array: 3913 }, // daterange
  { element: 3926, array: 3927 }, // int8range
];

/** The array type whose elements its literal separates with `;`: `box[]`. */
const BOX_ARRAY = 1020;

/** What of a postgres.js client's options arrays are taught to. */
export interface TypeOptions {
  /** Writers of parameters, by `pg_type` oid. */
  readonly serializers: Record<number, (value: never) => unknown>;
  /** Readers of result columns, by `pg_type` oid. */
  readonly parsers: Record<number, (text: string) => unknown>;
}

/**
 * Teaches a pool's `options` to write and read PostgreSQL's built-in array
 * types, each through its element type's writer and reader where the pool
 * has one. A type the pool already knows is left as it is.
 */
export function teachArrayTypes(options: TypeOptions): void {
  for (const { element, array } of BUILT_IN_ARRAYS) {
    const delimiter = array === BOX_ARRAY ? ";" : ",";
    options.serializers[array] ??= (values: never) =>
      arrayLiteral(values, options.serializers[element], delimiter);
    options.parsers[array] ??= (text: string) =>
      parseArrayLiteral(text, options.parsers[element], delimiter);
  }
}

/**
 * `values` as PostgreSQL's array literal: each element written by `write`
 * (as text when none), quoted, with `"` and `\` escaped; `null` and
 * `undefined` are `NULL` (the store's own rows leave absent values
 * `undefined`), and nested arrays are nested literals. A value
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
