/**
 * Plain-text tables for the admin commands: a header row, a rule, and
 * columns padded to their widest cell.
 *
 * @module
 * @internal
 */

/** Where a column's cells sit in their width. */
export type Align = "left" | "right";

/**
 * Control characters (C0, DEL, C1), line and paragraph separators, and the
 * bidirectional overrides: in a terminal they move the cursor, set the
 * title, clear the screen or reorder text, and a newline breaks a table row.
 */
// deno-lint-ignore no-control-regex -- matching control characters is the point
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Readonly<Record<string, string>> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/**
 * `text` safe to print to a terminal: each control character written as an
 * escape (`\x1b`, `\n`, `\u202e`), so stored text (error messages, job and
 * batch names) shows what it holds and cannot drive the terminal.
 */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (char) => {
    const code = char.charCodeAt(0);
    return NAMED[char] ??
      (code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16)}`);
  });
}

/** Lays out `rows` under `headers`, every cell {@linkcode printable}; `align` per column (left by default). */
export function formatTable(
  headers: readonly string[],
  rawRows: readonly (readonly string[])[],
  align: readonly Align[] = [],
): string {
  const rows = rawRows.map((row) => row.map(printable));
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

/**
 * A name, {@linkcode printable} whole (a newline in it shows as `\n`, so two
 * names that differ after one stay apart), cut to `max` characters with an
 * ellipsis.
 */
export function shortName(text: string, max: number): string {
  const shown = printable(text);
  return shown.length <= max ? shown : `${shown.slice(0, max - 1)}…`;
}

/** The first line of `text` (an error message), {@linkcode printable}, cut to `max` characters with an ellipsis. */
export function firstLine(text: string, max: number): string {
  return shortName(text.split("\n", 1)[0]!, max);
}

/** A time as the tables print it, `2026-01-01 12:00:05`: UTC, without the zone. */
export function tableTime(date: Date): string {
  return date.toISOString().replace("T", " ").slice(0, 19);
}
