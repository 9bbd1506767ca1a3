/**
 * What SQLite does its own way: a job's insert on its own, or 32 rows to a
 * statement in a bulk insert, the claim as one `UPDATE … RETURNING` over
 * each queue's claim-ordered index, a failure and a retry as
 * copy-then-delete (no statement may write two tables), and no row or key
 * locks (its one writer already serializes every write transaction) or
 * notifications (other processes watch the WAL file).
 *
 * @internal
 * @module
 */
import type { ClaimRow } from "../sql/stored_rows.ts";
import type { ClaimRequest, Lease, NewJobRow, StoredError } from "../store.ts";
import {
  CLAIMED_COLUMNS,
  claimSets,
  type Dialect,
  type FailSettlement,
  GROUP_COLUMNS,
  type InsertedAs,
  LINK_COLUMNS,
  type MovedJob,
  type RetrySelection,
  SETTLED_COLUMNS,
  type SettledJob,
} from "../sql/dialect.ts";
import { enterGroups } from "../sql/groups.ts";
import { notPaused } from "../sql/pauses.ts";
import { done, each, exec, type Result, type Script } from "../sql/script.ts";
import { type Statement, statement } from "../sql/statement.ts";
import { fenceWrites, idCounters, raiseIdCounter } from "./move_fence.ts";

/** What a job's insert binds, narrowest first: each shape binds the columns of the ones before. */
const INSERT_SHAPES = {
  /** A job of no batch, no key, no trace and no expiry (every other column keeps its default). */
  plain: ["queue", "name", "payload", "priority", "available_at", "retry_until", "created_at"],
  /** Any job without a group. */
  full: ["batch_id", "batch_member", "keyed", "trace", "expire_at"],
  /** A grouped job: its group key and settings too. */
  grouped: ["group_key", "group_limit", "group_ordered"],
} as const;
type InsertShape = keyof typeof INSERT_SHAPES;

/**
 * The insert of one shape's columns. Its id is `{{newJobId}}` when it runs
 * on its own (one statement, so no other writer comes between reading the
 * highest id and inserting), or bound first (`$1`) when it runs in a
 * transaction that read the next id once ({@linkcode NEXT_JOB_ID}): reading
 * it for every row was a sixth of a bulk insert.
 */
function insertStatement(shape: InsertShape, idBound: boolean): Statement {
  const order: InsertShape[] = ["plain", "full", "grouped"];
  const columns = order.slice(0, order.indexOf(shape) + 1).flatMap((name) => INSERT_SHAPES[name]);
  const params = columns.map((_, index) => `$${index + (idBound ? 2 : 1)}`);
  // A grouped job takes its group's id (its group is listed first): queue, name and key are bound.
  const groupId = shape === "grouped"
    ? [
      `(SELECT id FROM job_groups WHERE queue = ${params[0]} AND name = ${
        params[1]
      } AND group_key = ${params[columns.indexOf("group_key")]})`,
    ]
    : [];
  return statement(
    `INSERT INTO jobs (id, ${[...columns, ...groupId.map(() => "group_id")].join(", ")})
    VALUES (${idBound ? "$1" : "{{newJobId}}"}, ${[...params, ...groupId].join(", ")})`,
  );
}

/**
 * Rows a bulk insert stores per statement: SQLite runs one statement of
 * {@linkcode ROWS_PER_INSERT} rows in about two thirds of the time of as
 * many one-row statements (each has its own program start, bindings reset
 * and call from JavaScript), and a plain row binds 8 parameters, a full one
 * 13, far under SQLite's limit of 32,766.
 */
const ROWS_PER_INSERT = 32;

/**
 * The insert of {@linkcode ROWS_PER_INSERT} rows of `shape` (not grouped:
 * each grouped row reads its group's id), their ids bound, each row's
 * parameters after the one before's.
 */
function manyRowsStatement(shape: "plain" | "full"): Statement {
  const order: InsertShape[] = ["plain", "full"];
  const columns = order.slice(0, order.indexOf(shape) + 1).flatMap((name) => INSERT_SHAPES[name]);
  const width = columns.length + 1;
  const values = Array.from(
    { length: ROWS_PER_INSERT },
    (_, row) =>
      `(${
        Array.from({ length: width }, (_, column) => `$${row * width + column + 1}`).join(", ")
      })`,
  );
  return statement(`INSERT INTO jobs (id, ${columns.join(", ")}) VALUES ${values.join(", ")}`);
}

/** The inserts of {@linkcode ROWS_PER_INSERT} rows, by the shapes that take them. */
const MANY_ROWS_INSERTS = { plain: manyRowsStatement("plain"), full: manyRowsStatement("full") };

