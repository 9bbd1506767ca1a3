/**
 * Unique and debounced jobs, and job middleware: keys written with the job
 * they name, overlap locks and rate windows checked for a tick's claimed
 * jobs in one transaction, and all of it released in the transaction that
 * settles, claims or deletes the job. The job row says what it holds
 * (`keyed`, `locked`), so a plain job's settle runs none of these statements.
 *
 * @internal
 * @module
 */
import type { KeyedInsert, KeyedJobRow, Lease, MiddlewareRequest } from "../store.ts";
import { type Dialect, KEYED } from "./dialect.ts";
import { each, exec, type Script } from "./script.ts";
import { statement } from "./statement.ts";
import { capAtNow } from "../steady_shift.ts";

/**
 * The job holding unique key `$1` at `$2` whose row also meets `also` (SQL
 * on `jobs`, or empty). A key whose job is gone is stale (a process older
 * than schema step 5 did not mark its job).
 */
function findUnique(also: string) {
  return statement(
    `SELECT job_id FROM job_keys WHERE key = $1 AND kind = 'unique' AND expires_at > $2
    AND EXISTS (SELECT 1 FROM jobs WHERE jobs.id = job_keys.job_id${also})`,
    { oneRow: true },
  );
}
/** The job holding a unique key: a schedule's overlap waits for it to end. */
const FIND_UNIQUE = findUnique("");
/**
 * The job holding a unique key for a dispatch: not one that had a cancel
 * asked, which ends cancelled, so a dispatch taken for it would never run.
 * The key then names the new job, and the cancelled job's release leaves it.
 */
const FIND_UNIQUE_FOR_DISPATCH = findUnique(" AND jobs.cancel_requested IS NULL");
/**
 * The waiting job holding debounce key `$1`, unless it had a cancel asked (it
 * ends cancelled) or its durable steps recorded something (a sleep or a wait
 * gave its attempt back, but it started, on its payload).
 */
const FIND_DEBOUNCED = statement(
  `SELECT k.job_id, k.latest_at FROM job_keys k JOIN jobs j ON j.id = k.job_id
  WHERE k.key = $1 AND k.kind = 'debounce' AND j.token IS NULL AND j.attempts = 0
    AND j.cancel_requested IS NULL
    AND NOT EXISTS (SELECT 1 FROM job_steps s WHERE s.job_id = j.id)
  {{forUpdate j}}`,
  { oneRow: true },
);
const DEBOUNCE = statement("UPDATE jobs SET payload = $1, available_at = $2 WHERE id = $3");
const SET_KEY = statement(
  `INSERT INTO job_keys (key, kind, job_id, expires_at, release_on_start, latest_at)
  VALUES ($1, $2, $3, $4, $5, $6)
  ON CONFLICT (key) DO UPDATE SET kind = excluded.kind, job_id = excluded.job_id,
    expires_at = excluded.expires_at, release_on_start = excluded.release_on_start,
    latest_at = excluded.latest_at`,
);
const RELEASE_KEYS = statement("DELETE FROM job_keys WHERE job_id IN {{ids $1}}");
const RELEASE_KEYS_ON_START = statement(
  "DELETE FROM job_keys WHERE release_on_start = 1 AND job_id IN {{ids $1}}",
);
/**
 * The keys held until processing of the jobs whose claim started them (not
 * claimed ahead), each still leased by that claim: `$1` pairs of job id and token.
 */
