/**
 * One worker tick: the claim, and the settle that records how the tick's
 * attempts ended. Rows are changed in one order everywhere: job rows first
 * (successes together, then the rest by id), then chains and batches in
 * batch order, then keys and locks, so two processes settling at once never
 * deadlock where the engine locks rows.
 *
 * @internal
 * @module
 */
import { type ClaimRow, toClaimedJobs } from "./stored_rows.ts";
import { spent } from "../rows/spend_limits.ts";
import type { MetricsRollup } from "./metrics_rollup.ts";
import type {
  ClaimedJob,
  ClaimRequest,
  Lease,
  Settlement,
  SettleResult,
  TickRecords,
} from "../store.ts";
import * as chainsBatches from "./chains_batches.ts";
import * as flows from "./flows.ts";
import { clockParam, type Dialect, KEYED, SETTLED_COLUMNS, type SettledJob } from "./dialect.ts";
import { recordFinished } from "./finished_jobs.ts";
import { dropEndedRateWindows, releaseHeld, releaseOnStart, releaseRemoved } from "./keys.ts";
import { claimFairly, dropEndedWindows, groupsNextDue, rateWindowsTurn } from "./groups.ts";
import { fireDue, withScheduled } from "./schedules.ts";
import { each, exec, type Script, wakeAfterCommit } from "./script.ts";
import { confirmStarts, dueBeforeClaim, UNCLAIM } from "./start_confirmation.ts";
import { holdGroup, type HoldsWalk, pruneHolds } from "./group_pauses.ts";
import { markBegun } from "./handler_begun.ts";
import { statement } from "./statement.ts";
import { recordSpans, writeLogs } from "./job_logs.ts";
import * as steps from "./steps.ts";
import { ENDED_WINDOW_KEPT_MS, type PruneSchedule } from "./upkeep.ts";
import { recordMetrics } from "./stats.ts";

const PROGRESS = statement("UPDATE jobs SET progress = $1 WHERE id = $2 AND token = $3");
/**
 * Puts a job back, due `$1` ms after `$7` (the release's time; on
 * PostgreSQL the database's now when null, so a worker whose clock is off
 * still waits out the delay it asked for). With `$8` 1 its handler
 * started, so it no longer expires, and it ended without killing its
 * worker, so it is no longer suspect. With `$9` the lease of a claim that
 * never started it (`unclaimedLeaseMs`), a job still held ahead goes back
 * due when that claim found it due, as {@linkcode UNCLAIM} gives it back.
 */
const RELEASE = statement(
  `UPDATE jobs SET token = NULL, last_error = $2,
    available_at = CASE WHEN $9 > 0 AND claimed_ahead = 1
      THEN ${dueBeforeClaim("$9")} ELSE {{now $7}} + $1 END,
    attempts = attempts - $3, crashes = crashes + $4, claimed_ahead = 0,
    expire_at = CASE WHEN $8 = 1 THEN NULL ELSE expire_at END,
    suspect = CASE WHEN $8 = 1 THEN 0 ELSE suspect END
  WHERE id = $5 AND token = $6 RETURNING ${SETTLED_COLUMNS}`,
  { oneRow: true },
);

/**
 * Parks a job: put back unleased, due `$1` ms after `$4` (as
 * {@linkcode RELEASE}), its attempt given back; not a retry, so its last
 * error and crashes stay as they were. It has started, so it no longer
 * expires, and its handler ran to the park, so it is no longer suspect.
 */
const PARK = statement(
  `UPDATE jobs SET token = NULL, available_at = {{now $4}} + $1, attempts = attempts - 1,
    claimed_ahead = 0, expire_at = NULL, suspect = 0
  WHERE id = $2 AND token = $3 RETURNING ${SETTLED_COLUMNS}`,
  { oneRow: true },
);

/**
 * How long after `{{now $2}}` (the caller's now, or the database's) the
 * earliest job of queue `$1` due after it becomes due. It walks
 * `jobs_claim_order` (queue, priority, due time): one seek per priority
 * level to find the levels, then one per level to its first job due after
 * now. A queue has few levels, and an index by (queue, due time) alone, which
 * would answer with one seek, cost every dispatch a third page to write.
 */
