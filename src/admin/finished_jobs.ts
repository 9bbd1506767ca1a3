/**
 * The finished jobs a queue keeps (completed and cancelled, for
 * `keepFinishedMs`): list them, read one, prune them; and cancelling a job,
 * which keeps it as finished for as long as its job type says.
 *
 * @internal
 * @module
 */
import type { Clock } from "../clock.ts";
import type { JobRegistry } from "../registry.ts";
import type { JobControlStore } from "../stores/store.ts";
import { assertName, assertQueueName } from "../names.ts";
import { optionNames } from "../option_bags.ts";
import {
  type CancelOptions,
  type CancelOutcome,
  cancelReason,
  type FinishedJob,
  type FinishedOptions,
} from "./job_control.ts";
import { assertId, cutoff, page, type PruneOptions } from "./listing.ts";

/** Every option of `Queue.finished`. */
const FINISHED_OPTIONS = optionNames<FinishedOptions>()(["limit", "offset", "name", "queue"]);

/** What finished-job admin reads and writes. */
export interface FinishedJobsParts {
  /** Where finished jobs are kept and jobs cancelled. */
  readonly store: Pick<
    JobControlStore,
    "finished" | "finishedJob" | "pruneFinished" | "result" | "cancel"
  >;
  /** Source of the time cancels and prunes are written at. */
  readonly clock: Clock;
  /** The job definitions: how long each type keeps its finished jobs. */
  readonly registry: JobRegistry;
  /** How long finished jobs are kept, in ms, for jobs that do not say. */
  readonly keepFinishedMs: number;
}

/** The finished jobs of one queue. */
export class FinishedJobs {
  readonly #parts: FinishedJobsParts;

  /** Finished-job admin on `parts`. */
  constructor(parts: FinishedJobsParts) {
    this.#parts = parts;
  }

  /** A page of finished jobs, newest first, filtered by name and queue. */
  async list(options: FinishedOptions | undefined): Promise<FinishedJob[]> {
    const slice = page(options, "finished", FINISHED_OPTIONS);
    const { name, queue } = options ?? {};
    if (queue !== undefined) assertQueueName(queue, "finished");
    if (name !== undefined) assertName(name, "finished", "name");
    return await this.#parts.store.finished({ name, queue }, slice);
  }

  /** One finished job, or null. */
  one(id: number): Promise<FinishedJob | null> {
    return this.#parts.store.finishedJob(assertId(id));
  }

  /** Deletes finished jobs older than `options.olderThanMs`; resolves with how many. */
  prune(options: PruneOptions): Promise<number> {
    const now = this.#parts.clock.now();
    return this.#parts.store.pruneFinished(cutoff(now, options, "pruneFinished"), now);
  }

  /** Cancels job `id`, kept as finished for its type's `keepFinishedMs`; says what happened. */
  async cancel(id: number, options: CancelOptions | undefined): Promise<CancelOutcome> {
    const { store } = this.#parts;
    const reason = cancelReason(options);
    const jobId = assertId(id);
    const now = this.#parts.clock.now();
    const name = (await store.result(jobId, now))?.name;
    return await store.cancel({ id: jobId, reason, now, keepUntil: now + this.#keepMs(name) });
  }

  /**
   * Until when jobs cancelled at `now` are kept as finished: the queue's
   * `keepFinishedMs`, and each job name defined here whose type keeps them
   * for a time of its own (for a cancel that learns the names of the jobs
   * it cancels only in its write, as a flow's).
   */
  keepsOfCancelled(now: number): { keepUntil: number; keepUntilByName: Record<string, number> } {
    // Own properties even for a name such as "__proto__".
    const keepUntilByName = Object.fromEntries(
      this.#parts.registry.names().flatMap((name) => {
        const keepMs = this.#parts.registry.get(name)?.keepFinishedMs;
        return keepMs === undefined ? [] : [[name, now + keepMs] as const];
      }),
    );
    return { keepUntil: now + this.#parts.keepFinishedMs, keepUntilByName };
  }

  /** How long a finished job of `name` is kept, in ms: its type's `keepFinishedMs`, or the queue's. */
  #keepMs(name: string | undefined): number {
    return (name === undefined ? undefined : this.#parts.registry.get(name)?.keepFinishedMs) ??
      this.#parts.keepFinishedMs;
  }
}
