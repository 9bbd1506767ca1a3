/**
 * Job ids without SQLite's AUTOINCREMENT sequence. AUTOINCREMENT writes the
 * `sqlite_sequence` row on every insert: one more page in every dispatch's
 * commit, a third of a lone dispatch's cost (raw inserts into the store's
 * table: 23.7k/s with it, 33.4k/s without, the same run). Ids must still
 * never be used twice, since a finished job keeps its id in history and a
 * failed one in `failed_jobs`; SQLite's own choice without AUTOINCREMENT
 * (one more than the highest id in the table) would hand out again the id
 * of the newest job once it finished.
 *
 * So a new job takes one more than the highest of the table's ids and
 * `job_id_floor.floor`, and the trigger `jobs_keep_id_floor` raises the
 * floor to a job's id when the job leaves `jobs` as its newest row: a
 * deletion that leaves a newer row behind writes nothing. The floor starts
 * at the highest id the sequence handed out. Every insert into `jobs`
 * without an id of its own writes `{{newJobId}}` (`src/stores/sql/statement.ts`).
 *
 * SQLite cannot drop AUTOINCREMENT in place: the table is built anew, with
 * its rows and indexes as step 21 left them (step 22 does not touch it).
 * PostgreSQL's identity sequence costs no such write: it has no step 24.
 *
 * @module
 */
/** Number of this step; never reused. */
export const version = 24;

/** Whether code of the step before keeps working on it (contract): older code inserts jobs without an id, taking one more than the table's highest, which after the newest job finished is an id history already holds. */
export const kind = "contract";

/** The columns of `jobs` as step 21 left them, in their order. */
const columns = [
  "id",
  "queue",
  "name",
  "payload",
  "priority",
  "available_at",
  "token",
  "attempts",
  "crashes",
  "retry_until",
  "last_error",
  "created_at",
  "batch_id",
  "batch_member",
  "chain_id",
  "progress",
  "waited_ms",
  "keyed",
  "locked",
  "recovered",
  "cancel_requested",
  "awaited",
  "trace",
  "last_span",
  "claimed_ahead",
  "expire_at",
  "group_key",
  "group_limit",
  "group_ordered",
  "begun",
  "suspect",
  "flow_id",
  "flow_parents",
].join(", ");

/** The statements of this step. */
export const sql = `
CREATE TABLE jobs_without_sequence (
  id               INTEGER PRIMARY KEY,
  queue            TEXT    NOT NULL,
  name             TEXT    NOT NULL,
  payload          TEXT    NOT NULL,
  priority         INTEGER NOT NULL DEFAULT 0,
  available_at     INTEGER NOT NULL,
  token            INTEGER,
  attempts         INTEGER NOT NULL DEFAULT 0,
  crashes          INTEGER NOT NULL DEFAULT 0,
  retry_until      INTEGER,
  last_error       TEXT,
  created_at       INTEGER NOT NULL,
  batch_id         INTEGER,
  batch_member     INTEGER NOT NULL DEFAULT 0,
  chain_id         INTEGER,
  progress         REAL,
  waited_ms        INTEGER,
  keyed            INTEGER NOT NULL DEFAULT 0,
  locked           INTEGER NOT NULL DEFAULT 0,
  recovered        INTEGER NOT NULL DEFAULT 0,
  cancel_requested TEXT,
  awaited          INTEGER NOT NULL DEFAULT 0,
  trace            TEXT,
  last_span        TEXT,
  claimed_ahead    INTEGER NOT NULL DEFAULT 0,
  expire_at        INTEGER,
  group_key        TEXT,
  group_limit      INTEGER,
  group_ordered    INTEGER NOT NULL DEFAULT 0,
  begun            INTEGER NOT NULL DEFAULT 1,
  suspect          INTEGER NOT NULL DEFAULT 0,
  flow_id          INTEGER,
  flow_parents     TEXT
);
INSERT INTO jobs_without_sequence (${columns}) SELECT ${columns} FROM jobs;

CREATE TABLE job_id_floor (
  one   INTEGER PRIMARY KEY CHECK (one = 1),
  floor INTEGER NOT NULL
);
INSERT INTO job_id_floor (one, floor)
  SELECT 1, max(ifnull((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0),
    ifnull((SELECT max(id) FROM jobs), 0));

DROP TABLE jobs;
DELETE FROM sqlite_sequence WHERE name = 'jobs';
ALTER TABLE jobs_without_sequence RENAME TO jobs;

CREATE INDEX jobs_claim_order ON jobs (queue, priority DESC, available_at, group_key)
  WHERE group_key IS NULL;
CREATE INDEX jobs_group_due ON jobs (queue, name, group_key, available_at)
  WHERE group_key IS NOT NULL;
CREATE INDEX jobs_group_order ON jobs (queue, name, group_key, id)
  WHERE group_key IS NOT NULL AND group_ordered = 1;
CREATE INDEX jobs_batch ON jobs (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX jobs_chain ON jobs (chain_id) WHERE chain_id IS NOT NULL;

CREATE TRIGGER jobs_keep_id_floor AFTER DELETE ON jobs
  WHEN NOT EXISTS (SELECT 1 FROM jobs WHERE id > old.id)
BEGIN
  UPDATE job_id_floor SET floor = old.id WHERE floor < old.id;
END;
`;
