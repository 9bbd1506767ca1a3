/**
 * The rules for names (queues, jobs, batches, middleware keys), checked
 * wherever a name enters the system.
 *
 * @internal
 * @module
 */
import { shown } from "./shown.ts";

const QUEUE_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;

/** Throws a `TypeError` naming the bad value unless `name` is a valid queue name. */
export function assertQueueName(name: unknown, where: string): asserts name is string {
  if (typeof name !== "string" || !QUEUE_NAME.test(name)) {
    throw new TypeError(
      `${where}: queue name ${
        typeof name === "string" ? JSON.stringify(name.slice(0, 80)) : shown(name)
      } is invalid: use 1 to 64 of A-Z a-z 0-9 _ . : -`,
    );
  }
}

/**
 * Throws a `TypeError` naming `where` unless `name` is a well-formed string
 * of 1 to 255 characters without NUL: what both stores keep unchanged.
 */
export function assertName(name: unknown, where: string, what: string): string {
  if (
    typeof name !== "string" || name.length === 0 || name.length > 255 || name.includes("\0") ||
    !name.isWellFormed()
  ) {
    throw new TypeError(
      `${where}: ${what} must be a string of 1 to 255 characters, without NUL or lone surrogates: got ${
        typeof name === "string" ? JSON.stringify(name.slice(0, 64)) : shown(name)
      }`,
    );
  }
  return name;
}
