/**
 * The loop's sleep between polls: a wake-up (a store change, a finished
 * job, a stop) ends it early, and a loop that always has work to settle
 * still lets timers run (lease renewals, timeouts, a stop's grace) at least
 * every 20 ms instead of running on microtasks alone.
 *
 * @internal
 * @module
 */

import { TimerTurns } from "../timer_turns.ts";

/** Sleeps between polls until woken. */
export class PollSleep {
  #wake: (() => void) | null = null;
  #wakeRequested = false;
  /** When the loop last let timers run. */
  readonly #turns = new TimerTurns();

  /** Ends the current sleep, or the next one at once when the loop is busy. */
  wake(): void {
    this.#wakeRequested = true;
    this.#wake?.();
  }

  /** Whether the loop has run on microtasks alone too long and should yield to timers. */
  get timersStarved(): boolean {
    return this.#turns.starved;
  }

  /** Lets due timers run, then resolves (see `TimerTurns.take`). */
  yieldToTimers(): Promise<void> {
    return this.#turns.take();
  }

  /** Waits `ms`, or less when woken; a wake-up that came while the loop was busy ends it at once. */
  sleep(ms: number): Promise<void> {
    if (this.#wakeRequested) {
      this.#wakeRequested = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#wake = null;
        this.#wakeRequested = false;
        resolve();
      };
      const timer = setTimeout(() => {
        this.#turns.noteTurn();
        done();
      }, ms);
      this.#wake = done;
    });
  }
}
