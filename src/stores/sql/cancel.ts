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
import { clockParam, type Dialect, LINK_COLUMNS } from "./dialect.ts";
import { recordCancelled } from "./finished_jobs.ts";
import { releaseRemoved } from "./keys.ts";
import { exec, type Script, wakeAfterCommit } from "./script.ts";
import { statement } from "./statement.ts";
import * as steps from "./steps.ts";

/**
 * Job `$1`, locked, and whether it runs: its lease still runs at `now`,
 * `{{now $2}}`, and it started (a job claimed ahead has not).
 */
const FIND = statement(
  `SELECT id, keyed, ${LINK_COLUMNS}, token,
    CASE WHEN token IS NOT NULL AND available_at > {{now $2}} AND claimed_ahead = 0 THEN 1
      ELSE 0 END AS leased,
    {{now $2}} AS now
  FROM jobs WHERE id = $1 {{forUpdate}}`,
  { oneRow: true },
);
const FINISHED = statement(
  `SELECT id FROM completed_jobs WHERE id = $1 UNION ALL SELECT id FROM failed_jobs WHERE id = $1`,
);
const REMOVE = statement("DELETE FROM jobs WHERE id = $1");
const ASK_CANCEL = statement("UPDATE jobs SET cancel_requested = $1 WHERE id = $2");
const CANCELS_ASKED = statement(
  `SELECT id, token, cancel_requested FROM jobs
  WHERE id IN {{ids $1}} AND cancel_requested IS NOT NULL`,
);

/**
 * Cancels job `id`: one not started (not leased, claimed ahead by a worker
 * that has not started it, or whose worker died) is recorded as cancelled
 * and deleted (a worker holding it ahead then finds its start refused), its
 * batch counting it as skipped, its chain's
 * `catch` queued and its keys and locks released; a running one gets its
 * cancel asked, for its worker to see.
 */
export function* cancel(dialect: Dialect, request: CancelRequest): Script<CancelOutcome> {
  const { id, reason, keepUntil } = request;
  const { rows: [job] } = yield* exec<
    JobLinks & { id: number; token: number | null; leased: number; now: number; keyed: number }
  >(FIND, id, clockParam(dialect, request.now));
  if (job === undefined) {
    return (yield* exec(FINISHED, id)).rows.length > 0 ? "finished" : "not-found";
  }
  if (Number(job.leased) === 1) {
    yield* exec(ASK_CANCEL, reason, id);
    yield* wakeAfterCommit();
    return "cancelling";
  }
  // The store's now (the database's on PostgreSQL), read by the find: what the cancel queues
  // (a chain's catch, a batch's callbacks) is due by it.
  const now = Number(job.now);
  const keepMs = keepUntil - request.now;
  if (keepMs > 0) {
    yield* recordCancelled(id, job.token === null ? null : Number(job.token), reason, keepMs, now);
  }
  yield* exec(REMOVE, id);
  yield* chainsBatches.settled(job, "cancel", now);
  yield* flows.settled(job, "cancel", now, null, reason);
  yield* releaseRemoved([id]);
  yield* steps.dropRemoved([id]); // kept as cancelled, it keeps them
  yield* wakeAfterCommit();
  return "cancelled";
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
