/**
 * What a job holds, as columns its settle reads, and one word for follow-ups.
 *
 * `jobs.keyed` says whether the job holds a unique or debounce key in
 * `job_keys` (0 none, 1 until it succeeds or fails for good, 2 until it
 * starts), and `jobs.locked` whether its running attempt took middleware
 * locks in `job_locks` (1, reset by each claim). The settle releases keys
 * and locks only for the jobs whose columns say so, instead of looking for
 * them after every job. Rows already holding keys or locks are marked.
 * `jobs.recovered` is set by each claim: 1 when it took over an expired
 * lease (the last worker died), so that state is a column rather than a
 * matched error text. `workers.names` lists the job names each worker's
 * process knows (the only jobs it claims), so a due job that no live worker
 * knows can be shown.
 *
 * `held_jobs` becomes `waiting_jobs`: chain links and batch callbacks wait
 * there for the outcome that queues them ("held" now means only a job that
 * middleware put back).
 *
 * @module
 */

/** Number of the step. */
export const version = 5;

/** Whether code of the step before keeps working on it (contract): it renames held_jobs, which code of step 4 writes and reads for every chain and batch, and the keys that code takes are not marked in the new jobs.keyed, so newer code never releases them. */
export const kind = "contract";

/** The statements. */
export const sql = `
ALTER TABLE jobs ADD COLUMN keyed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN locked INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN recovered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN names TEXT NOT NULL DEFAULT '[]';
UPDATE jobs SET keyed = CASE WHEN EXISTS (SELECT 1 FROM job_keys k
    WHERE k.job_id = jobs.id AND k.release_on_start = 1) THEN 2 ELSE 1 END
  WHERE id IN (SELECT job_id FROM job_keys);
UPDATE jobs SET locked = 1 WHERE id IN (SELECT job_id FROM job_locks);

ALTER TABLE held_jobs RENAME TO waiting_jobs;
DROP INDEX held_jobs_chain;
DROP INDEX held_jobs_batch;
CREATE INDEX waiting_jobs_chain ON waiting_jobs (chain_id, role, position)
  WHERE chain_id IS NOT NULL;
CREATE INDEX waiting_jobs_batch ON waiting_jobs (batch_id, role) WHERE batch_id IS NOT NULL;
`;
