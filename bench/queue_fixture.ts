/**
 * A queue on a fresh temp-file database with the bench's jobs module, and
 * the check that a run did all its work, shared by every figure of ours.
 *
 * @module
 */
import { Queue } from "../mod.ts";
import { BENCH_JOBS_URL } from "./jobs.ts";
import { withTempDatabase } from "./temp_database.ts";

/**
 * Opens a queue on a fresh database with the jobs given as the bench's jobs
 * module URL (so both executors can run them), calls `fn`, and closes it.
 */
export function withQueue<T>(fn: (queue: Queue) => Promise<T>): Promise<T> {
  return withQueueKeeping(undefined, fn);
}

/**
 * {@linkcode withQueue} with `keepFinishedMs` set (undefined: the default,
 * 24 h): `0` keeps no finished job, as the raw ceilings keep none.
 */
export function withQueueKeeping<T>(
  keepFinishedMs: number | undefined,
  fn: (queue: Queue) => Promise<T>,
): Promise<T> {
  return withTempDatabase(async (path) => {
    await using queue = await Queue.open({
      path,
      jobs: BENCH_JOBS_URL,
      ...(keepFinishedMs !== undefined && { keepFinishedMs }),
    });
    return await fn(queue);
  });
}

/**
 * A figure for work that was not all done would flatter us: check what the
 * queue holds (`expected` pending and `delayed` delayed jobs, nothing else).
 */
export async function assertPending(queue: Queue, expected: number, delayed = 0): Promise<void> {
  const counts = Object.values(await queue.counts());
  const pending = counts.reduce((sum, { pending }) => sum + pending, 0);
  const waiting = counts.reduce((sum, c) => sum + c.delayed, 0);
  const other = counts.reduce((sum, c) => sum + c.reserved + c.failed, 0);
  if (pending !== expected || waiting !== delayed || other !== 0) {
    throw new Error(
      `Expected ${expected} pending and ${delayed} delayed jobs and nothing else: got ${pending} pending, ${waiting} delayed, ${other} other`,
    );
  }
}
