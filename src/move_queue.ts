/**
 * Moving a queue from one store to another (docs/moving.md): SQLite to
 * PostgreSQL as an app outgrows one machine, or any store to any other.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { checkedClock, type Clock } from "./clock.ts";
import {
  assertNotMovedElsewhere,
  type MovedTable,
  type MoveReport,
  moveStores,
  waitForWorkers,
} from "./moving/move_stores.ts";
import { shown } from "./shown.ts";
import { optionBag, optionNames } from "./option_bags.ts";
import { MOVE_PAGE_BYTES } from "./stores/rows/transfer.ts";
import { isServerUrl, redactPassword } from "./stores/database_url.ts";
import type { MoveFence, Store } from "./stores/store.ts";
import { missingQueue, openStore } from "./store_options.ts";

export type { MovedTable, MoveReport } from "./moving/move_stores.ts";
export type { MoveFence } from "./stores/store.ts";

/** Options for {@linkcode moveQueue}. */
export interface MoveQueueOptions {
  /**
   * How long to wait for the source's workers to stop before refusing, in
   * ms: a worker counts as running until 30 s after its last heartbeat (a
   * worker stopped gracefully removes its heartbeat at once).
   * @default {0}
   */
  waitMs?: number;
  /**
   * Rows copied per page (one transaction of the destination each). A page
   * also ends once its rows' text (payloads, outputs, log lines) passes
   * 4 MiB, a bigger row alone in its page, so big payloads move too.
   * @default {500}
   */
  pageSize?: number;
  /** The clock of the fence and of what the move leaves behind (tests). @default {systemClock} */
  clock?: Clock;
}

/** The options {@linkcode moveQueue} takes. */
const MOVE_QUEUE_OPTIONS = optionNames<MoveQueueOptions>()(["waitMs", "pageSize", "clock"]);

/**
 * Moves everything a queue holds from the store `from` to the store `to`:
 * each a SQLite file or a `postgres://` / `redis://` URL, as `Queue.open`
 * takes them (the destination is created and migrated if need be). Jobs
 * pending, delayed and running (copied as pending, their attempts kept),
 * failed jobs, kept history, batches, chains, flows, unique and debounce
 * keys, live overlap locks and rate windows, schedules with their last
 * slot, pauses, job logs, durable steps and signals, metrics: every id
 * kept, every payload copied as stored (ciphertext stays ciphertext). The
 * id counters come too: `to` hands out ids after every id `from` handed
 * out, also those no row holds any more (history not kept, pruned jobs and
 * batches), so an id the app kept never names another job.
 *
 * It refuses a `from` that holds no queue (no schema step applied: another
 * app's SQLite file or database, an unused Redis prefix), before anything
 * is written there. It refuses while workers of `from` run (see
 * {@linkcode MoveQueueOptions.waitMs}), and while `to` holds anything but
 * what an earlier run of this same move copied. It first fences `from`:
 * from then on `from` refuses every write with a `QueueMovedError`, so no
 * dispatch is lost. A move stopped halfway is finished by running it again.
 * The fence stays after the move; {@linkcode abortMove} lifts it.
 *
 * Resolves with both stores' counts per table; rejects naming the tables
 * whose counts differ.
 *
 * @example Moving a queue from SQLite to PostgreSQL
 * ```ts ignore
 * import { moveQueue } from "@renox/queue";
 *
 * const report = await moveQueue("./.renox/queue.db", "postgres://db.internal/app", {
 *   waitMs: 60_000,
 * });
 * console.log(`moved in ${report.ms} ms`);
 * ```
 */
export async function moveQueue(
  from: string,
  to: string,
  options: MoveQueueOptions = {},
): Promise<MoveReport> {
  const report = await moveQueueReport(from, to, options);
  if (report.mismatched.length > 0) throw mismatchError(report);
  return report;
}

/**
 * Lifts the fence a move left on the store `from`, for a move given up:
 * the store takes writes again (start its workers again; the destination
 * keeps what was copied, and should be emptied before a new move to it).
 * Resolves with the fence lifted, or null when `from` had none.
 */
export async function abortMove(from: string): Promise<MoveFence | null> {
  shownStore(from, "from");
  await using source = await openMovable(from, "from", false);
  const fence = await source.store.moveFence();
  if (fence === null) return null;
  await source.store.liftMoveFence();
  return fence;
}

/**
 * {@linkcode moveQueue}, resolving with the report whatever the counts (the
 * `move` command prints it, then fails when they differ). @internal
 */
