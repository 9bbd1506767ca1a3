/**
 * The middleware check between claim and start: the rules of every claimed
 * job that has middleware are checked in one store call (`acquire`), and a
 * job a rule refuses is held back, put back without using an attempt.
 *
 * @internal
 * @module
 */
import type { Clock } from "../clock.ts";
import type { PayloadCipher } from "../encryption.ts";
import { asError } from "../errors.ts";
import type { QueueEventTarget } from "../events.ts";
import { holdBack, outcomeOf } from "./outcomes.ts";
import {
  assertMiddleware,
  describeRules,
  type JobMiddleware,
  middlewareRequest,
} from "../middleware.ts";
import { openPayload } from "../payload.ts";
import { type JobRegistry, keptUntilChecked } from "../registry.ts";
import type { ClaimedJob, WorkerStore } from "../stores/store.ts";
import { spent } from "../stores/rows/spend_limits.ts";
import type { ResolvedWorkOptions } from "./work_options.ts";
import { type FinishedJob, STOP_MARGIN_MS } from "./attempts.ts";

/**
 * The default expiry of a job's `withoutOverlapping` lock, from its start:
 * past its timeout and the grace its handler gets to stop, the cap of an
 * attempt held for its handler (`STOP_MARGIN_MS`) twice over, so the lock
 * outlasts the hold however late the timeout's timer fired. It only ends
 * the lock of a worker that died holding it.
 */
export function lockExpiryMs(timeoutMs: number, graceMs: number): number {
  return timeoutMs + graceMs + 2 * STOP_MARGIN_MS;
}

/** What the middleware check needs. */
export interface MiddlewareCheckDeps {
  /** Where middleware locks and rate windows are taken. */
  readonly store: Pick<WorkerStore, "acquire">;
  /** The job definitions, for their middleware and timeouts. */
  readonly registry: JobRegistry;
  /** Source of stored times. */
  readonly clock: Clock;
  /** Source of jitter, for a middleware function that throws. */
  readonly random: () => number;
  /** Opens encrypted payloads for middleware; null without `APP_KEY`. */
  readonly cipher: PayloadCipher | null;
  /** Receives `queue:error` when the store cannot check middleware. */
  readonly events: Pick<QueueEventTarget, "emit">;
  /** Takes each job that may not start, to be settled with the next tick. */
  readonly settleLater: (finished: FinishedJob) => void;
}

/** Checks the middleware of claimed jobs. */
export class MiddlewareCheck {
  readonly #deps: MiddlewareCheckDeps;
  readonly #graceMs: number;
  readonly #pollMs: number;

  /** Overlap locks expire after a job's timeout plus `graceMs`; a failed check retries after `pollMs`. */
  constructor(deps: MiddlewareCheckDeps, options: Pick<ResolvedWorkOptions, "graceMs" | "pollMs">) {
    this.#deps = deps;
    this.#graceMs = options.graceMs;
    this.#pollMs = options.pollMs;
  }

  /**
   * Returns the claimed jobs that may start; those held back (or whose
   * middleware threw) go to `settleLater`.
   */
  async check(claimed: readonly ClaimedJob[]): Promise<ClaimedJob[]> {
    const { registry, clock, store, settleLater } = this.#deps;
    const now = clock.now();
    const guarded: { job: ClaimedJob; rules: readonly JobMiddleware[] }[] = [];
    const free: ClaimedJob[] = [];
    for (const job of claimed) {
      const definition = registry.get(job.name);
      // A job whose cancel was asked ends cancelled at its start, and one that spent its attempts
      // or crashes fails there, taking no lock: held back, it would come back and be held back
      // again while another job (or its own dead attempt) holds the lock, and its put-back would
      // lose why it fails (a worker that died).
      if (
        definition?.middleware === undefined || isCancelAsked(job) ||
        spent(job, { attempts: definition.maxAttempts, crashes: definition.maxCrashes })
      ) {
        free.push(job);
        continue;
      }
      let payload: unknown;
      try {
        payload = await openPayload(definition, job.payload, this.#deps.cipher);
      } catch {
        free.push(job); // its attempt fails at once with the same PayloadIntegrityError
        continue;
      }
      try {
        const rules = assertMiddleware(definition.middleware(payload), job.name);
        // With no rules, a job whose claim kept its key is let through by the store: its start
        // releases the key (`acquire`).
        if (rules.length === 0 && !keptUntilChecked(definition)) free.push(job);
        else guarded.push({ job, rules });
      } catch (error) {
        const outcome = outcomeOf(
          job,
          definition,
          { kind: "error", error: asError(error), permanent: false },
          now,
          this.#deps.random,
        );
        settleLater({ job, outcome, durationMs: 0 });
      }
    }
    if (guarded.length === 0) return free;
    let verdicts: (number | null)[];
    try {
      const expireMs = (job: ClaimedJob) =>
        lockExpiryMs(registry.get(job.name)!.timeoutMs, this.#graceMs);
      verdicts = await store.acquire(
        guarded.map(({ job, rules }) => middlewareRequest(job, rules, now, expireMs(job))),
        now,
      );
    } catch (error) {
      this.#deps.events.emit("queue:error", { error: asError(error), during: "middleware" });
      // Back after a poll, not at once: a store that keeps refusing must not spin the loop.
      const retryAt = now + this.#pollMs;
      for (const { job } of guarded) {
        const outcome = holdBack(job, now, retryAt, "middleware could not be checked");
        settleLater({ job, outcome, durationMs: 0 });
      }
      return free;
    }
    guarded.forEach(({ job, rules }, index) => {
      const retryAt = verdicts[index];
      if (retryAt === null || retryAt === undefined) free.push(job);
      else {
        const outcome = holdBack(job, now, retryAt, `held back by ${describeRules(rules)}`);
        settleLater({ job, outcome, durationMs: 0 });
      }
    });
    return free;
  }
}

/** Whether a cancel was asked of claimed `job` before this claim: its start cancels it. */
export function isCancelAsked(job: ClaimedJob): job is ClaimedJob & { cancelRequested: string } {
  return job.cancelRequested !== undefined && job.cancelRequested !== null;
}
