/**
 * Waiting for a job to end, wherever it runs: the result is read again when
 * the store's watch says another connection wrote (the WAL file on SQLite,
 * `NOTIFY` on PostgreSQL, sent by the settle of an awaited job), when this
 * process's own workers report the job, and once a second as a safety net
 * for a store that cannot watch.
 *
 * @internal
 * @module
 */
import type { Clock } from "../clock.ts";
import { JobWaitTimeoutError } from "../errors.ts";
import type { QueueEventTarget } from "../events.ts";
import type { JobControlStore, JobResultRow, WorkerStore } from "../stores/store.ts";

/** The slowest the result is read again while nothing wakes the wait. */
const SAFETY_POLL_MS = 1_000;

/** What a wait reads and listens to. */
export interface AwaitDeps {
  /** Where the result is read, and whose writes wake the wait. */
  readonly store: Pick<JobControlStore, "result"> & Pick<WorkerStore, "watch">;
  /** Source of the time results are read at. */
  readonly clock: Clock;
  /** This process's job events (its own workers' settles). */
  readonly events: QueueEventTarget;
}

/** Events that say a job of this process settled for good. */
const ENDED = ["job:complete", "job:failed", "job:cancelled"] as const;

/**
 * Resolves with job `id`'s result once it completed, failed for good or
 * was cancelled; rejects after `timeoutMs` with `JobWaitTimeoutError`, on
 * `signal`'s abort with its reason, or when the job is no longer stored.
 */
export function awaitResult(
  deps: AwaitDeps,
  id: number,
  timeoutMs: number | undefined,
  signal: AbortSignal | undefined,
): Promise<JobResultRow> {
  const { store, clock, events } = deps;
  return new Promise<JobResultRow>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const cleanups: (() => void)[] = [];
    let done = false;
    let reading = false;
    let readAgain = false;
    const end = (settle: () => void) => {
      if (done) return;
      done = true;
      for (const cleanup of cleanups) cleanup();
      settle();
    };
    const read = async () => {
      if (done) return;
      if (reading) {
        readAgain = true;
        return;
      }
      reading = true;
      try {
        const row = await store.result(id, clock.now());
        if (row === null) {
          end(() =>
            reject(
              new Error(
                `Job ${id} is no longer stored: it was cleared or forgotten, or it finished with keepFinishedMs 0 (nothing kept)`,
              ),
            )
          );
        } else if (row.state !== "pending" && row.state !== "running") end(() => resolve(row));
      } catch (error) {
        end(() => reject(error));
      } finally {
        reading = false;
        if (readAgain && !done) {
          readAgain = false;
          void read();
        }
      }
    };
    const watch = store.watch(() => void read());
    cleanups.push(() => watch[Symbol.dispose]());
    const poll = setInterval(() => void read(), SAFETY_POLL_MS);
    cleanups.push(() => clearInterval(poll));
    const onEnded = (event: Event) => {
      if ((event as CustomEvent<{ id: number }>).detail.id === id) void read();
    };
    for (const type of ENDED) {
      events.addEventListener(type, onEnded);
      cleanups.push(() => events.removeEventListener(type, onEnded));
    }
    if (timeoutMs !== undefined) {
      const timer = setTimeout(
        () => end(() => reject(new JobWaitTimeoutError(id, timeoutMs))),
        timeoutMs,
      );
      cleanups.push(() => clearTimeout(timer));
    }
    if (signal !== undefined) {
      const onAbort = () => end(() => reject(signal.reason));
      signal.addEventListener("abort", onAbort, { once: true });
      cleanups.push(() => signal.removeEventListener("abort", onAbort));
    }
    void read();
  });
}
