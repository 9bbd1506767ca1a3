/**
 * What PostgreSQL does its own way: inserts of any size as one `unnest`
 * statement, the claim with `FOR UPDATE SKIP LOCKED` on the database's
 * clock, a tick's successes in one statement, failures and retries that
 * move a row between tables in one statement (so a concurrent claim, retry
 * or forget finds it in exactly one), renewals that skip rows a settle
 * holds, and advisory locks on keys. No statement here sends `NOTIFY`: a
 * script asks for a wake-up, which the engine sends after the commit.
 *
 * @internal
 * @module
 */
import type { ClaimRow } from "../sql/stored_rows.ts";
import type { ClaimRequest, Lease, NewJobRow, StoredError } from "../store.ts";
import {
  CLAIMED_COLUMNS,
  claimSets,
  clockParam,
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
import { each, exec, type Script, wakeAfterCommit } from "../sql/script.ts";
import { fenceWrites, idCounters, raiseIdCounter } from "./move_fence.ts";
import { POSTGRES_NOW, type Statement, statement } from "../sql/statement.ts";
import {
  DispatchShift,
  SHIFT_KEPT_ABOVE_MS,
  SHIFT_KEPT_BELOW_MS,
  steadyShift,
} from "../steady_shift.ts";

const INSERT_COLUMNS =
  "queue, name, payload, priority, available_at, retry_until, created_at, batch_id, batch_member, keyed, trace, expire_at, group_key, group_limit, group_ordered, group_id";
/**
 * Inserts new rows given as one array per column, returning each id with
 * the clock shift the statement used; ids follow the rows' order, as the
 * sequence does. With `$12` true the rows' times are moved onto the
 * database's clock by one shift: the database's now minus the first row's
 * creation time (a dispatcher whose clock is off then still delays by what
 * it asked), or `$17`, the shift the store's last dispatch used, while the
 * one read is within the band around it (src/stores/steady_shift.ts). A
 * time not after the row's creation (its creation, a due time that asked
 * for no delay) is never past the database's now: the hint may be a ms or
 * two over the shift read. A grouped row takes its group's id: its group is
 * listed first.
 */
const INSERT = statement(
  `WITH clock AS (SELECT CASE WHEN $12::boolean THEN ${POSTGRES_NOW} END AS now_ms),
  shift AS (SELECT now_ms, CASE WHEN now_ms IS NULL THEN 0
      WHEN now_ms - ($7::bigint[])[1] BETWEEN $17::bigint - ${SHIFT_KEPT_BELOW_MS}
        AND $17::bigint + ${SHIFT_KEPT_ABOVE_MS} THEN $17::bigint
      ELSE now_ms - ($7::bigint[])[1] END AS ms FROM clock)
  INSERT INTO jobs (${INSERT_COLUMNS})
  SELECT queue, name, payload, priority,
    CASE WHEN available_at <= created_at THEN LEAST(available_at + shift.ms, shift.now_ms)
      ELSE available_at + shift.ms END,
    retry_until + shift.ms, LEAST(created_at + shift.ms, shift.now_ms), batch_id, batch_member,
    keyed, trace, expire_at + shift.ms, group_key, group_limit, group_ordered,
    (SELECT g.id FROM job_groups g WHERE g.queue = row.queue AND g.name = row.name
      AND g.group_key = row.group_key)
  FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::bigint[],
    $7::bigint[], $8::bigint[], $9::int[], $10::int[], $11::text[], $13::bigint[], $14::text[],
    $15::int[], $16::int[]) WITH ORDINALITY
    AS row(queue, name, payload, priority, available_at, retry_until, created_at, batch_id,
      batch_member, keyed, trace, expire_at, group_key, group_limit, group_ordered, position)
  CROSS JOIN shift
  ORDER BY position
  RETURNING id, (SELECT ms FROM shift) AS shift`,
);
const NOW = statement(`SELECT ${POSTGRES_NOW} AS t`, { oneRow: true });
/**
 * A tick's successes: each job deleted if its token still matches, rows
 * locked in id order, each with whether somebody awaits it. The ids are
 * looked up as `= ANY` (the primary key's index): joined with the pairs,
 * the planner read the whole table (20,000 rows for a settle of 288).
 */
const COMPLETE_MANY = statement(
  `WITH locked AS (
    SELECT j.id FROM jobs j WHERE j.id = ANY($1::bigint[])
      AND (j.id, j.token) IN (SELECT * FROM unnest($1::bigint[], $2::bigint[]))
    ORDER BY j.id FOR UPDATE OF j),
  gone AS (DELETE FROM jobs j USING locked WHERE j.id = locked.id
    RETURNING ${qualified(SETTLED_COLUMNS)}, j.awaited)
  SELECT ${SETTLED_COLUMNS}, awaited FROM gone`,
);
/**
 * Moves a job to the failed jobs in one statement, fenced by its token,
 * with whether somebody awaits it; it failed at `{{now $5}}` (the caller's
 * time, or the database's now).
 */
const FAIL = statement(
  `WITH gone AS (DELETE FROM jobs WHERE id = $6 AND token = $7
    RETURNING id, queue, name, payload, priority, crashes, created_at, waited_ms, keyed, locked,
      ${LINK_COLUMNS}, trace, awaited, group_key, group_limit, group_ordered),
  failed AS (INSERT INTO failed_jobs
    (id, queue, name, payload, priority, error, stack, attempts, crashes, created_at, failed_at,
      ${LINK_COLUMNS}, trace, ${GROUP_COLUMNS})
    SELECT id, queue, name, payload, priority, $1, $2, $3, crashes + $4, created_at, {{now $5}},
      ${LINK_COLUMNS}, trace, ${GROUP_COLUMNS}
    FROM gone
    ON CONFLICT (id) DO UPDATE SET queue = excluded.queue, name = excluded.name,
    payload = excluded.payload, priority = excluded.priority, error = excluded.error,
    stack = excluded.stack, attempts = excluded.attempts, crashes = excluded.crashes,
    created_at = excluded.created_at, failed_at = excluded.failed_at,
    batch_id = excluded.batch_id, batch_member = excluded.batch_member,
    chain_id = excluded.chain_id, flow_id = excluded.flow_id,
    flow_parents = excluded.flow_parents, trace = excluded.trace, group_key = excluded.group_key,
    group_limit = excluded.group_limit, group_ordered = excluded.group_ordered)
  SELECT ${SETTLED_COLUMNS}, awaited FROM gone`,
);
/**
 * Moves failed jobs back in one statement: the delete locks each row, so a
 * concurrent retry or forget of the same job finds it gone and moves nothing.
 */
function retryStatement(where: string): Statement {
  return statement(`WITH moved AS (DELETE FROM failed_jobs ${where}
      RETURNING id, queue, name, payload, priority, created_at, ${LINK_COLUMNS}, trace,
        ${GROUP_COLUMNS})
    INSERT INTO jobs (id, queue, name, payload, priority, available_at, created_at, ${LINK_COLUMNS},
      trace, ${GROUP_COLUMNS})
    SELECT id, queue, name, payload, priority, $1, created_at, ${LINK_COLUMNS}, trace,
      ${GROUP_COLUMNS} FROM moved
    ORDER BY id
    RETURNING id, ${LINK_COLUMNS}`);
}
const RETRY_ONE = retryStatement("WHERE id = $2");
const RETRY_ALL = retryStatement("");
const RETRY_BATCH = retryStatement("WHERE batch_id = $2 AND batch_member = 1");
/**
 * Returns the leases still held, and renews them to `$1` ms after `{{now $2}}`
 * (the caller's now, or the database's), each fenced by its
 * token. A row a settle holds right now is skipped (`SKIP LOCKED`): it is
 * being settled, or it gets its renewal next time, within its lease; waiting
 * for it could deadlock with that settle.
 */
const RENEW = statement(
  `WITH held AS (
    SELECT j.id, j.token FROM jobs j JOIN unnest($3::bigint[], $4::bigint[]) AS lease(id, token)
      ON j.id = lease.id AND j.token = lease.token),
  renewable AS (SELECT j.id FROM jobs j JOIN held ON j.id = held.id AND j.token = held.token
    ORDER BY j.id FOR UPDATE OF j SKIP LOCKED),
  renewed AS (UPDATE jobs j SET available_at = {{now $2}} + $1::bigint
    FROM renewable WHERE j.id = renewable.id)
  SELECT id, token FROM held`,
);
const LOCK_KEY = statement("SELECT pg_advisory_xact_lock(hashtextextended($1, 7204))");
/**
 * Conflicts with the ROW EXCLUSIVE lock every claim, start confirmation and
 * dispatch takes on `jobs` (and with itself), not with reads: a pause waits
 * for those in flight, and those that come after it wait for its commit,
 * taking their snapshot once it is visible (READ COMMITTED would otherwise
 * let a statement begun before the pause commit start a job after it).
 */
const WAIT_OUT_STARTS = statement("LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE");

const claimStatements = new Map<string, Statement>();
const passedOverStatements = new Map<string, Statement>();
/** The time the claim and its passed-over check read, once, from their `now_ms` CTE. */
const CLAIM_NOW = "(SELECT t FROM now_ms)";

/**
 * What the claim takes of queue `queue` (a placeholder) outside any group:
 * due at `now` (an SQL expression), its queue not paused, its name in
 * `names` (a list's placeholder) when given.
 */
function claimable(queue: string, now: string, names: string | null): string {
  return `queue = ${queue} AND group_key IS NULL AND available_at <= ${now}
    ${names === null ? "" : `AND name IN ${names}`} AND ${notPaused(queue, now)}`;
}

/**
 * Whether a group of queue `queue` (a placeholder) of `names` (a list's
 * placeholder, or null for any) with a job due at `now`, its queue not
 * paused, has its row locked by a transaction still open: the grouped
 * claim's window skips such a row (`SKIP LOCKED`), which a grouped dispatch
 * locks until it commits and a claim of the group until it ends. A row's
 * `xmax` names the last transaction that locked or changed it; that
 * transaction is still open while it holds the lock on its own id
 * (`pg_locks`). Only the lock is asked about, none of the group's own
 * rules (limit, order, rate, pause, hold): a worker that asks again once
 * the lock is gone meets those in its claim. Limits: a row locked by
 * several transactions at once, or locked and then changed under a
 * savepoint, has a multixact id for `xmax`, which this misses (the worker
 * may then stop as before); and it reads every group of the queue, which
 * only an idle worker about to stop pays.
 */
function lockedGroupDue(queue: string, now: string, names: string | null): string {
  return `EXISTS (SELECT 1 FROM job_groups g WHERE g.queue = ${queue}
    ${names === null ? "" : `AND g.name IN ${names}`} AND ${notPaused(queue, now)}
    AND EXISTS (SELECT 1 FROM jobs j WHERE j.group_id = g.id AND j.available_at <= ${now})
    AND EXISTS (SELECT 1 FROM pg_locks l
      WHERE l.locktype = 'transactionid' AND l.transactionid = g.xmax))`;
}

/**
 * Whether any job of `queueCount` queues (`$2`…) is one the claim would
 * take ({@linkcode claimable}) at `{{now $1}}`, with `byName` only of the
 * names in the last parameter, or is due in a group whose row another
 * transaction locks ({@linkcode lockedGroupDue}): plain reads, which neither take nor
 * wait for a row lock. After a claim that came back empty they find the
 * due jobs the claim's `SKIP LOCKED` passed over (or that came due since).
 */
function passedOverStatement(queueCount: number, byName: boolean): Statement {
  const cacheKey = `${queueCount}:${byName}`;
  let found = passedOverStatements.get(cacheKey);
  if (found !== undefined) return found;
  const names = byName ? `{{texts $${2 + queueCount}}}` : null;
  const anyQueue = Array.from({ length: queueCount }, (_, index) => {
    const queue = `$${index + 2}`;
    return `EXISTS (SELECT 1 FROM jobs WHERE ${claimable(queue, CLAIM_NOW, names)})
      OR ${lockedGroupDue(queue, CLAIM_NOW, names)}`;
  }).join(" OR ");
  found = statement(
    `WITH now_ms AS (SELECT {{now $1}} AS t) SELECT 1 AS found WHERE ${anyQueue}`,
  );
  passedOverStatements.set(cacheKey, found);
  return found;
}

/**
 * Most priority levels of a queue one claim seeks one by one; past it the
 * claim walks that queue's index in claim order.
 */
const MAX_CLAIM_LEVELS = 16;

/**
 * The claim for `queueCount` queues: each queue's due jobs in claim order,
 * locked with `SKIP LOCKED` so concurrent claims never wait for each other
 * or take the same job, then the first `limit` of them in queue order.
 * Each queue's priority levels are found first (one index seek per level,
 * {@linkcode MAX_CLAIM_LEVELS} + 1 at most), then each level's due jobs
 * are one seek on `jobs_claim_order` in due order (then id, so jobs due at
 * once go in the order they were stored): delayed jobs at a higher
 * priority are never walked over. A queue with more levels walks its index
 * instead. `$3` null means now on the database's clock. With `byName`, only
 * jobs whose name is in the last parameter; with `heldAhead`, its jobs are
 * held ahead. The picked rows are updated by
 * `id = ANY` (the primary key's index): joined with them instead, the
 * planner read the whole table on a small one.
 */
function claimStatement(queueCount: number, byName: boolean, heldAhead: boolean): Statement {
  const cacheKey = `${queueCount}:${byName}:${heldAhead}`;
  let claim = claimStatements.get(cacheKey);
  if (claim !== undefined) return claim;
  const names = byName ? `{{texts $${5 + queueCount}}}` : null;
  const perQueue = Array.from({ length: queueCount }, (_, index) => {
    const queue = `$${index + 5}`;
    const due = claimable(queue, CLAIM_NOW, names);
    return `l${index}(priority) AS (
      SELECT MAX(priority) FROM jobs WHERE queue = ${queue} AND group_key IS NULL
      UNION ALL
      SELECT (SELECT MAX(priority) FROM jobs WHERE queue = ${queue} AND group_key IS NULL
        AND priority < l.priority)
      FROM l${index} l WHERE l.priority IS NOT NULL),
    levels${index} AS (
      SELECT priority FROM l${index} WHERE priority IS NOT NULL LIMIT ${MAX_CLAIM_LEVELS + 1}),
    q${index} AS (
      SELECT due.id, ${index} AS rank, due.priority, due.available_at FROM levels${index} level
        CROSS JOIN LATERAL (SELECT id, priority, available_at FROM jobs
          WHERE priority = level.priority AND ${due}
          ORDER BY available_at, id LIMIT $4 FOR UPDATE SKIP LOCKED) due
        WHERE (SELECT COUNT(*) FROM levels${index}) <= ${MAX_CLAIM_LEVELS}
      UNION ALL
      SELECT walked.id, ${index}, walked.priority, walked.available_at FROM (
        SELECT id, priority, available_at FROM jobs WHERE ${due}
        ORDER BY priority DESC, available_at, id LIMIT $4 FOR UPDATE SKIP LOCKED) walked
        WHERE (SELECT COUNT(*) FROM levels${index}) > ${MAX_CLAIM_LEVELS})`;
  });
  const union = Array.from({ length: queueCount }, (_, index) => `SELECT * FROM q${index}`)
    .join(" UNION ALL ");
  claim = statement(
    `WITH RECURSIVE now_ms AS (SELECT {{now $3}} AS t), ${perQueue.join(", ")},
    picked AS (SELECT id FROM (${union}) candidates
      ORDER BY rank, priority DESC, available_at, id LIMIT $4)
    UPDATE jobs j SET token = $1, available_at = ${CLAIM_NOW} + $2,
      waited_ms = ${CLAIM_NOW} - j.available_at, ${claimSets(heldAhead)}
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING ${qualified(CLAIMED_COLUMNS)}, j.expire_at - ${CLAIM_NOW} AS expire_in_ms`,
  );
  claimStatements.set(cacheKey, claim);
  return claim;
}

/** What the PostgreSQL dialect needs from its store. */
export interface PostgresDialectOptions {
  /** Whether claims and renewals go by the database's clock instead of the caller's times. */
  readonly dbClock: boolean;
}

/** PostgreSQL's operations for one store. */
export function postgresDialect({ dbClock }: PostgresDialectOptions): Dialect {
  // The shift onto the database's clock the store's last dispatch used, the next one's hint.
  const shifts = new DispatchShift();
  const dialect: Dialect = {
    engine: "postgres",
    usesDatabaseClock: dbClock,
    insertsInOneStatement: true,

    *insertJobs(rows: readonly NewJobRow[], as: InsertedAs): Script<number[]> {
      if (rows.length === 0) return [];
      const column = <T>(pick: (row: NewJobRow) => T) => rows.map(pick);
      const params: unknown[] = [
        column((row) => row.queue),
        column((row) => row.name),
        column((row) => row.payload),
        column((row) => row.priority),
        column((row) => row.availableAt),
        column((row) => row.retryUntil),
        column((row) => row.createdAt),
        column(() => as.batchId),
        column(() => as.batchId === null ? 0 : 1),
        column(() => as.keyed),
        column((row) => row.trace ?? null),
        dbClock,
        column((row) => row.expireAt ?? null),
        column((row) => row.group?.key ?? null),
        column((row) => row.group?.limit ?? null),
        column((row) => row.group?.ordered ? 1 : 0),
        shifts.hint,
      ];
      // The groups first: each grouped row takes its group's id.
      yield* enterGroups(rows);
      const { rows: inserted } = yield* exec<{ id: number; shift: number }>(INSERT, ...params);
      if (dbClock && inserted[0] !== undefined) {
        shifts.learn(Number(inserted[0].shift));
      }
      return inserted.map((row) => Number(row.id)).sort((a, b) => a - b);
    },

    *claim(request: ClaimRequest, heldAhead: boolean): Script<ClaimRow[]> {
      const { queues, limit, now, leaseMs, token, names } = request;
      const { rows } = yield* exec<ClaimRow & { expire_in_ms: number | string | null }>(
        claimStatement(queues.length, names !== undefined, heldAhead),
        token,
        leaseMs,
        clockParam(dialect, now),
        limit,
        ...queues,
        ...(names === undefined ? [] : [names]),
      );
      // The expiry as far from the caller's now as it is from the claim's (the database's, with
      // its clock), so a worker whose clock is off still expires a job when the store says.
      return rows.map(({ expire_in_ms, ...row }) => ({
        ...row,
        expire_at: expire_in_ms === null ? null : now + Number(expire_in_ms),
      }));
    },

    *passedOver({ queues, names, now }): Script<boolean> {
      const { rows } = yield* exec(
        passedOverStatement(queues.length, names !== undefined),
        clockParam(dialect, now),
        ...queues,
        ...(names === undefined ? [] : [names]),
      );
      return rows.length > 0;
    },

    *completeJobs(leases: readonly Lease[]): Script<SettledJob[]> {
      if (leases.length === 0) return [];
      const { rows } = yield* exec<SettledJob & Awaited>(
        COMPLETE_MANY,
        leases.map(({ id }) => id),
        leases.map(({ token }) => token),
      );
      if (rows.some(isAwaited)) yield* wakeAfterCommit();
      return rows;
    },

    *failJob(settlement: FailSettlement, error: StoredError): Script<SettledJob | null> {
      const { rows: [job] } = yield* exec<SettledJob & Awaited>(
        FAIL,
        error.message,
        error.stack,
        settlement.attempts,
        settlement.crashed ? 1 : 0,
        clockParam(dialect, settlement.at),
        settlement.id,
        settlement.token,
      );
      if (job === undefined) return null;
      if (isAwaited(job)) yield* wakeAfterCommit();
      return job;
    },

    *retryFailed(selection: RetrySelection, now: number): Script<MovedJob[]> {
      if (selection === "all") return (yield* exec<MovedJob>(RETRY_ALL, now)).rows;
      if (!Array.isArray(selection)) {
        const { batchId } = selection as { readonly batchId: number };
        return (yield* exec<MovedJob>(RETRY_BATCH, now, batchId)).rows;
      }
      const moved = yield* each<MovedJob>(
        RETRY_ONE,
        (selection as readonly number[]).map((id) => [now, id]),
      );
      return moved.flatMap((result) => result.rows);
    },

    *renew(leases: readonly Lease[], until: number, now: number): Script<number[]> {
      if (leases.length === 0) return [];
      const { rows } = yield* exec<{ id: number; token: number }>(
        RENEW,
        until - now,
        clockParam(dialect, now),
        leases.map((lease) => lease.id),
        leases.map((lease) => lease.token),
      );
      const kept = new Set(rows.map((row) => `${row.id}:${row.token}`));
      return leases.filter((lease) => !kept.has(`${lease.id}:${lease.token}`)).map(({ id }) => id);
    },

    *lockKeys(keys: readonly string[]): Script<void> {
      yield* each(LOCK_KEY, [...new Set(keys)].sort().map((key) => [key]));
    },

    *waitOutStarts(): Script<void> {
      yield* exec(WAIT_OUT_STARTS);
    },

    *now(given: number): Script<number> {
      if (!dbClock) return given;
      return Number((yield* exec<{ t: number }>(NOW)).rows[0]!.t);
    },

    *dispatchClock(createdAt: number) {
      if (!dbClock) return { shift: 0, now: createdAt };
      const now = yield* dialect.now(createdAt);
      const shift = steadyShift(now - createdAt, shifts.hint);
      shifts.learn(shift);
      return { shift, now };
    },

    fenceWrites,
    idCounters,
    raiseIdCounter,
  };
  return dialect;
}

/** A settled job's `awaited` column: 1 while somebody awaits it (`dispatchAndWait`). */
interface Awaited {
  readonly awaited: number;
}

/**
 * Whether somebody awaits the settled job: its settle then asks for a
 * wake-up after commit, so their watchers read its result.
 */
function isAwaited(job: Awaited): boolean {
  return Number(job.awaited) === 1;
}

/** `columns` (a comma-separated list) each qualified with the table alias `j`. */
function qualified(columns: string): string {
  return columns.split(", ").map((column) => `j.${column}`).join(", ");
}
