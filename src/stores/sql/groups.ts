/**
 * Fair scheduling by group in SQL (docs/groups.md): the claim of grouped
 * jobs, round robin across groups, with each group's concurrency limit and
 * order enforced in the claim's own transaction.
 *
 * Design:
 * - A job's group is its queue, name and `jobs.group_key`; the row also
 *   keeps its definition's `group_limit` (null: none) and `group_ordered`
 *   (1: one at a time, in dispatch order). `failed_jobs` keeps the three,
 *   so a retried job comes back to its group.
 * - `jobs_claim_order` is partial (`group_key IS NULL`): the plain claim
 *   never walks a group's backlog. Grouped jobs are found through
 *   `jobs_group_due` (queue, name, key, due time: a group's due jobs, and
 *   its leased ones, whose lease end is their due time) and
 *   `jobs_group_order` (queue, name, key, id: an ordered group's first job).
 * - `job_groups` (queue, name, key, limit, ordered, turn, version) lists the
 *   groups that have jobs. Every insert of grouped jobs upserts their
 *   group's row (`version` + 1), so a grouped job always has one.
 * - A claim first asks whether any group exists in its queues (one seek).
 *   None: today's claim statement, unchanged. Else, per queue in order, the
 *   grouped claim and the plain one each take what the other left, the
 *   one going first alternating with the claim's token, so jobs without a
 *   group count as one more turn beside the groups.
 * - The grouped claim of one queue, repeated until it has its jobs or has
 *   looked at every group once:
 *   1. a window of groups in `turn` order (not paused, of the names the
 *      claimer runs), locked on PostgreSQL with `FOR UPDATE SKIP LOCKED`:
 *      concurrent claims take different groups, and the next statements
 *      (new snapshots, taken under the lock) see every claim of these
 *      groups that committed before;
 *   2. per group (one statement each, pipelined on PostgreSQL): its jobs
 *      leased now (token set, lease not over: started or claimed ahead),
 *      its first job by id, and its first due jobs in due order;
 *   3. picks in rounds: every group's first free slot, then every
 *      group's second, and so on, up to the claim's limit. A group's free
 *      slots are its limit less its leased jobs; an ordered group's one
 *      slot is its first job, only when it is due and nothing is leased;
 *   4. leases the picked jobs in one statement (by id), moves the groups it
 *      served or found nothing to take in to the back (`turn`), and drops
 *      the groups it found empty unless a dispatch filled them since
 *      (`version` unchanged).
 *
 * @internal
 * @module
 */
import type { ClaimRequest, NewJobRow } from "../store.ts";
import { CLAIM_SETS, CLAIMED_COLUMNS, clockParam, type Dialect } from "./dialect.ts";
import { notPaused } from "./pauses.ts";
import { each, exec, type Result, type Script } from "./script.ts";
import type { ClaimRow } from "./stored_rows.ts";
import { statement } from "./statement.ts";

/** Whether any of the queues `$1` has a group with jobs. */
const ANY_GROUP = statement(
  "SELECT 1 AS one FROM job_groups WHERE queue IN {{texts $1}} LIMIT 1",
  { oneRow: true },
);

/**
 * Puts the groups `$1` (queue, name, key, limit, ordered; no two alike) on
 * the list, at the back of their queue's turn order; a group already there
 * takes the settings given and a new version.
 */
const ENTER_GROUPS = statement(
  `INSERT INTO job_groups (queue, name, group_key, group_limit, group_ordered, turn, version)
  SELECT g.queue, g.name, g.group_key, g.lim, g.ordered,
    COALESCE((SELECT MAX(t.turn) FROM job_groups t WHERE t.queue = g.queue), 0), 0
  FROM {{rows $1 queue text, name text, group_key text, lim int, ordered int}} g WHERE true
  ON CONFLICT (queue, name, group_key) DO UPDATE SET version = job_groups.version + 1,
    group_limit = excluded.group_limit, group_ordered = excluded.group_ordered`,
);

/** Puts the groups of the jobs `$1` (just moved back from the failed jobs) on the list. */
const REENTER_GROUPS = statement(
  `INSERT INTO job_groups (queue, name, group_key, group_limit, group_ordered, turn, version)
  SELECT queue, name, group_key, MAX(group_limit), MAX(group_ordered),
    COALESCE((SELECT MAX(t.turn) FROM job_groups t WHERE t.queue = jobs.queue), 0), 0
  FROM jobs WHERE id IN {{ids $1}} AND group_key IS NOT NULL
  GROUP BY queue, name, group_key
  ON CONFLICT (queue, name, group_key) DO UPDATE SET version = job_groups.version + 1`,
);