/** The inserts by shape, their id taken on their own or bound. */
const INSERTS = Object.fromEntries(
  (Object.keys(INSERT_SHAPES) as InsertShape[]).map((shape) => [shape, {
    alone: insertStatement(shape, false),
    bound: insertStatement(shape, true),
  }]),
) as Record<InsertShape, { readonly alone: Statement; readonly bound: Statement }>;

/** The narrowest shape that binds every column of `rows` (one grouped row makes them all grouped). */
function insertShape(rows: readonly NewJobRow[], as: InsertedAs): InsertShape {
  let shape: InsertShape = as.batchId !== null || as.keyed !== 0 ? "full" : "plain";
  for (const row of rows) {
    if (row.group !== null && row.group !== undefined) return "grouped";
    if ((row.trace ?? null) !== null || (row.expireAt ?? null) !== null) shape = "full";
  }
  return shape;
}

/** Appends to `params` those of `row`'s insert of `shape`, its id first when it is bound (not null). */
function pushInsertParams(
  params: unknown[],
  row: NewJobRow,
  shape: InsertShape,
  as: InsertedAs,
  id: number | null,
): unknown[] {
  if (id !== null) params.push(id);
  params.push(
    row.queue,
    row.name,
    row.payload,
    row.priority,
    row.availableAt,
    row.retryUntil,
    row.createdAt,
  );
  if (shape === "plain") return params;
  const member = as.batchId === null ? 0 : 1;
  params.push(as.batchId, member, as.keyed, row.trace ?? null, row.expireAt ?? null);
  if (shape === "full") return params;
  params.push(row.group?.key ?? null, row.group?.limit ?? null, row.group?.ordered ? 1 : 0);
  return params;
}

/** The id the next job takes (inside a write transaction, the ids after it are free too). */
const NEXT_JOB_ID = statement("SELECT {{newJobId}} AS id", { oneRow: true });

const COMPLETE = statement(
  `DELETE FROM jobs WHERE id = $1 AND token = $2 RETURNING ${SETTLED_COLUMNS}`,
  { oneRow: true },
);
/** Deletes succeeded jobs of one claim: parameter 1 is its token, parameter 2 their ids. */
const COMPLETE_MANY = statement(
  `DELETE FROM jobs WHERE token = $1 AND id IN {{ids $2}} RETURNING ${SETTLED_COLUMNS}`,
);
const COPY_TO_FAILED = statement(
  `INSERT OR REPLACE INTO failed_jobs
  (id, queue, name, payload, priority, error, stack, attempts, crashes, created_at, failed_at,
    ${LINK_COLUMNS}, trace, ${GROUP_COLUMNS})
  SELECT id, queue, name, payload, priority, $1, $2, $3, crashes + $4, created_at, $5, ${LINK_COLUMNS},
    trace, ${GROUP_COLUMNS}
  FROM jobs WHERE id = $6 AND token = $7`,
);
const RENEW = statement("UPDATE jobs SET available_at = $1 WHERE id = $2 AND token = $3");
const RETRY_COPY = `INSERT INTO jobs
  (id, queue, name, payload, priority, available_at, created_at, ${LINK_COLUMNS}, trace,
    ${GROUP_COLUMNS})
  SELECT id, queue, name, payload, priority, $1, created_at, ${LINK_COLUMNS}, trace,
    ${GROUP_COLUMNS} FROM failed_jobs`;
const RETRY_ONE = statement(`${RETRY_COPY} WHERE id = $2 RETURNING id, ${LINK_COLUMNS}`, {
  oneRow: true,
});
const RETRY_ALL = statement(`${RETRY_COPY} ORDER BY id RETURNING id, ${LINK_COLUMNS}`);
const RETRY_BATCH = statement(
  `${RETRY_COPY} WHERE batch_id = $2 AND batch_member = 1 ORDER BY id RETURNING id, ${LINK_COLUMNS}`,
);
const FORGET = statement("DELETE FROM failed_jobs WHERE id = $1");
const FORGET_ALL = statement("DELETE FROM failed_jobs");
const FORGET_BATCH = statement(
  "DELETE FROM failed_jobs WHERE batch_id = $1 AND batch_member = 1",
);

const claimStatements = new Map<string, Statement>();

/**
 * A queue's priority levels, highest first: one seek per level on the claim
 * index, however many jobs each level holds. One more than
 * {@linkcode MAX_CLAIM_ARMS} at most, which says "too many".
 */
const LEVELS = statement(
  `WITH RECURSIVE levels(priority) AS (
    SELECT MAX(priority) FROM jobs INDEXED BY jobs_claim_order
      WHERE queue = $1 AND group_key IS NULL
    UNION ALL
    SELECT (SELECT MAX(priority) FROM jobs INDEXED BY jobs_claim_order
      WHERE queue = $1 AND group_key IS NULL AND priority < levels.priority)
    FROM levels WHERE levels.priority IS NOT NULL LIMIT $2
  )
  SELECT priority FROM levels WHERE priority IS NOT NULL`,
);

