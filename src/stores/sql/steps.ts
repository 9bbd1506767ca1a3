/**
 * Durable steps in SQL: the memos a handler's steps, sleeps and waits
 * leave on their job (`job_steps`, one row per call position), the
 * signals in its mailbox (`job_signals`), sending a signal, and pruning
 * both with the job's log lines.
 *
 * A memo is written by a settle: a `"step"` settlement (the job stays
 * leased) or a `"park"` (the job goes back unleased, its attempt given
 * back, due at the sleep's wake time or the wait's timeout). A wait parks
 * due at once when its signal is in the mailbox already, and a signal sent
 * to a job parked in a wait of its name makes it due at once: the job's
 * row is locked before the mailbox or the memos are read, on both sides,
 * so neither misses what the other committed (no lost wake-up).
 *
 * Memos and signals are kept while their job is in `jobs`, `failed_jobs` or
 * `completed_jobs`, and read only while it is: a job removed for good has
 * none. A removal by an admin command (forget, flush or prune of failed or
 * finished jobs, clear, cancel) deletes them in its transaction; a success
 * not kept leaves them to the settles' prune (at most once a minute, with
 * the log lines), so a plain success pays no statement for them.
 *
 * @internal
 * @module
 */
import type { JobStepsRow, SignalOutcome, SignalRequest, StepKind, StepWrite } from "../store.ts";
import { clockParam, type Dialect } from "./dialect.ts";
import { exec, type Script, wakeAfterCommit } from "./script.ts";
import { statement } from "./statement.ts";
import { JOB_GONE, jobStored } from "./upkeep.ts";

/** What a memo write sets when its call position is taken already: the new memo. */
const MEMO_REPLACES =
  `ON CONFLICT (job_id, seq) DO UPDATE SET key = excluded.key, kind = excluded.kind,
    output = excluded.output, until = excluded.until, done = excluded.done,
    attempt = excluded.attempt, duration_ms = excluded.duration_ms, at = excluded.at`;
/**
 * Writes a memo, replacing the one of the same call position: written at
 * `{{now $10}}` (the settlement's time, or the database's now), its `until`
 * `$6` ms after that (null: none).
 */
const WRITE_MEMO = statement(
  `INSERT INTO job_steps (job_id, seq, key, kind, output, until, done, attempt, duration_ms, at)
  VALUES ($1, $2, $3, $4, $5, {{now $10}} + $6, $7, $8, $9, {{now $10}})
  ${MEMO_REPLACES}`,
);
/**
 * {@linkcode WRITE_MEMO} while token `$11` holds job `$1` (its row locked
 * until the transaction ends), in one statement: no row when it does not.
 */
const WRITE_HELD_MEMO = statement(
  `INSERT INTO job_steps (job_id, seq, key, kind, output, until, done, attempt, duration_ms, at)
  SELECT id, CAST($2 AS INTEGER), CAST($3 AS TEXT), CAST($4 AS TEXT), CAST($5 AS TEXT),
    {{now $10}} + CAST($6 AS BIGINT), CAST($7 AS INTEGER), CAST($8 AS INTEGER),
    CAST($9 AS INTEGER), {{now $10}}
  FROM jobs WHERE id = $1 AND token = $11 {{forUpdate}}
  ${MEMO_REPLACES}`,
);
const TAKE_SIGNAL = statement("DELETE FROM job_signals WHERE id = $1 AND job_id = $2");
/**
 * Makes parked job `$1` due at `{{now $3}}` when its mailbox holds a signal
 * named `$2` (a wait's signal sent while its attempt ran).
 */
const DUE_ON_SIGNAL = statement(
  `UPDATE jobs SET available_at = {{now $3}} WHERE id = $1
  AND EXISTS (SELECT 1 FROM job_signals WHERE job_id = $1 AND name = $2)`,
);

