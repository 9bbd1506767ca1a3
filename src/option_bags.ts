/**
 * The shape of an options argument, checked where plain JavaScript may
 * pass anything: an object (or nothing), and, where every option is known,
 * none the call does not read, so a misspelt option is refused rather than
 * silently ignored; an option given as null reads as its default.
 *
 * @internal
 * @module
 */
import { shown } from "./shown.ts";

/**
 * Throws a `TypeError` starting with `where` unless `options` is undefined,
 * null or an object; with `known`, also when it has an own key not among
 * them, naming it. Gives back the options, or undefined for none. An option
 * given as null is not given (as `??` reads it): the copy given back then
 * leaves it out, so every option reads null as its default.
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
  let given = true;
  for (const key of Object.keys(options)) {
    if (known !== undefined && !known.includes(key)) {
      throw new TypeError(
        `${where}: unknown option ${JSON.stringify(key)} (it takes ${
          known.map((name) => JSON.stringify(name)).join(", ")
        })`,
      );
    }
    if ((options as Record<string, unknown>)[key] === null) given = false;
  }
  if (given) return options;
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== null)) as T;
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
