/**
 * Plain-text tables for the admin commands: a header row, a rule, and
 * columns padded to their widest cell.
 *
 * @module
 * @internal
 */

/** Where a column's cells sit in their width. */
export type Align = "left" | "right";

/** Lays out `rows` under `headers`; `align` per column (left by default). */
export function formatTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  align: readonly Align[] = [],
): string {
  const widths = headers.map((header, column) =>
    Math.max(header.length, ...rows.map((row) => (row[column] ?? "").length))
  );
  const line = (cells: readonly string[]) =>
    widths.map((width, column) => {
      const cell = cells[column] ?? "";
      return align[column] === "right" ? cell.padStart(width) : cell.padEnd(width);
    }).join("  ").trimEnd();
  return [line(headers), widths.map((width) => "-".repeat(width)).join("  "), ...rows.map(line)]
    .join("\n");
}

/** The first line of `text`, cut to `max` characters with an ellipsis. */
export function firstLine(text: string, max: number): string {
  const line = text.split("\n", 1)[0]!;
  return line.length <= max ? line : `${line.slice(0, max - 1)}…`;
}
