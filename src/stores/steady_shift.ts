/**
 * The clock shift a dispatch's times move by on a store that goes by the
 * database's clock (PostgreSQL by default, Redis), kept steady from one
 * dispatch to the next.
 *
 * A dispatch's times are on the dispatcher's clock; the store moves them
 * onto its own by the shift, its now minus the dispatch's creation time.
 * Read afresh for each call, that difference also holds the call's own
 * delay (the trip to the server, a busy event loop), which changes by a ms
 * or more from call to call: jobs dispatched one by one for the same `at`
 * came out due a ms or two apart, and ran out of dispatch order. So a
 * dispatcher sends the shift its last dispatch used as a hint, and the store
 * keeps the hint while the shift it reads is at most
 * {@linkcode SHIFT_KEPT_BELOW_MS} under it (the hint held a delay that
 * much longer: a first call held up, say) and at most
 * {@linkcode SHIFT_KEPT_ABOVE_MS} over it (this call was held up). Past
 * either, it takes the shift read (a clock that stepped, or a better
 * reading), which the dispatcher then learns. A time the dispatch gave that
 * is not after its creation (the creation itself, a due time with no delay)
 * is never put past the store's now as read, though the hint may be a few
 * ms over the shift read: a job dispatched due is due when it is stored.
 *
 * The rule is written once per language: here (`steadyShift`,
 * `capAtNow`) for the SQL scripts that read the database's now first
 * (src/stores/sql/keys.ts), in the `INSERT` of
 * src/stores/postgres/dialect.ts for PostgreSQL's inserts, and in the Lua
 * prelude's `enter` and `at` (src/stores/redis/lua.ts); the dispatch tests
 * hold them together (tests/queue_test.ts,
 * tests/stores/steady_shift_test.ts).
 *
 * @internal
 * @module
 */

/**
 * How far under the hint the shift a call reads may be and still take the
 * hint: the most a hint's own delay can make due times late by.
 */
export const SHIFT_KEPT_BELOW_MS = 50;

/**
 * How far over the hint the shift a call reads may be and still take the
 * hint: well past a call's delay on a loaded machine, and the most a due
 * time can be early by after the dispatcher's clock stepped back by less.
 */
export const SHIFT_KEPT_ABOVE_MS = 1_000;

/** The shift a dispatch takes: the `hint` while `read` is within the band around it, else `read`. */
export function steadyShift(read: number, hint: number | null): number {
  if (hint === null) return read;
  return read >= hint - SHIFT_KEPT_BELOW_MS && read <= hint + SHIFT_KEPT_ABOVE_MS ? hint : read;
}

/**
 * Time `at` of a dispatch created at `createdAt` on the store's clock
 * moved by `shift`: never past `storeNow` (the now the call read) when `at`
 * is not after the creation.
 */
export function capAtNow(at: number, createdAt: number, shift: number, storeNow: number): number {
  return at <= createdAt ? Math.min(at + shift, storeNow) : at + shift;
}

/** The shift a store's dispatches last used, sent with the next as its hint. */
export class DispatchShift {
  #last: number | null = null;

  /** The hint for the next dispatch: the shift the last one used, or null before the first. */
  get hint(): number | null {
    return this.#last;
  }

  /** Records the shift a dispatch used (read back from the store), the next one's hint. */
  learn(used: number): void {
    if (Number.isFinite(used)) this.#last = used;
  }
}
