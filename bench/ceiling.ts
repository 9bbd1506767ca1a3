/**
 * The raw SQLite ceiling: what this machine does with plain `node:sqlite`
 * statements on the same schema and pragmas as the store, with none of the
 * queue's code in the way, and the same on a minimal queue table (an id, the
 * queue, the payload, the due time and the claim's token, with one claim
 * index): what a queue that stores nothing more pays. Every figure of ours is
 * read against these.
 *
 * @module
 */
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import { migrations, STEPS_RECORD } from "../migrations/sqlite/mod.ts";
import { type Measurement, measureRate } from "./measurement.ts";
import { withTempDatabase } from "./temp_database.ts";

/** Jobs per transaction in the batched ceiling. */
export const CEILING_BATCH_SIZE = 50;

/** The store's busy wait per statement (`_sqlite_connection.ts`), in ms. */
const BUSY_TIMEOUT_MS = 50;
const LEASE_MS = 30_000;
const QUEUE = "default";
const NAME = "bench-noop";

const INSERT =
  `INSERT INTO jobs (queue, name, payload, priority, available_at, retry_until, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`;
/**
 * A claim as the store makes one: due rows of a queue in claim-index order get a token and a
 * lease (the store names the index, as here: `jobs_due_time` would make the planner sort; the
 * index holds jobs without a group only, so the claim says so).
 */
const CLAIM = `UPDATE jobs SET token = ?, available_at = ?, attempts = attempts + 1
  WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_claim_order WHERE queue = ? AND group_key IS NULL
    AND available_at <= ? ORDER BY priority DESC, available_at LIMIT ?)
  RETURNING id, payload`;
/** A completion as the store settles one: fenced by the claim's token. */
const DELETE = "DELETE FROM jobs WHERE id = ? AND token = ?";

/** The minimal queue table: what any queue stores, with the one index its claim walks. */
const MINIMAL_SCHEMA = `CREATE TABLE jobs (
  id           INTEGER PRIMARY KEY,
  queue        TEXT    NOT NULL,
  payload      TEXT    NOT NULL,
  available_at INTEGER NOT NULL,
  token        INTEGER
);
CREATE INDEX jobs_claim ON jobs (queue, available_at);`;
const MINIMAL_INSERT =
  "INSERT INTO jobs (queue, payload, available_at) VALUES (?, ?, ?) RETURNING id";
const MINIMAL_CLAIM = `UPDATE jobs SET token = ?, available_at = ?
  WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_claim WHERE queue = ? AND available_at <= ?
    ORDER BY available_at LIMIT ?)
  RETURNING id, payload`;

/** A table the raw statements run on. */
interface RawSchema {
  /** Creates the table and its indexes on a fresh connection. */
  create(db: DatabaseSync): void;
  readonly insert: string;
  /** Binds one insert: the job's index and the time. */
  readonly insertParams: (index: number, now: number) => SQLInputValue[];
  /** Parameters: token, lease end, queue, now, limit. */
  readonly claim: string;
}

/** The store's own schema, as its migrations make it (on the steps' record, which step 18 alters). */
const STORE_TABLE: RawSchema = {
  create: (db) => {
    db.exec(STEPS_RECORD);
    for (const migration of migrations) db.exec(migration.sql);
  },
  insert: INSERT,
  insertParams: (index, now) => [QUEUE, NAME, `{"n":${index}}`, 0, now, null, now],
  claim: CLAIM,
};

/** The minimal queue table. */
const MINIMAL_TABLE: RawSchema = {
  create: (db) => db.exec(MINIMAL_SCHEMA),
  insert: MINIMAL_INSERT,
  insertParams: (index, now) => [QUEUE, `{"n":${index}}`, now],
  claim: MINIMAL_CLAIM,
};

/**
 * The minimal queue table on a connection that never checkpoints (`wal_autocheckpoint = 0`): its
 * commits only append to the WAL, the cheapest commit of one row there is. The store's own
 * checkpoints run on a thread beside its commits; a raw loop's run inside them.
 */
const MINIMAL_TABLE_NO_CHECKPOINT: RawSchema = {
  ...MINIMAL_TABLE,
  create: (db) => {
    db.exec("PRAGMA wal_autocheckpoint = 0");
    MINIMAL_TABLE.create(db);
  },
};

/** Statements of one raw connection, prepared once. */
interface RawStatements {
  readonly db: DatabaseSync;
  readonly schema: RawSchema;
  readonly insert: StatementSync;
  readonly claim: StatementSync;
  readonly remove: StatementSync;
}

