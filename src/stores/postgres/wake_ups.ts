/**
 * Wake-ups after commit: one `NOTIFY` for the many commits that asked while
 * the previous one was on its way.
 *
 * A `NOTIFY` sent inside a transaction that writes (stores jobs, settles a
 * worker's tick) makes PostgreSQL take its one notify lock for the whole
 * commit, WAL flush included, so concurrent notifying commits flush one
 * after another instead of together. Sent after the commit instead, in a
 * transaction of its own that writes no WAL (its commit waits for no
 * flush), many writes share one message and commit side by side. Every
 * wake-up of the PostgreSQL store goes this way: a script asks for one
 * (`wakeAfterCommit` in `../sql/script.ts`) and the engine sends it here
 * once the script's transaction has committed, without holding up the
 * script's caller (a worker's settle waiting a round trip more for each
 * wake-up drained grouped jobs slower than the `NOTIFY` inside it did).
 *
 * @internal
 * @module
 */

/**
 * Coalesces wake-ups: {@linkcode WakeUps.wake} resolves once a message sent
 * after the call was answered, and at most one message is on its way at a
 * time; every call made meanwhile shares the next one.
 */
export class WakeUps {
  readonly #send: () => Promise<unknown>;
  /** The message on its way, if any. */
  #sending: Promise<void> | null = null;
  /** The message to send once `#sending` is answered, shared by everyone who asked meanwhile. */
  #next: Promise<void> | null = null;

  /** Sends each message with `send`; a message that fails is dropped (watchers also poll). */
  constructor(send: () => Promise<unknown>) {
    this.#send = send;
  }

  /**
   * Resolves once a message sent after this call was answered (or failed:
   * it never rejects). The one on its way may have left before the caller's
   * commit, when its wake-up could reach a watcher that then misses the
   * caller's rows, so a caller waits for the next one.
   */
  wake(): Promise<void> {
    if (this.#sending === null) return this.#start();
    this.#next ??= this.#sending.then(() => {
      this.#next = null;
      return this.#start();
    });
    return this.#next;
  }

  /** Resolves once no message is on its way or waiting to leave. */
  async settled(): Promise<void> {
    while (this.#sending !== null || this.#next !== null) await (this.#next ?? this.#sending);
  }

  #start(): Promise<void> {
    const sending: Promise<void> = this.#send().then(() => {}, () => {}).finally(() => {
      if (this.#sending === sending) this.#sending = null;
    });
    this.#sending = sending;
    return sending;
  }
}
