/**
 * The drains that follow responses: at most one runs at a time, and a
 * request for one while it runs makes a drain with its options follow (one
 * per distinct options asked meanwhile, in the order asked), so a job
 * dispatched just before a running drain looked for the last time, on any
 * of the queues asked for, is not left for the next cron tick.
 *
 * @internal
 * @module
 */
import type { DrainOptions, DrainResult } from "./options.ts";
import { asError, QueueClosedError } from "../errors.ts";

/** Runs one drain at a time, followed by those asked for meanwhile. */
export class DrainAfterResponses {
  readonly #drain: (options: DrainOptions) => Promise<DrainResult>;
  readonly #onError: (error: Error) => void;
  #running: Promise<void> | null = null;
  /** The drains asked for while one ran, each distinct options once, by their JSON. */
  readonly #again = new Map<string, DrainOptions>();

  /** `drain` runs one drain; `onError` hears what failed (never a closed queue). */
  constructor(
    drain: (options: DrainOptions) => Promise<DrainResult>,
    onError: (error: Error) => void,
  ) {
    this.#drain = drain;
    this.#onError = onError;
  }

  /** Starts a drain, or asks the running one to be followed by one with `options`. */
  request(options: DrainOptions): void {
    if (this.#running !== null) {
      const key = JSON.stringify(options);
      if (!this.#again.has(key)) this.#again.set(key, options);
      return;
    }
    this.#running = this.#loop(options);
  }

  async #loop(first: DrainOptions): Promise<void> {
    let options: DrainOptions | null = first;
    try {
      while (options !== null) {
        try {
          await this.#drain(options);
        } catch (error) {
          if (error instanceof QueueClosedError) return;
          this.#onError(asError(error));
        }
        const [next] = this.#again;
        options = next?.[1] ?? null;
        if (next !== undefined) this.#again.delete(next[0]);
      }
    } finally {
      this.#running = null;
      this.#again.clear();
    }
  }
}
