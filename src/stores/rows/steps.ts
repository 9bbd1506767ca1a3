/**
 * The rows of durable steps: the memo each `ctx.step`, `ctx.sleep` and
 * `ctx.waitFor` leaves on its job, and the signals waiting in a job's
 * mailbox.
 *
 * @module
 */

/** What a memo records: a step's output, a sleep's wake time, or a wait for a signal. */
export type StepKind = "step" | "sleep" | "wait";

/** A memo as a worker writes it (fenced by the claim's token, like a settle). */
export interface StepWrite {
  /** Its call position in the handler, from 1: the nth step, sleep or wait the handler reached. */
  readonly seq: number;
  /** Its name, numbered from the second use of one name in a run: `send`, `send#2`, … */
  readonly key: string;
  /** What it records. */
  readonly kind: StepKind;
  /**
   * A step's output as stored (JSON text, sealed for an encrypted job); a
   * finished wait's signal payload as stored, or `"null"` when it timed
   * out; null for a sleep and for a wait still waiting.
   */
  readonly output: string | null;
  /**
   * A sleep's wake time, or a wait's timeout (ms since the epoch, on the
   * clock of the settlement's `at`: a store that goes by its own clock
   * shifts it as it shifts `availableAt`); null for a step and a wait
   * without a timeout.
   */
  readonly until: number | null;
  /** False only for a wait still waiting for its signal. */
  readonly done: boolean;
  /** The attempt that wrote it. */
  readonly attempt: number;
  /** How long it ran, in ms (a step); 0 for sleeps and waits. */
  readonly durationMs: number;
  /**
   * A finished wait that took a signal from the mailbox: that signal's id.
   * The same write deletes it, so the signal is taken once.
   */
  readonly takesSignal?: number;
}

/** A memo as stored. */
export interface StepRow extends Omit<StepWrite, "takesSignal"> {
  /** When it was written (ms since the epoch, the store's clock). */
  readonly at: number;
}

/** A signal sent to a job and not yet taken by one of its waits. */
export interface SignalRow {
  /** Its id: signals of one name are taken in id order. */
  readonly id: number;
  /** The signal's name (a wait takes the oldest signal of its name). */
  readonly name: string;
  /** The payload as stored: JSON text, or sealed with the app key. */
  readonly payload: string;
  /** When it was sent (ms since the epoch, the store's clock). */
  readonly sentAt: number;
}

/** What a store holds of one job's durable steps. */
export interface JobStepsRow {
  /** Its memos, by `seq`. */
  readonly steps: StepRow[];
  /** Its mailbox: signals not yet taken, oldest first. */
  readonly signals: SignalRow[];
}

/** A signal to deliver to a job. */
export interface SignalRequest {
  /** The job's id. */
  readonly jobId: number;
  /** The signal's name. */
  readonly name: string;
  /** The payload as stored: JSON text, or sealed with the app key. */
  readonly payload: string;
  /** The caller's now (a store on its own clock uses its own). */
  readonly now: number;
}

/**
 * What became of a signal: `"delivered"` (the job was parked waiting for
 * it and is due now), `"buffered"` (kept in the job's mailbox for a wait
 * to come, or for the wait after one that an earlier signal answers), `"finished"` (the job already ended: in the failed jobs or the
 * kept finished jobs; nothing stored), `"not-found"` (no such job; nothing
 * stored).
 */
export type SignalOutcome = "delivered" | "buffered" | "finished" | "not-found";
