/**
 * Jobs claimed ahead: when handlers are quick, a tick claims more jobs than
 * the worker has free slots and keeps the rest here, leased under the same
 * token, to start as slots free up without another claim. One claim then
 * serves many jobs instead of one.
 *
 * A job claimed ahead has not started, to every rule of the queue: its row
 * says so (`jobs.claimed_ahead`), and the worker starts it only once a
 * settle confirms its start (see `src/stores/sql/start_confirmation.ts`):
 * the slot that frees takes it (the runner's `#toStart`), and the next tick
 * writes, in one transaction, the settles of the jobs that ended and the
 * start confirmations of the jobs that take their slots. A confirmation is
 * refused where the job was cancelled meanwhile (a cancel removes it as it
 * would a pending job), taken over by another worker, or its queue paused
 * (it is then given back unleased, charged nothing, and the worker puts
 * back the others it holds of that queue). Its `uniqueUntil: "processing"`
 * key is released by the confirmation, not the claim. So a worker starts at
 * most one job per slot per tick: at concurrency 1 a tick per job. A tick
 * that only confirms starts leaves plain successes to their settle group
 * (`src/runner/settle_group.ts`), unless one worker death would fail the job.
 *
 * How much is claimed ahead is bounded by time, not only by count: no more
 * jobs than the recent handlers would run in {@linkcode AHEAD_BUDGET_MS}
 * (a tenth of the lease at most), and never more than
 * {@linkcode mostAhead} (50, or 16 per slot where that is more); when the
 * handlers turn out slower than the claim took them to be, the jobs held
 * past twice that budget are put back at once, charged nothing. A job that
 * waited here longer than a third of its lease is not started but put back,
 * so a job never starts on a lease nobody renewed. What a crash holds back:
 * the jobs claimed ahead and not yet started (at most
 * {@linkcode mostAhead}) come back when their lease runs out, charged no
 * attempt and no crash (only a job whose handler's begin was recorded
 * counts one, see `src/runner/begin_marks.ts`). Batch jobs are never claimed
 * ahead (`ClaimRequest.aheadFrom`): a batch job waits unleased until a slot
 * can start it, so a cancel of its batch can still skip it.
 *
 * @internal
 * @module
 */
import type { ClaimedJob } from "../stores/store.ts";

/** Most jobs claimed beyond the free slots at low concurrency. */
export const MAX_AHEAD = 50;
/**
 * Most jobs claimed beyond the free slots per slot, where that is more than
 * {@linkcode MAX_AHEAD}: a busy worker at high concurrency claims and
 * settles more jobs per transaction (a transaction's own cost, its commit
 * and its claim's seeks, is then shared by more jobs). 16 rather than 8
 * drained no-op jobs at concurrency 32 faster in 8 of 8 paired runs (+6 to
 * +60 %), with claims of up to 544 jobs.
 */
export const MAX_AHEAD_PER_SLOT = 16;

/** Most jobs a worker of `concurrency` slots claims beyond its free slots. */
export function mostAhead(concurrency: number): number {
  return Math.max(MAX_AHEAD, MAX_AHEAD_PER_SLOT * concurrency);
}
/** The work claimed ahead: about this many ms of recent handlers' run time per slot. */
export const AHEAD_BUDGET_MS = 20;
/**
 * How long a worker claims nothing ahead after a claim that could have taken
 * jobs ahead came back short (ms): nothing more was due, or the claim gave
 * back batch jobs (see `ClaimRequest.aheadFrom`), and claiming ahead again
 * at once would only claim and give them back again.
 */
export const PAUSE_AFTER_SHORT_CLAIM_MS = 1_000;
/**
 * Jobs held ahead are put back past this many times the budget's run time
 * ({@linkcode ClaimAhead.takeBeyondBudget}): a margin over what a claim
 * takes, so that run times that vary a little do not claim jobs only to put
 * them back.
 */
export const BEYOND_BUDGET_FACTOR = 2;
/** The weight of the newest run time in the running mean. */
const MEAN_WEIGHT = 0.25;

/** A job claimed ahead, and when (performance.now). */
interface AheadJob {
  readonly job: ClaimedJob;
  readonly claimedAt: number;
}

/** A claim as {@linkcode ClaimAhead.noteClaimed} notes it. */
export interface ClaimNoted {
  /** When the call was sent (performance.now). */
  readonly sentAt: number;
  /** The worker's clock's now it claimed at. */
  readonly now: number;
}

/** What {@linkcode ClaimAhead.take} hands out. */
export interface TakenJob {
  /** The job, leased to this worker. */
  readonly job: ClaimedJob;
  /** False when it waited past a third of its lease: put it back instead of starting it. */
  readonly fresh: boolean;
}

/** The jobs a worker claimed ahead of its free slots, in claim order. */
export class ClaimAhead {
  readonly #leaseMs: number;
  readonly #concurrency: number;
  readonly #most: number;
  #jobs: AheadJob[] = [];
  #first = 0;
  /** The claim of each job the worker holds (see {@linkcode noteClaimed}). */
  readonly #claims = new WeakMap<ClaimedJob, ClaimNoted>();
  /** Running mean of handler run times, in ms; NaN until one ran. */
  #meanRunMs = NaN;
  /** Claims take nothing ahead until then (performance.now). */
  #pausedUntil = -Infinity;