const RELEASE_KEYS_OF_STARTED = statement(
  `DELETE FROM job_keys WHERE release_on_start = 1 AND job_id IN (
    SELECT jobs.id FROM jobs JOIN {{pairs $1}} p ON jobs.id = p.id AND jobs.token = p.token
    WHERE jobs.claimed_ahead = 0)`,
);
const DROP_LOCKS = statement("DELETE FROM job_locks WHERE job_id IN {{ids $1}}");
/** Only a lock its own attempt took: matched by job id and token. */
const RELEASE_LOCKS = statement(
  "DELETE FROM job_locks WHERE (job_id, token) IN (SELECT id, token FROM {{pairs $1}} p)",
);
const DROP_EXPIRED_LOCKS = statement("DELETE FROM job_locks WHERE key = $1 AND expires_at <= $2");
const COUNT_LOCKS = statement("SELECT COUNT(*) AS n FROM job_locks WHERE key = $1", {
  oneRow: true,
});
const TAKE_LOCK = statement(
  "INSERT INTO job_locks (key, job_id, token, expires_at) VALUES ($1, $2, $3, $4)",
);
const MARK_LOCKED = statement("UPDATE jobs SET locked = 1 WHERE id = $1 AND token = $2");
const RATE_WINDOW = statement("SELECT window_start, starts FROM rate_windows WHERE key = $1", {
  oneRow: true,
});
/** Counts a start in the window of `$4` ms that begins at `$2`; the prune reads its end from both. */
const COUNT_START = statement(
  `INSERT INTO rate_windows (key, window_start, starts, per_ms) VALUES ($1, $2, $3, $4)
  ON CONFLICT (key) DO UPDATE SET window_start = excluded.window_start, starts = excluded.starts,
    per_ms = excluded.per_ms`,
);
/**
 * Drops the `rateLimited` windows that ended by `$1` (a group's window has
 * no `per_ms`: `dropEndedWindows` in groups.ts drops those).
 */
const DROP_ENDED_RATE_WINDOWS = statement(
  "DELETE FROM rate_windows WHERE window_start + per_ms <= $1",
);

/** Inserts each row unless its key names a job that holds it; see {@linkcode KeyedInsert}. */
export function* insertKeyed(
  dialect: Dialect,
  rows: readonly KeyedJobRow[],
): Script<KeyedInsert[]> {
  const first = rows[0];
  if (first === undefined) return [];
  yield* dialect.lockKeys(rows.map((row) => row.key.key));
  // Key times on the store's clock, as insertJobs puts the job's times (the same steady shift).
  const { shift, now } = yield* dialect.dispatchClock(first.createdAt);
  const pushed: KeyedInsert[] = [];
  for (const row of rows) {
    const { key } = row;
    const onStore = (at: number) => capAtNow(at, row.createdAt, shift, now);
    if (key.kind === "unique") {
      const { rows: [holder] } = yield* exec<{ job_id: number }>(
        FIND_UNIQUE_FOR_DISPATCH,
        key.key,
        onStore(row.createdAt),
      );
      if (holder !== undefined) {
        pushed.push({ id: Number(holder.job_id), outcome: "duplicate" });
        continue;
      }
      const keyed = key.releaseOnStart ? KEYED.untilStarted : KEYED.untilSettled;
      const [id] = yield* dialect.insertJobs([row], { batchId: null, keyed });
      yield* exec(
        SET_KEY,
        key.key,
        "unique",
        id,
        onStore(key.expiresAt),
        key.releaseOnStart ? 1 : 0,
        null,
      );
      pushed.push({ id: id!, outcome: "stored" });
      continue;
    }
    const { rows: [waiting] } = yield* exec<{ job_id: number; latest_at: number | null }>(
      FIND_DEBOUNCED,
      key.key,
    );
    if (waiting !== undefined) {
      const due = waiting.latest_at === null
        ? onStore(row.availableAt)
        : Math.min(onStore(row.availableAt), Number(waiting.latest_at));
      yield* exec(DEBOUNCE, row.payload, due, waiting.job_id);
      pushed.push({ id: Number(waiting.job_id), outcome: "debounced" });
      continue;
    }
    const [id] = yield* dialect.insertJobs(
      [row],
      { batchId: null, keyed: KEYED.untilSettled },
    );
    const latestAt = key.latestAt === null ? null : onStore(key.latestAt);
    yield* exec(SET_KEY, key.key, "debounce", id, null, 0, latestAt);
    pushed.push({ id: id!, outcome: "stored" });
  }
  return pushed;
}

