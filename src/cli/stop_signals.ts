/**
 * Listening for the signals that ask a command to stop, counted so a second
 * one can mean "now".
 *
 * @module
 * @internal
 */

/** The signals that ask a command to stop on this platform. */
export const STOP_SIGNALS: readonly Deno.Signal[] = Deno.build.os === "windows"
  ? ["SIGINT", "SIGBREAK"]
  : ["SIGINT", "SIGTERM"];

/**
 * The signals that ask `work` to stop: {@linkcode STOP_SIGNALS}, and a
 * hang-up (its terminal closed), which would otherwise end the process with
 * its jobs still leased.
 */
export const WORK_STOP_SIGNALS: readonly Deno.Signal[] = Deno.build.os === "windows"
  ? STOP_SIGNALS
  : [...STOP_SIGNALS, "SIGHUP"];

/** What asks a worker to stop: a signal, or its supervisor gone (see `work`). */
export type StopCause = Deno.Signal | "supervisor gone";

/**
 * Calls `listener` on each of `signals` with how many have come so far,
 * until disposed. While it listens, those signals no longer end the process.
 */
export function onSignals(
  listener: (signal: Deno.Signal, count: number) => void,
  signals: readonly Deno.Signal[] = STOP_SIGNALS,
): Disposable {
  let count = 0;
  const handlers = signals.map((signal) => {
    const handler = () => listener(signal, ++count);
    Deno.addSignalListener(signal, handler);
    return [signal, handler] as const;
  });
  return {
    [Symbol.dispose]() {
      for (const [signal, handler] of handlers) Deno.removeSignalListener(signal, handler);
    },
  };
}
