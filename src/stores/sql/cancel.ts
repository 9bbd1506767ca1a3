/**
 * Cancels in SQL: removing a job that has not started (kept as cancelled,
 * its chain and batch moved on, its keys released), or asking the worker of
 * a running one, which reads the asks through {@linkcode cancelsAsked}.
 *
 * @internal
 * @module
 */
import type { JobLinks } from "./stored_rows.ts";
import type { CancelOutcome, CancelRequest, CancelRequested } from "../rows/job_control.ts";
import type { Lease } from "../store.ts";
import * as chainsBatches from "./chains_batches.ts";
import * as flows from "./flows.ts";
import { clockParam, type Dialect, LINK_COLUMNS, runningAt } from "./dialect.ts";
import { recordCancelled } from "./finished_jobs.ts";
import { releaseRemoved } from "./keys.ts";
import { exec, type Script, wakeAfterCommit } from "./script.ts";
import { statement } from "./statement.ts";
import * as steps from "./steps.ts";

/**
 * What a cancel reads of a job: whether it runs (its lease still runs at
 * `now`, `{{now $2}}`, and it started: a job claimed ahead has not).
 */
const FOUND_COLUMNS = `id, keyed, ${LINK_COLUMNS}, token, claimed_ahead,
    CASE WHEN ${runningAt("{{now $2}}")} THEN 1 ELSE 0 END AS leased,
    {{now $2}} AS now`;
/** Job `$1`, locked. */
const FIND = statement(`SELECT ${FOUND_COLUMNS} FROM jobs WHERE id = $1 {{forUpdate}}`, {
  oneRow: true,
});
/** Jobs `{{ids $1}}`, in id order, each locked unless another transaction holds it: then left out. */
const FIND_UNHELD = statement(
  `SELECT ${FOUND_COLUMNS} FROM jobs WHERE id IN {{ids $1}} ORDER BY id {{skipLocked}}`,
);
const STORED = statement("SELECT id FROM jobs WHERE id IN {{ids $1}}");
const FINISHED = statement(
  `SELECT id FROM completed_jobs WHERE id IN {{ids $1}}
  UNION ALL SELECT id FROM failed_jobs WHERE id IN {{ids $1}}`,
);
const REMOVE = statement("DELETE FROM jobs WHERE id IN {{ids $1}}");
const ASK_CANCEL = statement("UPDATE jobs SET cancel_requested = $1 WHERE id = $2");
const CANCELS_ASKED = statement(
  `SELECT id, token, cancel_requested FROM jobs
  WHERE id IN {{ids $1}} AND cancel_requested IS NOT NULL`,
);

/** A job a cancel found, locked. */
type FoundJob = JobLinks & {
  id: number;
  token: number | null;
  /** 1 when a worker holds it ahead: the attempt its claim counted is not one. */
  claimed_ahead: number;
  leased: number;
  now: number;
  keyed: number;
};

/**
 * Cancels job `id`: one not started (not leased, claimed ahead by a worker
 * that has not started it, or whose worker died) is recorded as cancelled
 * and deleted (a worker holding it ahead then finds its start refused), its
 * batch counting it as skipped, its chain's `catch` queued, its flow moved
 * on and its keys and locks released; a running one gets its cancel asked,
 * for its worker to see.
 */
export function* cancel(dialect: Dialect, request: CancelRequest): Script<CancelOutcome> {
  const { id, reason, now, keepUntil } = request;
  const { rows } = yield* exec<FoundJob>(FIND, id, clockParam(dialect, now));
  const outcomes = yield* cancelFound(rows, { jobs: [{ id, keepUntil }], reason, now });
  return outcomes.get(id) ??
    ((yield* exec(FINISHED, [id])).rows.length > 0 ? "finished" : "not-found");
}

/** Jobs to cancel together, for one reason, at one time. */
export interface JobsToCancel {
  /** Each job's id, and until when it is kept as cancelled (see `CancelRequest.keepUntil`). */
  readonly jobs: readonly { readonly id: number; readonly keepUntil: number }[];
  /** Why, kept as each one's error. */
  readonly reason: string;
  /** Now. */
  readonly now: number;
}

