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

/** How many of an object's keys are named when it is too large to show whole. */
const MAX_KEYS = 5;

/** How long a named key may be before it is cut. */
const MAX_KEY = 30;

/**
 * `value` for an error message: strings quoted (and cut), numbers as
 * written, others by kind; an object too large to show whole by its first
 * keys (`an object with keys job, payload`).
 */
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
  const kind = Object.prototype.toString.call(value);
  if (kind !== "[object Object]") return kind;
  const keys = Object.keys(value as object);
  if (keys.length === 0) return "an object";
  const named = keys.slice(0, MAX_KEYS).map((key) =>
    key.length <= MAX_KEY ? key : `${key.slice(0, MAX_KEY)}…`
  );
  const more = keys.length > MAX_KEYS ? ` and ${keys.length - MAX_KEYS} more` : "";
  return `an object with keys ${named.join(", ")}${more}`;
}
