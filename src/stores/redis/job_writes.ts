/**
 * Dispatch on Redis: plain jobs in one script, and transactions. A dispatch
 * carries a token of its own, so a call retried after its reply was lost
 * gives back the ids the first one stored instead of storing the jobs twice.
 *
 * A transaction's writes run at once, each in its own script, but stay out
 * of claim order (staged) until the transaction commits, in one script that
 * makes them all claimable; a transaction that throws removes them. One that
 * never ends (its process died) leaves them staged until it counts as
 * abandoned (stages.ts): the next commit or rollback of any transaction
 * then removes them, or a worker's claim.
 *
 * A unique or debounce key whose job an open transaction stored or
 * debounced holds the dispatches of that key from elsewhere back until the
 * transaction ends (see key_hooks.ts), as the job's row lock does on SQL.
 *
 * @internal
 * @module
 */
import type { NewJobRow, StoreTransaction } from "../store.ts";
import * as chainsBatches from "./chains_batches.ts";
import * as flows from "./flows.ts";
import type { RedisConnection } from "./connection.ts";
import { AREA_HOOKS } from "./hooks.ts";
import * as keys from "./keys.ts";
import { dispatch, dispatchScript } from "./dispatch_script.ts";
import { luaScript } from "./lua.ts";
import { untilAborted } from "../close_wait.ts";
import { STAGE_ENDS } from "./stages.ts";

/** Why `tx.query` is refused on Redis, and what to do instead. */
export const NO_SQL_ON_REDIS =
  "queue.transaction() on the Redis store cannot run SQL: Redis cannot join a transaction of " +
  "your database. Dispatch with tx.dispatch() alone here, or dispatch after your database " +
  "commits (an outbox table), or keep the jobs in PostgreSQL (the PostgreSQL store) to dispatch " +
  "inside your own SQL transaction";

/**
 * Input: `rows` (NewJobRow[], without their null fields: `insertJob` reads
 * each nullable field through `opt`), `token` (the dispatch's). Reply: the
 * ids in order.
 */
const INSERT_JOBS = dispatchScript(
  "insertJobs",
  String.raw`
local ids = {}
for i, row in ipairs(INPUT.rows) do ids[i] = insertJob(row, nil) end
reply = cjson.encode(ids)
`,
);

/**
 * Ends a transaction, input `stage` and `commit` (true to publish its
 * writes, false to remove them); then removes the writes of abandoned
 * stages (stages.ts). A transaction that counts as abandoned is rolled
 * back, whatever `commit` says (another end may have done it already, and
 * its keys no longer held other dispatches back): its commit fails saying
 * so.
 */
const END_TRANSACTION = luaScript(
  "endTransaction",
  "allow-oom",
  AREA_HOOKS,
  STAGE_ENDS,
  String.raw`
local open = stageOpen(INPUT.stage)
local published = endStage(INPUT.stage, INPUT.commit and open)
endAbandonedStages()
if published > 0 then wake() end
if INPUT.commit and not open then return abandonedStage() end
`,
);

/**
 * Input: `stage`. Records the transaction's start (server clock, as
 * `stageOpen` reads it), for the removal of abandoned ones.
 */
const BEGIN_TRANSACTION = luaScript(
  "beginTransaction",
  "writes",
  "redis.call('ZADD', P .. ':stages', serverMs(), INPUT.stage)",
);

/** Inserts jobs in one script; their ids in order. Retried once, with its token, when its reply was lost. */
export async function insertJobs(
  redis: RedisConnection,
  rows: readonly NewJobRow[],
  stage?: string,
): Promise<number[]> {
  if (rows.length === 0) return [];
  return await dispatch<number[]>(
    redis,
    INSERT_JOBS,
    { now: rows[0]!.createdAt, rows: rows.map(withoutNulls) },
    stage,
  );
}

/**
 * `row` without its null fields: the script reads an absent field as it
 * reads a null (`opt`), and a row of fewer fields costs the server less to
 * decode (a plain dispatch sends four nulls).
 */