/** Most (queue, priority) ranges one claim seeks; past it the claim walks each queue's index. */
const MAX_CLAIM_ARMS = 16;

/**
 * The claim statement over `arms` ranges of (queue, priority), looked at in
 * the given order, each a seek to its due jobs in due order, so delayed jobs
 * at a higher priority cost nothing; with `byName`, only jobs whose name is
 * in parameter 5; with `heldAhead`, its jobs are held ahead. Parameters:
 * token, now, limit, leaseMs, names, then a queue and a priority per arm.
 */
function levelClaimStatement(arms: number, byName: boolean, heldAhead: boolean): Statement {
  const cacheKey = `levels:${arms}:${byName}:${heldAhead}`;
  let claim = claimStatements.get(cacheKey);
  if (claim === undefined) {
    const names = byName ? "AND name IN {{texts $5}}" : "";
    const arm = (index: number) =>
      `SELECT id FROM (SELECT id FROM jobs INDEXED BY jobs_claim_order
        WHERE queue = $${6 + 2 * index} AND group_key IS NULL AND priority = $${7 + 2 * index}
        AND available_at <= $2 ${names} AND ${notPaused(`$${6 + 2 * index}`, "$2")}
        ORDER BY available_at LIMIT $3)`;
    claim = claimSetting(
      Array.from({ length: arms }, (_, i) => arm(i)).join(" UNION ALL "),
      heldAhead,
    );
    claimStatements.set(cacheKey, claim);
  }
  return claim;
}

/**
 * The claim statement that walks each of `queueCount` queues' claim index in
 * order (for queues with more priority levels than {@linkcode MAX_CLAIM_ARMS});
 * with `byName`, only jobs whose name is in parameter 5; with `heldAhead`,
 * its jobs are held ahead. Parameters: token, now, limit, leaseMs, names,
 * then the queues.
 */
function walkingClaimStatement(
  queueCount: number,
  byName: boolean,
  heldAhead: boolean,
): Statement {
  const cacheKey = `walk:${queueCount}:${byName}:${heldAhead}`;
  let claim = claimStatements.get(cacheKey);
  if (claim === undefined) {
    const names = byName ? "AND name IN {{texts $5}}" : "";
    const perQueue = (index: number) =>
      `SELECT id FROM (SELECT id FROM jobs INDEXED BY jobs_claim_order WHERE queue = $${6 + index}
        AND group_key IS NULL AND available_at <= $2 ${names} AND ${
        notPaused(`$${6 + index}`, "$2")
      }
        ORDER BY priority DESC, available_at LIMIT $3)`;
    claim = claimSetting(
      Array.from({ length: queueCount }, (_, i) => perQueue(i)).join(" UNION ALL "),
      heldAhead,
    );
    claimStatements.set(cacheKey, claim);
  }
  return claim;
}

/**
 * The claim's write: the rows `ids` selects, `LIMIT $3` of them, get the
 * token and a lease, held ahead with `heldAhead`.
 */
function claimSetting(ids: string, heldAhead: boolean): Statement {
  return statement(
    `UPDATE jobs SET token = $1, available_at = $2 + $4, waited_ms = $2 - available_at,
      ${claimSets(heldAhead)}
    WHERE id IN (${ids} LIMIT $3)
    RETURNING ${CLAIMED_COLUMNS}`,
  );
}

