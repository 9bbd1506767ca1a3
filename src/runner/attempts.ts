/**
 * The runner's record of one attempt: while its handler runs, then once it
 * has finished and waits to be settled with the next tick.
 *
 * @internal
 * @module
 */
import type { JobDefinition } from "../job.ts";
import type { Outcome } from "./outcomes.ts";
import type { ClaimedJob } from "../stores/store.ts";
import type { Deadline } from "./attempt_timeouts.ts";
import type { AttemptSpan } from "./tracing.ts";

/**
 * How long past `graceMs` a timed-out or cancelled attempt waits for its
 * handler to stop before it is settled anyway (a Web Worker is terminated
 * at `graceMs`; an isolate handler of a job with middleware that ignores
 * its signal may never stop).
 */
export const STOP_MARGIN_MS = 1_000;

/** An attempt whose handler runs now. */
export interface RunningJob {
  /** The claimed job. */
  readonly job: ClaimedJob;
  /** Its definition, for its retry rules. */
  readonly definition: JobDefinition;
  /** Aborts the handler: on timeout, on stop, and when the lease is lost. */
  readonly controller: AbortController;
  /** When the handler started (performance.now). */
  readonly startedAt: number;
  /** Ends the attempt at the job's `timeoutMs`; null until it started. */
  deadline: Deadline<RunningJob> | null;
  /** The latest progress the handler reported and not yet written, or null. */
  progress: number | null;
  /** When its progress was last written (performance.now), or -Infinity. */
  progressWrittenAt: number;
  /** Set while a progress write waits for its turn. */
  progressTimer: ReturnType<typeof setTimeout> | undefined;
  /** The attempt's span; undefined without a tracer SDK. */
  readonly span: AttemptSpan | undefined;
  /** The timers of its steps that run with a `timeoutMs`; absent until one starts. */
  stepTimers?: Set<ReturnType<typeof setTimeout>>;
  /**
   * Set once a timeout or a cancel decided how the attempt ends while its
   * handler may still run: called, instead of settling what the handler
   * gives, once the executor says the handler ended (or at a cap).
   */
  afterStop?: () => void;
}

/** An attempt that ended, or a claimed job that never started, waiting to be settled. */
export interface FinishedJob {
  /** The claimed job. */
  readonly job: ClaimedJob;
  /** What settling it means. */
  readonly outcome: Outcome;
  /** How long the handler ran; 0 when it did not start. */
  readonly durationMs: number;
  /** True when the handler ran: its duration goes to the metrics rollup. */
  readonly ran?: boolean;
  /** The `traceparent` of the attempt's span, kept on the job when it is retried; null when not traced. */
  readonly traceparent?: string | null;
}
