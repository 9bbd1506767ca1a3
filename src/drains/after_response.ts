/**
 * The drains that follow responses: at most one runs at a time, and a
 * request for one while it runs makes it run once more when it ends, so a
 * job dispatched just before a running drain looked for the last time is
 * not left for the next cron tick.
 *
 * @internal
 * @module
 */
import type { DrainOptions, DrainResult } from "./options.ts";
import { asError, QueueClosedError } from "../errors.ts";

/** Runs one drain at a time, with one more after it when asked meanwhile. */
export class DrainAfterResponses {
  readonly #drain: (options: DrainOptions) => Promise<DrainResult>;
  readonly #onError: (error: Error) => void;
  #running: Promise<void> | null = null;
  #again: DrainOptions | null = null;

  /** `drain` runs one drain; `onError` hears what failed (never a closed queue). */
  constructor(
    drain: (options: DrainOptions) => Promise<DrainResult>,
    onError: (error: Error) => void,
  ) {
    this.#drain = drain;
    this.#onError = onError;
  }

  /** Starts a drain, or asks the running one to be followed by another with `options`. */
  request(options: DrainOptions): void {
    if (this.#running !== null) {
      this.#again = options;
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
        options = this.#again;
        this.#again = null;
      }
    } finally {
      this.#running = null;
      this.#again = null;
    }
  }
}
