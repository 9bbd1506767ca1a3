/**
 * The rules for queue names, checked wherever a name enters the system.
 *
 * @internal
 * @module
 */

const QUEUE_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;

/** Throws a `TypeError` naming the bad value unless `name` is a valid queue name. */
export function assertQueueName(name: unknown, where: string): asserts name is string {
  if (typeof name !== "string" || !QUEUE_NAME.test(name)) {
    const shown = typeof name === "string" ? JSON.stringify(name.slice(0, 80)) : String(name);
    throw new TypeError(
      `${where}: queue name ${shown} is invalid: use 1 to 64 of A-Z a-z 0-9 _ . : -`,
    );
  }
}