function withoutNulls(row: NewJobRow): { [K in keyof NewJobRow]?: Exclude<NewJobRow[K], null> } {
  const sent: Record<string, unknown> = {};
  for (const field in row) {
    const value = row[field as keyof NewJobRow];
    if (value !== null) sent[field] = value;
  }
  return sent;
}

/**
 * Runs `fn` in a transaction: its inserts become claimable together when it
 * returns, and are removed when it throws. `tx.query` is refused.
 */
export function transaction<T>(
  redis: RedisConnection,
  fn: (tx: StoreTransaction) => T | Promise<T>,
): Promise<T> {
  // The store's close waits for it: closing under it would lose its commit or its rollback. Past
  // its wait, close aborts it: it rolls back then, as PostgreSQL's cut connection rolls back.
  return redis.keptOpenFor((closing) => runStaged(redis, fn, closing));
}

/** Runs `fn` as {@linkcode transaction} says, its writes staged until it ends. */
async function runStaged<T>(
  redis: RedisConnection,
  fn: (tx: StoreTransaction) => T | Promise<T>,
  closing: AbortSignal,
): Promise<T> {
  const stage = crypto.randomUUID();
  // abortedBy: set when a dispatch gave up to end a deadlock, which rolled the transaction back;
  // closedBy: set when the store's close gave up waiting for the callback, and rolled it back.
  const state: { open: boolean; abortedBy?: Error; closedBy?: Error } = { open: true };
  // Worded as the SQL stores' engines word it: a handle kept past its callback is refused alike.
  const inside =
    <A extends unknown[], R>(write: (...args: A) => Promise<R>) => (...args: A): Promise<R> => {
      if (!state.open) {
        return Promise.reject(
          state.closedBy ??
            new Error("This transaction has ended: use it only inside its callback"),
        );
      }
      // A write sent beside the dispatch that gave up, and run after it, found its stage gone:
      // it says why, as the writes asked after the deadlock do. The dispatch's reply came first,
      // but its handling may still be in the microtasks the event loop runs before a timer.
      return redis.transactionWrite(() => write(...args)).catch(async (error: unknown) => {
        // Sent before the close rolled the stage back, and run after it: its stage was gone.
        if (state.closedBy !== undefined) throw state.closedBy;
        if (state.abortedBy === undefined) await new Promise((resolve) => setTimeout(resolve, 0));
        throw state.abortedBy === undefined || error === state.abortedBy
          ? error
          : aborted(state.abortedBy);
      });
    };
  const tx: StoreTransaction = {
    insertJobs: inside((rows) => insertJobs(redis, rows, stage)),
    insertKeyed: inside((rows) => keys.insertKeyed(redis, rows, stage, state)),
    insertChain: inside((chain) => chainsBatches.insertChain(redis, chain, stage)),
    insertBatch: inside((batch) => chainsBatches.insertBatch(redis, batch, stage)),
    insertFlow: inside((flow) => flows.insertFlow(redis, flow, stage)),
    query: inside(() => Promise.reject(new TypeError(NO_SQL_ON_REDIS))),
  };
  await redis.call(BEGIN_TRANSACTION, { now: Date.now(), stage });
  let result: T;
  try {
    // The store's own calls from the callback are refused: they would escape the transaction.
    result = await untilAborted(redis.transactionCallback(state, () => fn(tx)), closing);
  } catch (error) {
    state.open = false;
    if (closing.aborted && error === closing.reason) state.closedBy = error as Error;
    await redis.call(END_TRANSACTION, { now: Date.now(), stage, commit: false }).catch(() => {});
    throw error;
  }
  state.open = false;
  // A callback that went on after its deadlock: the transaction was rolled back then.
  if (state.abortedBy !== undefined) throw aborted(state.abortedBy);
  await redis.call(END_TRANSACTION, { now: Date.now(), stage, commit: true });
  return result;
}

/**
 * The error of a write or commit of a transaction that a deadlock aborted,
 * as PostgreSQL refuses what an aborted transaction is asked next.
 */
function aborted(deadlock: Error): Error {
  return new Error(
    "This transaction was aborted by a deadlock and stored nothing: a dispatch in it gave up, and a transaction goes on after a deadlock only by running again",
    { cause: deadlock },
  );
}
