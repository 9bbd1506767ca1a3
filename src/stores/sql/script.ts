/**
 * Storage rules as scripts: a rule that spans statements is a generator that
 * yields each statement and receives its result, written once and driven by
 * each engine. `runSync` drives it inside SQLite's synchronous write
 * transaction, feeding each result straight back, so no other code can reach
 * the one connection between two statements; `runAsync` awaits each
 * statement inside a PostgreSQL transaction.
 *
 * A script that makes jobs claimable (or frees them, or ends one somebody
 * awaits) asks for other processes' idle workers to be woken by yielding
 * {@linkcode wakeAfterCommit}: the driver hands the request to the engine,
 * which sends one wake-up once the script's writes have committed, and none
 * when they roll back. PostgreSQL sends it as a `NOTIFY` of its own after
 * the commit (a `NOTIFY` inside the transaction would make its commit take
 * the server's one notify lock: see `../postgres/wake_ups.ts`); SQLite
 * sends nothing, its watchers see the commit in the WAL file.
 *
 * @example A rule written once
 * ```ts ignore
 * function* cancelBatch(id: number, at: number): Script<boolean> {
 *   const { count } = yield* exec(MARK_CANCELLED, at, id);
 *   if (count === 0) return false;
 *   yield* exec(SKIP_WAITING_MEMBERS, id);
 *   return true;
 * }
 * ```
 *
 * @internal
 * @module
 */
import type { Statement } from "./statement.ts";

/** What one statement did: the rows it returned, and how many rows it changed or returned. */
export interface Result<Row = Record<string, unknown>> {
  /** Rows returned (empty for a statement without `RETURNING` that is not a read). */
  readonly rows: Row[];
  /** Rows changed, or returned when the statement returns rows. */
  readonly count: number;
  /** The row id of the row an `INSERT` without `RETURNING` stored, where the engine says (SQLite). */
  readonly lastId?: number;
}

/** One statement to run, or the same statement once per parameter list (a plain loop on SQLite). */
export type Step =
  | { readonly statement: Statement; readonly params: readonly unknown[] }
  | { readonly statement: Statement; readonly each: readonly (readonly unknown[])[] };

/**
 * What a script yields to ask for a wake-up of other processes' idle
 * workers once its writes have committed ({@linkcode wakeAfterCommit}).
 */
export const WAKE_UP: unique symbol = Symbol("wake up after commit");

/** A storage rule: yields steps (and wake-up requests), receives their results, returns `T`. */
export type Script<T> = Generator<Step | typeof WAKE_UP, T, unknown>;

/** Runs `statement` with `params`; its result. */
export function* exec<Row = Record<string, unknown>>(
  statement: Statement,
  ...params: readonly unknown[]
): Script<Result<Row>> {
  return (yield { statement, params }) as Result<Row>;
}

/** Runs `statement` once per parameter list, in order; their results. */
export function* each<Row = Record<string, unknown>>(
  statement: Statement,
  paramLists: readonly (readonly unknown[])[],
): Script<Result<Row>[]> {
  if (paramLists.length === 0) return [];
  return (yield { statement, each: paramLists }) as Result<Row>[];
}

/**
 * Asks for other processes' idle workers to be woken once the script's
 * writes have committed (never when they roll back): for a write that makes
 * a job claimable, frees a slot or lock others wait for, asks a running job
 * to stop, or ends a job somebody awaits. Asked several times, one wake-up.
 */
export function* wakeAfterCommit(): Script<void> {
  yield WAKE_UP;
}

/** A script with nothing to run. */
// deno-lint-ignore require-yield
export function* done<T>(value: T): Script<T> {
  return value;
}

/**
 * `run`, refusing a second write: outside a transaction each statement
 * commits alone, so a script that writes twice could stop half done (and
 * a busy retry would write its first statement again).
 */
export function oneWriteAtMost<R>(run: (step: Step) => R): (step: Step) => R {
  let writes = 0;
  return (step) => {
    if (!step.statement.readsOnly) writes += "each" in step ? step.each.length : 1;
    if (writes > 1) {
      throw new Error(
        "A script run statement by statement may write once at most: run it in a write transaction",
      );
    }
    return run(step);
  };
}

/**
 * Drives `script` to its end, running each step with `run` (synchronously)
 * and calling `askWakeUp` for each wake-up it asks for (the engine sends
 * one once the script's writes have committed).
 */
export function runSync<T>(
  script: Script<T>,
  run: (step: Step) => unknown,
  askWakeUp: () => void,
): T {
  let next = script.next();
  while (!next.done) {
    const step = next.value;
    next = script.next(step === WAKE_UP ? askWakeUp() : run(step));
  }
  return next.value;
}

/** Drives `script` to its end as {@linkcode runSync} does, awaiting each step's `run`. */
export async function runAsync<T>(
  script: Script<T>,
  run: (step: Step) => Promise<unknown>,
  askWakeUp: () => void,
): Promise<T> {
  let next = script.next();
  while (!next.done) {
    const step = next.value;
    next = script.next(step === WAKE_UP ? askWakeUp() : await run(step));
  }
  return next.value;
}
