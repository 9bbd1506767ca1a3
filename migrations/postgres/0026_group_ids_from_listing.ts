/**
 * Group ids given from the group's listing, as SQLite's step 26 says
 * (migrations/sqlite/0026_group_ids_from_listing.ts): step 25's
 * `jobs_take_group_id()`, a row trigger on every insert into `jobs`, is
 * dropped; `job_groups_give_id()` gives a group's id to its jobs that have
 * none when the group is listed, anew or again.
 *
 * Code of step 24, a retry and a move's import insert a grouped job
 * without a group id and list its group after it, in the same transaction:
 * the listing locks the group's row (or inserts it) and takes the id to the
 * job, as step 25's trigger did before the job was written. A claim that
 * found the group empty and drops it either goes first (the listing then
 * inserts the group anew, with a new id) or sees the version the listing
 * bumped and keeps the group.
 *
 * @module
 */
export { kind, version } from "../sqlite/0026_group_ids_from_listing.ts";

/** The statements. */
export const sql = `
DROP TRIGGER jobs_take_group_id ON jobs;
DROP FUNCTION jobs_take_group_id();
CREATE INDEX jobs_group_unnumbered ON jobs (queue, name, group_key)
  WHERE group_key IS NOT NULL AND group_id IS NULL;

CREATE FUNCTION job_groups_give_id() RETURNS trigger LANGUAGE plpgsql AS $give$
BEGIN
  UPDATE jobs SET group_id = NEW.id
  WHERE queue = NEW.queue AND name = NEW.name AND group_key = NEW.group_key
    AND group_id IS NULL;
  RETURN NULL;
END
$give$;
CREATE TRIGGER job_groups_give_id AFTER INSERT OR UPDATE OF version ON job_groups FOR EACH ROW
  EXECUTE FUNCTION job_groups_give_id();
`;
