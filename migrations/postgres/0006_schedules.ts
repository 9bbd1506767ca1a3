/**
 * Schedules, as SQLite's step 6 with `bigint` times and ids. `schedules` keeps each schedule the jobs module defines (synced
 * by `Queue.open`): its rule, policies, the next slot to fire, whether it is
 * paused, and the last slot fired with its job. `schedule_runs` records each
 * job a schedule stored, by job id, with the slot it was fired for: the
 * unique index on `(schedule, slot)` of the slots it fired (not the manual
 * runs) is what makes a slot exactly one job across processes, and the job id
 * gives the job its `ctx.scheduled`.
 *
 * @module
 */

/** Number of the step. */
export const version = 6;

/** Whether code of the step before keeps working on it (expand): new tables: code of step 5 fires no schedule and reads none. */
export const kind = "expand";

/** The statements. */
export const sql = `
CREATE TABLE schedules (
  name          TEXT    PRIMARY KEY,
  job           TEXT    NOT NULL,
  queue         TEXT    NOT NULL,
  cron          TEXT,
  every_ms      BIGINT,
  timezone      TEXT    NOT NULL,
  missed        TEXT    NOT NULL,
  max_catch_up  BIGINT  NOT NULL,
  overlap       TEXT    NOT NULL,
  jitter_ms     BIGINT  NOT NULL,
  definition    TEXT    NOT NULL,
  next_slot     BIGINT,
  paused        INTEGER NOT NULL DEFAULT 0,
  last_slot     BIGINT,
  last_job_id   BIGINT,
  last_fired_at BIGINT,
  updated_at    BIGINT  NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_slot) WHERE paused = 0;

CREATE TABLE schedule_runs (
  job_id   BIGINT  PRIMARY KEY,
  schedule TEXT    NOT NULL,
  slot     BIGINT  NOT NULL,
  manual   INTEGER NOT NULL DEFAULT 0,
  fired_at BIGINT  NOT NULL
);
CREATE UNIQUE INDEX schedule_runs_slot ON schedule_runs (schedule, slot) WHERE manual = 0;
`;
