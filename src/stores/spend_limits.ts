/**
 * What a job may spend before it fails, and the question asked of it: has
 * a claimed job spent it already. The worker asks it before it starts one;
 * a claim asks it of a batch job before it gives it back.
 *
 * @module
 */

/** What a job may spend before it fails: its definition's `maxAttempts` and `maxCrashes`. */
export interface SpendLimits {
  /** Most starts of its handler. */
  readonly attempts: number;
  /** Most worker deaths while it is leased. */
  readonly crashes: number;
}

/** A claimed job's spending: `attempts` counts this claim, `crashes` every death so far. */
interface Spending {
  readonly attempts: number;
  readonly crashes: number;
}

/** Whether a claimed job has been leased by as many workers that died as it may. */
export function crashesSpent(job: Spending, limits: SpendLimits): boolean {
  return job.crashes >= limits.crashes;
}

/** Whether a claimed job's handler has started as often as it may (this claim not counted). */
export function attemptsSpent(job: Spending, limits: SpendLimits): boolean {
  return job.attempts - 1 >= limits.attempts;
}

/** Whether a claimed job has spent its crashes or its attempts: it fails without starting. */
export function spent(job: Spending, limits: SpendLimits): boolean {
  return crashesSpent(job, limits) || attemptsSpent(job, limits);
}