export async function moveQueueReport(
  from: string,
  to: string,
  given: MoveQueueOptions = {},
): Promise<MoveReport> {
  const options = optionBag(given, "moveQueue", MOVE_QUEUE_OPTIONS) ?? {};
  const waitMs = options.waitMs ?? 0;
  if (!(Number.isFinite(waitMs) && waitMs >= 0)) {
    throw new RangeError(`waitMs must be a number of ms >= 0: got ${shown(waitMs)}`);
  }
  const pageSize = options.pageSize ?? 500;
  if (!Number.isSafeInteger(pageSize) || pageSize < 1) {
    throw new RangeError(`pageSize must be a whole number >= 1: got ${shown(pageSize)}`);
  }
  const clock = checkedClock(options.clock, "moveQueue: clock");
  const fromShown = shownStore(from, "from");
  const toShown = shownStore(to, "to");
  if (fromShown === toShown) {
    throw new TypeError(`Cannot move a queue to the store it is in: ${fromShown}`);
  }
  await using source = await openMovable(from, "from", false);
  const settings = {
    from: fromShown,
    to: toShown,
    waitMs,
    pageSize,
    pageBytes: MOVE_PAGE_BYTES,
    clock,
  };
  // Before the destination is created or migrated: a refused move writes nothing there. The
  // source's workers are waited for again once the destination is open (one may start meanwhile).
  const fence = await source.store.moveFence();
  assertNotMovedElsewhere(fence, fromShown, toShown);
  if (fence === null) await waitForWorkers(source.store, settings);
  await using destination = await openMovable(to, "to", true);
  return await moveStores(source.store, destination.store, settings);
}

/**
 * The error for a move whose counts differ, naming the tables (`id_counters`:
 * counters behind) and what to do: run it again when rows are missing; when
 * the destination holds more than the move could have copied (the app wrote
 * there before the move ended), check the new store, since a run again is
 * refused. @internal
 */
export function mismatchError(report: MoveReport): Error {
  const tables = report.tables.filter(({ table }) => report.mismatched.includes(table));
  const names = (rows: readonly MovedTable[]) => rows.map(({ table }) => table).join(", ");
  const grown = tables.filter(({ source, leftBehind, destination }) =>
    destination > source - leftBehind
  );
  const short = tables.filter((row) => !grown.includes(row));
  const advice = grown.length === 0
    ? "run the move again to finish it"
    : `${report.to} holds more than the move copied in ${
      names(grown)
    } (something else wrote there since the move started, such as the app pointed at it), so running the move again would refuse; ${
      short.length === 0
        ? "nothing is lost: check the new store's jobs before starting its workers"
        : `and rows are missing in ${
          names(short)
        }: check both stores before starting the new store's workers`
    }`;
  return new Error(
    `The move of ${report.from} to ${report.to} is not complete: counts differ in ${
      tables.map(({ table, source, leftBehind, destination }) =>
        `${table} (source ${source}${
          leftBehind > 0 ? ` less ${leftBehind} left behind` : ""
        }, destination ${destination})`
      ).join(", ")
    }; ${advice}`,
  );
}

/**
 * A store as a move shows it: a URL without its password, a file as its
 * absolute path (so a move run again from another folder is the same move).
 */
function shownStore(db: string, role: "from" | "to"): string {
  if (typeof db !== "string" || db.trim() === "") {
    throw new TypeError(`${role} must name a SQLite file or a database URL: got ${shown(db)}`);
  }
  if (isServerUrl(db)) return redactPassword(db);
  if (db === ":memory:" || /^file:/i.test(db)) {
    throw new TypeError(
      `${role} must be a SQLite file by its path, or a database URL: got ${db} (a move runs in a process of its own)`,
    );
  }
  return resolve(db);
}

/**
 * Opens the store `db` names (migrating it). A source must hold a queue,
 * checked before anything is written: a mistyped `from` (another app's
 * SQLite file or database, an unused Redis prefix) is refused, not given
 * the queue's schema and a fence.
 */
async function openMovable(
  db: string,
  role: "from" | "to",
  create: boolean,
): Promise<{ store: Store } & AsyncDisposable> {
  const options = isServerUrl(db) ? { url: db } : { path: db };
  if (!create) {
    if ("path" in options && !existsSync(db)) {
      throw new TypeError(`${role}: no SQLite file at ${resolve(db)}`);
    }
    const missing = await missingQueue(options);
    if (missing !== null) {
      throw new TypeError(
        `${role}: no queue at ${
          shownStore(db, role)
        }: ${missing}; a move copies the queue of a store that holds one (nothing was written there)`,
      );
    }
  }
  const store = await openStore(options);
  return { store, [Symbol.asyncDispose]: () => store.close() };
}
