/**
 * A drain: one runner on the same tick path as `work()` (claim → run →
 * settle), stopping once nothing is due, within a time and a job budget,
 * whose jobs still running at the end of the time budget are put back
 * without using an attempt, as `stop()` does.
 *
 * @internal
 * @module
 */
import type { DrainResult } from "./options.ts";
import type { QueueWorker } from "../runner/runner.ts";

/**
 * Starts a runner with `start` (its options carry the budgets: `maxTimeMs`,
 * `maxJobs`, `stopWhenEmpty`), stops it at the end of the time budget, and
 * resolves with what it did once every job it held has settled.
 */
export async function runDrain(start: () => QueueWorker): Promise<DrainResult> {
  const runner = start();
  const maxMs = runner.options.maxTimeMs;
  const timer = setTimeout(() => {
    if (runner.stopReason !== null) return; // it ended, or the queue closed it, first
    void runner.stopFor("time", 0);
  }, maxMs);
  try {
    await runner.done;
  } finally {
    clearTimeout(timer);
  }
  const { completed, failed, retried } = runner.stats;
  // The reason its worker:stop carried: the drain sends the events work() does.
  return { completed, failed, retried, stoppedBecause: runner.stopReason ?? "closed" };
}