/**
 * The raw measurements: autocommit insert, one-transaction insert, the
 * insert + claim + delete cycle unbatched and in batches of
 * {@linkcode CEILING_BATCH_SIZE}, and the drain of pre-inserted rows: one
 * claim + delete per commit, and {@linkcode CEILING_BATCH_SIZE} claimed and
 * deleted per transaction (the drain ceiling our drains are read against).
 * The batched cycle is the baseline of the others. The inserts and the
 * batched drain are measured on the minimal table too, and the autocommit
 * insert once more there on a connection that never checkpoints.
 */
export function ceilingMeasurements(): Measurement[] {
  return [
    {
      id: "raw-insert-autocommit",
      name: "raw autocommit insert",
      label: "raw SQLite: INSERT … RETURNING id, autocommit",
      baseline: "ceiling-batched",
      run: (jobs) => withRaw(jobs, jobs, insertAutocommit),
    },
    {
      id: "raw-insert-autocommit-minimal",
      name: "raw autocommit insert, minimal table",
      label: "raw SQLite: INSERT … RETURNING id, autocommit, minimal queue table",
      baseline: "ceiling-batched",
      run: (jobs) => withRaw(jobs, jobs, insertAutocommit, undefined, MINIMAL_TABLE),
    },
    {
      id: "raw-insert-autocommit-minimal-no-checkpoint",
      name: "raw autocommit insert, minimal table, no checkpoint",
      label: "raw SQLite: INSERT … RETURNING id, autocommit, minimal queue table, never " +
        "checkpointed (the ceiling of one row per commit)",
      baseline: "ceiling-batched",
      run: (jobs) => withRaw(jobs, jobs, insertAutocommit, undefined, MINIMAL_TABLE_NO_CHECKPOINT),
    },
    {
      id: "raw-insert-one-transaction",
      name: "raw one-transaction insert",
      label: "raw SQLite: INSERT … RETURNING id, all in one transaction",
      baseline: "ceiling-batched",
      run: (jobs) => withRaw(jobs, jobs, insertInOneTransaction),
    },
    {
      id: "raw-insert-one-transaction-minimal",
      name: "raw one-transaction insert, minimal table",
      label: "raw SQLite: INSERT … RETURNING id, all in one transaction, minimal queue table",
      baseline: "ceiling-batched",
      run: (jobs) => withRaw(jobs, jobs, insertInOneTransaction, undefined, MINIMAL_TABLE),
    },
    {
      id: "ceiling-unbatched",
      name: "unbatched ceiling",
      label: "raw SQLite ceiling: insert + claim + delete, each autocommit",
      baseline: "ceiling-batched",
      run: (jobs) => withRaw(jobs, 0, cycleUnbatched),
    },
    {
      id: "ceiling-batched",
      name: "batched ceiling",
      label: `raw SQLite ceiling: insert + claim + delete, ${CEILING_BATCH_SIZE} per transaction`,
      baseline: "ceiling-batched",
      run: (jobs) => withRaw(jobs, 0, cycleBatched),
    },
    {
      id: "raw-drain-unbatched",
      name: "raw drain, 1 per commit",
      label: "raw SQLite drain of pre-inserted rows: claim 1 + delete 1 per commit",
      baseline: "raw-drain-batched",
      run: (jobs) => withRaw(jobs, 0, drainUnbatched, insertInOneTransaction),
    },
    {
      id: "raw-drain-batched",
      name: "drain ceiling",
      label:
        `raw SQLite drain ceiling: pre-inserted rows, claim ${CEILING_BATCH_SIZE} + delete ${CEILING_BATCH_SIZE} per transaction`,
      baseline: "ceiling-batched",
      run: (jobs) => withRaw(jobs, 0, drainBatched, insertInOneTransaction),
    },
    {
      id: "raw-drain-batched-minimal",
      name: "drain ceiling, minimal table",
      label:
        `raw SQLite drain ceiling, minimal queue table: claim ${CEILING_BATCH_SIZE} + delete ${CEILING_BATCH_SIZE} per transaction`,
      baseline: "ceiling-batched",
      run: (jobs) => withRaw(jobs, 0, drainBatched, insertInOneTransaction, MINIMAL_TABLE),
    },
  ];
}

/**
 * Opens a raw connection on a fresh file with `schema` (the store's by
 * default), runs `prepare` untimed, times `work`, and checks that the table
 * then holds `left` jobs: a ceiling that skipped work would flatter it.
 */