/** Checks each claimed job's middleware in order; see {@linkcode Store.acquire}. */
export function* acquire(
  dialect: Dialect,
  requests: readonly MiddlewareRequest[],
  now: number,
): Script<(number | null)[]> {
  yield* dialect.lockKeys(requests.flatMap((request) => [
    ...request.locks.map((lock) => JSON.stringify(["lock", lock.key])),
    ...request.rates.map((rate) => JSON.stringify(["rate", rate.key])),
  ]));
  // Locks expire and rate windows turn on the store's clock; the caller's times move onto it.
  const clockNow = yield* dialect.now(now);
  const shift = clockNow - now;
  now = clockNow;
  const verdicts: (number | null)[] = [];
  const started: [number, number][] = [];
  for (const request of requests) {
    let retryAt: number | null = null;
    const later = (at: number) => retryAt = Math.max(retryAt ?? at, at);
    for (const lock of request.locks) {
      yield* exec(DROP_EXPIRED_LOCKS, lock.key, now);
      const { rows: [held] } = yield* exec<{ n: number }>(COUNT_LOCKS, lock.key);
      if (Number(held!.n) >= lock.limit) later(lock.retryAt);
    }
    const windows: { key: string; start: number; used: number; perMs: number }[] = [];
    for (const rate of request.rates) {
      const start = Math.floor(now / rate.perMs) * rate.perMs;
      const { rows: [row] } = yield* exec<{ window_start: number; starts: number }>(
        RATE_WINDOW,
        rate.key,
      );
      const stored = row === undefined ? null : Number(row.window_start);
      const used = stored === start ? Number(row!.starts) : 0;
      // When the window turns, on the caller's clock as every verdict is (the release moves it back).
      // A window newer than this request's (another start counted under a later now) is full for
      // it: counting here would move the window back, and its starts would count again.
      if (used >= rate.max || (stored !== null && stored > start)) {
        later(start + rate.perMs - shift);
      }
      windows.push({ key: rate.key, start, used, perMs: rate.perMs });
    }
    verdicts.push(retryAt);
    if (retryAt !== null) continue;
    started.push([request.id, request.token]);
    for (const lock of request.locks) {
      yield* exec(TAKE_LOCK, lock.key, request.id, request.token, lock.expiresAt + shift);
    }
    if (request.locks.length > 0) yield* exec(MARK_LOCKED, request.id, request.token);
    yield* each(
      COUNT_START,
      windows.map(({ key, start, used, perMs }) => [key, start, used + 1, perMs]),
    );
  }
  if (started.length > 0) yield* exec(RELEASE_KEYS_OF_STARTED, started);
  return verdicts;
}

/**
 * Drops the `rateLimited` windows that ended by `endedBy` (the store's
 * clock): a window is written for every key a job named, so without this
 * the table grows with every key ever used. Run by settles at most once a
 * minute, with the groups' windows (`dropEndedWindows` in groups.ts), a
 * minute behind their now (`ENDED_WINDOW_KEPT_MS` in upkeep.ts).
 */
export function* dropEndedRateWindows(endedBy: number): Script<void> {
  yield* exec(DROP_ENDED_RATE_WINDOWS, endedBy);
}

/** The job holding unique key `key` at `at`, or null when none does. */
export function* uniqueHolder(key: string, at: number): Script<number | null> {
  const { rows: [holder] } = yield* exec<{ job_id: number }>(FIND_UNIQUE, key, at);
  return holder === undefined ? null : Number(holder.job_id);
}

/** Makes job `jobId` hold unique key `key` until it settles, or until `expiresAt`. */
export function* holdUnique(key: string, jobId: number, expiresAt: number): Script<void> {
  yield* exec(SET_KEY, key, "unique", jobId, expiresAt, 0, null);
}

/** Releases the keys of jobs just claimed that let the next one in when they start. */
export function* releaseOnStart(ids: readonly number[]): Script<void> {
  if (ids.length > 0) yield* exec(RELEASE_KEYS_ON_START, ids);
}

/**
 * Releases what settled jobs held: the keys of those that `ended` (succeeded
 * or failed for good), and the locks each attempt in `attempts` took, fenced
 * by its token: a lock an earlier, dead attempt of the same job took stays
 * until it expires.
 */
export function* releaseHeld(ended: readonly number[], attempts: readonly Lease[]): Script<void> {
  if (ended.length > 0) yield* exec(RELEASE_KEYS, ended);
  if (attempts.length > 0) {
    yield* exec(RELEASE_LOCKS, attempts.map(({ id, token }) => [id, token]));
  }
}

/** Releases every key and lock of jobs that were deleted unrun (cleared, or skipped by a cancel). */
export function* releaseRemoved(ids: readonly number[]): Script<void> {
  if (ids.length === 0) return;
  yield* exec(RELEASE_KEYS, ids);
  yield* exec(DROP_LOCKS, ids);
}
