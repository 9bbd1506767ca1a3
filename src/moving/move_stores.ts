/**
 * A move from one opened store to another (docs/moving.md), whatever the
 * stores: the checks, the fence, the copy table by table in pages (the
 * source's id counters first), the destination's counters moved past the
 * highest id copied, and the counts of both stores side by side.
 *
 * Recognising a move run again: the source's fence names where its move
 * went. A source fenced for this destination is a move being resumed, and
 * its destination may hold what the earlier run copied (never more rows in
 * a table than the source has); a source fenced for another destination is
 * refused, and so is a destination that holds anything while the source
 * has no fence. Those checks look at rows only: a destination whose id
 * counters are ahead of the source's takes the move (counters only rise).
 *
 * @internal
 * @module
 */
import type { Clock } from "../clock.ts";
import {
  ID_COUNTERS_TABLE,
  pagesWithin,
  SCHEMA_TABLES,
  TRANSFER_TABLES,
  type TransferRow,
  type TransferTable,
} from "../stores/rows/transfer.ts";
import { LIVE_WORKER_WINDOW_MS } from "../stores/schema_steps.ts";
import type { MoveFence, Store } from "../stores/store.ts";
import { MoveRules } from "./rules.ts";

/** One table's rows, in both stores, once a move ended. */
export interface MovedTable {
  /** The table, as the SQL schema names it, or `id_counters` (the id counters). */
  readonly table: TransferTable;
  /** Its rows in the source (for `id_counters`, the counters that handed out an id). */
  readonly source: number;
  /** Rows of the source the move does not copy (expired locks, locks of ended attempts). */
  readonly leftBehind: number;
  /**
   * Its rows in the destination (for `id_counters`, how many of the
   * source's counters the destination's are at or past).
   */
  readonly destination: number;
}

/** What a move did. */
export interface MoveReport {
  /** The source, as shown (a URL's password hidden, a file as its absolute path). */
  readonly from: string;
  /** The destination, as shown. */
  readonly to: string;
  /** When the move fenced the source (an earlier run's time when this run resumed it). */
  readonly fencedAt: Date;
  /** Whether this run finished a move an earlier run started. */
  readonly resumed: boolean;
  /** Every table a move copies, in the order it copied them. */
  readonly tables: readonly MovedTable[];
  /**
   * The tables whose destination count is not the source's less what was
   * left behind; empty when the move is complete.
   */
  readonly mismatched: readonly TransferTable[];
  /** How long the move took, in ms. */
  readonly ms: number;
}

/** What {@linkcode moveStores} needs besides the stores. */
export interface MoveSettings {
  /** The source, as the fence and the messages show it. */
  readonly from: string;
  /** The destination, as the fence and the messages show it. */
  readonly to: string;
  /** How long to wait for the source's workers to stop, in ms. */
  readonly waitMs: number;
  /** Rows per page. */
  readonly pageSize: number;
  /**
   * Most bytes of text per page (a row bigger than that alone): each page
   * is read, and stored, as one string.
   */
  readonly pageBytes: number;
  /** The clock of the fence and the rules. */
  readonly clock: Clock;
}

/** How often a move waiting for workers to stop looks again, in ms. */
const WORKERS_POLL_MS = 500;

/**
 * Throws unless the source's `fence` (null when it has none) is for a move
 * to `to`: a source fenced for another destination belongs to that move,
 * to be run again or given up, never copied elsewhere.
 */
export function assertNotMovedElsewhere(fence: MoveFence | null, from: string, to: string): void {
  if (fence === null || fence.to === to) return;
  throw new Error(
    `Cannot move ${from} to ${to}: it was moved to ${fence.to} (fenced at ${
      new Date(fence.at).toISOString()
    }); run that move again to finish it, or give it up with move --abort`,
  );
}

/**
 * Moves everything `source` holds to `destination` (see the module doc).
 * Resolves with the report, whose `mismatched` lists the tables whose
 * counts differ; rejects, changing nothing, when the move may not start.
 */
