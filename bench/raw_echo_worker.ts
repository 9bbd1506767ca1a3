/**
 * The Web Worker of the raw round trip: answers every `run` message at
 * once with its run ids as done, as the queue's Web Worker answers no-op
 * attempts.
 *
 * @module
 */
/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />

self.onmessage = ({ data }: MessageEvent<{ runs: readonly (readonly unknown[])[] }>) => {
  self.postMessage({ type: "results", done: data.runs.map((run) => run[0]) });
};