/** SQLite's operations. */
export const sqliteDialect: Dialect = {
  engine: "sqlite",
  usesDatabaseClock: false,
  insertsInOneStatement: false,

  *insertJobs(rows: readonly NewJobRow[], as: InsertedAs): Script<number[]> {
    const shape = insertShape(rows, as);
    // The groups first: a grouped job's insert takes its group's id.
    if (shape === "grouped") yield* enterGroups(rows);
    if (rows.length === 1) {
      // Without RETURNING: run() reports the new row id, and is the cheaper read. Steps are
      // yielded as they are here (no helper generator, no copy of the parameters): the hot path.
      const params = pushInsertParams([], rows[0]!, shape, as, null);
      const { lastId } = (yield { statement: INSERTS[shape].alone, params }) as Result;
      return [lastId!];
    }
    // Several rows always run in a write transaction (BEGIN IMMEDIATE): the ids after the next are free.
    const { rows: [next] } = yield* exec<{ id: number }>(NEXT_JOB_ID);
    const first = Number(next!.id);
    const ids = rows.map((_, index) => first + index);
    let index = 0;
    if (shape !== "grouped") {
      // A step per ROWS_PER_INSERT rows, their parameters made as it runs: nothing outlives it.
      const many = MANY_ROWS_INSERTS[shape];
      for (; index + ROWS_PER_INSERT <= rows.length; index += ROWS_PER_INSERT) {
        const params: unknown[] = [];
        for (let at = index; at < index + ROWS_PER_INSERT; at++) {
          pushInsertParams(params, rows[at]!, shape, as, first + at);
        }
        yield { statement: many, params };
      }
    }
    const insert = INSERTS[shape].bound;
    // The rest a step per row (every grouped row: each reads its own group's id).
    for (; index < rows.length; index++) {
      yield {
        statement: insert,
        params: pushInsertParams([], rows[index]!, shape, as, first + index),
      };
    }
    return ids;
  },

  /** False: a claim here writes under the database's one write lock, and passes no job over. */
  // deno-lint-ignore require-yield
  *passedOver(): Script<boolean> {
    return false;
  },

  *claim(request: ClaimRequest, heldAhead: boolean): Script<ClaimRow[]> {
    const { queues, limit, now, leaseMs, token, names } = request;
    const params = [token, now, limit, leaseMs, names ?? null];
    const byName = names !== undefined;
    // Each queue's priority levels first (a few seeks), then one seek per level to its due jobs:
    // walking the index instead would step over every delayed job at a higher priority.
    const levels = yield* each<{ priority: number }>(
      LEVELS,
      queues.map((queue) => [queue, MAX_CLAIM_ARMS + 1]),
    );
    const arms = queues.flatMap((queue, index) =>
      levels[index]!.rows.map(({ priority }) => [queue, priority] as const)
    );
    if (arms.length === 0) return [];
    if (arms.length > MAX_CLAIM_ARMS) {
      return yield* claimRows(walkingClaimStatement(queues.length, byName, heldAhead), [
        ...params,
        ...queues,
      ]);
    }
    return yield* claimRows(levelClaimStatement(arms.length, byName, heldAhead), [
      ...params,
      ...arms.flat(),
    ]);
  },

  *completeJobs(leases: readonly Lease[]): Script<SettledJob[]> {
    // One statement per claim's token (a tick's successes come from a claim or a few).
    const idsByToken = new Map<number, number[]>();
    for (const { id, token } of leases) {
      const ids = idsByToken.get(token);
      if (ids === undefined) idsByToken.set(token, [id]);
      else ids.push(id);
    }
    const deleted = yield* each<SettledJob>(COMPLETE_MANY, [...idsByToken]);
    return deleted.flatMap((result) => result.rows);
  },

  *failJob(settlement: FailSettlement, error: StoredError): Script<SettledJob | null> {
    const { id, token } = settlement;
    const { count } = yield* exec(
      COPY_TO_FAILED,
      error.message,
      error.stack,
      settlement.attempts,
      settlement.crashed ? 1 : 0,
      settlement.at,
      id,
      token,
    );
    if (count === 0) return null;
    const { rows: [job] } = yield* exec<SettledJob>(COMPLETE, id, token);
    return job ?? null;
  },

  *retryFailed(selection: RetrySelection, now: number): Script<MovedJob[]> {
    if (selection === "all") {
      const { rows } = yield* exec<MovedJob>(RETRY_ALL, now);
      yield* exec(FORGET_ALL);
      return rows;
    }
    if (!Array.isArray(selection)) {
      const { batchId } = selection as { readonly batchId: number };
      const { rows } = yield* exec<MovedJob>(RETRY_BATCH, now, batchId);
      yield* exec(FORGET_BATCH, batchId);
      return rows;
    }
    const moved: MovedJob[] = [];
    for (const id of selection as readonly number[]) {
      const { rows: [row] } = yield* exec<MovedJob>(RETRY_ONE, now, id);
      if (row === undefined) continue;
      yield* exec(FORGET, id);
      moved.push(row);
    }
    return moved;
  },

  *renew(leases: readonly Lease[], until: number): Script<number[]> {
    const renewed = yield* each(RENEW, leases.map(({ id, token }) => [until, id, token]));
    return leases.filter((_, index) => renewed[index]!.count === 0).map(({ id }) => id);
  },

  lockKeys: () => done(undefined),
  waitOutStarts: () => done(undefined),
  // One machine, one clock.
  dispatchClock: (createdAt) => done({ shift: 0, now: createdAt }),
  now: (given) => done(given),
  fenceWrites,
  idCounters,
  raiseIdCounter,
};

function* claimRows(claim: Statement, params: readonly unknown[]): Script<ClaimRow[]> {
  return (yield* exec<ClaimRow>(claim, ...params)).rows;
}