export async function moveStores(
  source: Store,
  destination: Store,
  settings: MoveSettings,
): Promise<MoveReport> {
  const started = performance.now();
  const { from, to, clock } = settings;
  const already = await destination.moveFence();
  if (already !== null) {
    throw new Error(
      `Cannot move ${from} to ${to}: ${to} was itself moved to ${already.to}; a move copies into a store that is in use by no queue`,
    );
  }
  let fence: MoveFence | null = await source.moveFence();
  const resumed = fence !== null;
  await assertNoWorkers(destination, settings);
  assertNotMovedElsewhere(fence, from, to);
  if (fence === null) {
    await waitForWorkers(source, settings);
    const held = await tablesHolding(destination);
    if (held.length > 0) {
      throw new Error(
        `Cannot move ${from} to ${to}: ${to} is not empty (${
          held.map(({ table, rows }) => `${table}: ${rows}`).join(", ")
        }); a move copies into an empty store, or finishes its own earlier run (if ${to} is ${from} under another name, a path or host name, the queue is there already)`,
      );
    }
    fence = await source.fenceForMove(to, clock.now());
    if (fence.to !== to) {
      // Another move fenced the source first, between the read above and this fence.
      throw new Error(
        `Cannot move ${from} to ${to}: it was moved to ${fence.to} (fenced at ${
          new Date(fence.at).toISOString()
        }) while this move started; run that move again to finish it, or give it up with move --abort`,
      );
    }
    await assertTwoStores(source, destination, settings);
  } else {
    await assertLeftByThisMove(source, destination, settings);
  }
  const rules = new MoveRules(fence.at);
  const kept = new Map<TransferTable, number>();
  for (const table of TRANSFER_TABLES) {
    kept.set(table, await copyTable(source, destination, table, rules, settings));
  }
  await destination.finishImport();
  await assertStillFenced(source, fence, settings);
  const tables: MovedTable[] = [];
  for (const table of TRANSFER_TABLES) {
    const sourceRows = await source.countRows(table);
    tables.push({
      table,
      source: sourceRows,
      leftBehind: sourceRows - kept.get(table)!,
      destination: table === ID_COUNTERS_TABLE
        ? await countersReached(source, destination)
        : await destination.countRows(table),
    });
  }
  return {
    from,
    to,
    fencedAt: new Date(fence.at),
    resumed,
    tables,
    mismatched: tables.filter((row) => row.destination !== row.source - row.leftBehind)
      .map(({ table }) => table),
    ms: Math.round(performance.now() - started),
  };
}

/**
 * Throws, lifting the fence just set, when `destination` sees the fence of
 * `source`: both name one store (a file by two paths, a server by two host
 * names), which the names alone cannot tell.
 */
async function assertTwoStores(
  source: Store,
  destination: Store,
  { from, to }: MoveSettings,
): Promise<void> {
  if ((await destination.moveFence()) === null) return;
  await source.liftMoveFence();
  throw new TypeError(
    `Cannot move a queue to the store it is in: ${from} and ${to} are one store`,
  );
}

/**
 * Throws unless `source` still carries `fence`: a fence lifted while the
 * move copied (`move --abort`) let the source take writes the copy may
 * have missed, so the destination cannot be taken for the queue.
 */
async function assertStillFenced(
  source: Store,
  fence: MoveFence,
  { from, to }: MoveSettings,
): Promise<void> {
  const now = await source.moveFence();
  if (now !== null && now.to === fence.to && now.at === fence.at) return;
  throw new Error(
    `The move of ${from} to ${to} was given up while it copied: ${from} ${
      now === null ? "has no fence any more" : `was fenced again for ${now.to}`
    }, so it may have taken writes the copy missed; empty ${to} before moving to it again`,
  );
}

/**
 * Copies `table` page by page, each page within `pageSize` rows and
 * `pageBytes` of text on both sides (the source's page is stored in as
 * many imports as its bytes need, one when the source bounded it alike);
 * how many rows of the source the rules kept.
 */
