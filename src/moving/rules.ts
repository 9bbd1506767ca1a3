/**
 * What a move changes in the rows it copies, written once for every pair of
 * stores (the rows are in the SQL schema's layout whatever the store,
 * `TransferRow`). Everything else is copied as it is: ids, payloads
 * (ciphertext stays ciphertext), batch counters, chains, flows, keys,
 * schedules with their last slot, pauses, logs, steps, signals, metrics,
 * id counters.
 *
 * - A running job (it holds a token) is copied as pending: no token, due at
 *   the fence, not claimed ahead, `begun` as a job dispatched fresh has it,
 *   no progress and no locks held; its crashes are kept, and its attempts
 *   too when its handler began. A job held ahead, or whose handler had not
 *   begun, gets back the attempt its claim counted, as its own store gives
 *   it back when another claim takes it over: the destination's claim
 *   counts it again, and a job that never ran must not spend one. The
 *   worker that ran it was stopped before the move, and its settle would be
 *   refused by the fence anyway, so the job runs again on the destination
 *   (at least once, as a job whose worker died).
 * - An overlap lock is left behind when it expired by the fence, or when it
 *   is held by the attempt of a job copied as pending (that attempt is over;
 *   the job takes its lock again when it runs).
 * - Rate windows are copied whole: a window records its start but not its
 *   length, so an old one cannot be told from a live one; an old window
 *   counts for nothing (the next start opens a new window over it).
 *
 * Every rule goes by the fence's time, never the clock, so a move run again
 * keeps exactly the rows the first run kept.
 *
 * @internal
 * @module
 */
import type { TransferRow, TransferTable } from "../stores/rows/transfer.ts";

/** What the rules of one move remember from table to table. */
export class MoveRules {
  readonly #at: number;
  /** The attempts (`id:token`) of the jobs copied as pending. */
  readonly #endedAttempts = new Set<string>();

  /** The rules of a move that fenced its source at `at` (ms since the epoch). */
  constructor(at: number) {
    this.#at = at;
  }

  /**
   * The rows of `table` to store in the destination, changed as the module
   * doc says. Tables are given in the order of `TRANSFER_TABLES` (jobs
   * before their locks).
   */
  apply(table: TransferTable, rows: readonly TransferRow[]): TransferRow[] {
    if (table === "jobs") return rows.map((row) => this.#job(row));
    if (table === "job_locks") return rows.filter((row) => this.#liveLock(row));
    return [...rows];
  }

  #job(row: TransferRow): TransferRow {
    if (row.token === null) return row;
    this.#endedAttempts.add(`${row.id}:${row.token}`);
    const began = Number(row.claimed_ahead) === 0 && Number(row.begun) !== 0;
    return {
      ...row,
      attempts: Math.max(0, Number(row.attempts) - (began ? 0 : 1)),
      token: null,
      available_at: this.#at,
      claimed_ahead: 0,
      begun: 1,
      progress: null,
      locked: 0,
    };
  }

  #liveLock(row: TransferRow): boolean {
    return Number(row.expires_at) > this.#at &&
      !this.#endedAttempts.has(`${row.job_id}:${row.token}`);
  }
}
