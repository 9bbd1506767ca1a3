/**
 * The begin marks of handlers: a worker records, with its next tick, which
 * of the jobs it started have a handler that began (its executor says so
 * as the handler is called). A claim that takes over a dead worker's lease
 * charges a crash only to a job so marked (see `CLAIM_SETS`); a job that
 * its worker started but died before marking is charged nothing, and
 * becomes suspect: its next start is marked begun before its handler runs.
 *
 * @internal
 * @module
 */
import type { Lease } from "../store.ts";
import { exec, type Script } from "./script.ts";
import { statement } from "./statement.ts";

/**
 * Marks begun the jobs `$1` that claim `$2` still holds and has started
 * (not held ahead).
 */
const MARK_BEGUN = statement(
  "UPDATE jobs SET begun = 1 WHERE id IN {{ids $1}} AND token = $2 AND claimed_ahead = 0",
);

/** Marks begun the handlers of `leases`, one statement per claim token. */
export function* markBegun(leases: readonly Lease[]): Script<void> {
  const idsByToken = new Map<number, number[]>();
  for (const { id, token } of leases) {
    const ids = idsByToken.get(token);
    if (ids === undefined) idsByToken.set(token, [id]);
    else ids.push(id);
  }
  for (const [token, ids] of idsByToken) yield* exec(MARK_BEGUN, ids, token);
}