/**
 * Cancels each of `request.jobs` as {@linkcode cancel} does, in one go,
 * except one whose row another transaction holds right now: `"held"`,
 * nothing changed, where `cancel` would wait for it. It never waits for a
 * job's row, so it can hold other rows meanwhile (a flow's) without ever
 * closing a cycle of waits. Each job's outcome, by id.
 */
export function* cancelUnheld(
  dialect: Dialect,
  request: JobsToCancel,
): Script<Map<number, CancelOutcome | "held">> {
  const ids = request.jobs.map((job) => job.id);
  if (ids.length === 0) return new Map();
  const { rows } = yield* exec<FoundJob>(FIND_UNHELD, ids, clockParam(dialect, request.now));
  const outcomes: Map<number, CancelOutcome | "held"> = yield* cancelFound(rows, request);
  const missing = ids.filter((id) => !outcomes.has(id));
  if (missing.length === 0) return outcomes;
  const stored = new Set((yield* exec<{ id: number }>(STORED, missing)).rows.map(rowId));
  const finished = new Set((yield* exec<{ id: number }>(FINISHED, missing)).rows.map(rowId));
  for (const id of missing) {
    outcomes.set(id, stored.has(id) ? "held" : finished.has(id) ? "finished" : "not-found");
  }
  return outcomes;
}

/** The cancel of the jobs `found` (locked) of `request`: each one's outcome, by id. */
function* cancelFound(
  found: readonly FoundJob[],
  request: JobsToCancel,
): Script<Map<number, CancelOutcome>> {
  const { reason } = request;
  const outcomes = new Map<number, CancelOutcome>();
  if (found.length === 0) return outcomes;
  const unstarted: FoundJob[] = [];
  for (const job of found) {
    if (Number(job.leased) === 1) {
      yield* exec(ASK_CANCEL, reason, Number(job.id));
      outcomes.set(Number(job.id), "cancelling");
    } else {
      unstarted.push(job);
      outcomes.set(Number(job.id), "cancelled");
    }
  }
  if (unstarted.length > 0) {
    // The store's now (the database's on PostgreSQL), read by the find: what the cancel queues
    // (a chain's catch, a batch's callbacks) is due by it.
    const now = Number(unstarted[0]!.now);
    const keepUntil = new Map(request.jobs.map((job) => [job.id, job.keepUntil]));
    yield* recordCancelled(
      unstarted.flatMap((job) => {
        const keepMs = keepUntil.get(Number(job.id))! - request.now;
        const token = job.token === null ? null : Number(job.token);
        const heldAhead = token !== null && Number(job.claimed_ahead) === 1;
        return keepMs > 0 ? [{ id: Number(job.id), token, keepMs, heldAhead }] : [];
      }),
      reason,
      now,
    );
    const ids = unstarted.map(rowId);
    yield* exec(REMOVE, ids);
    for (const job of unstarted) yield* chainsBatches.settled(job, "cancel", now);
    yield* flows.cancelled(unstarted, now, reason);
    yield* releaseRemoved(ids);
    yield* steps.dropRemoved(ids); // kept as cancelled, they keep them
  }
  yield* wakeAfterCommit();
  return outcomes;
}

/** A row's id, as a number. */
function rowId(row: { id: number }): number {
  return Number(row.id);
}

/** The leases among `leases` whose job had a cancel asked, with the reason. */
export function* cancelsAsked(leases: readonly Lease[]): Script<CancelRequested[]> {
  if (leases.length === 0) return [];
  const { rows } = yield* exec<{ id: number; token: number; cancel_requested: string }>(
    CANCELS_ASKED,
    leases.map((lease) => lease.id),
  );
  const held = new Set(leases.map((lease) => `${lease.id}:${lease.token}`));
  return rows.filter((row) => held.has(`${row.id}:${row.token}`)).map((row) => ({
    id: Number(row.id),
    token: Number(row.token),
    reason: row.cancel_requested,
  }));
}