/** The groups' window: see the module doc, step 1. `$4`: the names the claimer runs. */
function windowStatement(byName: boolean) {
  return statement(
    `SELECT name, group_key, group_limit, group_ordered, version FROM job_groups
    WHERE queue = $1 AND ${notPaused("$1", "(SELECT {{now $2}})")}
      ${byName ? "AND name IN {{texts $4}}" : ""}
      AND NOT EXISTS (SELECT 1 FROM group_pauses p
        WHERE p.name = job_groups.name AND p.group_key = job_groups.group_key)
    ORDER BY turn, name, group_key LIMIT $3 {{skipLocked}}`,
  );
}
const WINDOW = windowStatement(false);
const WINDOW_BY_NAME = windowStatement(true);

/**
 * One group's state (module doc, step 2): its first `$5` due jobs (one row
 * with null id when none), each row with the group's leased count, its
 * first job by id and whether that one is due (1 or 0).
 */
const GROUP_STATE = statement(
  `SELECT due.id, due.available_at,
    (SELECT COUNT(*) FROM jobs r WHERE r.queue = $1 AND r.name = $2 AND r.group_key = $3
      AND r.available_at > (SELECT {{now $4}}) AND r.token IS NOT NULL) AS leased,
    (SELECT MIN(h.id) FROM jobs h WHERE h.queue = $1 AND h.name = $2 AND h.group_key = $3) AS head,
    (SELECT CASE WHEN f.available_at <= (SELECT {{now $4}}) THEN 1 ELSE 0 END FROM jobs f
      WHERE f.id = (SELECT MIN(h.id) FROM jobs h
        WHERE h.queue = $1 AND h.name = $2 AND h.group_key = $3)) AS head_due
  FROM (SELECT 1 AS one) one LEFT JOIN (
    SELECT id, available_at FROM jobs WHERE queue = $1 AND name = $2 AND group_key = $3
      AND available_at <= (SELECT {{now $4}}) ORDER BY available_at, id LIMIT $5
  ) due ON true`,
);

/** Leases the jobs `$3` for claim `$1`: due `$4` ms after `{{now $2}}`. */
const LEASE = statement(
  `WITH now_ms AS (SELECT {{now $2}} AS t)
  UPDATE jobs SET token = $1, available_at = (SELECT t FROM now_ms) + $4,
    waited_ms = (SELECT t FROM now_ms) - available_at, ${CLAIM_SETS}
  WHERE id IN {{ids $3}}
  RETURNING ${CLAIMED_COLUMNS}, expire_at - (SELECT t FROM now_ms) AS expire_in_ms`,
);

/** Moves the groups `$2` of queue `$1` to the back of its turn order. */
const TO_THE_BACK = statement(
  `UPDATE job_groups SET turn = (SELECT MAX(t.turn) + 1 FROM job_groups t WHERE t.queue = $1)
  WHERE queue = $1 AND (name, group_key) IN (SELECT name, group_key FROM {{rows $2 name text, group_key text}} g)`,
);

/** Drops the groups `$2` of queue `$1` that have no job, unless their version moved on. */
const DROP_EMPTY = statement(
  `DELETE FROM job_groups WHERE queue = $1
    AND (name, group_key, version) IN (
      SELECT name, group_key, version FROM {{rows $2 name text, group_key text, version int}} g)
    AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.queue = job_groups.queue
      AND j.name = job_groups.name AND j.group_key = job_groups.group_key)`,
);

/**
 * How long after `{{now $2}}` the earliest grouped job of queue `$1` due
 * after it becomes due (a delayed job, a retry, a lease that runs out):
 * one seek per group.
 */
const GROUPS_NEXT_DUE = statement(
  `SELECT MIN(next_at) - MIN(t) AS in_ms FROM (
    SELECT (SELECT MIN(j.available_at) FROM jobs j WHERE j.queue = g.queue AND j.name = g.name
        AND j.group_key = g.group_key AND j.available_at > clock.t) AS next_at, clock.t
    FROM job_groups g CROSS JOIN (SELECT {{now $2}} AS t) clock WHERE g.queue = $1
  ) due`,
  { oneRow: true },
);

/** Most groups one step of the grouped claim looks at. */
const MAX_WINDOW = 64;

/**
 * For each of `queues`, how long after `now` (a `{{now}}` parameter) its
 * earliest grouped job due after it becomes due (null in_ms: none).
 */
export function groupsNextDue(
  queues: readonly string[],
  now: number | null,
): Script<Result<{ in_ms: number | string | null }>[]> {
  return each<{ in_ms: number | string | null }>(
    GROUPS_NEXT_DUE,
    queues.map((queue) => [queue, now]),
  );
}

/** Puts the groups of `rows` (those that have one) on the list; run with their insert. */
export function* enterGroups(rows: readonly NewJobRow[]): Script<void> {
  const groups = new Map<string, readonly unknown[]>();
  for (const row of rows) {
    if (row.group === null || row.group === undefined) continue;
    const entry = [row.queue, row.name, row.group.key, row.group.limit, row.group.ordered ? 1 : 0];
    groups.set(JSON.stringify(entry.slice(0, 3)), entry);
  }
  if (groups.size > 0) yield* exec(ENTER_GROUPS, [...groups.values()]);
}

