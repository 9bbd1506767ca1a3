/**
 * Turns of the event loop for timers: code that runs on microtasks alone
 * (a loop of awaited calls whose work is synchronous underneath, as every
 * SQLite call is) never lets a due timer run, and with it a lease renewal,
 * a heartbeat, a timeout or an app's own `setTimeout`. Such code asks
 * {@linkcode TimerTurns.starved} before each step and, when it has run that
 * way for longer than its `everyMs`, awaits {@linkcode TimerTurns.take}: one
 * turn (`setImmediate`, a few µs; a `setTimeout(0)` waits a millisecond or
 * more).
 *
 * @internal
 * @module
 */

/** When a loop running on microtasks alone last let timers run. */
export class TimerTurns {
  /** The longest a loop runs on microtasks alone before it lets timers run, in ms. */
  readonly everyMs: number;
  /** When timers last had a turn (performance.now). */
  #tookAt = performance.now();

  /** Turns at least every `everyMs` (20 ms unless given). */
  constructor(everyMs = 20) {
    this.everyMs = everyMs;
  }

  /** Whether timers had no turn for longer than `everyMs`. */
  get starved(): boolean {
    return performance.now() - this.#tookAt > this.everyMs;
  }

  /** Notes that timers just had a turn (a timer of the caller's own fired). */
  noteTurn(): void {
    this.#tookAt = performance.now();
  }

  /** Lets due timers run, then resolves. */
  take(): Promise<void> {
    return new Promise((resolve) =>
      setImmediate(() => {
        this.noteTurn();
        resolve();
      })
    );
  }
}
