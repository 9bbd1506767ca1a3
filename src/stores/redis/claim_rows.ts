/**
 * How a claim's reply carries the jobs it claimed: one array per job, its
 * values in ClaimRow's order then `ahead` (`ReplyRow`), each stored field as the
 * job's hash holds it (a decimal string, not a number Lua would format
 * again), and the call's clock shift once for the whole reply. The Lua
 * (`claimRow`) and the reader ({@linkcode claimedRows}) are kept here
 * together, as they must agree on the order.
 *
 * Why: a claim's reply was a JSON object per job with its numbers
 * formatted by Lua (`%.14g`, about a tenth of the server's time in a
 * drain) and its absent fields spelt out as `null` under their names; the
 * server's time per job bounds a drain, the client's does not.
 *
 * @internal
 * @module
 */
import type { ClaimRow } from "../sql/stored_rows.ts";

/**
 * `claimRow(idText, job, attempts, crashes, lastError, recovered, waited,
 * ahead, expireAt)`: the reply's array for job `idText` (its id as a
 * string), `job` its row as read before the claim, the other values as
 * the claim wrote them (`recovered` and `ahead` booleans, `expireAt` a
 * stored string or nil). Times stay on
 * the store's clock: the reply's `shift` takes them back.
 */
export const CLAIM_ROW = String.raw`
local function claimRow(idText, job, attempts, crashes, lastError, recovered, waited, ahead, expireAt)
  return {idText, job.queue, job.name, job.payload, job.priority, attempts, crashes,
    job.retry_until or NULL, lastError or NULL, job.created_at, job.batch_id or NULL,
    job.keyed or NULL, recovered, job.cancel_requested or NULL, waited,
    job.trace or NULL, job.last_span or NULL, ahead, expireAt or NULL, job.flow_parents or NULL}
end
`;

/** A reply's array for one claimed job: ClaimRow's fields in order, `ahead` before `expire_at`. */
type ReplyRow = readonly [
  id: string,
  queue: string,
  name: string,
  payload: string,
  priority: string,
  attempts: number,
  crashes: number,
  retryUntil: string | null,
  lastError: string | null,
  createdAt: string,
  batchId: string | null,
  keyed: string | null,
  recovered: boolean,
  cancelRequested: string | null,
  waitedMs: number,
  trace: string | null,
  lastSpan: string | null,
  ahead: boolean,
  expireAt: string | null,
  flowParents: string | null,
];

/** A claim's rows as the reply carries them: an empty Lua table comes back as `{}`. */
export type ReplyRows = readonly ReplyRow[] | Record<string, never>;

/** A stored time on the caller's clock (`shift` the call's: the store's now minus the caller's). */
function back(stored: string | null, shift: number): number | null {
  return stored === null ? null : Number(stored) - shift;
}

/**
 * The claimed rows of a reply, `rows` read with the call's clock shift
 * (`shiftText`: the store's now minus the caller's, in ms, as the script
 * wrote it, `%.17g`), in the reply's order.
 */
export function claimedRows(
  rows: ReplyRows,
  shiftText: string,
): (ClaimRow & { ahead: boolean })[] {
  if (!Array.isArray(rows)) return [];
  const shift = Number(shiftText);
  return rows.map((row) => ({
    id: Number(row[0]),
    queue: row[1],
    name: row[2],
    payload: row[3],
    priority: Number(row[4]),
    attempts: row[5],
    crashes: row[6],
    retry_until: back(row[7], shift),
    last_error: row[8],
    created_at: back(row[9], shift)!,
    batch_id: row[10] === null ? null : Number(row[10]),
    keyed: row[11] === null ? 0 : Number(row[11]),
    recovered: row[12] ? 1 : 0,
    cancel_requested: row[13],
    waited_ms: row[14],
    trace: row[15],
    last_span: row[16],
    ahead: row[17],
    expire_at: back(row[18], shift),
    flow_parents: row[19],
  }));
}
