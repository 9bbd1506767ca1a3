/**
 * Shared test fixtures: temp database files, a clock tests move by hand, and
 * waiting on an event with a deadline instead of sleeping.
 *
 * @module
 */
import { join } from "node:path";
import type { QueueCounts } from "../src/admin/listing.ts";
import type { Clock } from "../src/clock.ts";
import { PayloadCipher } from "../src/encryption.ts";

/** A temp folder removed on dispose, with a fresh database path inside. */
export interface TempDir extends AsyncDisposable {
  /** The folder. */
  readonly dir: string;
  /** `dir/queue.db`. */
  readonly dbPath: string;
}

/** Makes a temp folder for one test; `await using` removes it. */
export async function tempDir(): Promise<TempDir> {
  const dir = await Deno.makeTempDir({ prefix: "renox-queue-test-" });
  return {
    dir,
    dbPath: join(dir, "queue.db"),
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  };
}

/** A clock that moves only when told to. */
export class ManualClock implements Clock {
  #now: number;

  /** Starts at `start` (ms since the epoch). */
  constructor(start = Date.UTC(2026, 0, 1)) {
    this.#now = start;
  }

  /** The current time of this clock. */
  now(): number {
    return this.#now;
  }

  /** Moves the clock forward by `ms`. */
  advance(ms: number): void {
    this.#now += ms;
  }
}

/**
 * Resolves with the first `type` event on `target` whose detail `accept`s,
 * or rejects after `timeoutMs`: a deadline for a test that would otherwise
 * hang, generous enough for a loaded CI machine (a `job:retry` once took
 * longer than 5 s there), never a measure of speed.
 */
export function nextEvent<D>(
  target: EventTarget,
  type: string,
  accept: (detail: D) => boolean = () => true,
  timeoutMs = WAIT_UNTIL_TIMEOUT_MS,
): Promise<D> {
  return new Promise((resolve, reject) => {
    const listener = (event: Event) => {
      const detail = (event as CustomEvent<D>).detail;
      if (!accept(detail)) return;
      cleanup();
      resolve(detail);
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`No "${type}" event within ${timeoutMs} ms`));
    }, timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      target.removeEventListener(type, listener);
    };
    target.addEventListener(type, listener);
  });
}

/**
 * `queue.counts()` without the queues that hold nothing: `counts()` lists
 * every queue the jobs name, with zeros, so "nothing stored" reads `{}` here.
 */
export async function storedCounts(
  queue: { counts(): Promise<Record<string, QueueCounts>> },
): Promise<Record<string, QueueCounts>> {
  const counts = await queue.counts();
  return Object.fromEntries(
    Object.entries(counts).filter(([, { pending, delayed, reserved, failed }]) =>
      [pending, delayed, reserved, failed].some((count) => count !== 0)
    ),
  );
}

/**
 * How many jobs `queue`'s store holds unfinished (due, delayed or running),
 * as `queue.jobs()` counts them: the store-neutral `db.count("jobs")`.
 */
export async function unfinishedCount(
  queue: { jobs(options: { limit: number }): Promise<{ total: number }> },
): Promise<number> {
  return (await queue.jobs({ limit: 1 })).total;
}

/** How many failed jobs `queue`'s store holds (up to 1000): the store-neutral `db.count("failed_jobs")`. */
export async function failedCount(
  queue: { failed(options: { limit: number }): Promise<readonly unknown[]> },
): Promise<number> {
  return (await queue.failed({ limit: 1000 })).length;
}

/** Whether a file or folder exists at `path` (a marker a job or child process writes). */
export function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** `promise`, or a rejection once `ms` have passed saying `what` did not happen: a hang fails. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** How long {@linkcode waitUntil} waits unless told otherwise: generous, for a busy machine. */
export const WAIT_UNTIL_TIMEOUT_MS = 30_000;

/** Options of {@linkcode waitUntil}. */
export interface WaitUntilOptions {
  /** What is awaited, for the error: "the job settled". */
  readonly what: string;
  /**
   * How long to wait before failing.
   * @default {WAIT_UNTIL_TIMEOUT_MS}
   */
  readonly timeoutMs?: number;
  /**
   * How long to sleep between two checks.
   * @default {10}
   */
  readonly everyMs?: number;
}

/**
 * Checks `condition` until it returns something other than undefined,
 * false or null, and resolves with that; rejects naming `what` once
 * `timeoutMs` have passed. For conditions that have no event to wait on
 * (rows, files, a child's output).
 */
export async function waitUntil<T>(
  condition: () => T | undefined | false | null | Promise<T | undefined | false | null>,
  { what, timeoutMs = WAIT_UNTIL_TIMEOUT_MS, everyMs = 10 }: WaitUntilOptions,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value !== undefined && value !== false && value !== null) return value;
    if (performance.now() > deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting until ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** A cipher of `current` and `previous`, named as `Queue.open`'s options name them. */
export function cipherOf(
  current: string,
  previous: readonly string[] = [],
): Promise<PayloadCipher> {
  return PayloadCipher.fromKeys({
    current,
    previous,
    names: {
      current: "appKey",
      previousList: "previousAppKeys",
      previous: previous.map((_, index) => `previousAppKeys[${index}]`),
    },
  });
}
