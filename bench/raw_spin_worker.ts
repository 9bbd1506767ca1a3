/**
 * The Web Worker of the plain parallel ceiling: no queue, no payload
 * decoding; it runs {@linkcode spin} for each message and answers.
 *
 * @module
 */
/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />
import { spin } from "./cpu_work.ts";

self.onmessage = ({ data }: MessageEvent<number>) => {
  spin(data);
  self.postMessage(null);
};
