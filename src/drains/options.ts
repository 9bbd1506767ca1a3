/**
 * The options of {@linkcode Queue.drain}, {@linkcode Queue.drainAfter} and
 * {@linkcode Queue.serverless}, what a drain returns, and the one place
 * their defaults are resolved and checked.
 *
 * @module
 */
import { optionBag, optionNames } from "../option_bags.ts";
import { shown } from "../shown.ts";
import type { StopReason } from "../events.ts";
import { type ResolvedWorkOptions, resolveWorkOptions } from "../runner/work_options.ts";

/** Options for {@linkcode Queue.drain}. */
export interface DrainOptions {
  /**
   * The time budget: claim nothing after it, and put jobs still running then back on their
   * queue without using an attempt (as `stop()` does), so the next drain or worker runs them.
   * @default {10_000}
   */
  maxTimeMs?: number;
  /** @deprecated Use `maxTimeMs`; still accepted (`maxTimeMs` wins when both are given). */
  maxMs?: number;
  /**
   * Claim at most this many jobs; the drain ends once they settle.
   * @default {Infinity}
   */
  maxJobs?: number;
  /**
   * Jobs run at once, in this isolate.
   * @default {1}
   */
  concurrency?: number;
  /**
   * Queues to take jobs from, in order: every due job of the first before any of the second.
   * @default {the queues of the registered jobs, "default" first}
   */
  queues?: readonly string[];
  /**
   * How long a claimed job stays leased without renewal: if the isolate dies mid-drain, its
   * jobs are claimable again after this.
   * @default {30_000}
   */
  leaseMs?: number;
}

/** What a drain did, from {@linkcode Queue.drain}. */
export interface DrainResult {
  /** Jobs that succeeded. */
  readonly completed: number;
  /** Jobs that failed for good (moved to the failed jobs). */
  readonly failed: number;
  /**
   * Jobs released to run again: attempts that threw and will be retried after their backoff,
   * and jobs still running at the end of `maxTimeMs`, put back without using an attempt.
   */
  readonly retried: number;
  /**
   * Why it ended: nothing was due any more (`"empty"`), the time budget was spent (`"time"`),
   * the job budget was spent (`"jobs"`), the queue was closed meanwhile (`"closed"`), or, as
   * `worker.stopReason` says it, the queue was moved to another store (`"moved"`), the store
   * lost its data (`"lost"`), a contract schema step newer than this code was applied
   * (`"outdated"`), or a job was stuck (`"stuck"`).
   */
  readonly stoppedBecause: StopReason;
}

/** @deprecated Use {@linkcode StopReason}. */
export type DrainStopReason = StopReason;

/** Options for {@linkcode Queue.drainAfter}. */
export interface DrainAfterOptions extends DrainOptions {
  /**
   * The time budget of each drain after a response: keep it within what the host lets an
   * isolate run after its last response, and above your jobs' usual runtime.
   * @default {5_000}
   */
  maxTimeMs?: number;
  /**
   * Starts the drain once this settles, e.g. `info.completed` of `Deno.serve`'s handler
   * (settles once the response was sent), so the drain never delays the response.
   * @default {the next turn of the event loop after drainAfter() returns}
   */
  after?: Promise<unknown>;
}

/** Options for {@linkcode Queue.serverless}. */
export interface ServerlessOptions {
  /**
   * When to drain: a cron expression in UTC, as `Deno.cron` takes it.
   * @default {"* * * * *" (every minute)}
   */
  cron?: string;
  /**
   * How long each tick drains, in ms: keep it under the time between ticks.
   * @default {50_000}
   */
  maxTimeMs?: number;
  /** @deprecated Use `maxTimeMs`; still accepted (`maxTimeMs` wins when both are given). */
  drainMs?: number;
  /**
   * The name `Deno.cron` registers, unique in the app.
   * @default {"renox-queue drain"}
   */
  name?: string;
  /**
   * Jobs run at once during a tick.
   * @default {1}
   */
  concurrency?: number;
  /**
   * Queues each tick takes jobs from, in order.
   * @default {the queues of the registered jobs, "default" first}
   */
  queues?: readonly string[];
  /** Unregisters the cron job when aborted (for a graceful shutdown). */
  signal?: AbortSignal;
}

/**
 * The runner options of a drain: in this isolate, stopping once nothing is
 * due, within the time and job budgets. Throws naming a bad option. @internal
 */
export function resolveDrainOptions(
  given: DrainOptions | undefined,
  defaultQueues: readonly string[],
): ResolvedWorkOptions {
  const options = optionBag(given, "drain", DRAIN_OPTIONS) ?? {};
  const maxMs = maxTimeMsOf(options, 10_000);
  if (!Number.isFinite(maxMs) || maxMs < 0 || maxMs > 2_147_483_647) {
    throw new RangeError(
      `drain: maxTimeMs must be a number of ms from 0 to 2147483647: got ${shown(maxMs)}`,
    );
  }
  try {
    return resolveWorkOptions(
      {
        ...(options.queues !== undefined && { queues: options.queues }),
        ...(options.concurrency !== undefined && { concurrency: options.concurrency }),
        ...(options.maxJobs !== undefined && { maxJobs: options.maxJobs }),
        ...(options.leaseMs !== undefined && { leaseMs: options.leaseMs }),
        executor: "isolate",
        stopWhenEmpty: true,
        maxTimeMs: maxMs,
        // A close() meanwhile lets running jobs finish within the budget; its end aborts them.
        graceMs: maxMs,
      },
      defaultQueues,
      false,
    );
  } catch (error) {
    // The same rules as work(), named for the method the caller used.
    if (error instanceof TypeError) throw new TypeError(drainMessage(error));
    if (error instanceof RangeError) throw new RangeError(drainMessage(error));
    throw error;
  }
}

/** Every option of {@linkcode Queue.drain}. */
const DRAIN_OPTIONS = optionNames<DrainOptions>()([
  "maxTimeMs",
  "maxMs",
  "maxJobs",
  "concurrency",
  "queues",
  "leaseMs",
]);

/** Every option of {@linkcode Queue.drainAfter}. @internal */
export const DRAIN_AFTER_OPTIONS = optionNames<DrainAfterOptions>()([...DRAIN_OPTIONS, "after"]);

/** Every option of {@linkcode Queue.serverless}. @internal */
export const SERVERLESS_OPTIONS = optionNames<ServerlessOptions>()([
  "cron",
  "maxTimeMs",
  "drainMs",
  "name",
  "concurrency",
  "queues",
  "signal",
]);

function drainMessage(error: Error): string {
  return error.message.replace(/^work:/, "drain:");
}

/**
 * A drain's time budget: `maxTimeMs`, else the deprecated `maxMs`, else
 * `defaultMs`. @internal
 */
export function maxTimeMsOf(options: DrainOptions, defaultMs: number): number {
  return options.maxTimeMs ?? options.maxMs ?? defaultMs;
}
