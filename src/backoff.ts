/**
 * How long a failed attempt waits before the next one.
 *
 * @module
 */
import { shown } from "./shown.ts";

/**
 * Delay before the next attempt: milliseconds per attempt (the last value
 * repeats), or a function of the attempt that just failed (1 for the first).
 */
export type Backoff = readonly number[] | ((attempt: number) => number);

/** The default: 10 s times the attempt that just failed. */
export const defaultBackoff: Backoff = (attempt) => 10_000 * attempt;

/**
 * The longest delay anything accepts (a dispatch's `delayMs`, a release, a
 * backoff): about 100 years, so that every stored time stays an exact
 * integer in both stores' columns.
 */
export const MAX_DELAY_MS = 100 * 365 * 24 * 60 * 60 * 1_000;

/**
 * The delay after `attempt` failed, spread by ±`jitter` (a fraction of the
 * delay) so that jobs that failed together do not all come back together.
 */
export function retryDelayMs(
  backoff: Backoff,
  attempt: number,
  jitter: number,
  random: () => number = Math.random,
): number {
  const base = typeof backoff === "function"
    ? backoff(attempt)
    : backoff[Math.min(attempt, backoff.length) - 1] ?? 0;
  if (!Number.isFinite(base) || base < 0 || base > MAX_DELAY_MS) {
    throw new RangeError(
      `Backoff for attempt ${attempt} must be a delay from 0 to ${MAX_DELAY_MS} ms: got ${
        shown(base)
      }`,
    );
  }
  const spread = base * jitter * (2 * random() - 1);
  return Math.min(MAX_DELAY_MS, Math.max(0, Math.round(base + spread)));
}

/** Checks a backoff given to `defineJob`, naming the job in the error. */
export function assertBackoff(jobName: string, backoff: Backoff): void {
  if (typeof backoff === "function") return;
  if (!Array.isArray(backoff) || backoff.length === 0) {
    throw new TypeError(
      `Job "${jobName}": backoff must be a non-empty array of delays or a function`,
    );
  }
  for (const delay of backoff) {
    if (typeof delay !== "number" || !(delay >= 0 && delay <= MAX_DELAY_MS)) {
      throw new RangeError(
        `Job "${jobName}": backoff delays must be numbers of ms from 0 to ${MAX_DELAY_MS}: got ${
          shown(delay)
        }`,
      );
    }
  }
}