const STEPS_OF = statement(
  `SELECT seq, key, kind, output, until, done, attempt, duration_ms, at FROM job_steps
  WHERE job_id = $1 AND ${jobStored("$1")} ORDER BY seq`,
);
const SIGNALS_OF = statement(
  `SELECT id, name, payload, sent_at FROM job_signals WHERE job_id = $1 AND ${jobStored("$1")}
  ORDER BY id`,
);

/** Job `$1` in `jobs` (its row locked until the transaction ends), or nothing. */
const UNFINISHED = statement("SELECT token FROM jobs WHERE id = $1 {{forUpdate}}", {
  oneRow: true,
});
/** 1 when job `$1` ended: it is in the failed jobs or the kept finished jobs. */
const ENDED = statement(
  `SELECT CASE WHEN EXISTS (SELECT 1 FROM failed_jobs WHERE id = $1)
    OR EXISTS (SELECT 1 FROM completed_jobs WHERE id = $1) THEN 1 ELSE 0 END AS ended`,
  { oneRow: true },
);
const INSERT_SIGNAL = statement(
  "INSERT INTO job_signals (job_id, name, payload, sent_at) VALUES ($1, $2, $3, {{now $4}})",
);
/**
 * Delivers a signal named `$3` to job `$1`: when it is not leased and a
 * wait of that name (its key, or its key numbered `name#n`) is waiting, it
 * is due at `{{now $2}}` (or stays due earlier).
 */
const DELIVER = statement(
  `UPDATE jobs SET available_at = CASE WHEN available_at < {{now $2}} THEN available_at
    ELSE {{now $2}} END
  WHERE id = $1 AND token IS NULL AND EXISTS (
    SELECT 1 FROM job_steps s WHERE s.job_id = $1 AND s.kind = 'wait' AND s.done = 0
    AND (s.key = CAST($3 AS TEXT)
      OR substr(s.key, 1, length(CAST($3 AS TEXT)) + 1) = CAST($3 AS TEXT) || '#'))`,
);

/** Whether job `$1`'s mailbox holds a signal called `$2` (the oldest answers a wait first). */
const HOLDS_SIGNAL = statement(
  "SELECT 1 AS held FROM job_signals WHERE job_id = $1 AND name = $2 LIMIT 1",
  { oneRow: true },
);

const PRUNE_STEPS = statement(`DELETE FROM job_steps WHERE ${JOB_GONE}`);
const PRUNE_SIGNALS = statement(`DELETE FROM job_signals WHERE ${JOB_GONE}`);
const DROP_STEPS_OF = statement(
  `DELETE FROM job_steps WHERE job_id IN {{ids $1}} AND NOT ${jobStored("job_steps.job_id")}`,
);
const DROP_SIGNALS_OF = statement(
  `DELETE FROM job_signals WHERE job_id IN {{ids $1}} AND NOT ${jobStored("job_signals.job_id")}`,
);

/** A `"step"` or `"park"` settlement: what writing its memo needs. */
interface MemoSettlement {
  readonly id: number;
  readonly at: number;
  readonly step: StepWrite;
}

/**
 * Writes a `"step"` settlement's memo while `token` holds job `id` (and
 * deletes the signal it took); whether it applied.
 */
export function* writeStep(
  dialect: Dialect,
  settlement: MemoSettlement & { readonly token: number },
): Script<boolean> {
  const { id, token, step } = settlement;
  const written = yield* exec(WRITE_HELD_MEMO, ...memoParams(dialect, settlement), token);
  if (written.count === 0) return false;
  if (step.takesSignal !== undefined) yield* exec(TAKE_SIGNAL, step.takesSignal, id);
  return true;
}

/**
 * The rest of a `"park"` once its job row was put back (and so locked):
 * a wait whose signal is in the mailbox is due at once, and the memo is
 * written. Read after the row's lock was taken, so a signal committed
 * meanwhile is seen.
 */
export function* parked(dialect: Dialect, settlement: MemoSettlement): Script<void> {
  const { step } = settlement;
  if (step.kind === "wait" && !step.done) {
    yield* exec(
      DUE_ON_SIGNAL,
      settlement.id,
      waitedName(step.key),
      clockParam(dialect, settlement.at),
    );
  }
  yield* writeMemo(dialect, settlement);
}

