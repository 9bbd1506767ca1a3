/**
 * What a job may spend before it fails, and the two questions asked of it:
 * has a claimed job spent it already, and would one more worker death
 * spend it. The worker asks the first before it starts one (and a claim of
 * a batch job before it gives it back), the second before it leaves a
 * success to be written with its group.
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

/**
 * Whether one worker death while this claim holds the job would spend it
 * (its next claim counts one more attempt and one more crash), though it
 * has not spent it yet.
 */
export function oneDeathSpends(job: Spending, limits: SpendLimits): boolean {
  return !spent(job, limits) &&
    spent({ attempts: job.attempts + 1, crashes: job.crashes + 1 }, limits);
}
