/**
 * The SQL of unique and debounced jobs and of job middleware on PostgreSQL,
 * the same rules as on SQLite (see `_sqlite_guards.ts`). Where SQLite's one
 * writer serializes everything, here a transaction-scoped advisory lock on
 * each key makes two processes that check the same key take turns.
 *
 * @internal
 * @module
 */
import type { Run } from "./_postgres_run.ts";
import type { GuardRequest, KeyedJobRow, KeyedPush, Lease, NewJobRow } from "./store.ts";

const LOCK_KEY = "SELECT pg_advisory_xact_lock(hashtextextended($1, 7204))";
const FIND_UNIQUE =
  "SELECT job_id FROM job_keys WHERE key = $1 AND kind = 'unique' AND expires_at > $2";
const FIND_DEBOUNCED = `SELECT k.job_id, k.latest_at FROM job_keys k JOIN jobs j ON j.id = k.job_id
  WHERE k.key = $1 AND k.kind = 'debounce' AND j.token IS NULL AND j.attempts = 0
  FOR UPDATE OF j`;
const DEBOUNCE = "UPDATE jobs SET payload = $1, available_at = $2 WHERE id = $3";
const SET_KEY = `INSERT INTO job_keys (key, kind, job_id, expires_at, release_on_start, latest_at)
  VALUES ($1, $2, $3, $4, $5, $6)
  ON CONFLICT (key) DO UPDATE SET kind = excluded.kind, job_id = excluded.job_id,
    expires_at = excluded.expires_at, release_on_start = excluded.release_on_start,
    latest_at = excluded.latest_at`;
const RELEASE_KEYS = "DELETE FROM job_keys WHERE job_id = ANY($1::bigint[])";
const DROP_LOCKS = "DELETE FROM job_locks WHERE job_id = ANY($1::bigint[])";
/** Only a lock its own attempt took: matched by job id and token. */
const RELEASE_LOCKS =
  `DELETE FROM job_locks l USING unnest($1::bigint[], $2::bigint[]) AS a(id, token)
  WHERE l.job_id = a.id AND l.token = a.token`;
const DROP_EXPIRED_LOCKS = "DELETE FROM job_locks WHERE key = $1 AND expires_at <= $2";
const COUNT_LOCKS = "SELECT COUNT(*) AS n FROM job_locks WHERE key = $1";
const TAKE_LOCK = "INSERT INTO job_locks (key, job_id, token, expires_at) VALUES ($1, $2, $3, $4)";
const RATE_WINDOW = "SELECT window_start, starts FROM rate_windows WHERE key = $1";
const COUNT_START = `INSERT INTO rate_windows (key, window_start, starts) VALUES ($1, $2, $3)
  ON CONFLICT (key) DO UPDATE SET window_start = excluded.window_start, starts = excluded.starts`;

/** Unique and debounce keys, overlap locks and rate windows, through the store's transaction. */
export class PostgresGuards {
  readonly #run: Run;

  /** `run` sends one statement in the store's current transaction. */
  constructor(run: Run) {
    this.#run = run;
  }

  /** Inserts each row unless its key names a job that holds it; see {@linkcode KeyedPush}. */
  async pushKeyed(
    rows: readonly KeyedJobRow[],
    insert: (rows: readonly NewJobRow[]) => Promise<number[]>,
  ): Promise<KeyedPush[]> {
    await this.#lockKeys(rows.map((row) => row.key.key));
    const pushed: KeyedPush[] = [];
    for (const row of rows) {
      const { key } = row;
      if (key.kind === "unique") {
        const [holder] = await this.#run<{ job_id: number }>(FIND_UNIQUE, [key.key, row.createdAt]);
        if (holder !== undefined) {
          pushed.push({ id: holder.job_id, outcome: "held" });
          continue;
        }
        const [id] = await insert([row]);
        await this.#run(SET_KEY, [
          key.key,
          "unique",
          id,
          key.expiresAt,
          key.releaseOnStart ? 1 : 0,
          null,
        ]);
        pushed.push({ id: id!, outcome: "stored" });
        continue;
      }
      const [waiting] = await this.#run<{ job_id: number; latest_at: number | null }>(
        FIND_DEBOUNCED,
        [key.key],
      );
      if (waiting !== undefined) {
        const due = waiting.latest_at === null
          ? row.availableAt
          : Math.min(row.availableAt, waiting.latest_at);
        await this.#run(DEBOUNCE, [row.payload, due, waiting.job_id]);
        pushed.push({ id: waiting.job_id, outcome: "debounced" });
        continue;
      }
      const [id] = await insert([row]);
      await this.#run(SET_KEY, [key.key, "debounce", id, null, 0, key.latestAt]);
      pushed.push({ id: id!, outcome: "stored" });
    }
    return pushed;
  }

  /** Checks each job's rules in order; see {@linkcode Store.acquire}. */
  async acquire(requests: readonly GuardRequest[], now: number): Promise<(number | null)[]> {
    await this.#lockKeys(
      requests.flatMap((request) => [
        ...request.locks.map((lock) => JSON.stringify(["lock", lock.key])),
        ...request.rates.map((rate) => JSON.stringify(["rate", rate.key])),
      ]),
    );
    const verdicts: (number | null)[] = [];
    for (const request of requests) {
      let retryAt: number | null = null;
      const later = (at: number) => retryAt = Math.max(retryAt ?? at, at);
      for (const lock of request.locks) {
        await this.#run(DROP_EXPIRED_LOCKS, [lock.key, now]);
        const [held] = await this.#run<{ n: number }>(COUNT_LOCKS, [lock.key]);
        if (held!.n >= lock.limit) later(lock.retryAt);
      }
      const windows: { key: string; start: number; used: number }[] = [];
      for (const rate of request.rates) {
        const start = Math.floor(now / rate.perMs) * rate.perMs;
        const [row] = await this.#run<{ window_start: number; starts: number }>(RATE_WINDOW, [
          rate.key,
        ]);
        const used = row?.window_start === start ? row.starts : 0;
        if (used >= rate.max) later(start + rate.perMs);
        windows.push({ key: rate.key, start, used });
      }
      verdicts.push(retryAt);
      if (retryAt !== null) continue;
      for (const lock of request.locks) {
        await this.#run(TAKE_LOCK, [lock.key, request.id, request.token, lock.expiresAt]);
      }
      for (const { key, start, used } of windows) {
        await this.#run(COUNT_START, [key, start, used + 1]);
      }
    }
    return verdicts;
  }

  /**
   * Takes the transaction's advisory lock on each key, all of them up front
   * and in one order, so that two transactions never wait for each other.
   */
  async #lockKeys(keys: readonly string[]): Promise<void> {
    for (const key of [...new Set(keys)].sort()) await this.#run(LOCK_KEY, [key]);
  }

  /**
   * Releases the keys of jobs that `ended`, and the locks each attempt in
   * `attempts` took, fenced by its token.
   */
  async released(ended: readonly number[], attempts: readonly Lease[]): Promise<void> {
    if (ended.length > 0) await this.#run(RELEASE_KEYS, [ended]);
    if (attempts.length > 0) {
      await this.#run(RELEASE_LOCKS, [attempts.map((a) => a.id), attempts.map((a) => a.token)]);
    }
  }

  /** Releases every key and lock of jobs that were deleted (cleared, or skipped in a cancelled batch). */
  async removed(ids: readonly number[]): Promise<void> {
    if (ids.length === 0) return;
    await this.#run(RELEASE_KEYS, [ids]);
    await this.#run(DROP_LOCKS, [ids]);
  }
}
