/**
 * The shape of an options argument, checked where plain JavaScript may
 * pass anything: an object (or nothing), and, where every option is known,
 * none the call does not read, so a misspelt option is refused rather than
 * silently ignored.
 *
 * @internal
 * @module
 */
import { shown } from "./shown.ts";

/**
 * Throws a `TypeError` starting with `where` unless `options` is undefined,
 * null or an object; with `known`, also when it has an own key not among
 * them, naming it. Gives back the object, or undefined for none.
 */
export function optionBag<T extends object>(
  options: T | null | undefined,
  where: string,
  known?: readonly string[],
): T | undefined {
  if (options === undefined || options === null) return undefined;
  if (typeof options !== "object" || Array.isArray(options)) {
    throw new TypeError(`${where}: options must be an object: got ${shown(options)}`);
  }
  if (known !== undefined) {
    const unknown = Object.keys(options).find((key) => !known.includes(key));
    if (unknown !== undefined) {
      throw new TypeError(
        `${where}: unknown option ${JSON.stringify(unknown)} (it takes ${
          known.map((key) => JSON.stringify(key)).join(", ")
        })`,
      );
    }
  }
  return options;
}

/**
 * Lists the option names of `T` for {@linkcode optionBag}, checked at
 * compile time to name every one: an option added to `T` and missing from
 * the list fails to compile (its name shows in the error), so a new option
 * is never refused as unknown.
 *
 * @example
 * const NAMES = optionNames<{ limit?: number; offset?: number }>()(["limit", "offset"]);
 */
export function optionNames<T extends object>(): <const L extends readonly (keyof T & string)[]>(
  names:
    & L
    & ([Exclude<keyof T, L[number]>] extends [never] ? unknown : {
      readonly missing: Exclude<keyof T, L[number]>;
    }),
) => L {
  return (names) => names;
}
