/**
 * Rows as the SQL stores read them (snake_case columns), and their mapping to
 * the store's row types and the public read models: one place for both
 * engines, so SQLite and PostgreSQL hand out the same objects.
 *
 * @internal
 * @module
 */
import type {
  BatchRow,
  ClaimedJob,
  FailedJob,
  FinishedJob,
  FinishedState,
  RunningJobOnQueue,
} from "../store.ts";

/** The links of a job to its chain, batch and flow, as the settling statements return them. */
export interface JobLinks {
  readonly batch_id: number | null;
  readonly batch_member: number;
  readonly chain_id: number | null;
  /** Absent where a statement does not return it (the flow then does not move). */
  readonly flow_id?: number | null;
}

/** A claimed job as the claim statement returns it. */
export interface ClaimRow {
  readonly id: number;
  readonly queue: string;
  readonly name: string;
  readonly payload: string;
  readonly priority: number;
  readonly attempts: number;
  readonly crashes: number;
  readonly retry_until: number | null;
  readonly last_error: string | null;
  readonly created_at: number;
  readonly batch_id: number | null;
  /** Whether and until when it holds a key (`jobs.keyed`). */
  readonly keyed: number;
  /** 1 when the claim took over an expired lease (`jobs.recovered`). */
  readonly recovered: number;
  /** The reason of a cancel asked of it, or null (`jobs.cancel_requested`). */
  readonly cancel_requested: string | null;
  /** How long it had been due when claimed, in ms: the longer, the earlier its due time. */
  readonly waited_ms: number | string | null;
  /** The `traceparent` active at dispatch, or null. */
  readonly trace: string | null;
  /** The `traceparent` of its last retried attempt's span, or null. */
  readonly last_span: string | null;
  /** When it expires unless started, or null (`jobs.expire_at`). */
  readonly expire_at: number | string | null;
  /** A flow node's parents' outputs and errors (JSON), or null (`jobs.flow_parents`). */
  readonly flow_parents?: string | null;
}

/** A failed job as the listing statements return it. */
export interface FailedRow {
  readonly id: number;
  readonly queue: string;
  readonly name: string;
  readonly payload: string;
  readonly error: string;
  readonly stack: string | null;
  readonly attempts: number;
  readonly crashes: number;
  readonly created_at: number;
  readonly failed_at: number;
  readonly batch_id: number | null;
  readonly chain_id: number | null;
}

/** A leased job as the running-jobs statement returns it. */
export interface RunningRow {
  readonly id: number;
  readonly queue: string;
  readonly name: string;
  readonly attempts: number;
  readonly progress: number | null;
  readonly available_at: number;
  readonly batch_id: number | null;
}

/** A batch row. */
export interface StoredBatch {
  readonly id: number;
  readonly name: string;
  readonly total: number;
  readonly pending: number;
  readonly failed: number;
  readonly skipped: number;
  readonly allow_failures: number;
  readonly created_at: number;
  readonly cancelled_at: number | null;
  readonly finished_at: number | null;
}

/**
 * The rows of a plain claim (an `UPDATE … RETURNING`, in no set order) put
 * back in its claim order: queues in the order given, then priority, then
 * due time (longest waited first), then id.
 */
export function inClaimOrder<Row extends ClaimRow>(
  rows: readonly Row[],
  queues: readonly string[],
): Row[] {
  const ranks = new Map(queues.map((queue, index) => [queue, index]));
  const rank = (queue: string) => ranks.get(queue) ?? -1;
  return [...rows].sort((a, b) =>
    rank(a.queue) - rank(b.queue) || b.priority - a.priority ||
    Number(b.waited_ms) - Number(a.waited_ms) || a.id - b.id
  );
}

/**
 * Claimed rows as jobs, in the order given: the order the claim took them
 * in, which is the order they start in (a grouped claim's round robin
 * across its groups, a plain claim's {@linkcode inClaimOrder}).
 */
export function toClaimedJobs(rows: readonly ClaimRow[], token: number): ClaimedJob[] {
  return rows
    .map((row) => ({
      id: row.id,
      queue: row.queue,
      name: row.name,
      payload: row.payload,
      priority: row.priority,
      attempts: row.attempts,
      crashes: row.crashes,
      recovered: Number(row.recovered) === 1,
      retryUntil: row.retry_until,
      lastError: row.last_error,
      createdAt: row.created_at,
      batchId: row.batch_id,
      token,
      // Only when set: a cancel asked while an earlier attempt ran is rare.
      ...(row.cancel_requested !== null && row.cancel_requested !== undefined &&
        { cancelRequested: row.cancel_requested }),
      waitedMs: row.waited_ms === null ? 0 : Math.max(0, Number(row.waited_ms)),
      trace: row.trace,
      lastSpan: row.last_span,
      expireAt: row.expire_at === null || row.expire_at === undefined
        ? null
        : Number(row.expire_at),
      ...(row.flow_parents !== null && row.flow_parents !== undefined &&
        { flowParents: row.flow_parents }),
    }));
}

/** A failed job as the store hands it out. */
export function toFailedJob(row: FailedRow): FailedJob {
  return {
    id: row.id,
    queue: row.queue,
    name: row.name,
    payload: row.payload,
    error: row.error,
    stack: row.stack,
    attempts: row.attempts,
    crashes: row.crashes,
    createdAt: new Date(row.created_at),
    failedAt: new Date(row.failed_at),
    batchId: row.batch_id,
    chainId: row.chain_id,
  };
}

/** A running job as the store hands it out. */
export function toRunningJob(row: RunningRow): RunningJobOnQueue {
  return {
    id: row.id,
    queue: row.queue,
    name: row.name,
    attempt: row.attempts,
    progress: row.progress,
    leasedUntil: new Date(row.available_at),
    batchId: row.batch_id,
  };
}

/** A batch row as the store hands it out. */
export function toBatchRow(row: StoredBatch): BatchRow {
  return {
    id: row.id,
    name: row.name,
    total: row.total,
    pending: row.pending,
    failed: row.failed,
    skipped: row.skipped,
    allowFailures: row.allow_failures === 1,
    createdAt: row.created_at,
    cancelledAt: row.cancelled_at,
    finishedAt: row.finished_at,
  };
}

/** Counted batch jobs per batch. */
export function countMembers(rows: readonly JobLinks[]): Map<number, number> {
  const counts = new Map<number, number>();
  for (const { batch_id: batchId, batch_member: member } of rows) {
    if (batchId !== null && member === 1) counts.set(batchId, (counts.get(batchId) ?? 0) + 1);
  }
  return counts;
}

/** A kept finished job as the listing statements (and the Redis store's scripts) return it. */
export interface StoredFinished {
  readonly id: number;
  readonly queue: string;
  readonly name: string;
  readonly state: FinishedState;
  readonly payload: string;
  readonly output: string | null;
  readonly error: string | null;
  readonly attempts: number;
  readonly created_at: number;
  readonly started_at: number | null;
  readonly finished_at: number;
  readonly duration_ms: number | null;
}

/** A kept finished job as the store hands it out. */
export function toFinishedJob(row: StoredFinished): FinishedJob {
  return {
    id: Number(row.id),
    queue: row.queue,
    name: row.name,
    state: row.state,
    payload: row.payload,
    output: row.output,
    error: row.error,
    attempts: Number(row.attempts),
    createdAt: new Date(Number(row.created_at)),
    startedAt: row.started_at === null ? null : new Date(Number(row.started_at)),
    finishedAt: new Date(Number(row.finished_at)),
    durationMs: row.duration_ms === null ? null : Number(row.duration_ms),
  };
}
