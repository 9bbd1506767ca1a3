/**
 * The rows of job logs: the lines a tick writes with its settle, and the
 * lines a store reads back for one job.
 *
 * @module
 */
import type { Lease, StartRequest } from "./tick.ts";

/** One line a handler wrote, as the runner hands it to the settle. */
export interface NewLogLine {
  /** The job's id. */
  readonly jobId: number;
  /** The attempt that wrote it. */
  readonly attempt: number;
  /** When, in ms since the epoch. */
  readonly at: number;
  /** `"info"` for `ctx.log()`, else the `console` method it came from. */
  readonly level: string;
  /** The text, or the sealed line (message and fields) when `encrypted`. */
  readonly message: string;
  /** The fields as JSON text, or null (always null when `encrypted`). */
  readonly fields: string | null;
  /** True when `message` is sealed with the job's key. */
  readonly encrypted: boolean;
  /** The line's size before sealing, in bytes: what the cap counts. */
  readonly bytes: number;
}

/** The lines of one tick, and the per-job cap they are kept under. */
export interface LogWrites {
  /** The lines, in the order they were written. */
  readonly lines: readonly NewLogLine[];
  /** A job's lines are kept under this many bytes, the oldest dropped first. */
  readonly maxBytesPerJob: number;
}

/** One stored line of a job's log, oldest first. */
export interface LogLineRow {
  /** The line's id, increasing in the order lines were written. */
  readonly id: number;
  /** The job's id. */
  readonly jobId: number;
  /** The attempt that wrote it (0 for the line saying the cap dropped older ones). */
  readonly attempt: number;
  /** When, in ms since the epoch. */
  readonly at: number;
  /** `"info"`, a `console` method's name, or `"cap"` for the line saying older lines were dropped. */
  readonly level: string;
  /** The text, or the sealed line when `encrypted`. */
  readonly message: string;
  /** The fields as JSON text, or null. */
  readonly fields: string | null;
  /** True when `message` is sealed with the job's key. */
  readonly encrypted: boolean;
}

/** A retried attempt's span, kept on its job so the next attempt's span links to it. */
export interface AttemptSpan {
  /** The job's id. */
  readonly id: number;
  /** The span's `traceparent`. */
  readonly traceparent: string;
}

/** What a tick records beside its settlements, in the same transaction. */
export interface TickRecords {
  /** The lines handlers wrote since the last tick. */
  readonly logs?: LogWrites;
  /** The spans of attempts this tick releases for a retry. */
  readonly spans?: readonly AttemptSpan[];
  /** Jobs claimed ahead to start now: their start confirmations (`SettleResult.started`). */
  readonly starts?: StartRequest;
  /**
   * Jobs whose handler began since the last tick and still run: each is
   * marked begun while the claim that holds it still does, so a worker
   * death from then on charges it a crash (before, it is charged nothing
   * and becomes suspect).
   */
  readonly begun?: readonly Lease[];
}
