/**
 * A queue transaction: the app's own statements and its dispatches in one
 * database transaction, and the dispatches announced (events, waking
 * workers) only once it committed.
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
   * Runs the app's own statement in the same transaction (`?` placeholders on
   * SQLite) and returns its rows.
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
  const result = await store.transaction((storeTx: StoreTransaction) => {
    const dispatch = new Dispatch(parts.rules, {
      target: storeTx,
      sink: committed.sink,
      assertOpen: parts.assertOpen,
    });
    return fn({
      dispatch: (job, payload, options) => dispatch.dispatch(job, payload, options),
      dispatchMany: (job, payloads, options) => dispatch.dispatchMany(job, payloads, options),
      query: (sql, params) => storeTx.query(sql, params),
      chain: (options) => dispatch.chain(options),
      batch: (name) => dispatch.batch(name),
      flow: (name) => dispatch.flow(name),
    });
  });
  committed.flush(parts.committed);
  return result;
}
