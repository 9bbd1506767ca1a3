/**
 * The hand-off a Web Worker job pays at concurrency 1, with no queue in the
 * way: a message shaped like the pool's for one attempt (its tuple in a
 * `run` message) posted to a bare Web Worker that answers at once as the
 * pool's does for a no-op success, the next one posted when the answer came. The rate of these round trips bounds what one
 * attempt at a time in a Web Worker can reach beside the isolate executor.
 *
 * @module
 */

/** Round trips made before the timing starts (the Web Worker's code gets compiled). */
const WARMUP_ROUND_TRIPS = 500;

/** Times `roundTrips` round trips, one at a time, to a fresh echoing Web Worker; per second. */
export async function rawRoundTripRate(roundTrips: number): Promise<number> {
  const worker = new Worker(new URL("./raw_echo_worker.ts", import.meta.url), { type: "module" });
  try {
    let answered: (() => void) | null = null;
    worker.onmessage = () => answered?.();
    worker.onerror = (event) => {
      event.preventDefault();
      throw new Error(`The raw echo Web Worker failed: ${event.message}`);
    };
    const roundTrip = (run: number) =>
      new Promise<void>((resolve) => {
        answered = resolve;
        worker.postMessage({
          type: "run",
          runs: [[run, run, "bench-noop", "default", '{"n":1}', 1, null, null, null]],
        });
      });
    for (let run = 0; run < WARMUP_ROUND_TRIPS; run++) await roundTrip(run);
    const start = performance.now();
    for (let run = 0; run < roundTrips; run++) await roundTrip(run);
    return roundTrips / (Math.max(performance.now() - start, 0.001) / 1000);
  } finally {
    worker.terminate();
  }
}