async function copyTable(
  source: Store,
  destination: Store,
  table: TransferTable,
  rules: MoveRules,
  { pageSize, pageBytes }: MoveSettings,
): Promise<number> {
  let kept = 0;
  let after: string | null = null;
  do {
    const page: Awaited<ReturnType<Store["exportRows"]>> = await source.exportRows(
      table,
      after,
      pageSize,
      pageBytes,
    );
    const rows = rules.apply(table, page.rows);
    kept += rows.length;
    for (const part of pagesWithin(rows, pageBytes)) await destination.importRows(table, part);
    after = page.after;
  } while (after !== null);
  return kept;
}

/** How many of the source's id counters the destination's are at or past. */
async function countersReached(source: Store, destination: Store): Promise<number> {
  const reached = new Map(
    (await allRows(destination, ID_COUNTERS_TABLE)).map((row) => [row.name, Number(row.value)]),
  );
  return (await allRows(source, ID_COUNTERS_TABLE))
    .filter((row) => (reached.get(row.name) ?? 0) >= Number(row.value)).length;
}

/** Every row of `table` in `store`. */
async function allRows(store: Store, table: TransferTable): Promise<TransferRow[]> {
  const rows: TransferRow[] = [];
  let after: string | null = null;
  do {
    const page: Awaited<ReturnType<Store["exportRows"]>> = await store.exportRows(
      table,
      after,
      100,
    );
    rows.push(...page.rows);
    after = page.after;
  } while (after !== null);
  return rows;
}

/**
 * Throws naming them when workers of `destination` were seen within the
 * live window: they would run the jobs as they arrive, before the move
 * ends, and a move run again would bring back the ones they finished.
 */
async function assertNoWorkers(
  destination: Store,
  { clock, from, to }: MoveSettings,
): Promise<void> {
  const now = clock.now();
  const live = await destination.workers(now - LIVE_WORKER_WINDOW_MS, now);
  if (live.length === 0) return;
  throw new Error(
    `Cannot move ${from} to ${to}: ${live.length} worker(s) of ${to} were seen within the last ${
      LIVE_WORKER_WINDOW_MS / 1000
    } s (${
      live.map((worker) =>
        `${worker.host} pid ${worker.pid}, last seen ${worker.lastSeenAt.toISOString()}`
      ).join("; ")
    }); start the workers of the new store once the move is done`,
  );
}

/** Waits up to `waitMs` until no worker of `source` was seen within the live window; else throws naming them. */
export async function waitForWorkers(source: Store, settings: MoveSettings): Promise<void> {
  const { clock, waitMs, from } = settings;
  const deadline = clock.now() + waitMs;
  for (;;) {
    const now = clock.now();
    const live = await source.workers(now - LIVE_WORKER_WINDOW_MS, now);
    if (live.length === 0) return;
    if (now >= deadline) {
      throw new Error(
        `Cannot move ${from}: ${live.length} worker(s) of it were seen within the last ${
          LIVE_WORKER_WINDOW_MS / 1000
        } s (${
          live.map((worker) =>
            `${worker.host} pid ${worker.pid}, last seen ${worker.lastSeenAt.toISOString()}`
          ).join("; ")
        }); stop them first, or give --wait (waitMs) the time they take to stop`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(WORKERS_POLL_MS, deadline - now)));
  }
}

/** The tables of `store` that hold rows, with how many (its id counters are not rows). */
async function tablesHolding(
  store: Store,
): Promise<{ table: TransferTable; rows: number }[]> {
  const held: { table: TransferTable; rows: number }[] = [];
  for (const table of SCHEMA_TABLES) {
    const rows = await store.countRows(table);
    if (rows > 0) held.push({ table, rows });
  }
  return held;
}

/**
 * Throws unless `destination` could be what an earlier run of this move
 * left: no table with more rows than the source's.
 */
async function assertLeftByThisMove(
  source: Store,
  destination: Store,
  { from, to }: MoveSettings,
): Promise<void> {
  const extra: string[] = [];
  for (const { table, rows } of await tablesHolding(destination)) {
    const sourceRows = await source.countRows(table);
    if (rows > sourceRows) extra.push(`${table}: ${rows}, ${from} has ${sourceRows}`);
  }
  if (extra.length > 0) {
    throw new Error(
      `Cannot finish the move of ${from} to ${to}: ${to} holds more than the move could have copied (${
        extra.join("; ")
      }); something else wrote there since the move started`,
    );
  }
}
