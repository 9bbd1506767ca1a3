/**
 * A value as an error message shows it: whatever the caller passed, even a
 * symbol, a BigInt or an object without a prototype, which a template
 * string or `JSON.stringify` would throw on instead of naming.
 *
 * @internal
 * @module
 */

/** How long a shown string may be before it is cut. */
const MAX_SHOWN = 80;

/** `value` for an error message: strings quoted (and cut), numbers as written, others by kind. */
export function shown(value: unknown): string {
  switch (typeof value) {
    case "string": {
      const quoted = JSON.stringify(value);
      return quoted.length <= MAX_SHOWN
        ? quoted
        : `${quoted.slice(0, MAX_SHOWN)}…" (${value.length} characters)`;
    }
    case "number":
    case "boolean":
    case "undefined":
      return String(value);
    case "bigint":
      return `${value}n (a BigInt)`;
    case "symbol":
      return value.toString();
    case "function":
      return "a function";
  }
  if (value === null) return "null";
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (value instanceof Date) {
    return Number.isNaN(value.getTime()) ? "an invalid Date" : `a Date (${value.toISOString()})`;
  }
  try {
    const text = JSON.stringify(value);
    if (text !== undefined && text.length <= MAX_SHOWN) return text;
  } catch {
    // circular, or holds a BigInt
  }
  return Object.prototype.toString.call(value);
}
