/**
 * The queue's counts: jobs per queue by state, with the running ones and
 * the progress they reported. Every queue a job or schedule names shows,
 * idle ones as zeros.
 *
 * @internal
 * @module
 */
import type { Clock } from "../clock.ts";
import type { StatsStore } from "../stores/store.ts";
import type { QueueCounts } from "./listing.ts";

/** Counts the jobs of every queue in `store` at `clock`'s now; `queues` show even when idle. */
export async function countJobs(
  store: Pick<StatsStore, "counts" | "running">,
  clock: Clock,
  queues: readonly string[],
): Promise<Record<string, QueueCounts>> {
  const now = clock.now();
  const [rows, running] = [await store.counts(now), await store.running(now)];
  const idle = { pending: 0, delayed: 0, reserved: 0, failed: 0 };
  const byQueue = new Map(queues.map((queue) => [queue, idle]));
  for (const { queue, ...counts } of rows) byQueue.set(queue, counts);
  return Object.fromEntries(
    [...byQueue].map(([queue, counts]) => [
      queue,
      {
        ...counts,
        running: running.filter((job) => job.queue === queue).map(({ queue: _, ...job }) => job),
      },
    ]),
  );
}
