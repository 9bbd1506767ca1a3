/**
 * The rows of a move as the Redis store's functions take and give them:
 * each value a decimal string or null in, a row of the typed columns
 * (src/stores/rows/transfer_columns.ts) out.
 *
 * @internal
 * @module
 */
import type { TransferRow, TransferTable } from "../rows/transfer.ts";
import { TRANSFER_COLUMNS } from "../rows/transfer_columns.ts";

/**
 * `rows` of `table` as the Redis store's functions take them: every value a
 * decimal string (Lua's numbers keep 14 digits; a token has 16) or null.
 * The rows are checked first (`assertTransferRows`).
 */
export function toLuaRows(
  table: TransferTable,
  rows: readonly TransferRow[],
): Record<string, string | null>[] {
  return rows.map((row) =>
    Object.fromEntries(
      TRANSFER_COLUMNS[table].map(({ name }) => {
        const value = row[name];
        return [name, value === null || value === undefined ? null : String(value)];
      }),
    )
  );
}

/**
 * A row of `table` from what a Redis function gave back (values as strings
 * or numbers; an absent field is its column's default, or null).
 */
export function fromLuaRow(
  table: TransferTable,
  raw: Readonly<Record<string, string | number | boolean | null>>,
): TransferRow {
  const row: Record<string, string | number | null> = {};
  for (const column of TRANSFER_COLUMNS[table]) {
    const value = raw[column.name];
    if (value === undefined || value === null) {
      row[column.name] = column.absent ?? null;
    } else if (column.type === "text") {
      row[column.name] = String(value);
    } else if (typeof value === "boolean") {
      row[column.name] = value ? 1 : 0;
    } else {
      const number = Number(value);
      if (!Number.isFinite(number)) {
        throw new Error(`Cannot export ${table}: ${column.name}: stored ${JSON.stringify(value)}`);
      }
      row[column.name] = number;
    }
  }
  return row;
}
