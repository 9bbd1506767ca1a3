/**
 * The metrics rollup, the workers seen, and how long each claimed job
 * waited, as on SQLite (migrations/sqlite/0004_metrics_and_workers.ts).
 *
 * @module
 */

/** Number of this step; never reused, the same as SQLite's. */
export const version = 4;

/** Whether code of the step before keeps working on it (expand): a nullable column and new tables that code of step 3 never reads; its workers only go unlisted. */
export const kind = "expand";

const buckets = Array.from(
  { length: 17 },
  (_, index) => `  runtime_b${index} bigint NOT NULL DEFAULT 0,`,
).join("\n");

/** The statements of this step. */
export const sql = `
ALTER TABLE jobs ADD COLUMN waited_ms bigint;

CREATE TABLE job_metrics (
  minute      bigint NOT NULL,
  queue       text   NOT NULL,
  name        text   NOT NULL,
  completed   bigint NOT NULL DEFAULT 0,
  failed      bigint NOT NULL DEFAULT 0,
  retried     bigint NOT NULL DEFAULT 0,
  runtime_ms  double precision NOT NULL DEFAULT 0,
  wait_ms     double precision NOT NULL DEFAULT 0,
${buckets}
  PRIMARY KEY (minute, queue, name)
);

CREATE TABLE workers (
  id           text    PRIMARY KEY,
  host         text    NOT NULL,
  pid          integer NOT NULL,
  queues       text    NOT NULL,
  concurrency  integer NOT NULL,
  started_at   bigint  NOT NULL,
  last_seen_at bigint  NOT NULL,
  running      integer NOT NULL
);
CREATE INDEX workers_last_seen_at ON workers (last_seen_at);
`;
