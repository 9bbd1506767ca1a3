/**
 * The metrics rollup by store, as on SQLite
 * (migrations/sqlite/0012_metrics_by_store.ts): `shard` joins the primary
 * key, so worker processes settling at once add to rows of their own
 * instead of waiting for each other's row lock.
 *
 * @module
 */

/** Number of this step; never reused, the same as SQLite's. */
export const version = 12;

/** Whether code of the step before keeps working on it (contract): the rollup's primary key gains shard: the upsert of code of step 11 (ON CONFLICT on minute, queue, name) no longer matches a key and fails every settle. */
export const kind = "contract";

/** The statements of this step. */
export const sql = `
ALTER TABLE job_metrics ADD COLUMN shard integer NOT NULL DEFAULT 0;
ALTER TABLE job_metrics DROP CONSTRAINT job_metrics_pkey;
ALTER TABLE job_metrics ADD PRIMARY KEY (minute, queue, name, shard);
ALTER TABLE job_metrics ALTER COLUMN shard DROP DEFAULT;
`;
