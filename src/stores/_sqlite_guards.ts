/**
 * The SQL of unique and debounced jobs and of job middleware on SQLite: keys
 * written with the job they name, locks and rate counters checked for a
 * tick's claimed jobs in one transaction, and all of it released in the
 * transaction that settles (or claims, or clears) the job. Every method runs
 * inside a write transaction the store has opened.
 *
 * @internal
 * @module
 */
import type { StatementSync } from "node:sqlite";
import type { GuardRequest, KeyedJobRow, KeyedPush, Lease, NewJobRow } from "./store.ts";

const FIND_UNIQUE =
  "SELECT job_id FROM job_keys WHERE key = ? AND kind = 'unique' AND expires_at > ?";
const FIND_DEBOUNCED = `SELECT k.job_id, k.latest_at FROM job_keys k JOIN jobs j ON j.id = k.job_id
  WHERE k.key = ? AND k.kind = 'debounce' AND j.token IS NULL AND j.attempts = 0`;
const DEBOUNCE = "UPDATE jobs SET payload = ?, available_at = ? WHERE id = ?";
const SET_KEY = `INSERT OR REPLACE INTO job_keys
  (key, kind, job_id, expires_at, release_on_start, latest_at) VALUES (?, ?, ?, ?, ?, ?)`;
/** Statements on a set of job ids, passed as one JSON array. */
const IDS = "(SELECT value FROM json_each(?))";
const RELEASE_KEYS = `DELETE FROM job_keys WHERE job_id IN ${IDS}`;
const RELEASE_KEYS_ON_START =
  `DELETE FROM job_keys WHERE release_on_start = 1 AND job_id IN ${IDS}`;
const DROP_LOCKS = `DELETE FROM job_locks WHERE job_id IN ${IDS}`;
/** Locks of the attempts passed as a JSON array of [id, token] pairs: only a lock its own attempt took. */
const RELEASE_LOCKS = `DELETE FROM job_locks WHERE rowid IN (SELECT l.rowid FROM json_each(?) p
  JOIN job_locks l ON l.job_id = json_extract(p.value, '$[0]')
    AND l.token = json_extract(p.value, '$[1]'))`;
const DROP_EXPIRED_LOCKS = "DELETE FROM job_locks WHERE key = ? AND expires_at <= ?";
const COUNT_LOCKS = "SELECT COUNT(*) AS n FROM job_locks WHERE key = ?";
const TAKE_LOCK = "INSERT INTO job_locks (key, job_id, token, expires_at) VALUES (?, ?, ?, ?)";
const RATE_WINDOW = "SELECT window_start, starts FROM rate_windows WHERE key = ?";
const COUNT_START =
  "INSERT OR REPLACE INTO rate_windows (key, window_start, starts) VALUES (?, ?, ?)";

/** Unique and debounce keys, overlap locks and rate windows on one SQLite connection. */
export class SqliteGuards {
  readonly #prepare: (sql: string) => StatementSync;

  /** `prepare` returns the connection's cached statement for `sql`. */
  constructor(prepare: (sql: string) => StatementSync) {
    this.#prepare = prepare;
  }

  /** Inserts each row unless its key names a job that holds it; see {@linkcode KeyedPush}. */
  pushKeyed(
    rows: readonly KeyedJobRow[],
    insert: (rows: readonly NewJobRow[]) => number[],
  ): KeyedPush[] {
    return rows.map((row) => {
      const { key } = row;
      if (key.kind === "unique") {
        const holder = this.#prepare(FIND_UNIQUE).get(key.key, row.createdAt) as
          | { job_id: number }
          | undefined;
        if (holder !== undefined) return { id: holder.job_id, outcome: "held" };
        const [id] = insert([row]);
        this.#prepare(SET_KEY).run(
          key.key,
          "unique",
          id!,
          key.expiresAt,
          key.releaseOnStart ? 1 : 0,
          null,
        );
        return { id: id!, outcome: "stored" };
      }
      const waiting = this.#prepare(FIND_DEBOUNCED).get(key.key) as
        | { job_id: number; latest_at: number | null }
        | undefined;
      if (waiting !== undefined) {
        const due = waiting.latest_at === null
          ? row.availableAt
          : Math.min(row.availableAt, waiting.latest_at);
        this.#prepare(DEBOUNCE).run(row.payload, due, waiting.job_id);
        return { id: waiting.job_id, outcome: "debounced" };
      }
      const [id] = insert([row]);
      this.#prepare(SET_KEY).run(key.key, "debounce", id!, null, 0, key.latestAt);
      return { id: id!, outcome: "stored" };
    });
  }

  /** Checks each job's rules in order; see {@linkcode Store.acquire}. */
  acquire(requests: readonly GuardRequest[], now: number): (number | null)[] {
    return requests.map((request) => {
      let retryAt: number | null = null;
      const later = (at: number) => retryAt = Math.max(retryAt ?? at, at);
      for (const lock of request.locks) {
        this.#prepare(DROP_EXPIRED_LOCKS).run(lock.key, now);
        const { n } = this.#prepare(COUNT_LOCKS).get(lock.key) as { n: number };
        if (n >= lock.limit) later(lock.retryAt);
      }
      const windows = request.rates.map((rate) => {
        const start = Math.floor(now / rate.perMs) * rate.perMs;
        const row = this.#prepare(RATE_WINDOW).get(rate.key) as
          | { window_start: number; starts: number }
          | undefined;
        const used = row?.window_start === start ? row.starts : 0;
        if (used >= rate.max) later(start + rate.perMs);
        return { key: rate.key, start, used };
      });
      if (retryAt !== null) return retryAt;
      for (const lock of request.locks) {
        this.#prepare(TAKE_LOCK).run(lock.key, request.id, request.token, lock.expiresAt);
      }
      for (const { key, start, used } of windows) {
        this.#prepare(COUNT_START).run(key, start, used + 1);
      }
      return null;
    });
  }

  /** Releases the keys of jobs that were just claimed and let the next one in on start. */
  started(ids: readonly number[]): void {
    if (ids.length > 0) this.#prepare(RELEASE_KEYS_ON_START).run(JSON.stringify(ids));
  }

  /**
   * Releases what settled jobs held: the keys of those that `ended`
   * (succeeded or failed for good), and the locks each attempt in
   * `attempts` took, fenced by its token: a lock that an earlier, dead
   * attempt of the same job took stays until it expires.
   */
  released(ended: readonly number[], attempts: readonly Lease[]): void {
    if (ended.length > 0) this.#prepare(RELEASE_KEYS).run(JSON.stringify(ended));
    if (attempts.length > 0) {
      this.#prepare(RELEASE_LOCKS).run(
        JSON.stringify(attempts.map(({ id, token }) => [id, token])),
      );
    }
  }

  /** Releases every key and lock of jobs that were deleted (cleared, or skipped in a cancelled batch). */
  removed(ids: readonly number[]): void {
    if (ids.length === 0) return;
    this.#prepare(RELEASE_KEYS).run(JSON.stringify(ids));
    this.#prepare(DROP_LOCKS).run(JSON.stringify(ids));
  }
}
