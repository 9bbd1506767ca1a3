/**
 * Full garbage collections for the soak. Its worker processes run with
 * `--expose-gc`; every isolate that loads the soak's jobs module (each
 * worker's main isolate and each of its Web Workers) then collects in full
 * every {@linkcode COLLECT_EVERY_MS}, so the memory the soak samples is live
 * memory plus what V8 reserves, not garbage V8 would collect later.
 *
 * Without it a Web Worker's old generation gathers garbage for minutes
 * between V8's own full collections (seen with `--trace-gc`: 9.6 → 13.8 MiB
 * committed over 7 minutes, 9.7 MiB again after a full collection), which
 * looks like a leak of about 1 MiB a minute in the process's RSS.
 *
 * @module
 */

/** How often each isolate collects in full while the soak runs. */
export const COLLECT_EVERY_MS = 10_000;

/**
 * Collects in full every {@linkcode COLLECT_EVERY_MS} in this isolate when
 * `gc()` is exposed (`--v8-flags=--expose-gc`); does nothing otherwise. The
 * timer never keeps the isolate alive.
 */
export function collectPeriodically(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect === undefined) return;
  Deno.unrefTimer(setInterval(() => collect(), COLLECT_EVERY_MS));
}
