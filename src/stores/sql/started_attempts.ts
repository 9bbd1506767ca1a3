/**
 * A job row's attempts as the queue counts them: the starts of its handler
 * (DESIGN: an attempt is one start of the handler). The `attempts` column
 * counts what claims counted, which differs in two cases:
 *
 * - A claim counts the attempt it takes a job for at once, also for a job
 *   it holds ahead (`claimed_ahead` 1), so that a takeover after its worker
 *   died charges it nothing and a put-back gives it back; until its start
 *   is confirmed, that attempt is not one.
 * - A park (a sleep or a wait) gives its attempt back, so that the claim
 *   that resumes the run counts it again (`ctx.attempt` stays where it
 *   was); yet the run that parked started, and counts. The store keeps no
 *   mark of a park on the job (as `src/runner/park_resumes.ts` reads it):
 *   its memos tell. A job not running under a started claim whose last
 *   memo is a sleep or a wait recorded by the attempt after the ones
 *   counted parked there.
 *
 * Every read of an unfinished job's attempts (`result()`, `jobs()`) and the
 * kept record of a job removed unfinished use this one rule.
 *
 * @internal
 * @module
 */

/**
 * The attempts of job row `row` (a table or alias of `jobs`) as an SQL
 * expression, `unstarted` being an expression that is 1 when the claim
 * holding it counted an attempt its handler has not started (held ahead,
 * or given back by its settle) and 0 otherwise.
 */
export function startedAttempts(row: string, unstarted: string): string {
  const counted = `${row}.attempts - ${unstarted}`;
  return `(${counted} + CASE WHEN ${row}.token IS NOT NULL AND ${unstarted} = 0 THEN 0
    WHEN EXISTS (SELECT 1 FROM job_steps parked WHERE parked.job_id = ${row}.id
      AND parked.kind <> 'step' AND parked.attempt = ${counted} + 1
      AND parked.seq = (SELECT MAX(memo.seq) FROM job_steps memo WHERE memo.job_id = ${row}.id))
    THEN 1 ELSE 0 END)`;
}

/** {@linkcode startedAttempts} of a row of `jobs` as it stands (a job held ahead has not started). */
export const STARTED_ATTEMPTS: string = startedAttempts("jobs", "jobs.claimed_ahead");
