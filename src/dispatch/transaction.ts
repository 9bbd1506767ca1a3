/**
 * A queue transaction: the app's own statements and its dispatches in one
 * database transaction, and the dispatches announced (events, waking
 * workers) only once it committed.
 *
 * A dispatch the callback started but did not await (`tx.dispatch(job, p)`
 * in a callback that returns at once) is part of the transaction all the
 * same: the transaction waits for it before it commits, and a dispatch
 * still running when the callback ended settles with the transaction: with
 * its id once the transaction committed, rejected once it rolled back
 * (that rejection counts as handled: the transaction's own promise carries
 * the error). A dispatch that fails rolls the transaction back with its
 * error unless the app took its outcome (awaited it, or handled it with
 * `then` or `catch`) before the transaction ends; either way its rejection
 * is not reported as unhandled.
 *
 * @module
 */
import type { BatchBuilder } from "../batch.ts";
import type { ChainBuilder, ChainOptions } from "../chain.ts";
import type { FlowBuilder } from "../flow.ts";
import type { Dispatcher } from "../job.ts";
import type { JobWrites, StoreTransaction } from "../stores/store.ts";
import { CommitBuffer, Dispatch, type DispatchRules, type DispatchSink } from "./dispatch.ts";

/** The handle {@linkcode Queue.transaction} passes to its callback. */
export interface QueueTransaction extends Dispatcher {
  /** Builds a chain stored as part of the transaction. */
  chain(options?: ChainOptions): ChainBuilder;
  /** Builds a batch stored as part of the transaction. */
  batch(name: string): BatchBuilder;
  /** Builds a flow stored as part of the transaction. */
  flow(name: string): FlowBuilder;
  /**
   * Runs one statement of the app's own in the same transaction (`?`
   * placeholders on SQLite, `$1` on PostgreSQL) and returns its rows.
   * Rejects with a `TypeError` a text of no statement or of several, params
   * that are no array or, on SQLite, not as many as the statement's
   * placeholders (PostgreSQL's server refuses fewer), transaction control (`COMMIT`, …) and what changes
   * the connection past the transaction (`SET` but `SET LOCAL`, `PRAGMA`, …).
   */
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
}

/** What a transaction needs from its queue besides the store. @internal */
export interface TransactionParts {
  /** The dispatch rules of the queue (its registry, payload limits, clock). */
  readonly rules: DispatchRules;
  /** Throws when the queue closed meanwhile, so a dispatch is refused. */
  readonly assertOpen: () => void;
  /** Announces the jobs dispatched, once the transaction committed. */
  readonly committed: DispatchSink;
}

/**
 * Runs `fn` in one transaction of `store` with a {@linkcode QueueTransaction}
 * bound to it; its dispatches reach `parts.committed` only if it commits.
 * @internal
 */
export async function runTransaction<T>(
  store: Pick<JobWrites, "transaction">,
  parts: TransactionParts,
  fn: (tx: QueueTransaction) => T | Promise<T>,
): Promise<T> {
  const committed = new CommitBuffer();
  const dispatches = new TransactionDispatches();
  let result: T;
  try {
    result = await store.transaction(async (storeTx: StoreTransaction) => {
      const dispatch = new Dispatch(parts.rules, {
        target: storeTx,
        sink: committed.sink,
        assertOpen: parts.assertOpen,
        track: dispatches.track,
      });
      let value: T;
      try {
        value = await dispatches.endWith(fn({
          dispatch: (job, payload, options) => dispatch.dispatch(job, payload, options),
          dispatchMany: (job, payloads, options) => dispatch.dispatchMany(job, payloads, options),
          query: (sql, params) => dispatches.afterRollBack(storeTx.query(sql, params)),
          chain: (options) => dispatch.chain(options),
          batch: (name) => dispatch.batch(name),
          flow: (name) => dispatch.flow(name),
        }));
      } catch (error) {
        await dispatches.callbackEnded();
        throw error;
      }
      await dispatches.callbackEnded();
      dispatches.assertNoneFailed();
      return value;
    });
  } catch (error) {
    dispatches.rolledBack(error);
    throw error;
  }
  committed.flush(parts.committed);
  dispatches.committed();
  return result;
}

/**
 * The dispatches of one transaction's callback: followed from their call to
 * their end, so the transaction ends only after every one of them, and those
 * that outlast the callback settle with the transaction. One that fails and
 * that nothing took (see {@linkcode DispatchPromise}) fails the transaction.
 */
class TransactionDispatches {
  /** Dispatches not yet ended. */
  readonly #running = new Set<Promise<void>>();
  /** How each dispatch that outlasted the callback settles: on commit, or on rollback (its error). */
  readonly #outlasting: { commit: () => void; rollBack: (error: unknown) => void }[] = [];
  #callbackRunning = true;
  /** How the transaction ended, once it did: `{ error }` when it rolled back. */
  #outcome: "committed" | { readonly error: unknown } | null = null;
  /** The dispatches that failed, in the order they failed, each with its error. */
  readonly #failed: { readonly promise: DispatchPromise<unknown>; readonly error: unknown }[] = [];