const NEXT_DUE = statement(
  `WITH RECURSIVE levels(priority) AS (
    SELECT MAX(priority) FROM jobs WHERE queue = $1 AND group_key IS NULL
    UNION ALL
    SELECT (SELECT MAX(priority) FROM jobs WHERE queue = $1 AND group_key IS NULL
      AND priority < levels.priority)
    FROM levels WHERE levels.priority IS NOT NULL
  )
  SELECT MIN(in_ms) AS in_ms FROM (
    SELECT (SELECT MIN(available_at) FROM jobs WHERE queue = $1 AND group_key IS NULL
        AND priority = levels.priority AND available_at > clock.t) - clock.t AS in_ms
    FROM levels CROSS JOIN (SELECT {{now $2}} AS t) clock
    WHERE levels.priority IS NOT NULL
  ) due`,
  { oneRow: true },
);

/**
 * The earliest time after `after` (the caller's now) at which a job of
 * `queues` becomes due (a delayed job, a retry, or a lease that runs out),
 * or null: a few seeks per queue on `jobs_claim_order`. The time is on the
 * caller's clock: as long after `after` as the job is due after the
 * store's now, so a worker whose clock is off still wakes when it is due.
 * With `groupRates`, a group over its rate limit with a job due now is due
 * when its window turns.
 */
export function* nextDueAt(
  dialect: Dialect,
  queues: readonly string[],
  after: number,
  groupRates?: ClaimRequest["groupRates"],
): Script<number | null> {
  const now = clockParam(dialect, after);
  const results = yield* each<{ in_ms: number | string | null }>(
    NEXT_DUE,
    queues.map((queue) => [queue, now]),
  );
  results.push(...yield* groupsNextDue(queues, now));
  if (groupRates !== undefined) {
    const storeNow = yield* dialect.now(after);
    const turn = yield* rateWindowsTurn(queues, now, storeNow, groupRates);
    if (turn !== null) results.push({ rows: [{ in_ms: turn - storeNow }], count: 1 });
  }
  let next: number | null = null;
  for (const { rows: [row] } of results) {
    if (row?.in_ms === null || row?.in_ms === undefined) continue;
    const at = after + Number(row.in_ms);
    if (next === null || at < next) next = at;
  }
  return next;
}

/**
 * Marks claimed rows as started (`claimed_ahead` 0): those of a claim that
 * held every job it took ahead (`claimSets` in `./dialect.ts`) which start at once.
 */
const START_AT_ONCE = statement(
  "UPDATE jobs SET claimed_ahead = 0 WHERE id IN {{ids $1}} AND token = $2",
);

/**
 * Fires the schedules' due slots (when the request carries them), leases due
 * jobs in one statement, and releases the keys that end when their job
 * starts. With `aheadFrom`, the jobs past the first `aheadFrom` are held
 * ahead, not started: their row says so (`claimed_ahead`), their keys stay
 * until their start is confirmed ({@linkcode confirmStarts}), and each comes
 * back marked `ahead`. The first job past them that is not to be held ahead
 * (a batch job) and every job after it are given back in the same
 * transaction. Such a claim marks every job it takes held ahead, then the
 * first `aheadFrom` (or fewer) started: a worker starts a few of a claim's
 * jobs at once and holds the many others.
 */