/** Puts the groups of jobs `ids`, just moved back from the failed jobs, on the list. */
export function* reenterGroups(ids: readonly number[]): Script<void> {
  if (ids.length > 0) yield* exec(REENTER_GROUPS, ids);
}

/**
 * The claim with groups: `request` as {@linkcode Dialect.claim} takes it,
 * each queue's grouped jobs taken round robin across its groups (see the
 * module doc). Rows in no set order.
 */
export function* claimFairly(dialect: Dialect, request: ClaimRequest): Script<ClaimRow[]> {
  const { rows: any } = yield* exec(ANY_GROUP, request.queues);
  if (any.length === 0) return yield* dialect.claim(request);
  const claimed: ClaimRow[] = [];
  const groupsFirst = request.token % 2 === 0;
  for (const queue of request.queues) {
    for (const grouped of groupsFirst ? [true, false] : [false, true]) {
      const limit = request.limit - claimed.length;
      if (limit <= 0) return claimed;
      const one = { ...request, queues: [queue], limit };
      claimed.push(...(grouped ? yield* claimGrouped(dialect, one) : yield* dialect.claim(one)));
    }
  }
  return claimed;
}

/** A group as the window lists it. */
interface GroupRow {
  readonly name: string;
  readonly group_key: string;
  readonly group_limit: number | null;
  readonly group_ordered: number;
  readonly version: number | string;
}

/** A row of {@linkcode GROUP_STATE}. */
interface GroupStateRow {
  readonly id: number | string | null;
  readonly leased: number | string;
  readonly head: number | string | null;
  readonly head_due: number | string | null;
}

/** The grouped claim of `request`'s one queue: module doc, steps 1 to 4. */
function* claimGrouped(dialect: Dialect, request: ClaimRequest): Script<ClaimRow[]> {
  const queue = request.queues[0]!;
  const now = clockParam(dialect, request.now);
  const size = Math.min(MAX_WINDOW, Math.max(4, request.limit));
  const seen = new Set<string>();
  const claimed: ClaimRow[] = [];
  const keyOf = (group: { name: string; group_key: string }) =>
    JSON.stringify([group.name, group.group_key]);
  while (claimed.length < request.limit) {
    const { rows: window } = request.names === undefined
      ? yield* exec<GroupRow>(WINDOW, queue, now, size)
      : yield* exec<GroupRow>(WINDOW_BY_NAME, queue, now, size, request.names);
    const groups = window.filter((group) => !seen.has(keyOf(group)));
    if (groups.length === 0) break;
    for (const group of groups) seen.add(keyOf(group));
    const want = request.limit - claimed.length;
    const states = yield* each<GroupStateRow>(
      GROUP_STATE,
      groups.map((group) => [
        queue,
        group.name,
        group.group_key,
        now,
        group.group_limit === null ? want : Math.min(want, Number(group.group_limit)),
      ]),
    );
    // Each group's takeable jobs, in its order.
    const takeable = groups.map((group, index) => {
      const rows = states[index]!.rows;
      const leased = Number(rows[0]?.leased ?? 0);
      const due = rows.flatMap((row) => row.id === null ? [] : [Number(row.id)]);
      if (Number(group.group_ordered) === 1) {
        const head = rows[0]?.head === null || rows[0]?.head === undefined
          ? null
          : Number(rows[0].head);
        return leased === 0 && head !== null && Number(rows[0]?.head_due) === 1 ? [head] : [];
      }
      const free = group.group_limit === null ? due.length : Number(group.group_limit) - leased;
      return due.slice(0, Math.max(0, free));
    });
    const picked: number[] = [];
    const served = new Set<number>();
    for (let round = 0; picked.length < want; round++) {
      let any = false;
      takeable.forEach((ids, index) => {
        if (round < ids.length && picked.length < want) {
          picked.push(ids[round]!);
          served.add(index);
          any = true;
        }
      });
      if (!any) break;
    }
    if (picked.length > 0) {
      const { rows } = yield* exec<ClaimRow & { expire_in_ms: number | string | null }>(
        LEASE,
        request.token,
        now,
        picked,
        request.leaseMs,
      );
      // The expiry as far from the caller's now as it is from the store's.
      claimed.push(...rows.map(({ expire_in_ms, ...row }) => ({
        ...row,
        expire_at: expire_in_ms === null ? null : request.now + Number(expire_in_ms),
      })));
    }
    // A group left with jobs it could take keeps its turn; the rest go to the back.
    const back = groups.filter((_, index) => served.has(index) || takeable[index]!.length === 0);
    if (back.length > 0) {
      yield* exec(TO_THE_BACK, queue, back.map((group) => [group.name, group.group_key]));
    }
    const empty = groups.filter((_, index) => states[index]!.rows[0]?.head === null);
    if (empty.length > 0) {
      yield* exec(
        DROP_EMPTY,
        queue,
        empty.map((group) => [group.name, group.group_key, Number(group.version)]),
      );
    }
    if (window.length < size) break;
  }
  return claimed;
}
