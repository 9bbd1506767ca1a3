/**
 * Where a runner is on its way to stopping, as one value: it runs; it is
 * stopping (claims nothing more, running jobs may finish until the grace
 * deadline); its grace ran out (running jobs were aborted and put back, their
 * settles are being written); or it has stopped.
 *
 * @internal
 * @module
 */
import type { StopReason } from "../events.ts";

/** A runner's stop state; every phase past `"running"` carries why it stops. */
export type StopState =
  | { readonly phase: "running" }
  | {
    readonly phase: "stopping";
    readonly reason: StopReason;
    /** When running jobs are aborted (performance.now). */
    readonly graceDeadline: number;
    /** Aborts them then. */
    readonly graceTimer: ReturnType<typeof setTimeout>;
  }
  | { readonly phase: "grace over"; readonly reason: StopReason }
  | { readonly phase: "stopped"; readonly reason: StopReason };

/** The state of a runner that has not been asked to stop. */
export const RUNNING: StopState = { phase: "running" };