export function* claim(dialect: Dialect, request: ClaimRequest): Script<ClaimedJob[]> {
  if (request.schedules !== undefined) yield* fireDue(dialect, request.schedules, request.now);
  if (request.limit === 0) return [];
  // The slots a claim that holds jobs ahead starts at once; undefined when it holds none.
  const { aheadFrom } = request;
  const startsAtOnce = aheadFrom !== undefined && request.limit > aheadFrom ? aheadFrom : undefined;
  let rows: ClaimRow[] = yield* claimFairly(dialect, request, startsAtOnce !== undefined);
  let jobs: ClaimedJob[];
  if (startsAtOnce === undefined) {
    jobs = toClaimedJobs(rows, request.token);
  } else if (rows.length <= startsAtOnce) {
    // Fewer than the free slots: every one starts.
    jobs = toClaimedJobs(rows, request.token);
    if (rows.length > 0) {
      yield* exec(START_AT_ONCE, rows.map((row) => Number(row.id)), request.token);
    }
  } else {
    const ordered = toClaimedJobs(rows, request.token);
    const limits = request.spendLimits ?? {};
    // Spent already: it fails without starting, so holding it costs nothing.
    const refused = (job: ClaimedJob) => {
      const limit = limits[job.name];
      return limit !== undefined && spent(job, limit);
    };
    // A batch job waits unleased until a slot can start it, so a cancel of its batch can skip it.
    const cut = ordered.findIndex((job, index) =>
      index >= startsAtOnce && job.batchId !== null && !refused(job)
    );
    const back = new Set(
      cut < 0 ? [] : ordered.slice(cut).filter((job) => !refused(job)).map((job) => job.id),
    );
    if (back.size > 0) yield* exec(UNCLAIM, request.leaseMs, [...back], request.token);
    jobs = ordered.filter((job) => !back.has(job.id));
    const startIds = jobs.slice(0, startsAtOnce).map((job) => job.id);
    if (startIds.length > 0) yield* exec(START_AT_ONCE, startIds, request.token);
    for (let index = startsAtOnce; index < jobs.length; index++) {
      jobs[index] = { ...jobs[index]!, ahead: true };
    }
    const started = new Set(startIds);
    rows = rows.filter((row) => started.has(Number(row.id)));
  }
  // A job whose middleware the worker checks first starts when `acquire` lets it: it keeps its key.
  const checked = new Set(request.checkedNames);
  yield* releaseOnStart(
    rows.filter((row) => Number(row.keyed) === KEYED.untilStarted && !checked.has(row.name))
      .map((row) => Number(row.id)),
  );
  return request.readsScheduled === true ? yield* withScheduled(jobs) : jobs;
}

/**
 * Applies settlements, each fenced by its token, writes what the tick
 * records beside them (log lines, retried attempts' spans), then claims, all
 * in one transaction; `upkeep` is what the store keeps between its ticks.
 */
