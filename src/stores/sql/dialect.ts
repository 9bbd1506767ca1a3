/**
 * What really differs between the SQL engines, as operations named for what
 * they do: each returns a script, so the shared rules call them like any
 * other step. Everything else is a shared statement.
 *
 * @internal
 * @module
 */
import type { IdCounter } from "../rows/transfer.ts";
import type { ClaimRequest, Lease, NewJobRow, Settlement, StoredError } from "../store.ts";
import type { EngineName } from "./statement.ts";
import type { Script } from "./script.ts";
import type { ClaimRow, JobLinks } from "./stored_rows.ts";

/** How a job holds a unique or debounce key: the `jobs.keyed` column. */
export const KEYED = {
  /** It holds none. */
  none: 0,
  /** It holds one until it succeeds or fails for good. */
  untilSettled: 1,
  /** It holds one until it starts. */
  untilStarted: 2,
} as const;

/** What the jobs of one insert share: their batch and how they hold a key. */
export interface InsertedAs {
  /** The batch they are counted members of, or null. */
  readonly batchId: number | null;
  /** How they hold a key ({@linkcode KEYED}). */
  readonly keyed: number;
}

/** Jobs of no batch that hold no key. */
export const PLAIN: InsertedAs = Object.freeze({ batchId: null, keyed: KEYED.none });

/** A job as the settle statements return it, before or as they change it. */
export interface SettledJob extends JobLinks {
  readonly id: number;
  readonly queue: string;
  readonly name: string;
  readonly waited_ms: number | null;
  /** {@linkcode KEYED}: whether its settle must release a key. */
  readonly keyed: number;
  /** 1 when the attempt took middleware locks its settle must release. */
  readonly locked: number;
  /** Its group key, or null: its settle frees a slot of its group. */
  readonly group_key: string | null;
}

/**
 * What every claim writes on a job it leases, after its token, lease and
 * wait: no progress, no locks, and the start mark `heldAhead` (`claimed_ahead`
 * 1: the claim holds its jobs ahead, and the claim script sets it back to 0
 * on the few it starts at once, in the same transaction; one statement over
 * those few, where marking the many held ahead took one over them all). It
 * reads the row as it was before the claim. When it takes over a dead
 * worker's lease (the row still has a token), what that worker recorded
 * decides the charge: a job whose handler it recorded as begun (`begun` 1)
 * gets a crash (and one more when it was `suspect`: the death it was
 * suspected of), the `recovered` mark and an error saying so, and one more
 * attempt; a job it held ahead and never started is charged nothing (its
 * attempt, counted by that claim, stands for this one); a job it started
 * without recording that its handler began is charged nothing either, but
 * becomes `suspect` and no longer expires. The claim's `begun` is the
 * job's `suspect`: a suspect job's start counts as begun before its handler
 * runs, so a job that kills its worker as it starts is charged from its
 * second death on, for both.
 */
export function claimSets(heldAhead: boolean): string {
  return `progress = NULL, locked = 0, claimed_ahead = ${heldAhead ? 1 : 0},
  attempts = attempts + CASE WHEN token IS NOT NULL AND (claimed_ahead = 1 OR begun = 0)
    THEN 0 ELSE 1 END,
  crashes = crashes + CASE WHEN token IS NULL OR claimed_ahead = 1 OR begun = 0 THEN 0
    ELSE 1 + suspect END,
  recovered = CASE WHEN token IS NULL OR claimed_ahead = 1 OR begun = 0 THEN 0 ELSE 1 END,
  last_error = CASE WHEN token IS NULL OR claimed_ahead = 1 OR begun = 0 THEN last_error
    ELSE 'worker died during attempt ' || attempts END,
  expire_at = CASE WHEN token IS NOT NULL AND claimed_ahead = 0 AND begun = 0 THEN NULL
    ELSE expire_at END,
  suspect = CASE WHEN token IS NULL OR claimed_ahead = 1 THEN suspect WHEN begun = 0 THEN 1
    ELSE 0 END,
  begun = CASE WHEN token IS NULL OR claimed_ahead = 1 THEN suspect WHEN begun = 0 THEN 1
    ELSE 0 END`;
}

/**
 * A job row's attempts as the queue counts them, the starts of its handler:
 * a job held ahead (`claimed_ahead` 1) has not started, so the attempt its
 * claim counted is not one yet (it becomes one when its start is confirmed,
 * and is given back when it is put back or cancelled unstarted). What every
 * read of an unfinished job's attempts reports (`result()`, `jobs()`, the
 * kept record of a cancel).
 */
export const STARTED_ATTEMPTS = "attempts - claimed_ahead";

/**
 * Whether a job row runs at `now` (a clock expression such as
 * `{{now $2}}`): leased, its lease not run out, and started (a job held
 * ahead has not). What a cancel asks rather than removes, and a clear leaves.
 */
export function runningAt(now: string): string {
  return `(token IS NOT NULL AND available_at > ${now} AND claimed_ahead = 0)`;
}

/** The columns a claim returns, in the order of `ClaimRow`. */
export const CLAIMED_COLUMNS =
  "id, queue, name, payload, priority, attempts, crashes, retry_until, last_error, created_at, batch_id, keyed, recovered, cancel_requested, waited_ms, trace, last_span, expire_at, flow_parents";

/** The links of a job to its chain, batch and flow, as columns (what moves with it to the failed jobs and back). */
export const LINK_COLUMNS = "batch_id, batch_member, chain_id, flow_id, flow_parents";

