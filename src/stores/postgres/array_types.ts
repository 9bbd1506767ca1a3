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
 * PostgreSQL's built-in types and their array types, `[element, array]`
 * `pg_type` oids, fixed by the server's own catalog (`pg_type.dat`) in
 * every release; tests/stores/postgres/array_types_test.ts checks each
 * against the server.
 */
const BUILT_IN_PAIRS: readonly (readonly [number, number])[] = [
  [16, 1000], // bool
  [17, 1001], // bytea
  [18, 1002], // char
  [19, 1003], // name
  [20, 1016], // int8
  [21, 1005], // int2
  [23, 1007], // int4
  [25, 1009], // text
  [26, 1028], // oid
  [114, 199], // json
  [142, 143], // xml
  [600, 1017], // point
  [601, 1018], // lseg
  [602, 1019], // path
  [603, 1020], // box, whose array literal alone puts ";" between elements
  [604, 1027], // polygon
  [628, 629], // line
  [650, 651], // cidr
  [700, 1021], // float4
  [701, 1022], // float8
  [718, 719], // circle
  [774, 775], // macaddr8
  [790, 791], // money
  [829, 1040], // macaddr
  [869, 1041], // inet
  [1042, 1014], // bpchar
  [1043, 1015], // varchar
  [1082, 1182], // date
  [1083, 1183], // time
  [1114, 1115], // timestamp
  [1184, 1185], // timestamptz
  [1186, 1187], // interval
  [1266, 1270], // timetz
  [1560, 1561], // bit
  [1562, 1563], // varbit
  [1700, 1231], // numeric
  [2950, 2951], // uuid
  [3220, 3221], // pg_lsn
  [3614, 3643], // tsvector
  [3615, 3645], // tsquery
  [3802, 3807], // jsonb
  [3904, 3905], // int4range
  [3906, 3907], // numrange
  [3908, 3909], // tsrange
  [3910, 3911], // tstzrange
  [3912, 3913], // daterange
  [3926, 3927], // int8range
];

/** PostgreSQL's built-in array types (see {@linkcode BUILT_IN_PAIRS}). */
export const BUILT_IN_ARRAYS: readonly ArrayType[] = BUILT_IN_PAIRS.map(([element, array]) => ({
  element,
  array,
}));

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
