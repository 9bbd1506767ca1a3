/**
 * A job's result: dispatching and awaiting the output (`dispatchAndWait`),
 * and reading the state, output or error of any job by id (`result`). A
 * stored output is decoded (and opened with the queue's key) here; a failed
 * or cancelled job's end is thrown as the error the caller awaits.
 *
 * @internal
 * @module
 */
import { optionBag } from "../option_bags.ts";
import type { Clock } from "../clock.ts";
import type { Dispatch, StoreTarget } from "../dispatch/dispatch.ts";
import type { JobRows } from "../dispatch/job_rows.ts";
import { runNow } from "../dispatch/run_now.ts";
import type { PayloadCipher } from "../encryption.ts";
import { asError, JobCancelledError } from "../errors.ts";
import type { QueueEventTarget } from "../events.ts";
import type { Executor } from "../executors/executor.ts";
import type { JobDefinition, OutputOf, PayloadOf } from "../job.ts";
import type { JobRegistry } from "../registry.ts";
import { decodeOutput, isEncryptedOutput, OUTPUT_WITHHELD_NO_KEY } from "../output.ts";
import type { JobControlStore, JobResultRow, WorkerStore } from "../stores/store.ts";
import { ResultWaiters } from "./await_result.ts";
import { untilAborted } from "../stores/close_wait.ts";
import { isPassingOutage } from "../stores/store_outage.ts";
import {
  DISPATCH_AND_WAIT_OPTIONS,
  type DispatchAndWaitOptions,
  type JobResult,
  storedErrorToError,
  waitTimeoutMs,
} from "./job_control.ts";
import { assertId } from "./listing.ts";

/** What reading and awaiting results uses. */
export interface JobResultsParts {
  /** Where results are read and awaited jobs marked, and whose writes wake the waits. */
  readonly store:
    & Pick<JobControlStore, "result" | "results" | "markAwaited">
    & Pick<WorkerStore, "watch">;
  /** Source of the time results are read at. */
  readonly clock: Clock;
  /** This process's job events (its own workers' settles). */
  readonly events: QueueEventTarget;
  /** The jobs this process defines: an output of one defined `encrypted` must be sealed. */
  readonly registry: Pick<JobRegistry, "get">;
  /** Opens encrypted outputs; null without `APP_KEY`. */
  readonly cipher: PayloadCipher | null;
  /** Builds the row an inline queue runs at once. */
  readonly jobRows: JobRows;
  /** Runs a job at once in this isolate (an inline queue). */
  readonly executor: Pick<Executor, "run">;
  /** Stores the job to await. */
  readonly dispatch: Dispatch<StoreTarget>;
  /** An inline queue runs the job at dispatch; any other stores it. */
  readonly inline: boolean;
  /** Wakes the queue's workers: a job may be due now. */
  readonly notify: () => void;
}

/** Results of one queue's jobs. */
export class JobResults {
  readonly #parts: JobResultsParts;
  readonly #waiters: ResultWaiters;

  /** Results on `parts`. */
  constructor(parts: JobResultsParts) {
    this.#parts = parts;
    this.#waiters = new ResultWaiters(parts);
  }

  /** Dispatches `job` and resolves with its output once it completes, or rejects with how it ended. */
  async dispatchAndWait<J extends JobDefinition>(
    job: J,
    payload: PayloadOf<J>,
    options: DispatchAndWaitOptions | undefined,
  ): Promise<OutputOf<J>> {
    const { cipher } = this.#parts;
    const given = optionBag(options, "dispatchAndWait", DISPATCH_AND_WAIT_OPTIONS);
    const timeoutMs = waitTimeoutMs(given);
    const { timeoutMs: _timeout, signal, ...dispatchOptions } = given ?? {};
    // Aborted already: nothing is dispatched, as fetch() sends nothing.
    signal?.throwIfAborted();
    if (this.#parts.inline) {
      const [row] = await this.#parts.jobRows.rows(job, [payload], dispatchOptions);
      const output = await runNow(this.#parts.executor, job, row!);
      return (output === null ? undefined : await decodeOutput(job, output, cipher)) as OutputOf<J>;
    }
    // timeoutMs counts from this call: a dispatch held up (a stalled server, a lock) spends it.
    const calledAt = performance.now();
    const stored = (async () => {
      const id = await this.#parts.dispatch.dispatch(job, payload, dispatchOptions);
      await this.#markAwaited(id);
      return id;
    })();
    // An abort meanwhile rejects at once, as fetch() does; the job may be stored all the same.
    const id = await (signal === undefined ? stored : untilAborted(stored, signal));
    this.#parts.notify(); // a claim that ran while the mark held the row skipped it
    const row = await this.#waiters.wait(id, timeoutMs, signal, performance.now() - calledAt);
    return (await this.#output(id, row)) as OutputOf<J>;
  }

  /**
   * Marks job `id` awaited, so the settle that ends it wakes the waits at
   * once. The job is stored by then: a mark the store cannot make for now
   * (an outage, a reply lost to a cut connection) is reported as
   * `queue:error` and the wait goes on without it, finding the job's end
   * with its once-a-second read; rejecting would have a caller that retries
   * run the job twice.
   */
  async #markAwaited(id: number): Promise<void> {
    try {
      await this.#parts.store.markAwaited(id);
    } catch (error) {
      if (!isPassingOutage(error)) throw error;
      this.#parts.events.emit("queue:error", {
        error: asError(error),
        during: `marking job ${id} awaited`,
      });
    }
  }

  /** The state, output or error of job `id`, or null when no trace of it is kept. */
  async result(id: number): Promise<JobResult | null> {
    const { cipher } = this.#parts;
    const row = await this.#parts.store.result(assertId(id), this.#parts.clock.now());
    if (row === null) return null;
    const output = row.state !== "completed" || row.output === null
      ? {}
      : isEncryptedOutput(row.output) && cipher === null
      ? { outputWithheld: OUTPUT_WITHHELD_NO_KEY }
      : { output: await decodeOutput(this.#job(row.name), row.output, cipher) };
    const error = row.error === null ? {} : { error: row.error };
    return { state: row.state, attempts: row.attempts, ...output, ...error };
  }

  async #output(id: number, row: JobResultRow): Promise<unknown> {
    if (row.state === "failed") throw storedErrorToError(row.error ?? "Error: failed");
    if (row.state === "cancelled" || row.state === "expired") {
      throw new JobCancelledError(id, row.name, row.error ?? "cancelled");
    }
    const { cipher } = this.#parts;
    return row.output === null
      ? undefined
      : await decodeOutput(this.#job(row.name), row.output, cipher);
  }

  /** Job `name` as this process defines it, or as a plain job when it does not. */
  #job(name: string): { readonly name: string; readonly encrypted: boolean } {
    return { name, encrypted: this.#parts.registry.get(name)?.encrypted ?? false };
  }
}
