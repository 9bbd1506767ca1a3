/**
 * The raw PostgreSQL ceiling: what this server does through the same driver
 * (`postgres`), on the store's schema and with the same durability settings
 * (the server's defaults, which the store does not change), with none of
 * the queue's code in the way. Every PostgreSQL figure of ours is read
 * against these.
 *
 * @module
 */
import { migrations, STEPS_RECORD } from "../migrations/postgres/mod.ts";
import { CEILING_BATCH_SIZE } from "./ceiling.ts";
import { type Measurement, measureRate } from "./measurement.ts";
import { connectRaw, type RawSql, type RawTransaction, withTempSchema } from "./postgres_schema.ts";
import type { PostgresSizes } from "./postgres_sizes.ts";

const LEASE_MS = 30_000;
const QUEUE = "default";
const NAME = "bench-noop";

const INSERT_ONE =
  `INSERT INTO jobs (queue, name, payload, priority, available_at, retry_until, created_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`;
/** Many rows in one statement, one array per column: the fastest way the driver inserts many. */
const INSERT_MANY =
  `INSERT INTO jobs (queue, name, payload, priority, available_at, retry_until, created_at)
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::bigint[],
    $7::bigint[])
  RETURNING id`;
/** A claim as the store makes one: due rows of a queue in index order, locked with SKIP LOCKED. */
const CLAIM = `UPDATE jobs SET token = $1, available_at = $2, attempts = attempts + 1
  WHERE id IN (SELECT id FROM jobs WHERE queue = $3 AND available_at <= $4
    ORDER BY priority DESC, available_at LIMIT $5 FOR UPDATE SKIP LOCKED)
  RETURNING id, payload`;
/** Completions fenced by the claim's token, all of a claim in one statement. */
const DELETE_CLAIMED = "DELETE FROM jobs WHERE id = ANY($1::bigint[]) AND token = $2";

/**
 * The raw measurements: autocommit single-row inserts (`sizes.commitJobs`),
 * all rows in one transaction (`sizes.jobs`), and the insert + claim +
 * delete cycle in transactions of {@linkcode CEILING_BATCH_SIZE} (`sizes.jobs`),
 * the baseline of them all.
 */
export function postgresCeilingMeasurements(url: string, sizes: PostgresSizes): Measurement[] {
  const fixed = (jobs: number) => ({
    fixedJobs: jobs,
    fixedWarmupJobs: Math.max(1, Math.round(jobs / 10)),
  });
  return [
    {
      ...fixed(sizes.commitJobs),
      id: "raw-insert-autocommit",
      name: "raw autocommit insert",
      label: `raw PostgreSQL: INSERT … RETURNING id, one row, autocommit (${
        count(sizes.commitJobs)
      } jobs)`,
      baseline: "ceiling-batched",
      run: (jobs) => withRaw(url, jobs, jobs, insertAutocommit),
    },
    {
      ...fixed(sizes.jobs),
      id: "raw-insert-one-transaction",
      name: "raw one-transaction insert",
      label: `raw PostgreSQL: INSERT … SELECT FROM unnest(…) RETURNING id, all rows in one ` +
        `statement and transaction (${count(sizes.jobs)} jobs)`,
      baseline: "ceiling-batched",
      run: (jobs) => withRaw(url, jobs, jobs, insertInOneTransaction),
    },
    {
      ...fixed(sizes.jobs),
      id: "ceiling-batched",
      name: "batched ceiling",
      label: `raw PostgreSQL ceiling: insert + claim (UPDATE … FOR UPDATE SKIP LOCKED) + delete, ` +
        `${CEILING_BATCH_SIZE} per transaction, one statement each (${count(sizes.jobs)} jobs)`,
      baseline: "ceiling-batched",
      run: (jobs) => withRaw(url, jobs, 0, cycleBatched),
    },
  ];
}

function count(jobs: number): string {
  return jobs.toLocaleString("en-US");
}

/**
 * Creates the store's tables in a fresh schema, times `work` on one
 * connection, and checks that the table then holds `left` jobs: a ceiling
 * that skipped work would flatter it.
 */
function withRaw(
  url: string,
  jobs: number,
  left: number,
  work: (sql: RawSql, jobs: number) => Promise<void>,
): Promise<number> {
  return withTempSchema(url, async (schema) => {
    const sql = connectRaw(url, { schema });
    try {
      await sql.unsafe(`CREATE SCHEMA "${schema}"`);
      await sql.unsafe(STEPS_RECORD);
      for (const migration of migrations) await sql.unsafe(migration.sql);
      const rate = await measureRate(jobs, () => work(sql, jobs));
      const [row] = await sql.unsafe("SELECT COUNT(*)::int AS n FROM jobs");
      if (row?.n !== left) {
        throw new Error(`The ceiling left ${row?.n} jobs in the table instead of ${left}`);
      }
      return rate;
    } finally {
      await sql.end({ timeout: 5 });
    }
  });
}

/** Runs one statement, prepared once per connection as the store's are. */
function run(sql: RawSql | RawTransaction, text: string, params: readonly unknown[]) {
  return sql.unsafe(text, params as never[], { prepare: true });
}

async function insertAutocommit(sql: RawSql, jobs: number): Promise<void> {
  for (let index = 0; index < jobs; index++) {
    const now = Date.now();
    await run(sql, INSERT_ONE, [QUEUE, NAME, `{"n":${index}}`, 0, now, null, now]);
  }
}

/** Rows `first` to `first + size - 1` as the one-array-per-column parameters of `INSERT_MANY`. */
function columns(first: number, size: number, now: number): unknown[] {
  const each = <T>(value: T) => Array.from({ length: size }, () => value);
  return [
    each(QUEUE),
    each(NAME),
    Array.from({ length: size }, (_, index) => `{"n":${first + index}}`),
    each(0),
    each(now),
    each(null),
    each(now),
  ];
}

async function insertInOneTransaction(sql: RawSql, jobs: number): Promise<void> {
  await sql.begin((tx) => run(tx, INSERT_MANY, columns(0, jobs, Date.now())));
}

async function cycleBatched(sql: RawSql, jobs: number): Promise<void> {
  for (let first = 0; first < jobs; first += CEILING_BATCH_SIZE) {
    const size = Math.min(CEILING_BATCH_SIZE, jobs - first);
    const now = Date.now();
    const token = first + 1;
    await sql.begin(async (tx) => {
      await run(tx, INSERT_MANY, columns(first, size, now));
      const claimed = await run(tx, CLAIM, [token, now + LEASE_MS, QUEUE, now, size]);
      if (claimed.length !== size) {
        throw new Error(`The ceiling claimed ${claimed.length} of ${size} jobs`);
      }
      await run(tx, DELETE_CLAIMED, [claimed.map((row) => row.id), token]);
    });
  }
}
