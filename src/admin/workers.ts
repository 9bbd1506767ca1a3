/**
 * The workers a queue's database has seen: each running worker writes a
 * heartbeat row at its start and on its lease-renewal timer (every third of
 * its lease, at most 10 s apart), and deletes it when it stops.
 *
 * @module
 */
import { optionBag } from "../option_bags.ts";
import { shown } from "../shown.ts";
import type { Clock } from "../clock.ts";
import type { PendingByName, StatsStore, WorkerInfo } from "../stores/store.ts";

export type { WorkerInfo } from "../stores/store.ts";

/** Options for {@linkcode Queue.workers}. */
export interface WorkersOptions {
  /**
   * List workers whose last heartbeat is at most this old, in ms, from
   * 1,000 to 86,400,000 (a day).
   * @default {30_000}
   */
  seenWithinMs?: number;
}

/**
 * The earliest heartbeat {@linkcode WorkersOptions} accept at `now`; an
 * error names `method`, the call they came to.
 */
export function seenSince(
  now: number,
  options: WorkersOptions | undefined,
  method: "workers" | "unclaimed",
): number {
  const seenWithinMs = optionBag(options, method, ["seenWithinMs"])?.seenWithinMs ?? 30_000;
  if (!(Number.isFinite(seenWithinMs) && seenWithinMs >= 1_000 && seenWithinMs <= 86_400_000)) {
    throw new RangeError(
      `${method}: seenWithinMs must be a number of ms from 1000 to 86400000: got ${
        shown(seenWithinMs)
      }`,
    );
  }
  return now - seenWithinMs;
}

/** Due jobs of one name on one queue that no worker seen lately can claim. */
export interface UnclaimedJobs {
  /** The queue they wait on. */
  readonly queue: string;
  /** Their job name. */
  readonly name: string;
  /** How many are due. */
  readonly pending: number;
}

/**
 * The groups of `pending` (due jobs per queue and name) that no worker in
 * `workers` can claim: none of them lists the queue and knows the name.
 */
export function unclaimedJobs(
  pending: readonly PendingByName[],
  workers: readonly WorkerInfo[],
): UnclaimedJobs[] {
  return pending.filter(({ queue, name }) =>
    !workers.some((worker) => worker.queues.includes(queue) && worker.names.includes(name))
  );
}

/** The workers `store` heard from within `options.seenWithinMs` of `clock`'s now. */
export async function listWorkers(
  store: Pick<StatsStore, "workers">,
  clock: Clock,
  options: WorkersOptions,
): Promise<WorkerInfo[]> {
  const now = clock.now();
  return await store.workers(seenSince(now, options, "workers"), now);
}

/** The due jobs in `store` that no worker seen lately can claim; none when no worker is seen. */
export async function listUnclaimed(
  store: Pick<StatsStore, "workers" | "pendingByName">,
  clock: Clock,
  options: WorkersOptions,
): Promise<UnclaimedJobs[]> {
  const now = clock.now();
  const workers = await store.workers(seenSince(now, options, "unclaimed"), now);
  if (workers.length === 0) return [];
  return unclaimedJobs(await store.pendingByName(now), workers);
}
