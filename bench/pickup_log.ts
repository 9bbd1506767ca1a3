/**
 * Matching each pick-up job's start signal with its completion: a serial
 * pick-up run dispatches the next job only once the previous one has both
 * started (its latency is known) and completed (its worker is idle again).
 *
 * @module
 */

interface Waiter {
  readonly id: number;
  readonly resolve: (latencyMs: number) => void;
  readonly reject: (error: Error) => void;
  readonly timer: ReturnType<typeof setTimeout>;
}

/** Starts and completions of pick-up jobs, as their worker reports them. */
export class PickupLog {
  readonly #latencies = new Map<number, number>();
  readonly #completed = new Set<number>();
  #waiter: Waiter | null = null;
  #failure: Error | null = null;

  /** The handler of job `id` started `latencyMs` after its dispatch. */
  started(id: number, latencyMs: number): void {
    this.#latencies.set(id, latencyMs);
    this.#check();
  }

  /** Job `id` completed and its settle was written. */
  completed(id: number): void {
    this.#completed.add(id);
    this.#check();
  }

  /** The worker can report nothing more (it exited): every wait fails with `error`. */
  fail(error: Error): void {
    this.#failure ??= error;
    this.#check();
  }

  /**
   * Resolves with job `id`'s latency once it has started and completed;
   * rejects after `timeoutMs`, or when the worker failed.
   */
  wait(id: number, timeoutMs: number): Promise<number> {
    if (this.#waiter !== null) throw new Error("PickupLog.wait: one job at a time");
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiter = null;
        reject(new Error(`Pick-up job ${id} did not start and complete within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#waiter = { id, resolve, reject, timer };
      this.#check();
    });
  }

  #check(): void {
    const waiter = this.#waiter;
    if (waiter === null) return;
    const latency = this.#latencies.get(waiter.id);
    const done = latency !== undefined && this.#completed.has(waiter.id);
    if (!done && this.#failure === null) return;
    this.#waiter = null;
    clearTimeout(waiter.timer);
    this.#latencies.delete(waiter.id);
    this.#completed.delete(waiter.id);
    if (done) waiter.resolve(latency);
    else waiter.reject(this.#failure!);
  }
}
