/**
 * How the pick-up job tells its process that its handler started: a
 * `BroadcastChannel` message, which reaches the main thread from any Web
 * Worker of the same process without going through the queue.
 *
 * @module
 */

const CHANNEL = "renox-queue-bench-pickup";

/** A pick-up job's handler has started. */
export interface PickupSignal {
  /** The job's id. */
  readonly id: number;
  /** Handler start minus dispatch time, both on the wall clock, in ms. */
  readonly latencyMs: number;
}

/** The sending end, opened on first use in the isolate that runs the handler. */
let sender: BroadcastChannel | null = null;

/** Tells this process's listeners that a pick-up job started. */
export function signalPickup(signal: PickupSignal): void {
  (sender ??= new BroadcastChannel(CHANNEL)).postMessage(signal);
}

/** Calls `listener` for every pick-up signal of this process; dispose the result to stop. */
export function listenForPickups(listener: (signal: PickupSignal) => void): Disposable {
  const channel = new BroadcastChannel(CHANNEL);
  channel.onmessage = ({ data }: MessageEvent<PickupSignal>) => listener(data);
  return { [Symbol.dispose]: () => channel.close() };
}
