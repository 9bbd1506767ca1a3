/**
 * The array parameters the store binds (`$n::text[]`, `int[]`, `bigint[]`),
 * serialized without the driver's catalog lookup.
 *
 * postgres.js learns how to write an array parameter from a `pg_type` query
 * each new connection runs before its first call. A pool swapped in after a
 * lost connection has learnt nothing yet, and a restart of the server could
 * let a call through before the lookup had landed: the driver then wrote the
 * array `["default"]` as the text `default`, which PostgreSQL refuses
 * ("malformed array literal"). With these handlers every pool writes the
 * store's arrays from its first call; the driver's lookup, once it lands,
 * puts its own in their place.
 *
 * @module
 */

/** The `pg_type` oids of `text[]`, `int4[]` and `int8[]`. */
const ARRAY_OIDS = { text: 1009, int: 1007, bigint: 1016 } as const;

/**
 * A one-dimensional array as PostgreSQL's array literal: each element quoted
 * (with `"` and `\` escaped), so text of any content and numbers read the
 * same; `null` and `undefined` are `NULL`.
 */
export function arrayLiteral(values: readonly unknown[]): string {
  const elements = values.map((value) =>
    value === null || value === undefined
      ? "NULL"
      : `"${String(value).replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`
  );
  return `{${elements.join(",")}}`;
}

/**
 * Gives a postgres.js client's serializers the store's array types, where the
 * driver's own lookup has not put them yet.
 */
export function writeArraysWithoutLookup(
  serializers: Record<number, (value: never) => unknown>,
): void {
  for (const oid of Object.values(ARRAY_OIDS)) serializers[oid] ??= arrayLiteral;
}