/** The columns every settle statement returns, in the order of {@linkcode SettledJob}. */
export const SETTLED_COLUMNS =
  "id, batch_id, batch_member, chain_id, flow_id, queue, name, waited_ms, keyed, locked, group_key";

/** A job's group, as columns (`jobs` and `failed_jobs`): see src/stores/sql/groups.ts. */
export const GROUP_COLUMNS = "group_key, group_limit, group_ordered";

/** A job moved back from the failed jobs, with its links. */
export interface MovedJob extends JobLinks {
  readonly id: number;
}

/** Which failed jobs a retry moves back. */
export type RetrySelection = readonly number[] | "all" | { readonly batchId: number };

/** A settlement that fails a job for good. */
export type FailSettlement = Extract<Settlement, { kind: "fail" }>;

/**
 * The parameter a `{{now $n}}` takes for a rule the caller runs at `now`:
 * null where the store goes by the database's clock (the statement then
 * reads it), else `now`. A time the caller gives, `t`, is stored as
 * `{{now $n}} + (t - now)`, so it keeps its distance from the caller's now
 * on whichever clock the store goes by; a cutoff the same way. Use it where
 * the time only goes into SQL; where the script needs the store's time as a
 * value (to compute with it in JS), read it with {@linkcode Dialect.now}.
 */
export function clockParam(dialect: Dialect, now: number): number | null {
  return dialect.usesDatabaseClock ? null : now;
}

/** The engine-specific operations, each a script. */
export interface Dialect {
  /** Which engine's statement texts to run. */
  readonly engine: EngineName;
  /** Whether statements read the time from the database (`{{now $n}}` given null) rather than the caller. */
  readonly usesDatabaseClock: boolean;
  /** Whether {@linkcode Dialect.insertJobs} stores any number of rows in one statement. */
  readonly insertsInOneStatement: boolean;
  /**
   * The shift a dispatch created at `createdAt` moves its times by onto the
   * store's clock, kept steady from the store's last dispatch, and the
   * store's now it read (src/stores/steady_shift.ts): 0 and `createdAt`
   * where the store goes by the caller's clock.
   */
  dispatchClock(createdAt: number): Script<{ readonly shift: number; readonly now: number }>;
  /**
   * Inserts jobs `as` members of a batch or holders of a key (or neither);
   * their ids in order.
   */
  insertJobs(rows: readonly NewJobRow[], as: InsertedAs): Script<number[]>;
  /**
   * Leases due jobs in one statement, as {@linkcode ClaimRequest} says; rows
   * in no set order. With `heldAhead`, each is marked held ahead, not
   * started ({@linkcode claimSets}).
   */
  claim(request: ClaimRequest, heldAhead: boolean): Script<ClaimRow[]>;
  /**
   * Whether an empty claim for `request`'s queues and names passed over a
   * job it could take, due outside any group (see
   * `WorkerStore.claimPassedOver`), read without locks.
   */
  passedOver(request: Pick<ClaimRequest, "queues" | "names" | "now">): Script<boolean>;
  /**
   * Deletes succeeded jobs, each fenced by its token; the rows deleted.
   * Asks for a wake-up after commit (`wakeAfterCommit` of `./script.ts`) when
   * somebody awaits one of them (`dispatchAndWait`) and no file watch tells
   * other processes.
   */
  completeJobs(leases: readonly Lease[]): Script<SettledJob[]>;
  /**
   * Moves a job to the failed jobs, fenced by its token, asking to wake its
   * awaiters as {@linkcode Dialect.completeJobs} does; the job, or null when
   * its lease was lost.
   */
  failJob(settlement: FailSettlement, error: StoredError): Script<SettledJob | null>;
  /** Moves failed jobs back to their queues, due at `now`; a job is in exactly one table throughout. */
  retryFailed(selection: RetrySelection, now: number): Script<MovedJob[]>;
  /**
   * Extends leases to `until`, given with the caller's `now`: on the
   * database's clock, as long after its now; the ids whose lease was lost.
   */
  renew(leases: readonly Lease[], until: number, now: number): Script<number[]>;
  /**
   * Makes transactions that check the same keys take turns until they end
   * (all keys up front, in one order); a no-op where writes are serialized.
   */
  lockKeys(keys: readonly string[]): Script<void>;
  /**
   * Makes a pause wait until every transaction that may be claiming jobs or
   * confirming starts has ended, and holds new ones until it commits, so no
   * job starts on a snapshot that missed the pause; a no-op where writes are
   * serialized.
   */
  waitOutStarts(): Script<void>;
  /**
   * The time the rules of this transaction go by: `given` (the caller's
   * clock), or the database's own where the store goes by it (PostgreSQL
   * by default, so hosts whose clocks disagree agree on due times, lock
   * expiry and rate windows).
   */
  now(given: number): Script<number>;
  /**
   * Makes every write to the queue's tables fail with the error the engine
   * turns into a `QueueMovedError` (`on`: a move's fence, see
   * `./transfer.ts`), or no longer (`on` false). Nothing is checked on a
   * write before a move creates the fence.
   */
  fenceWrites(on: boolean): Script<void>;
  /** The highest id each of the store's id counters handed out (0: none), by counter. */
  idCounters(): Script<Record<IdCounter, number>>;
  /** Raises `counter` so that the next id it hands out is past `value`; never lowers it. */
  raiseIdCounter(counter: IdCounter, value: number): Script<void>;
}