  /**
   * `call` (a dispatch or a statement on the transaction's handle), kept
   * from being reported as unhandled once the transaction has rolled back:
   * the callback may still run then (close() or a deadlock stopped waiting
   * for it, or the app kept the handle), and its store refuses the call.
   */
  readonly afterRollBack = <R>(call: Promise<R>): Promise<R> => {
    if (this.#outcome !== null && this.#outcome !== "committed") markHandled(call);
    return call;
  };

  /** Follows `dispatching`; the promise the caller gets in its place. */
  readonly track = <R>(dispatching: Promise<R>): Promise<R> => {
    // A handle kept past the transaction: its store refuses the dispatch, as it says.
    if (this.#outcome !== null) return this.afterRollBack(dispatching);
    let resolve!: (value: R) => void;
    let reject!: (error: unknown) => void;
    const promise = new DispatchPromise<R>((resolved, rejected) => {
      resolve = resolved;
      reject = rejected;
    });
    const ended: Promise<void> = dispatching.then(
      (value) => {
        if (this.#callbackRunning) resolve(value);
        else this.#outlast(promise, () => resolve(value), (error) => reject(rolledBack(error)));
      },
      (error: unknown) => {
        // Taken by the app (an await, a catch) or, if not, by the transaction, which fails with it.
        markHandled(promise);
        this.#failed.push({ promise, error });
        reject(error);
      },
    ).finally(() => this.#running.delete(ended));
    this.#running.add(ended);
    return promise;
  };

  #outlast(
    promise: Promise<unknown>,
    commit: () => void,
    rollBack: (error: unknown) => void,
  ): void {
    // Its rejection reaches the app through the transaction's own promise: not an unhandled one.
    markHandled(promise);
    if (this.#outcome === "committed") commit();
    else if (this.#outcome !== null) rollBack(this.#outcome.error);
    else this.#outlasting.push({ commit, rollBack });
  }

  /**
   * `returned`, what the callback returned: the callback ends as it does
   * (at once for a plain value), before any dispatch it started can end
   * after it.
   */
  endWith<R>(returned: R | PromiseLike<R>): R | PromiseLike<R> {
    if (typeof (returned as PromiseLike<R> | null)?.then !== "function") this.#ended();
    else Promise.resolve(returned).then(this.#ended, this.#ended);
    return returned;
  }

  readonly #ended = (): void => {
    this.#callbackRunning = false;
  };

  /** The callback ended: waits for every dispatch still running (and those they start meanwhile). */
  async callbackEnded(): Promise<void> {
    this.#callbackRunning = false;
    while (this.#running.size > 0) await Promise.all(this.#running);
  }

  /**
   * Throws the error of the first dispatch that failed with nothing to take
   * its outcome (the app neither awaited it nor handled it): the
   * transaction rolls back with it, as with an error the callback threw.
   */
  assertNoneFailed(): void {
    const failed = this.#failed.find(({ promise }) => !promise.taken);
    if (failed !== undefined) throw failed.error;
  }

  /** The transaction committed: the dispatches that outlasted the callback give their ids. */
  committed(): void {
    this.#outcome = "committed";
    for (const dispatch of this.#outlasting.splice(0)) dispatch.commit();
  }

  /** The transaction rolled back with `error`: the dispatches that outlasted the callback reject. */
  rolledBack(error: unknown): void {
    this.#outcome = { error };
    for (const dispatch of this.#outlasting.splice(0)) dispatch.rollBack(error);
  }
}

/**
 * A dispatch's promise as the app gets it, which notes whether anything
 * took its outcome: `await`, `then`, `catch`, `finally` and `Promise.all`
 * each call its `then` (an `await` too, as it is not a plain promise).
 * Promises made from it are plain ones.
 */
class DispatchPromise<T> extends Promise<T> {
  static override readonly [Symbol.species] = Promise;
  /** Whether the app took its outcome. */
  taken = false;

  override then<A = T, B = never>(
    onFulfilled?: ((value: T) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    this.taken = true;
    return super.then(onFulfilled, onRejected);
  }
}

/** Keeps `promise`'s rejection from being reported as unhandled, without taking its outcome. */
function markHandled(promise: Promise<unknown>): void {
  Promise.prototype.then.call(promise, undefined, () => {});
}

/** The error a dispatch rejects with when its transaction rolled back with `error`. */
function rolledBack(error: unknown): Error {
  const reason = error instanceof Error ? error.message : String(error);
  return new Error(`The transaction rolled back, and this dispatch with it: ${reason}`, {
    cause: error,
  });
}
