/**
 * What survives a trip through JSON unchanged: a job's output is stored as
 * JSON and handed back parsed, so an output schema whose values would come
 * back as something else (a Date as a string, a Map as `{}`) is refused
 * when the job is defined, and a returned value that would change (from a
 * transform or a custom schema the definition cannot see into) is refused
 * when it is stored. A value is never handed back contradicting its type.
 *
 * @internal
 * @module
 */

/** Why a value of a zod def type does not survive JSON, and what to use instead. */
const CHANGED_BY_JSON: Readonly<Record<string, string>> = {
  date: "a Date comes back as a string: use z.iso.datetime() and return date.toISOString()",
  map: "a Map comes back as {}: use z.record() or an array of pairs",
  set: "a Set comes back as {}: use an array",
  bigint: "a BigInt cannot be written as JSON: use a string or a number",
  symbol: "a symbol cannot be written as JSON",
  function: "a function is dropped by JSON",
  promise: "a Promise comes back as {}: return the value it resolves with",
  file: "a File comes back as {}: store it elsewhere and return where",
  nan: "NaN comes back as null",
  undefined: "undefined comes back as null: use z.null(), or an optional object property",
  void: "undefined comes back as null: use z.null(), or an optional object property",
};

/** A zod 4 schema's definition, as far as this walk reads it. */
interface Def {
  readonly type: string;
  readonly [key: string]: unknown;
}

function defOf(schema: unknown): Def | null {
  const def = (schema as { _zod?: { def?: Def } } | null)?._zod?.def;
  return typeof def?.type === "string" ? def : null;
}

/**
 * Where and why values of `schema` (a zod 4 schema) would not come back
 * from JSON as they went in: `"output.when: a Date comes back as a
 * string: …"`, or null when they all survive. `root` names the value
 * (`"output"`). Schemas it cannot see into (transforms, custom checks) are
 * left to {@linkcode jsonChange}.
 */
export function jsonUnsafePart(schema: unknown, root: string): string | null {
  // A schema met again (z.lazy() recursion) was walked already, in the same place.
  const seen = { property: new Set<unknown>(), other: new Set<unknown>() };
  const walk = (schema: unknown, path: string, property: boolean): string | null => {
    const def = defOf(schema);
    const walked = property ? seen.property : seen.other;
    if (def === null || walked.has(schema)) return null;
    walked.add(schema);
    const inner = (key: string, at = path, isProperty = false) => walk(def[key], at, isProperty);
    switch (def.type) {
      case "optional":
        return property ? inner("innerType", path, true) : `${path}: ${CHANGED_BY_JSON.undefined}`;
      case "nullable":
      case "default":
      case "prefault":
      case "catch":
      case "readonly":
      case "nonoptional":
        return inner("innerType", path, property);
      case "pipe":
        return inner("out", path, property); // what it holds is what comes out of the pipe
      case "lazy":
        return walk((def.getter as () => unknown)(), path, property);
      case "array":
        return inner("element", `${path}[]`);
      case "object": {
        const shape = def.shape as Record<string, unknown>;
        for (const [key, value] of Object.entries(shape)) {
          const found = walk(value, `${path}.${key}`, true);
          if (found !== null) return found;
        }
        return def.catchall === undefined ? null : inner("catchall", `${path}.*`, true);
      }
      case "record":
        return inner("valueType", `${path}.*`, true);
      case "tuple": {
        const items = def.items as readonly unknown[];
        for (const [index, item] of items.entries()) {
          const found = walk(item, `${path}[${index}]`, false);
          if (found !== null) return found;
        }
        return def.rest === null || def.rest === undefined ? null : inner("rest", `${path}[]`);
      }
      case "union":
        for (const option of def.options as readonly unknown[]) {
          const found = walk(option, path, property);
          if (found !== null) return found;
        }
        return null;
      case "intersection":
        return inner("left", path, property) ?? inner("right", path, property);
      case "literal":
        for (const value of def.values as readonly unknown[]) {
          if (value === undefined && !property) return `${path}: ${CHANGED_BY_JSON.undefined}`;
          if (typeof value === "bigint" || typeof value === "symbol") {
            return `${path}: ${CHANGED_BY_JSON[typeof value]}`;
          }
        }
        return null;
      default: {
        const why = CHANGED_BY_JSON[def.type];
        if (why === undefined) return null;
        if ((def.type === "undefined" || def.type === "void") && property) return null;
        return `${path}: ${why}`;
      }
    }
  };
  return walk(schema, root, false);
}

/**
 * Whether `schema` (a zod 4 schema) holds a transform or a pipe anywhere
 * (`.transform()`, `z.preprocess()`, `.pipe()`, a codec, `z.stringbool()`):
 * what it outputs is then not what it parses (`z.string().transform((s) =>
 * s.length)` outputs a number and parses strings), so a value it output,
 * read back from JSON, cannot be checked by it again.
 */
