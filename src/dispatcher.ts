/**
 * The dispatch surface shared by {@linkcode Queue}, a transaction, a handler's
 * `ctx.queue` and the test fake, so app code can take any of them.
 *
 * @module
 */
import type { JobDefinition, PayloadOf } from "./job.ts";

/** Options for one dispatch. */
export interface DispatchOptions {
  /**
   * Wait this long before the job is due.
   * @default {0}
   */
  delayMs?: number;
  /**
   * Queue to put the job on.
   * @default {the job's own queue}
   */
  queue?: string;
  /**
   * Higher runs first within a queue.
   * @default {the job's own priority}
   */
  priority?: number;
}

/** Something jobs can be dispatched to. */
export interface Dispatcher {
  /** Stores one job and returns its id. */
  dispatch<J extends JobDefinition>(
    job: J,
    payload: PayloadOf<J>,
    options?: DispatchOptions,
  ): Promise<number>;
  /** Stores many jobs of one kind, all or none, and returns their ids in order. */
  dispatchMany<J extends JobDefinition>(
    job: J,
    payloads: readonly PayloadOf<J>[],
    options?: DispatchOptions,
  ): Promise<number[]>;
}