  /** For a worker with `leaseMs` leases and `concurrency` slots. */
  constructor(options: { readonly leaseMs: number; readonly concurrency: number }) {
    this.#leaseMs = options.leaseMs;
    this.#concurrency = options.concurrency;
    this.#most = mostAhead(options.concurrency);
  }

  /** Jobs waiting here. */
  get size(): number {
    return this.#jobs.length - this.#first;
  }

  /** Records how long a handler ran, in ms. */
  noteRun(durationMs: number): void {
    this.#meanRunMs = Number.isNaN(this.#meanRunMs)
      ? durationMs
      : this.#meanRunMs + MEAN_WEIGHT * (durationMs - this.#meanRunMs);
  }

  /**
   * How many jobs a claim may take beyond the free slots: none until a
   * handler ran (nothing says they are quick), then what the recent run
   * times fit in the budget, `most` at the highest.
   */
  allowance(most: number): number {
    const mean = this.#meanRunMs;
    if (Number.isNaN(mean) || most <= 0 || performance.now() < this.#pausedUntil) return 0;
    const fits = Math.floor(this.#budgetMs / Math.max(mean, 0.01));
    return Math.max(0, Math.min(this.#most, most, fits));
  }

  /**
   * Takes the jobs held here beyond what the recent run times fit in twice
   * the budget, the last claimed first, for the worker to put back: a claim
   * made while handlers were quick (one quick run, say) holds no more than
   * that once they turn out slow, so a job of higher priority and the other
   * workers are not kept waiting behind seconds of held work.
   */
  takeBeyondBudget(): ClaimedJob[] {
    const mean = this.#meanRunMs;
    if (Number.isNaN(mean) || this.size === 0) return [];
    const kept = Math.floor(BEYOND_BUDGET_FACTOR * this.#budgetMs / Math.max(mean, 0.01));
    if (this.size <= kept) return [];
    const cut = this.#first + kept;
    const taken = this.#jobs.slice(cut).map(({ job }) => job);
    this.#jobs = this.#jobs.slice(this.#first, cut);
    this.#first = 0;
    return taken;
  }

  /** The run time the jobs claimed ahead may add up to, in ms: the budget for every slot. */
  get #budgetMs(): number {
    return Math.min(AHEAD_BUDGET_MS, this.#leaseMs / 10) * this.#concurrency;
  }

  /** Claims nothing ahead for {@linkcode PAUSE_AFTER_SHORT_CLAIM_MS}. */
  pause(): void {
    this.#pausedUntil = performance.now() + PAUSE_AFTER_SHORT_CLAIM_MS;
  }

  /**
   * Notes the claim that took `jobs`, whether they are kept here or start at
   * once: sent at `sentAt` (performance.now, before the claim read their due
   * times), asking for the jobs due at `now` (the worker's clock).
   */
  noteClaimed(jobs: readonly ClaimedJob[], claim: ClaimNoted): void {
    for (const job of jobs) this.#claims.set(job, claim);
  }

  /** Keeps `jobs`, claimed now, after those already here. */
  add(jobs: readonly ClaimedJob[]): void {
    const now = performance.now();
    for (const job of jobs) {
      this.#jobs.push({ job, claimedAt: this.#claims.get(job)?.sentAt ?? now });
    }
  }

  /** The worker's clock's now of the claim that took `job`, as noted; undefined if none was. */
  claimNow(job: ClaimedJob): number | undefined {
    return this.#claims.get(job)?.now;
  }

  /** The next job in claim order, or undefined. */
  take(): TakenJob | undefined {
    const next = this.#jobs[this.#first];
    if (next === undefined) return undefined;
    this.#first++;
    // Drop the taken jobs once they fill half the array: a busy worker claims more before this
    // runs dry, and the array would otherwise keep every job it handed out (and its payload)
    // alive until then.
    if (this.#first * 2 >= this.#jobs.length) {
      this.#jobs = this.#jobs.slice(this.#first);
      this.#first = 0;
    }
    return { job: next.job, fresh: performance.now() - next.claimedAt <= this.#leaseMs / 3 };
  }

  /** The jobs here that `match`, in claim order, leaving the others. */
  takeWhere(match: (job: ClaimedJob) => boolean): ClaimedJob[] {
    const taken: ClaimedJob[] = [];
    const kept: AheadJob[] = [];
    for (const entry of this.#jobs.slice(this.#first)) {
      if (match(entry.job)) taken.push(entry.job);
      else kept.push(entry);
    }
    this.#jobs = kept;
    this.#first = 0;
    return taken;
  }

  /** Every job here, in claim order, leaving none. */
  takeAll(): ClaimedJob[] {
    const jobs = this.#jobs.slice(this.#first).map(({ job }) => job);
    this.#jobs = [];
    this.#first = 0;
    return jobs;
  }
}
