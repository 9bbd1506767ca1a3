/**
 * Synchronous CPU work of a known duration, the body of the bench's
 * CPU-bound job: integer mixing in a tight loop, with no allocation and no
 * await, so that it holds its thread the whole time.
 *
 * @module
 */
import { median } from "./median.ts";

/**
 * Iterations of one warm-up call of {@linkcode spin}. V8 optimises the loop
 * in steps over its first calls (on-stack first, the whole function after
 * some twenty calls, ~20 % faster again): every isolate that times it must
 * first run {@linkcode SPIN_WARMUP_CALLS} calls of this size.
 */
export const SPIN_WARMUP_ITERATIONS = 1_000_000;
/** Warm-up calls of {@linkcode SPIN_WARMUP_ITERATIONS} before timing {@linkcode spin}. */
export const SPIN_WARMUP_CALLS = 30;

/** Iterations of {@linkcode spin} that take about a given time on this machine. */
export interface SpinCalibration {
  /** Iterations per job. */
  readonly iterations: number;
  /** What one job of that many iterations took here, in ms (median of a few, JIT warm). */
  readonly msPerJob: number;
}

/** Where results go, so that the loop cannot be optimised away. */
let sink = 0;

/** Mixes integers `iterations` times and returns the result. */
export function spin(iterations: number): number {
  let state = 0x2545f491 ^ sink;
  for (let index = 0; index < iterations; index++) {
    state = (Math.imul(state ^ (state >>> 13), 0x5bd1e995) + index) | 0;
  }
  sink = state;
  return state;
}

/** Times one call of {@linkcode spin}, in ms. */
function timeSpin(iterations: number): number {
  const start = performance.now();
  spin(iterations);
  return performance.now() - start;
}

/**
 * Finds how many iterations take `targetMs` in this isolate once the JIT has
 * warmed up: times a guess, rescales it, and repeats until a median of five
 * calls lands within 5 % of the target (or after a few tries).
 */
export function calibrateSpin(targetMs: number): SpinCalibration {
  for (let warm = 0; warm < SPIN_WARMUP_CALLS; warm++) spin(SPIN_WARMUP_ITERATIONS);
  let iterations = SPIN_WARMUP_ITERATIONS;
  let msPerJob = timeSpin(iterations);
  for (let attempt = 0; attempt < 6; attempt++) {
    iterations = Math.max(1, Math.round(iterations * targetMs / Math.max(msPerJob, 0.01)));
    msPerJob = median(Array.from({ length: 5 }, () => timeSpin(iterations)));
    if (Math.abs(msPerJob - targetMs) <= targetMs * 0.05) break;
  }
  return { iterations, msPerJob };
}
