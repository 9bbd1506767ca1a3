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
 * - `job_groups` (queue, name, key, limit, ordered, version, id) lists the
 *   groups that have jobs. Every insert of grouped jobs upserts their
 *   group's row first (`version` + 1), so a grouped job always has one, and
 *   takes its `id` into `jobs.group_id` (schema step 25: a group listed
 *   anew takes one more than the highest id). Rows inserted without one
 *   (by older code, a retry, a move's import) take it when their group is
 *   listed after them, in the same transaction: triggers on `job_groups`
 *   (steps 25 and 26), none on the inserts into `jobs`, which every plain
 *   dispatch would pay for (docs/performance.md).
 *   `group_cursors` holds, per queue, the id of the last group the round
 *   robin served: the turn goes through the groups in id order (the order
 *   they were listed) from there, back to the first after the last.
 * - `jobs_claim_order` is partial (`group_key IS NULL`): the plain claim
 *   never walks a group's backlog. Grouped jobs are found through
 *   `jobs_group_due` (group id, due time: a group's due jobs, and its
 *   leased ones, whose lease end is their due time) and `jobs_group_order`
 *   (group id, id, for ordered groups only: an ordered group's first job).
 *   A lease, a start and a settle each move or drop one entry per job in
 *   `jobs_group_due`, spread over as many groups as the claim served: the
 *   small entries (an integer and a time, not the queue, name and key)
 *   and the id order (jobs dispatched across groups have neighbouring
 *   ids, so one turn's jobs share table pages) keep the pages a
 *   transaction writes few (docs/performance.md).
 * - A claim first asks whether any group exists in its queues (one seek).
 *   None: today's claim statement, unchanged. Else, per queue in order, a
 *   queue without groups takes the plain claim, and a queue with groups the
 *   grouped claim, in which the queue's jobs without a group are one more
 *   turn of the round robin ({@linkcode PLAIN_TURN}): the turn after the
 *   last group in id order, before the first. A claim's rounds take from it
 *   as from a group (the plain claim statement, asked for as many jobs as
 *   its turns in the rounds would take), and the cursor passes it as it
 *   passes a group (`group_cursors.group_id` 0: the plain jobs were served
 *   last, the first group goes next). A queue's first claim starts at its
 *   first group, as after a plain turn.
 * - The grouped claim of one queue, repeated until it has its jobs or has
 *   looked at every group once:
 *   1. a window of groups in id order after the cursor (not paused nor
 *      held until later, of the names the claimer runs), each with its
 *      first due job, locked on
 *      PostgreSQL with `FOR UPDATE SKIP LOCKED`:
 *      concurrent claims take different groups, and the next statements
 *      (new snapshots, taken under the lock) see every claim of these
 *      groups that committed before;
 *   2. per group with a limit or an order (one statement each, pipelined
 *      on PostgreSQL): its jobs leased now (token set, lease not over:
 *      started or claimed ahead), an ordered group's first job by id, and
 *      its first due jobs in due order; a group with neither gives its
 *      first due job from step 1 (or, when the claim wants more jobs than
 *      there are groups, its first few, all such groups in one statement);
 *   3. picks in rounds: every group's first free slot, then every
 *      group's second, and so on, up to the claim's limit. A group's free
 *      slots are its limit less its leased jobs; an ordered group's one
 *      slot is its first job, only when it is due and nothing is leased.
 *      Where the window reached the end of the list, the plain turn is in
 *      the rounds too: the plain claim takes as many jobs as the rounds
 *      would give it, and the rounds are picked again with what it took;
 *   4. leases the picked jobs in one statement (by id, those still free),
 *      drops the groups it found empty unless a dispatch filled them since
 *      (`version` unchanged), and moves the cursor (one write per claim):
 *      past every turn, when the rounds took all the turns had; else past
 *      the turn of the last job taken and the turns after it with nothing
 *      to give, so the next claim starts with the first turn the last
 *      round did not come to (a turn served in an earlier round but not in
 *      the last one does not lose its place).
 * - A group rate limit (`ClaimRequest.groupRates`, by job name) is counted
 *   in `rate_windows`, the table of `rateLimited`, under a key of the group
 *   that no `rateLimited` key can be ({@linkcode groupRateKey}): the
 *   current window's start (a multiple of `perMs` on the store's clock)
 *   and the claims in it. Between steps 3 and 4 (one read for the window's
 *   groups) a limited group gives at most what its window has left; after
 *   the lease its count grows by the jobs leased. On PostgreSQL the group's
 *   row, locked by step 1, keeps two claims from counting the same window
 *   at once. A settle drops the windows of the names it limits a minute
 *   after they end, at most once a minute ({@linkcode dropEndedWindows}).
 *   The next-due read makes a group over its limit with a job due now due
 *   when its window turns.
 *
 * @internal
 * @module
 */
import type { ClaimRequest, NewJobRow } from "../store.ts";
import type { GroupRate } from "../rows/tick.ts";
import { CLAIMED_COLUMNS, claimSets, clockParam, type Dialect } from "./dialect.ts";
import { notPaused } from "./pauses.ts";
import { each, exec, type Result, type Script } from "./script.ts";
import { type ClaimRow, inClaimOrder } from "./stored_rows.ts";
import { type Statement, statement } from "./statement.ts";

const anyGroupStatements = new Map<number, Statement>();

/**
 * Whether any of `count` queues (the parameters) has a group with jobs: a
 * seek per queue on `job_groups`, the one statement the grouped claim adds
 * to a claim where no queue has groups (placeholders, not a JSON list: it
 * runs on every claim).
 */
function anyGroup(count: number): Statement {
  let any = anyGroupStatements.get(count);
  if (any === undefined) {
    const queues = Array.from({ length: count }, (_, index) => `$${index + 1}`).join(", ");
    any = statement(`SELECT 1 AS one FROM job_groups WHERE queue IN (${queues}) LIMIT 1`, {
      oneRow: true,
    });
    anyGroupStatements.set(count, any);
  }
  return any;
}

/**
 * Puts the groups `$1` (queue, name, key, limit, ordered; no two alike) on
 * the list, a new one with the next id; a group already there takes the
 * settings given and a new version, and keeps its id.
 */
const ENTER_GROUPS = statement(
  `INSERT INTO job_groups (queue, name, group_key, group_limit, group_ordered, version, id)
  SELECT g.queue, g.name, g.group_key, g.lim, g.ordered, 0, {{newGroupId}}
  FROM {{rows $1 queue text, name text, group_key text, lim int, ordered int}} g WHERE true
  ON CONFLICT (queue, name, group_key) DO UPDATE SET version = job_groups.version + 1,
    group_limit = excluded.group_limit, group_ordered = excluded.group_ordered`,
);

/**
 * Puts the groups of the jobs `$1` (just moved back from the failed jobs) on
 * the list. A group listed anew takes its id (SQLite: from step 25's
 * trigger `job_groups_take_id`), one listed again bumps its version, and
 * either way a trigger gives the id to those jobs (step 26).
 */
const REENTER_GROUPS = statement(
  `INSERT INTO job_groups (queue, name, group_key, group_limit, group_ordered, version)
  SELECT queue, name, group_key, MAX(group_limit), MAX(group_ordered), 0
  FROM jobs WHERE id IN {{ids $1}} AND group_key IS NOT NULL
  GROUP BY queue, name, group_key ORDER BY MIN(id)
  ON CONFLICT (queue, name, group_key) DO UPDATE SET version = job_groups.version + 1`,
);

/**
 * The groups' window: see the module doc, step 1, with each group's first
 * due job (a hint: on PostgreSQL it is read before the lock, so the lease
 * checks it is still free): the first `$3` groups after group id `$4` in
 * id order, or after the queue's cursor when it is null. `$5`: the names
 * the claimer runs.
 */
function windowStatement(byName: boolean) {
  return statement(
    `SELECT id, name, group_key, group_limit, group_ordered, version,
      (SELECT j.id FROM jobs j WHERE j.group_id = job_groups.id
        AND j.available_at <= (SELECT {{now $2}}) ORDER BY j.available_at, j.id LIMIT 1)
        AS first_due
    FROM job_groups
    WHERE queue = $1 AND ${notPaused("$1", "(SELECT {{now $2}})")}
      ${byName ? "AND name IN {{texts $5}}" : ""}
      AND (NOT EXISTS (SELECT 1 FROM group_pauses) OR NOT EXISTS (SELECT 1 FROM group_pauses p
        WHERE p.name = job_groups.name AND p.group_key = job_groups.group_key
          AND (p.until IS NULL OR p.until > (SELECT {{now $2}}))))
      AND id > COALESCE($4, (SELECT c.group_id FROM group_cursors c WHERE c.queue = $1), 0)
    ORDER BY id LIMIT $3 {{skipLocked}}`,
  );
}
const WINDOW = windowStatement(false);
const WINDOW_BY_NAME = windowStatement(true);

/**
 * One group's state (module doc, step 2), group id `$1` at `{{now $2}}`: its
 * first `$3` due jobs (one row with null id when none), each row with the
 * group's leased count and, for an ordered group, its first job by id and
 * whether that one is due (1 or 0).
 */
const GROUP_STATE = statement(
  `SELECT due.id, due.available_at,
    (SELECT COUNT(*) FROM jobs r WHERE r.group_id = $1
      AND r.available_at > (SELECT {{now $2}}) AND r.token IS NOT NULL) AS leased,
    (SELECT MIN(h.id) FROM jobs h WHERE h.group_id = $1 AND h.group_ordered = 1) AS head,
    (SELECT CASE WHEN f.available_at <= (SELECT {{now $2}}) THEN 1 ELSE 0 END FROM jobs f
      WHERE f.id = (SELECT MIN(h.id) FROM jobs h WHERE h.group_id = $1 AND h.group_ordered = 1))
      AS head_due
  FROM (SELECT 1 AS one) one LEFT JOIN (
    SELECT id, available_at FROM jobs WHERE group_id = $1
      AND available_at <= (SELECT {{now $2}}) ORDER BY available_at, id LIMIT $3
  ) due ON true`,
);

const dueStatements = new Map<number, Statement>();

/**
 * The first `$2` due jobs of each of `count` groups without a limit or an
 * order, in one statement (module doc, step 2, for the groups that need
 * nothing else): each group's jobs one seek on `jobs_group_due`, tagged by
 * its position (`rank`). Parameters: `{{now}}`, limit, then a group id per
 * group.
 */
function dueInGroups(count: number): Statement {
  let due = dueStatements.get(count);
  if (due === undefined) {
    const arm = (index: number) =>
      `SELECT ${index} AS rank, id FROM (SELECT id, available_at FROM jobs
        WHERE group_id = $${3 + index}
        AND available_at <= (SELECT {{now $1}}) ORDER BY available_at, id LIMIT $2) g${index}`;
    due = statement(Array.from({ length: count }, (_, index) => arm(index)).join(" UNION ALL "));
    dueStatements.set(count, due);
  }
  return due;
}

/**
 * Leases the jobs `$3` for claim `$1` (those still free): due `$4` ms after
 * `{{now $2}}`; held ahead with `heldAhead`.
 */
function leaseStatement(heldAhead: boolean): Statement {
  return statement(
    `WITH now_ms AS (SELECT {{now $2}} AS t)
    UPDATE jobs SET token = $1, available_at = (SELECT t FROM now_ms) + $4,
      waited_ms = (SELECT t FROM now_ms) - available_at, ${claimSets(heldAhead)}
    WHERE id IN {{ids $3}} AND (token IS NULL OR available_at <= (SELECT t FROM now_ms))
    RETURNING ${CLAIMED_COLUMNS}, expire_at - (SELECT t FROM now_ms) AS expire_in_ms`,
  );
}
/** The leases by whether they hold their jobs ahead. */
const LEASES = { started: leaseStatement(false), heldAhead: leaseStatement(true) };

/** The rate windows of the keys `$1`. */
const RATE_WINDOWS = statement(
  "SELECT key, window_start, starts FROM rate_windows WHERE key IN {{texts $1}}",
);

/** Sets the rate windows `$1` (key, window start, claims in it). */
const COUNT_CLAIMS = statement(
  `INSERT INTO rate_windows (key, window_start, starts)
  SELECT w.key, w.window_start, w.starts
  FROM {{rows $1 key text, window_start int, starts int}} w WHERE true
  ON CONFLICT (key) DO UPDATE SET window_start = excluded.window_start, starts = excluded.starts`,
);

/**
 * Drops the rate windows of the groups of one queue and job name (keys that
 * start with `$1`) that started at or before `$2`: those that ended by `$2`
 * plus the window's length.
 */
const DROP_ENDED_WINDOWS = statement(
  `DELETE FROM rate_windows
  WHERE substr(key, 1, length(CAST($1 AS TEXT))) = CAST($1 AS TEXT) AND window_start <= $2`,
);

/**
 * The groups of queue `$1` of the names `$3` (those with a group rate limit)
 * that have a job due at `{{now $2}}`: those a full window may hold back.
 */
const RATED_GROUPS_DUE = statement(
  `SELECT g.name, g.group_key FROM job_groups g
  WHERE g.queue = $1 AND g.name IN {{texts $3}}
    AND EXISTS (SELECT 1 FROM jobs j WHERE j.group_id = g.id
      AND j.available_at <= (SELECT {{now $2}}))`,
);

/**
 * Moves queue `$1`'s round robin past group `$4` (named `$2`, `$3`: the
 * cursor of code before schema step 25).
 */
const MOVE_CURSOR = statement(
  `INSERT INTO group_cursors (queue, name, group_key, group_id) VALUES ($1, $2, $3, $4)
  ON CONFLICT (queue) DO UPDATE SET name = excluded.name, group_key = excluded.group_key,
    group_id = excluded.group_id`,
);

/** Drops the groups `$2` (id, version) of queue `$1` that have no job, unless their version moved on. */
const DROP_EMPTY = statement(
  `DELETE FROM job_groups WHERE queue = $1
    AND (id, version) IN (SELECT id, version FROM {{rows $2 id int, version int}} g)
    AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.group_id = job_groups.id)`,
);

/**
 * How long after `{{now $2}}` the earliest grouped job of queue `$1` due
 * after it becomes due (a delayed job, a retry, a lease that runs out), or
 * the earliest hold of a group of it ends: one seek per group, and one per
 * hold.
 */
const GROUPS_NEXT_DUE = statement(
  `SELECT MIN(next_at) - MIN(t) AS in_ms FROM (
    SELECT (SELECT MIN(j.available_at) FROM jobs j WHERE j.group_id = g.id
        AND j.available_at > clock.t) AS next_at, clock.t
    FROM job_groups g CROSS JOIN (SELECT {{now $2}} AS t) clock WHERE g.queue = $1
    UNION ALL
    SELECT MIN(p.until), clock.t FROM group_pauses p CROSS JOIN (SELECT {{now $2}} AS t) clock
    WHERE p.until > clock.t AND EXISTS (SELECT 1 FROM job_groups g
      WHERE g.queue = $1 AND g.name = p.name AND g.group_key = p.group_key)
    GROUP BY clock.t
  ) due`,
  { oneRow: true },
);

/**
 * Most groups one step of the grouped claim looks at: as many as a worker's
 * claim takes jobs (claims ahead included), so that with many groups a
 * claim takes one job from each, read with the window (each group's first
 * due job); asking several groups for more in one statement cost about
 * three times as much per job.
 */
const MAX_WINDOW = 256;

/**
 * The key under which group `key` of job `name` in `queue` is counted in
 * `rate_windows` (and on Redis in `P:rate:<key>`): U+0001, which no
 * `rateLimited` key may start with, then the queue and the job name, each
 * after its length in UTF-8 bytes (as Lua counts them), then the group key.
 */
export function groupRateKey(queue: string, name: string, key: string): string {
  const bytes = (text: string) => new TextEncoder().encode(text).length;
  return `\u0001${bytes(queue)}:${queue}:${bytes(name)}:${name}:${key}`;
}

/** The start of the window of `perMs` that holds `now`. */
function windowStart(now: number, perMs: number): number {
  return Math.floor(now / perMs) * perMs;
}

/**
 * The earliest time (on the store's clock, as `storeNow`) at which a group
 * of `queues` with a job due now and a full rate window sees its window
 * turn, or null: the next-due read adds it, so that an idle worker wakes
 * for it (and, its window not full after, does not wake for it again).
 */
export function* rateWindowsTurn(
  queues: readonly string[],
  now: number | null,
  storeNow: number,
  rates: Readonly<Record<string, GroupRate>>,
): Script<number | null> {
  const names = Object.keys(rates);
  if (names.length === 0) return null;
  const groups = (yield* each<{ name: string; group_key: string }>(
    RATED_GROUPS_DUE,
    queues.map((queue) => [queue, now, names]),
  )).flatMap(({ rows }, index) =>
    rows.map((row) => ({ ...row, key: groupRateKey(queues[index]!, row.name, row.group_key) }))
  );
  if (groups.length === 0) return null;
  const { rows } = yield* exec<{ key: string; window_start: number | string; starts: number }>(
    RATE_WINDOWS,
    groups.map((group) => group.key),
  );
  const windows = new Map(rows.map((row) => [row.key, row]));
  let turn: number | null = null;
  for (const group of groups) {
    const rate = rates[group.name]!;
    const start = windowStart(storeNow, rate.perMs);
    const row = windows.get(group.key);
    if (row === undefined || Number(row.window_start) < start) continue;
    if (Number(row.window_start) === start && row.starts < rate.max) continue;
    if (turn === null || start + rate.perMs < turn) turn = start + rate.perMs;
  }
  return turn;
}

/**
 * Drops the rate windows of the groups of `queues` of each job name in
 * `rates` (by its `perMs`) that ended by `endedBy` (the store's clock). Run
 * by settles at most once a minute (a scan of `rate_windows` per queue and
 * name), a minute behind their now (`ENDED_WINDOW_KEPT_MS` in upkeep.ts).
 */
export function* dropEndedWindows(
  queues: readonly string[],
  rates: Readonly<Record<string, GroupRate>>,
  endedBy: number,
): Script<void> {
  const drops = queues.flatMap((queue) =>
    Object.entries(rates).map(([name, { perMs }]) => {
      const startedBy = endedBy - perMs; // a window that started by then ended by `endedBy`
      return [groupRateKey(queue, name, ""), startedBy];
    })
  );
  if (drops.length > 0) yield* each(DROP_ENDED_WINDOWS, drops);
}

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
 * The claim with groups: `request` and `heldAhead` as
 * {@linkcode Dialect.claim} takes them, each queue's grouped jobs taken
 * round robin across its groups, its jobs without a group one more turn
 * (see the module doc). Rows in the order they were taken, the order they
 * start in: queue by queue, the turns round by round (every turn's first
 * job, then every turn's second), the plain turn's jobs in claim order.
 */
export function* claimFairly(
  dialect: Dialect,
  request: ClaimRequest,
  heldAhead: boolean,
): Script<ClaimRow[]> {
  const plain = function* (one: ClaimRequest): Script<ClaimRow[]> {
    return inClaimOrder(yield* dialect.claim(one, heldAhead), one.queues);
  };
  const { rows: any } = yield* exec(anyGroup(request.queues.length), ...request.queues);
  if (any.length === 0) return yield* plain(request);
  const claimed: ClaimRow[] = [];
  for (const queue of request.queues) {
    const limit = request.limit - claimed.length;
    if (limit <= 0) break;
    const one = { ...request, queues: [queue], limit };
    const grouped = request.queues.length === 1 ||
      (yield* exec(anyGroup(1), queue)).rows.length > 0;
    claimed.push(
      ...(grouped ? yield* claimGrouped(dialect, one, heldAhead, plain) : yield* plain(one)),
    );
  }
  return claimed;
}

/** A group as the window lists it. */
interface GroupRow {
  readonly id: number | string;
  readonly name: string;
  readonly group_key: string;
  readonly group_limit: number | null;
  readonly group_ordered: number;
  readonly version: number | string;
  readonly first_due: number | string | null;
}

/**
 * The turn of a queue's jobs without a group in its round robin: after the
 * last group in id order, before the first. The cursor names it as group
 * id 0 (and an empty name and key, for code before schema step 25, whose
 * cursor then goes on from the first group too).
 */
const PLAIN_TURN = "plain";

/** A turn of the round robin: a group, or the plain jobs'. */
type Turn = GroupRow | typeof PLAIN_TURN;

/** A row of {@linkcode GROUP_STATE}. */
interface GroupStateRow {
  readonly id: number | string | null;
  readonly leased: number | string;
  readonly head: number | string | null;
  readonly head_due: number | string | null;
}

/** The claim of `request`'s one queue (a plain claim of it: `plain`): module doc, steps 1 to 4. */
function* claimGrouped(
  dialect: Dialect,
  request: ClaimRequest,
  heldAhead: boolean,
  plain: (one: ClaimRequest) => Script<ClaimRow[]>,
): Script<ClaimRow[]> {
  const queue = request.queues[0]!;
  const now = clockParam(dialect, request.now);
  const size = Math.min(MAX_WINDOW, Math.max(4, request.limit));
  const seen = new Set<number>();
  const claimed: ClaimRow[] = [];
  // From the queue's cursor (null: the window reads it), then on from each window's last group,
  // then once from the first group.
  const START = 0;
  let from: number | null = null;
  let wrapped = false;
  let servedUpTo: Turn | undefined;
  let exhausted = false;
  // The plain turn comes once per claim, where the walk passes the end of the list. The cursor
  // stays where the walk went round the whole list and found no group the claimer could take
  // from (all paused, or of names it does not run): the plain jobs' claims then write nothing.
  let plainListed = false;
  let sawGroup = false;
  while (claimed.length < request.limit && !exhausted) {
    // Turns enough for one job each, groups read a window at a time (past the last group, the
    // plain turn, then on from the first), so that a claim near the end of the id order still
    // takes one job per turn.
    const turns: Turn[] = [];
    const want = request.limit - claimed.length;
    while (turns.length < want) {
      const { rows: window }: Result<GroupRow> = yield* exec<GroupRow>(
        request.names === undefined ? WINDOW : WINDOW_BY_NAME,
        queue,
        now,
        size,
        from,
        ...(request.names === undefined ? [] : [request.names]),
      );
      const fresh = window.filter((group) => !seen.has(Number(group.id)));
      for (const group of fresh) seen.add(Number(group.id));
      turns.push(...fresh);
      const last = window.at(-1);
      if (window.length < size || last === undefined) {
        if (!plainListed) {
          plainListed = true;
          turns.push(PLAIN_TURN);
        }
        if (wrapped) {
          exhausted = true;
          break;
        }
        wrapped = true;
        from = START;
      } else if (fresh.length === 0 && wrapped) {
        exhausted = true;
        break;
      } else {
        from = Number(last.id);
      }
    }
    if (turns.length === 0) break;
    sawGroup ||= turns.some((turn) => turn !== PLAIN_TURN);
    const taken = yield* takeTurns(dialect, request, turns, want, heldAhead, plain);
    claimed.push(...taken.rows);
    servedUpTo = turns[taken.passed];
    if (taken.full) break;
  }
  if (servedUpTo !== undefined && (sawGroup || !exhausted)) {
    yield* exec(
      MOVE_CURSOR,
      queue,
      ...(servedUpTo === PLAIN_TURN
        ? ["", "", 0]
        : [servedUpTo.name, servedUpTo.group_key, Number(servedUpTo.id)]),
    );
  }
  return claimed;
}

/**
 * The turn (its index in `supplies`, each turn's jobs to give) of each pick
 * of up to `want` jobs taken in rounds: every turn's first, then every
 * turn's second, and so on.
 */
function inRounds(supplies: readonly number[], want: number): number[] {
  const picks: number[] = [];
  for (let round = 0; picks.length < want; round++) {
    let any = false;
    for (let turn = 0; turn < supplies.length && picks.length < want; turn++) {
      if (round < supplies[turn]!) {
        picks.push(turn);
        any = true;
      }
    }
    if (!any) break;
  }
  return picks;
}

/**
 * Takes up to `want` jobs from `turns` (module doc, steps 2 to 4), held
 * ahead with `heldAhead`, the plain turn's with `plain`: the rows leased, in
 * the order the rounds took them; whether the rounds took `want` (else every
 * turn gave what it had); and the index of the last turn the cursor passes.
 */
function* takeTurns(
  dialect: Dialect,
  request: ClaimRequest,
  turns: readonly Turn[],
  want: number,
  heldAhead: boolean,
  plain: (one: ClaimRequest) => Script<ClaimRow[]>,
): Script<{ rows: ClaimRow[]; full: boolean; passed: number }> {
  const groups = turns.filter((turn): turn is GroupRow => turn !== PLAIN_TURN);
  // Each group asked as if the plain turn had nothing: what the plain jobs lack, groups give.
  const takeable = groups.length === 0 ? [] : yield* takeableIn(dialect, request, groups, want);
  // Maybe empty: no due job found (the statement checks that it has none at all).
  const empty = groups.filter((_, index) => takeable[index]!.length === 0);
  const rates = yield* rateWindowsOf(dialect, request, groups);
  rates.forEach((window, index) => {
    if (window !== null) takeable[index] = takeable[index]!.slice(0, window.left);
  });
  const groupAt = turns.map((turn) => turn === PLAIN_TURN ? -1 : groups.indexOf(turn));
  const plainAt = groupAt.indexOf(-1);
  const supplies = groupAt.map((index) => index < 0 ? want : takeable[index]!.length);
  // The plain turn's jobs: as many as the rounds would take from it, then the rounds again with
  // what it had.
  let plainRows: ClaimRow[] = [];
  let plainAsked = 0;
  if (plainAt >= 0) {
    plainAsked = inRounds(supplies, want).filter((turn) => turn === plainAt).length;
    if (plainAsked > 0) plainRows = yield* plain({ ...request, limit: plainAsked });
    supplies[plainAt] = plainRows.length;
  }
  const picks = inRounds(supplies, want);
  const given = turns.map(() => 0);
  const picked: number[] = [];
  const groupOf = new Map<number, number>();
  for (const turn of picks) {
    const index = groupAt[turn]!;
    if (index >= 0) {
      const id = takeable[index]![given[turn]!]!;
      picked.push(id);
      groupOf.set(id, index);
    }
    given[turn]!++;
  }
  let rows: (ClaimRow & { expire_in_ms?: number | string | null })[] = [];
  if (picked.length > 0) {
    rows = (yield* exec<ClaimRow & { expire_in_ms: number | string | null }>(
      heldAhead ? LEASES.heldAhead : LEASES.started,
      request.token,
      clockParam(dialect, request.now),
      picked,
      request.leaseMs,
    )).rows;
    // The expiry as far from the caller's now as it is from the store's (where the store goes by
    // its own clock; else `expire_at` is already on the caller's).
    if (dialect.usesDatabaseClock) {
      rows = rows.map((row) => ({
        ...row,
        expire_at: row.expire_in_ms === null || row.expire_in_ms === undefined
          ? null
          : request.now + Number(row.expire_in_ms),
      }));
    }
  }
  yield* countClaims(rates, groupOf, rows);
  if (empty.length > 0) {
    yield* exec(
      DROP_EMPTY,
      request.queues[0]!,
      empty.map((group) => [Number(group.id), Number(group.version)]),
    );
  }
  // RETURNING gives the rows in no set order: back in the order the rounds picked them (a job
  // another claim took meanwhile is missing), the plain turn's in theirs.
  const leased = new Map(rows.map((row) => [Number(row.id), row]));
  const taken: ClaimRow[] = [];
  let nextPicked = 0;
  let nextPlain = 0;
  for (const turn of picks) {
    if (groupAt[turn]! < 0) taken.push(plainRows[nextPlain++]!);
    else {
      const row = leased.get(picked[nextPicked++]!);
      if (row !== undefined) taken.push(row);
    }
  }
  // The turn passes every turn where the rounds took all they had; else the turn of the last
  // job taken and the turns after it with nothing to give, so that the next claim goes on with
  // the first turn this claim's last round did not come to (the plain turn's jobs are not known
  // before the rounds come to it).
  const full = picks.length === want;
  let passed = turns.length - 1;
  if (full) {
    const mayGive = (turn: number) =>
      turn === plainAt ? plainAsked === 0 || plainRows.length > 0 : supplies[turn]! > 0;
    passed = picks.at(-1)!;
    while (passed + 1 < turns.length && !mayGive(passed + 1)) passed++;
  }
  return { rows: taken, full, passed };
}

/** A limited group's rate window as the claim reads it. */
interface RateWindow {
  /** Its key in `rate_windows`. */
  readonly key: string;
  /** The current window's start. */
  readonly start: number;
  /** Claims counted in the current window. */
  readonly used: number;
  /** Claims the current window has left. */
  readonly left: number;
}

/**
 * The rate window of each of `groups` whose job name has a group rate
 * limit in `request` (null for the others): one read for them all, and one
 * of the store's clock (module doc).
 */
function* rateWindowsOf(
  dialect: Dialect,
  request: ClaimRequest,
  groups: readonly GroupRow[],
): Script<(RateWindow | null)[]> {
  const rates = request.groupRates ?? {};
  const limited = groups.map((group) => rates[group.name] ?? null);
  if (limited.every((rate) => rate === null)) return limited.map(() => null);
  const now = yield* dialect.now(request.now);
  const queue = request.queues[0]!;
  const keys = groups.map((group) => groupRateKey(queue, group.name, group.group_key));
  const { rows } = yield* exec<{ key: string; window_start: number | string; starts: number }>(
    RATE_WINDOWS,
    keys.filter((_, index) => limited[index] !== null),
  );
  const stored = new Map(rows.map((row) => [row.key, row]));
  return limited.map((rate, index) => {
    if (rate === null) return null;
    const key = keys[index]!;
    const start = windowStart(now, rate.perMs);
    const row = stored.get(key);
    const used = row === undefined || Number(row.window_start) < start
      ? 0
      // A later window than this claim's now (a claim that read its clock before another
      // claimed, or a clock behind): this claim's window is over, and that one is not its to count.
      : Number(row.window_start) > start
      ? rate.max
      : Number(row.starts);
    return { key, start, used, left: Math.max(0, rate.max - used) };
  });
}

/**
 * Adds the jobs leased (`rows`; `groupOf` gives the index of each one's
 * group) to the windows of the limited groups.
 */
function* countClaims(
  windows: readonly (RateWindow | null)[],
  groupOf: ReadonlyMap<number, number>,
  rows: readonly ClaimRow[],
): Script<void> {
  if (windows.every((window) => window === null) || rows.length === 0) return;
  const counts = windows.map(() => 0);
  for (const row of rows) counts[groupOf.get(Number(row.id))!]!++;
  const writes = windows.flatMap((window, index) =>
    window === null || counts[index] === 0
      ? []
      : [[window.key, window.start, window.used + counts[index]!]]
  );
  if (writes.length > 0) yield* exec(COUNT_CLAIMS, writes);
}

/**
 * Each of `groups`' takeable jobs, in its order, for a claim that wants
 * `want` (module doc, step 2): a group's free slots of its due jobs, an
 * ordered group's first job when it may run.
 */
function* takeableIn(
  dialect: Dialect,
  request: ClaimRequest,
  groups: readonly GroupRow[],
  want: number,
): Script<number[][]> {
  const now = clockParam(dialect, request.now);
  // Rounds take one job of each group in turn: a group gives at most this many unless the
  // others run short (then those that gave all they were asked for are asked for more).
  const share = Math.ceil(want / groups.length);
  const plain = (group: GroupRow) =>
    group.group_limit === null && Number(group.group_ordered) !== 1;
  // The common case, one job from each group of no limit and no order: the window read them.
  if (share === 1 && groups.every(plain)) {
    return groups.map((group) => group.first_due === null ? [] : [Number(group.first_due)]);
  }
  // Groups with a limit or an order need their state; the rest only their due jobs.
  const stated = groups.filter((group) => !plain(group));
  const unstated = groups.filter(plain);
  const states = yield* each<GroupStateRow>(
    GROUP_STATE,
    stated.map((group) => [
      Number(group.id),
      now,
      Math.min(share, Number(group.group_limit ?? want)),
    ]),
  );
  const stateOf = new Map(stated.map((group, index) => [group, states[index]!.rows]));
  const dueOf = new Map<GroupRow, number[]>();
  // One job each (at least as many groups as jobs to take): the window read it.
  let ask = share === 1 ? [] : unstated;
  if (share === 1) {
    for (const group of unstated) {
      dueOf.set(group, group.first_due === null ? [] : [Number(group.first_due)]);
    }
  }
  for (let limit = share; ask.length > 0; limit = want) {
    for (const group of ask) dueOf.set(group, []);
    const { rows } = yield* exec<{ rank: number | string; id: number | string }>(
      dueInGroups(ask.length),
      now,
      limit,
      ...ask.map((group) => Number(group.id)),
    );
    for (const row of rows) dueOf.get(ask[Number(row.rank)]!)!.push(Number(row.id));
    const found = [...dueOf.values()].reduce((sum, ids) => sum + ids.length, 0);
    if (limit === want || found >= want) break;
    ask = ask.filter((group) => dueOf.get(group)!.length === limit);
  }
  return groups.map((group) => {
    const due = dueOf.get(group);
    if (due !== undefined) return due;
    const rows = stateOf.get(group)!;
    const leased = Number(rows[0]?.leased ?? 0);
    const dueIds = rows.flatMap((row) => row.id === null ? [] : [Number(row.id)]);
    if (Number(group.group_ordered) === 1) {
      const head = rows[0]?.head === null || rows[0]?.head === undefined
        ? null
        : Number(rows[0].head);
      return leased === 0 && head !== null && Number(rows[0]?.head_due) === 1 ? [head] : [];
    }
    const free = group.group_limit === null ? dueIds.length : Number(group.group_limit) - leased;
    return dueIds.slice(0, Math.max(0, free));
  });
}