export function holdsTransform(schema: unknown): boolean {
  const seen = new Set<unknown>(); // a schema met again (z.lazy() recursion) was walked already
  const walk = (schema: unknown): boolean => {
    const def = defOf(schema);
    if (def === null || seen.has(schema)) return false;
    seen.add(schema);
    if (def.type === "pipe" || def.type === "transform") return true;
    if (def.type === "lazy") return walk((def.getter as () => unknown)());
    // The schemas a def holds: innerType, element, shape, options, items, keyType, left, …
    for (const key of Object.keys(def)) {
      // A default is a value, perhaps made by a function (a getter) the walk must not call.
      if (key === "checks" || key === "type" || key === "defaultValue") continue;
      const held = def[key];
      if (defOf(held) !== null) {
        if (walk(held)) return true;
      } else if (Array.isArray(held) || (typeof held === "object" && held !== null)) {
        for (const part of Object.values(held)) if (walk(part)) return true;
      }
    }
    return false;
  };
  return walk(schema);
}

/**
 * The deepest nesting of arrays and objects a stored value may have: a
 * deeper one is refused when it is stored (as a job's payload, a step's
 * output, a job's output or a signal's payload), with an error naming where,
 * rather than overflowing the stack of whatever walks it (a page of the
 * dashboard that shows it, a recursive schema).
 */
export const MAX_JSON_DEPTH = 1_000;

/**
 * Whether the JSON text `json` nests arrays and objects deeper than
 * {@linkcode MAX_JSON_DEPTH}: one pass over the text, skipping strings. A
 * text shorter than twice the limit cannot, and is not read.
 */
export function jsonTooDeep(json: string): boolean {
  if (json.length <= 2 * MAX_JSON_DEPTH) return false;
  let depth = 0;
  let inString = false;
  for (let index = 0; index < json.length; index++) {
    const code = json.charCodeAt(index);
    if (inString) {
      if (code === 0x5c) index++; // a backslash: the next unit is escaped
      else if (code === 0x22) inString = false;
    } else if (code === 0x22) {
      inString = true;
    } else if (code === 0x5b || code === 0x7b) {
      if (++depth > MAX_JSON_DEPTH) return true;
    } else if (code === 0x5d || code === 0x7d) {
      depth--;
    }
  }
  return false;
}

/**
 * Where and how `value` would come back from JSON changed (`"output.when:
 * a Date comes back as a string"`), or null when `JSON.parse` of its JSON
 * equals it. An object property holding undefined is dropped by JSON and
 * reads undefined again: that is no change. A value nested deeper than
 * {@linkcode MAX_JSON_DEPTH} arrays and objects is refused too. The walk
 * keeps its own stack, so no depth overflows the call stack.
 */
export function jsonChange(value: unknown, root: string): string | null {
  /** An array or object being walked: its entries still to look at, and its place in its parent. */
  interface Level {
    readonly object: object;
    readonly entries: Iterator<readonly [string | number, unknown]>;
    readonly step: string;
  }
  const levels: Level[] = [];
  const ancestors = new Set<object>(); // the objects that hold the one looked at
  const path = (step: string) => root + levels.map((level) => level.step).join("") + step;
  // Looks at one value: why it changes, or descends into it (null either way when it does not).
  const look = (value: unknown, step: string): string | null => {
    switch (typeof value) {
      case "string":
      case "boolean":
        return null;
      case "number":
        return Number.isFinite(value) ? null : `${path(step)}: ${value} comes back as null`;
      case "undefined":
        return `${path(step)}: ${CHANGED_BY_JSON.undefined}`;
      case "bigint":
      case "symbol":
      case "function":
        return `${path(step)}: ${CHANGED_BY_JSON[typeof value]}`;
    }
    if (value === null) return null;
    if (typeof (value as { toJSON?: unknown }).toJSON === "function") {
      const kind = value instanceof Date ? "a Date" : "a value with toJSON()";
      return `${path(step)}: ${kind} comes back as what toJSON() returned`;
    }
    const object = value as object;
    if (ancestors.has(object)) {
      return `${path(step)}: a circular reference cannot be written as JSON`;
    }
    if (levels.length === MAX_JSON_DEPTH) {
      return `${root}: nested deeper than ${MAX_JSON_DEPTH} arrays and objects, the most a stored value may hold`;
    }
    if (!Array.isArray(value)) {
      const prototype = Object.getPrototypeOf(value);
      if (prototype !== Object.prototype && prototype !== null) {
        const name = object.constructor?.name ?? "object";
        return `${path(step)}: a ${name} comes back as a plain object`;
      }
    }
    levels.push({
      object,
      entries: Array.isArray(value)
        ? value.entries()
        : Object.entries(value as Record<string, unknown>).values(),
      step,
    });
    ancestors.add(object);
    return null;
  };
  const found = look(value, "");
  if (found !== null) return found;
  while (levels.length > 0) {
    const level = levels[levels.length - 1]!;
    const next = level.entries.next();
    if (next.done === true) {
      levels.pop();
      ancestors.delete(level.object);
      continue;
    }
    const [key, item] = next.value;
    if (typeof key === "string" && item === undefined) continue;
    const found = look(item, typeof key === "number" ? `[${key}]` : `.${key}`);
    if (found !== null) return found;
  }
  return null;
}
