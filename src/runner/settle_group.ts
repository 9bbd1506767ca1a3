/**
 * The settle group: attempts that ended (and claimed jobs put back unstarted)
 * wait here for the tick that writes their settles. While jobs claimed ahead
 * wait for slots, plain successes are written in groups (group commit): once
 * {@linkcode SETTLE_GROUP}`.jobs` have finished, or once the first of them
 * has waited {@linkcode SETTLE_GROUP}`.withinMs`. Anything else (a retry, a
 * failure, a batch job's success, a success that one worker death would
 * fail) marks the group to be written first: before another job starts, so
 * the next job sees its batch counters, and its events and hooks come at
 * once.
 *
 * @internal
 * @module
 */
import type { FinishedJob } from "./attempts.ts";

/**
 * While jobs claimed ahead wait, finished jobs are settled in groups: once
 * this many have finished, or once the first of them has waited this long
 * (ms), whichever comes first. With nothing claimed ahead they are settled at once.
 */
export const SETTLE_GROUP = { jobs: 512, withinMs: 5 } as const;

/** What {@linkcode SettleGroup.take} hands to a tick, to give back with `restore()` if it fails. */
export interface TakenGroup {
  /** The finished jobs, oldest first. */
  readonly jobs: readonly FinishedJob[];
  /** When the oldest of them finished (performance.now); Infinity when there are none. */
  readonly since: number;
  /** Whether one of them was to be written before another job starts. */
  readonly first: boolean;
}

/** The finished jobs waiting for their settle, their age, and whether they go first. */
export class SettleGroup {
  #jobs: FinishedJob[] = [];
  /** When the oldest of `#jobs` finished (performance.now); Infinity when none waits. */
  #since = Infinity;
  /** Whether one of `#jobs` is to be settled before another job starts. */
  #first = false;

  /** Finished jobs waiting. */
  get size(): number {
    return this.#jobs.length;
  }

  /** Whether a job waiting here is to be settled before another job starts. */
  get first(): boolean {
    return this.#first;
  }

  /**
   * Whether the group is to be written now. With `grouping` (jobs claimed
   * ahead wait for slots and the worker runs): once it is full, its time is
   * up, or it holds a job to be written first. Without: as soon as any job
   * waits.
   */
  due(grouping: boolean): boolean {
    if (this.#jobs.length === 0) return false;
    return !grouping || this.#first || this.#jobs.length >= SETTLE_GROUP.jobs ||
      performance.now() - this.#since >= SETTLE_GROUP.withinMs;
  }

  /** How long until the group's time is up, in ms (0 when it is, Infinity when none waits). */
  waitMs(): number {
    return Math.max(0, SETTLE_GROUP.withinMs - (performance.now() - this.#since));
  }

  /** Keeps `finished` for the next settle; `first`: write it before another job starts. */
  add(finished: FinishedJob, first: boolean): void {
    if (this.#jobs.length === 0) this.#since = performance.now();
    this.#jobs.push(finished);
    this.#first ||= first;
  }

  /** Every job waiting, oldest first, leaving none. */
  take(): TakenGroup {
    const taken = { jobs: this.#jobs, since: this.#since, first: this.#first };
    this.#jobs = [];
    this.#since = Infinity;
    this.#first = false;
    return taken;
  }

  /**
   * Puts back jobs a tick took and could not write, ahead of those that
   * finished since: they keep their age (the group is due at once if their
   * time is up) and whether they go first.
   */
  restore(group: TakenGroup): void {
    if (group.jobs.length === 0) return;
    this.#jobs = group.jobs.concat(this.#jobs);
    this.#since = Math.min(group.since, this.#since, performance.now());
    this.#first ||= group.first;
  }
}
