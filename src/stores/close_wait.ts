/**
 * How a store's `close()` ends an app transaction whose callback does not
 * return: it waits {@linkcode CLOSE_WAITS_MS} for it, then rolls it back,
 * and the transaction rejects with {@linkcode closedUnderTransaction}'s
 * error. Every store does so alike: PostgreSQL's driver cuts the
 * connection after as long (`end({ timeout })`), which rolls it back, and
 * the store words the cut as this error; the SQLite and Redis stores abort
 * the wait for the callback ({@linkcode untilAborted}) and roll back
 * themselves.
 *
 * @internal
 * @module
 */
import { LONGEST_TIMER_MS } from "../clock.ts";
import { QueueClosedError } from "../errors.ts";

/** How long close() waits for the open app transactions before it rolls them back, in ms. */
export const CLOSE_WAITS_MS = 5_000;

/** The error of a transaction that close() rolled back, and of the calls on its `tx` after it. */
export function closedUnderTransaction(options?: ErrorOptions): QueueClosedError {
  return new QueueClosedError(
    "go on with this transaction: close() stopped waiting for it to end and rolled it back, storing nothing",
    options,
  );
}

/**
 * Settles when `ended` settles, or after `ms` (none when not above 0; at
 * most the longest a timer takes), whichever comes first.
 */
export async function waitAtMost(ended: Promise<unknown>, ms: number): Promise<void> {
  if (ms <= 0) return;
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    ended.then(() => {}, () => {}),
    new Promise((resolve) => timer = setTimeout(resolve, Math.min(ms, LONGEST_TIMER_MS))),
  ]);
  clearTimeout(timer);
}

/**
 * What `work` (a callback's outcome) settles with, or `signal`'s reason once
 * it is aborted first; `work` may then never settle, and what it settles
 * with later is dropped.
 */
export function untilAborted<T>(work: T | Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason);
    signal.addEventListener("abort", abort, { once: true });
    Promise.resolve(work).then(resolve, reject).finally(() =>
      signal.removeEventListener("abort", abort)
    );
  });
}