export function* settle(
  dialect: Dialect,
  upkeep: {
    readonly metrics: MetricsRollup;
    readonly finished: PruneSchedule;
    readonly logs: PruneSchedule;
    readonly rateWindows: PruneSchedule;
    readonly holds: HoldsWalk;
  },
  settlements: readonly Settlement[],
  then: ClaimRequest | undefined,
  records: TickRecords = {},
): Script<SettleResult> {
  // Job control, before the job rows change: keep the ended (their awaiters are woken after the
  // commit, as the statements that delete them ask).
  yield* recordFinished(dialect, settlements, upkeep.finished);
  const jobs = yield* applyToJobs(dialect, settlements);
  yield* holdGroups(dialect, settlements, jobs);
  const applied = jobs.map((job) => job !== "lost");
  const settledJobs = jobs.flatMap((job) => job === "lost" || job === null ? [] : [job]);
  const retried = new Set(
    settlements.flatMap((s, index) => s.kind === "release" && applied[index] ? [s.id] : []),
  );
  yield* recordSpans((records.spans ?? []).filter((span) => retried.has(span.id)));
  yield* recordMetrics(settlements, applied, settledJobs, upkeep.metrics);
  const at = [...settlements, ...records.logs?.lines ?? []]
    .reduce((latest, { at }) => Math.max(latest, at), -Infinity);
  yield* writeLogs(dialect, records.logs, upkeep.logs, at);
  // Ended rate windows, of `rateLimited` keys and of groups, at most once a minute.
  if (then !== undefined && upkeep.rateWindows.due(then.now)) {
    const endedBy = (yield* dialect.now(then.now)) - ENDED_WINDOW_KEPT_MS;
    yield* dropEndedRateWindows(endedBy);
    if (then.groupRates !== undefined) {
      yield* dropEndedWindows(then.queues, then.groupRates, endedBy);
    }
  }
  // Holds whose end has passed, after this settle's own holds (which replace a passed one).
  const upkeepAt = then?.now ?? at;
  if (Number.isFinite(upkeepAt)) yield* pruneHolds(dialect, upkeep.holds, upkeepAt);

  // Chains and batches second, in batch order: the batch rows are what processes share.
  const moves = settlements.flatMap((settlement, index) => {
    const job = jobs[index]!;
    return job === "lost" || job === null ? [] : [{ settlement, job, index }];
  }).sort((a, b) => (a.job.batch_id ?? 0) - (b.job.batch_id ?? 0) || a.index - b.index);
  // What a chain or batch queues next is due by the store's clock: the settlements' times move
  // onto it (one read of the database's clock on PostgreSQL, only when such a job settled).
  const linked = moves.some(({ job }) =>
    job.batch_id !== null || job.chain_id !== null || job.flow_id !== null
  );
  const shift = linked ? (yield* dialect.now(at)) - at : 0;
  let queued = 0;
  const skipped: number[] = [];
  for (const { settlement, job } of moves) {
    if (settlement.kind === "release" || settlement.kind === "park") {
      const putBack = yield* chainsBatches.putBack(settlement.id, job, settlement.at + shift);
      queued += putBack.queued;
      if (putBack.skipped) skipped.push(settlement.id);
    } else if (settlement.kind !== "progress" && settlement.kind !== "step") {
      const output = settlement.kind === "complete" ? settlement.output ?? null : null;
      queued += yield* chainsBatches.settled(job, settlement.kind, settlement.at + shift, output);
    }
  }
  // Flows third, in flow order: each locks its flow's row, always in the same order.
  const flowMoves = moves.filter(({ job }) => job.flow_id !== null)
    .sort((a, b) => Number(a.job.flow_id) - Number(b.job.flow_id));
  for (const { settlement, job } of flowMoves) {
    if (
      settlement.kind === "complete" || settlement.kind === "fail" || settlement.kind === "cancel"
    ) {
      queued += yield* flows.settled(
        { ...job, id: settlement.id },
        settlement.kind,
        settlement.at + shift,
        settlement.kind === "complete" ? settlement.output ?? null : null,
        settlement.kind === "fail"
          ? settlement.error.message
          : settlement.kind === "cancel"
          ? settlement.reason
          : null,
      );
    }
  }

  // Keys and locks last, and only for the jobs whose row says they hold any.
  const ended: number[] = [];
  const attempts: Lease[] = [];
  let released = 0;
  for (const { settlement, job } of moves) {
    if (Number(job.locked) === 1) attempts.push({ id: settlement.id, token: settlement.token });
    if (settlement.kind === "release" || settlement.kind === "park") {
      if (!skipped.includes(settlement.id)) released++;
    } else if (Number(job.keyed) === KEYED.untilSettled) ended.push(settlement.id);
  }
  yield* releaseHeld(ended, attempts);
  yield* releaseRemoved(skipped);
  // The starts of jobs claimed ahead, after the settles of the jobs before them.
  const started = records.starts === undefined ? [] : yield* confirmStarts(dialect, records.starts);
  if (records.begun !== undefined) yield* markBegun(records.begun);
  // Wake other processes (after the commit) only when this made a job claimable: a retry or a
  // park (due at once when its wait's signal came already), a follow-up queued, or a group's slot
  // freed. A grouped job's settle frees a slot of its group: jobs held back by its limit become
  // claimable.
  const freed = settledJobs.some((job) => job.group_key !== null && job.group_key !== undefined);
  if (released > 0 || queued > 0 || freed) yield* wakeAfterCommit();
  return { applied, claimed: then === undefined ? [] : yield* claim(dialect, then), started };
}

/**
 * Whether a settle only marks starts: it confirms the starts of jobs
 * claimed ahead or marks handlers begun, and settles, claims and records
 * nothing beside. It runs as the engine's `"unflushed statements"`: on
 * PostgreSQL each statement is its own commit, which need not wait for the
 * disk. Each statement leaves the rows whole when those after it are lost
 * (to a worker's death, or to a crash of the database server, which loses
 * the last unflushed commits and every commit after them):
 * - a confirmation, one per claim token, starts the jobs it marks and
 *   leaves the others held ahead;
 * - a job refused for a pause and not yet given back stays held ahead
 *   until its lease runs out, when a claim takes it over charged nothing,
 *   and the locks its claim took expire, as when a worker dies holding
 *   jobs ahead;
 * - a job given back whose claim's locks were not yet released waits,
 *   like any job, until those locks expire;
 * - a key that ends when its job starts and was not yet released holds
 *   until the job's next start (a claim that takes the job over releases
 *   it) or until the job ends, and holds nothing once the job is gone;
 * - a job whose begin mark was lost is charged nothing and only becomes
 *   suspect.
 *
 * A worker that lives on asks again with a later tick, and the whole
 * script runs again: a confirmation confirms again the jobs an earlier try
 * confirmed (`confirmStarts`), and every other statement changes nothing
 * the second time.
 *
 * What a settle of finished jobs writes (a success, a failure, a retry)
 * stays one flushed transaction. At concurrency 1 a worker writes one such
 * settle per job, usually one statement: on PostgreSQL one round trip with
 * no `BEGIN` or `COMMIT` and no wait for the flush.
 */
