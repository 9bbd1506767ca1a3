/**
 * Settling a tick's jobs one by one after the database refused them
 * together for a reason that is not an outage: every job it accepts on its
 * own is settled; a job it still refuses (a poisoned row: a trigger, a
 * constraint) fails with the database's error, or, when even that is
 * refused, is put back with it as its last error, its attempt counted, so
 * one row never jams the worker. A job the database refuses every way is
 * left to its lease.
 *
 * @internal
 * @module
 */
import { asError } from "../errors.ts";
import { failWith, type Outcome, storedError } from "./outcomes.ts";
import type { Settlement, WorkerStore } from "../stores/store.ts";
import type { FinishedJob } from "./attempts.ts";
import { isStoreOutage } from "../stores/store_outage.ts";

/** A job the database refused to settle on its own. */
export interface PoisonedSettle {
  /** The attempt whose settle was refused. */
  readonly finished: FinishedJob;
  /** What the database said. */
  readonly error: Error;
  /** The settle written instead (a failure, or a put-back), or null when none was accepted. */
  readonly instead: FinishedJob | null;
}

/** How settling one by one went. */
export interface SettledApart {
  /** Jobs settled as they finished. */
  readonly settled: FinishedJob[];
  /** Jobs not settled because the database stopped taking writes meanwhile: keep and retry. */
  readonly kept: FinishedJob[];
  /** The outage that stopped them, or null. */
  readonly outage: Error | null;
  /** Jobs the database refused on their own. */
  readonly poisoned: PoisonedSettle[];
}

/** Longest a poisoned job that could only be put back waits before it is due again. */
const MAX_POISON_DELAY_MS = 60_000;

/**
 * Settles `finished` one at a time (each its own transaction, no claim);
 * `settlementOf` gives each job's settlement, `now` the time of the
 * replacements written for poisoned ones.
 */
export async function settleApart(
  store: WorkerStore,
  finished: readonly FinishedJob[],
  settlementOf: (finished: FinishedJob) => Settlement,
  now: number,
): Promise<SettledApart> {
  const settled: FinishedJob[] = [];
  const kept: FinishedJob[] = [];
  const poisoned: PoisonedSettle[] = [];
  let outage: Error | null = null;
  for (const each of finished) {
    if (outage !== null) {
      kept.push(each);
      continue;
    }
    const error = await settleOne(store, settlementOf(each), () => settled.push(each));
    if (error === null) continue;
    if (isStoreOutage(error)) {
      outage = error;
      kept.push(each);
      continue;
    }
    const written: FinishedJob[] = [];
    for (const outcome of replacements(each, error, now)) {
      const replacement: FinishedJob = { job: each.job, outcome, durationMs: 0 };
      const refused = await settleOne(store, outcome.settlement, () => written.push(replacement));
      if (refused === null) break;
      if (isStoreOutage(refused)) {
        outage = refused;
        break;
      }
    }
    const instead = written[0] ?? null;
    if (instead === null && outage !== null) kept.push(each);
    else poisoned.push({ finished: each, error, instead });
  }
  return { settled, kept, outage, poisoned };
}

/** Writes one settlement; calls `applied` when it changed its job; the error, or null. */
async function settleOne(
  store: WorkerStore,
  settlement: Settlement,
  applied: () => void,
): Promise<Error | null> {
  try {
    const result = await store.settle([settlement]);
    if (result.applied[0]) applied();
    return null;
  } catch (error) {
    return asError(error);
  }
}

/**
 * What to write instead of a refused settle, in order: a failure naming the
 * database's error (unless the refused settle was already one), then a
 * put-back that counts the attempt, due after a delay that doubles with
 * each attempt.
 */
function replacements({ job, outcome }: FinishedJob, error: Error, now: number): Outcome[] {
  const refusal = new Error(
    `Cannot settle job ${job.id}: the database refused it: ${error.message}`,
    {
      cause: error,
    },
  );
  const delayMs = Math.min(MAX_POISON_DELAY_MS, 1_000 * 2 ** Math.max(0, job.attempts - 1));
  const putBack: Outcome = {
    kind: "retry",
    error: refusal,
    delayMs,
    settlement: {
      kind: "release",
      id: job.id,
      token: job.token,
      at: now,
      availableAt: now + delayMs,
      error: storedError(refusal).message,
      refundAttempt: false,
    },
  };
  return outcome.kind === "fail" ? [putBack] : [failWith(job, refusal, now), putBack];
}