/** Job `id`'s memos by `seq` and its mailbox oldest first. */
export function* jobSteps(id: number): Script<JobStepsRow> {
  const { rows: steps } = yield* exec<StoredStep>(STEPS_OF, id);
  const { rows: signals } = yield* exec<StoredSignal>(SIGNALS_OF, id);
  return {
    steps: steps.map((row) => ({
      seq: Number(row.seq),
      key: row.key,
      kind: row.kind,
      output: row.output,
      until: row.until === null ? null : Number(row.until),
      done: Number(row.done) === 1,
      attempt: Number(row.attempt),
      durationMs: Number(row.duration_ms),
      at: Number(row.at),
    })),
    signals: signals.map((row) => ({
      id: Number(row.id),
      name: row.name,
      payload: row.payload,
      sentAt: Number(row.sent_at),
    })),
  };
}

/**
 * Sends a signal (see {@linkcode SignalOutcome}); the job's row is locked
 * first, so a park committing meanwhile is seen. Delivered only to a job
 * parked in a wait of its name that no signal in the mailbox answers yet;
 * wakes idle workers when it made the job due.
 */
export function* signal(dialect: Dialect, request: SignalRequest): Script<SignalOutcome> {
  const { jobId, name } = request;
  const { rows: [job] } = yield* exec<{ token: number | null }>(UNFINISHED, jobId);
  if (job === undefined) {
    const { rows: [row] } = yield* exec<{ ended: number }>(ENDED, jobId);
    return Number(row?.ended) === 1 ? "finished" : "not-found";
  }
  const now = clockParam(dialect, request.now);
  // Only a job not leased can be parked in a wait, and a signal of this name in its mailbox
  // already answers that wait (which is then due).
  const deliverable = job.token === null &&
    (yield* exec(HOLDS_SIGNAL, jobId, name)).rows.length === 0;
  yield* exec(INSERT_SIGNAL, jobId, name, request.payload, now);
  if (!deliverable || (yield* exec(DELIVER, jobId, now, name)).count === 0) return "buffered";
  yield* wakeAfterCommit();
  return "delivered";
}

/**
 * Deletes the memos and signals of the jobs `ids` that are in no table any
 * more (removed for good), as Redis's `dropSteps` does.
 */
export function* dropRemoved(ids: readonly number[]): Script<void> {
  if (ids.length === 0) return;
  yield* exec(DROP_STEPS_OF, ids);
  yield* exec(DROP_SIGNALS_OF, ids);
}

/** Deletes the memos and signals of jobs in no table (see {@linkcode JOB_GONE}). */
export function* prune(): Script<void> {
  yield* exec(PRUNE_STEPS);
  yield* exec(PRUNE_SIGNALS);
}

/** The name a wait keyed `key` waits for: the key without its `#n` (names hold no `#`). */
function waitedName(key: string): string {
  const mark = key.indexOf("#");
  return mark < 0 ? key : key.slice(0, mark);
}

function* writeMemo(dialect: Dialect, settlement: MemoSettlement): Script<void> {
  yield* exec(WRITE_MEMO, ...memoParams(dialect, settlement));
}

/** The ten parameters of a memo write. */
function memoParams(dialect: Dialect, { id, at, step }: MemoSettlement): unknown[] {
  return [
    id,
    step.seq,
    step.key,
    step.kind,
    step.output,
    step.until === null ? null : step.until - at,
    step.done ? 1 : 0,
    step.attempt,
    Math.round(step.durationMs),
    clockParam(dialect, at),
  ];
}

interface StoredStep {
  readonly seq: number;
  readonly key: string;
  readonly kind: StepKind;
  readonly output: string | null;
  readonly until: number | null;
  readonly done: number;
  readonly attempt: number;
  readonly duration_ms: number;
  readonly at: number;
}

interface StoredSignal {
  readonly id: number;
  readonly name: string;
  readonly payload: string;
  readonly sent_at: number;
}