export function onlyMarksStarts(
  settlements: readonly Settlement[],
  then: ClaimRequest | undefined,
  records: TickRecords | undefined,
): boolean {
  return settlements.length === 0 && then === undefined && records !== undefined &&
    (records.starts !== undefined || records.begun !== undefined) &&
    records.logs === undefined && (records.spans ?? []).length === 0;
}

/**
 * The job-row half of a settle: step memos first (while the claims that
 * wrote them still hold their jobs, when the same tick ends their attempts),
 * then successes in one step, then each other settlement in id order. For
 * each settlement: the job as settled (null for a progress or step write,
 * whose job stays leased), or `"lost"` when its lease was lost.
 */
function* applyToJobs(
  dialect: Dialect,
  settlements: readonly Settlement[],
): Script<(SettledJob | null | "lost")[]> {
  const jobs: (SettledJob | null | "lost")[] = settlements.map(() => "lost");
  for (const [index, settlement] of settlements.entries()) {
    if (settlement.kind === "step") jobs[index] = yield* applyToJob(dialect, settlement);
  }
  const successes = settlements.filter((settlement) => settlement.kind === "complete");
  const completed = new Map<number, SettledJob>();
  for (const job of yield* dialect.completeJobs(successes)) completed.set(Number(job.id), job);
  settlements.forEach((settlement, index) => {
    if (settlement.kind === "complete") jobs[index] = completed.get(settlement.id) ?? "lost";
  });
  const others = [...settlements.keys()]
    .filter((index) =>
      settlements[index]!.kind !== "complete" && settlements[index]!.kind !== "step"
    )
    .sort((a, b) => settlements[a]!.id - settlements[b]!.id);
  for (const index of others) jobs[index] = yield* applyToJob(dialect, settlements[index]!);
  return jobs;
}

/**
 * Pauses the groups that releases held back (`holdsGroup`), until each
 * release's due time, in group order (two settles holding the same groups
 * lock their rows in the same order).
 */
function* holdGroups(
  dialect: Dialect,
  settlements: readonly Settlement[],
  jobs: readonly (SettledJob | null | "lost")[],
): Script<void> {
  const holds = settlements.flatMap((settlement, index) => {
    const job = jobs[index];
    if (settlement.kind !== "release" || settlement.holdsGroup !== true) return [];
    if (job === "lost" || job === null || job === undefined) return [];
    if (job.group_key === null || job.group_key === undefined) return [];
    return [{ name: job.name, key: job.group_key, settlement }];
  }).sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0
  );
  for (const { name, key, settlement } of holds) {
    yield* holdGroup(dialect, name, key, settlement.at, settlement.availableAt);
  }
}

/** One release, park, failure, progress or step write on its job row (a memo with its job). */
function* applyToJob(dialect: Dialect, settlement: Settlement): Script<SettledJob | null | "lost"> {
  const { id, token } = settlement;
  switch (settlement.kind) {
    case "complete":
      throw new Error("complete settlements are applied together, by completeJobs");
    case "progress":
      return (yield* exec(PROGRESS, settlement.percent, id, token)).count === 1 ? null : "lost";
    case "release": {
      const { rows: [job] } = yield* exec<SettledJob>(
        RELEASE,
        settlement.availableAt - settlement.at,
        settlement.error,
        settlement.refundAttempt ? 1 : 0,
        settlement.crashed ? 1 : 0,
        id,
        token,
        clockParam(dialect, settlement.at),
        !settlement.refundAttempt || settlement.started ? 1 : 0,
        settlement.unclaimedLeaseMs ?? 0, // 0: not a give-back of an unstarted claim
      );
      return job ?? "lost";
    }
    case "park": {
      const { rows: [job] } = yield* exec<SettledJob>(
        PARK,
        settlement.availableAt - settlement.at,
        id,
        token,
        clockParam(dialect, settlement.at),
      );
      if (job === undefined) return "lost";
      yield* steps.parked(dialect, settlement);
      return job;
    }
    case "step":
      return (yield* steps.writeStep(dialect, settlement)) ? null : "lost";
    case "fail":
      return (yield* dialect.failJob(settlement, settlement.error)) ?? "lost";
    case "cancel":
      return (yield* dialect.completeJobs([{ id, token }]))[0] ?? "lost";
  }
}