function withRaw(
  jobs: number,
  left: number,
  work: (raw: RawStatements, jobs: number) => void,
  prepare?: (raw: RawStatements, jobs: number) => void,
  schema: RawSchema = STORE_TABLE,
): Promise<number> {
  return withTempDatabase(async (path) => {
    const db = openRaw(path, schema);
    try {
      const raw = {
        db,
        schema,
        insert: db.prepare(schema.insert),
        claim: db.prepare(schema.claim),
        remove: db.prepare(DELETE),
      };
      prepare?.(raw, jobs);
      const rate = await measureRate(jobs, () => work(raw, jobs));
      const count = Number(db.prepare("SELECT COUNT(*) AS n FROM jobs").get()!.n);
      if (count !== left) {
        throw new Error(`The ceiling left ${count} jobs in the table instead of ${left}`);
      }
      return rate;
    } finally {
      db.close();
    }
  });
}

/** A connection with the store's pragmas and `schema`. */
function openRaw(path: string, schema: RawSchema): DatabaseSync {
  const db = new DatabaseSync(path, { timeout: BUSY_TIMEOUT_MS });
  try {
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = NORMAL");
    db.exec("PRAGMA foreign_keys = ON");
    schema.create(db);
    assertClaimWalksIndex(db, schema.claim);
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/** A ceiling whose claim sorts would be a false floor: refuse to measure it. */
function assertClaimWalksIndex(db: DatabaseSync, claim: string): void {
  const plan = db.prepare(`EXPLAIN QUERY PLAN ${claim}`).all(0, 0, QUEUE, 0, 1)
    .map((row) => String(row.detail));
  if (plan.some((detail) => detail.includes("TEMP B-TREE"))) {
    throw new Error(`The ceiling's claim sorts instead of walking an index: ${plan.join("; ")}`);
  }
}

/**
 * One insert, read with `all()` as the store reads its writes. `get()` leaves
 * the statement before SQLite's end-of-statement work: outside a transaction,
 * besides swallowing the commit's error, it skips the WAL's autocheckpoint, so
 * the WAL grows without bound (over 350 MB for 20,000 rows) and its write-back
 * (and the checkpoint's fsyncs) lands in `close()`, outside the timing: a
 * ceiling no correct writer can reach.
 */
function insertOne(raw: RawStatements, index: number, now: number): void {
  raw.insert.all(...raw.schema.insertParams(index, now));
}

/** One commit per row. */
function insertAutocommit(raw: RawStatements, jobs: number): void {
  for (let index = 0; index < jobs; index++) insertOne(raw, index, Date.now());
}

function insertInOneTransaction(raw: RawStatements, jobs: number): void {
  raw.db.exec("BEGIN IMMEDIATE");
  const now = Date.now();
  for (let index = 0; index < jobs; index++) insertOne(raw, index, now);
  raw.db.exec("COMMIT");
}

function cycleUnbatched(raw: RawStatements, jobs: number): void {
  for (let index = 0; index < jobs; index++) {
    const now = Date.now();
    insertOne(raw, index, now);
    const token = index + 1;
    for (const row of raw.claim.all(token, now + LEASE_MS, QUEUE, now, 1)) {
      raw.remove.run(Number(row.id), token);
    }
  }
}

function cycleBatched(raw: RawStatements, jobs: number): void {
  for (let first = 0; first < jobs; first += CEILING_BATCH_SIZE) {
    const size = Math.min(CEILING_BATCH_SIZE, jobs - first);
    const now = Date.now();
    const token = first + 1;
    raw.db.exec("BEGIN IMMEDIATE");
    for (let index = first; index < first + size; index++) insertOne(raw, index, now);
    for (const row of raw.claim.all(token, now + LEASE_MS, QUEUE, now, size)) {
      raw.remove.run(Number(row.id), token);
    }
    raw.db.exec("COMMIT");
  }
}

/** One transaction per job: claim it, delete it, commit (what a worker that commits per job does). */
function drainUnbatched(raw: RawStatements, jobs: number): void {
  for (let token = 1; token <= jobs; token++) {
    const now = Date.now();
    raw.db.exec("BEGIN IMMEDIATE");
    for (const row of raw.claim.all(token, now + LEASE_MS, QUEUE, now, 1)) {
      raw.remove.run(Number(row.id), token);
    }
    raw.db.exec("COMMIT");
  }
}

/** {@linkcode CEILING_BATCH_SIZE} claimed and deleted per transaction. */
function drainBatched(raw: RawStatements, jobs: number): void {
  for (let first = 0; first < jobs; first += CEILING_BATCH_SIZE) {
    const now = Date.now();
    const token = first + 1;
    raw.db.exec("BEGIN IMMEDIATE");
    for (const row of raw.claim.all(token, now + LEASE_MS, QUEUE, now, CEILING_BATCH_SIZE)) {
      raw.remove.run(Number(row.id), token);
    }
    raw.db.exec("COMMIT");
  }
}
