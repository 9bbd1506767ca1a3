/**
 * Console capture for the Web Workers of the pool (`captureConsole`): each
 * `console.log`/`info`/`warn`/`error`/`debug` call is still printed, and its
 * text (formatted as the console formats it) is also handed to a sink.
 *
 * @internal
 * @module
 */
/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />
import { format } from "node:util";

/** The console methods captured; the level of a captured line is the method's name. */
export const CAPTURED_METHODS = ["log", "info", "warn", "error", "debug"] as const;

/** Wraps the console methods so each call also reaches `sink(level, text)`; a sink that throws is ignored. */
export function captureConsole(sink: (level: string, text: string) => void): void {
  for (const method of CAPTURED_METHODS) {
    const original = console[method].bind(console);
    console[method] = (...args: unknown[]) => {
      original(...args);
      try {
        sink(method, format(...args));
      } catch {
        // Printing must never fail because capturing did.
      }
    };
  }
}
