/**
 * The one contract every `Store` keeps. A store's test file calls
 * {@linkcode storeContract} once with a way to open a fresh, empty store;
 * the cases live in one file per area, named after the store's roles, and
 * each area says which methods it holds to their contract. One more case
 * fails when a method of the store has no area covering it, naming it.
 *
 * ```ts ignore
 * storeContract("SqliteStore (file)", async () => {
 *   const dir = await tempDir();
 *   const store = await SqliteStore.open(dir.dbPath);
 *   return { store, another: () => SqliteStore.open(dir.dbPath), [Symbol.asyncDispose]: … };
 * });
 * ```
 *
 * @module
 */
import assert from "node:assert/strict";
import { adminStore } from "./admin_store.ts";
import { backup } from "./backup.ts";
import { chainsBatches } from "./chains_batches.ts";
import { flows } from "./flows.ts";
import type { ContractArea, ContractTest, OpenedStore, StoreMethod } from "./fixtures.ts";
import { jobControlStore } from "./job_control_store.ts";
import { groups } from "./groups.ts";
import { jobWrites } from "./job_writes.ts";
import { lifetime } from "./lifetime.ts";
import { moving } from "./moving.ts";
import { scheduleStore } from "./schedule_store.ts";
import { statsStore } from "./stats_store.ts";
import { steps } from "./steps.ts";
import { transactions } from "./transactions.ts";
import { workerStore } from "./worker_store.ts";

export { claim, LEASE_MS, newJob, type OpenedStore, T0 } from "./fixtures.ts";

/**
 * The areas of the contract in parts of about equal length on PostgreSQL
 * (each case opens a schema of its own there). Every store spreads its
 * contract over a test file per part (`store_test.ts`,
 * `store_part2_test.ts`, `store_part3_test.ts` under its folder, through
 * its `_contract.ts`), so `deno test --parallel` runs them side by side.
 */
export const AREA_PARTS: readonly (readonly ContractArea[])[] = [
  [jobWrites, transactions, workerStore, adminStore],
  [statsStore, chainsBatches, flows, scheduleStore, jobControlStore],
  [groups, steps, backup, moving, lifetime],
];

/** Every area of the contract, in the order their cases are registered. */
export const AREAS: readonly ContractArea[] = AREA_PARTS.flat();

/**
 * Every member of the `Store` interface: the type checker holds this list to
 * the interface (a member missing here, or one the interface lacks, does not
 * compile), so the coverage case sees a method added to `Store` even before
 * a store implements it.
 */
export const STORE_MEMBERS: Record<StoreMethod, true> = {
  insertJobs: true,
  claimPassedOver: true,
  insertKeyed: true,
  insertChain: true,
  insertBatch: true,
  addToBatch: true,
  transaction: true,
  claim: true,
  settle: true,
  nextDueAt: true,
  renew: true,
  acquire: true,
  heartbeat: true,
  removeWorker: true,
  cancelsAsked: true,
  watch: true,
  failed: true,
  failedJob: true,
  unfinishedJob: true,
  retry: true,
  forget: true,
  flushFailed: true,
  pruneFailed: true,
  clear: true,
  batch: true,
  batches: true,
  cancelBatch: true,
  insertFlow: true,
  flow: true,
  flows: true,
  pruneFlows: true,
  cancelFlow: true,
  pruneBatches: true,
  counts: true,
  pendingByName: true,
  running: true,
  jobs: true,
  metrics: true,
  workers: true,
  logs: true,
  syncSchedules: true,
  schedules: true,
  setSchedulePaused: true,
  forgetSchedule: true,
  runSchedule: true,
  result: true,
  results: true,
  finished: true,
  finishedJob: true,
  pruneFinished: true,
  markAwaited: true,
  cancel: true,
  pause: true,
  resume: true,
  paused: true,
  pauseGroup: true,
  resumeGroup: true,
  pausedGroups: true,
  jobSteps: true,
  signal: true,
  migrate: true,
  migrationPlan: true,
  backup: true,
  fenceForMove: true,
  moveFence: true,
  liftMoveFence: true,
  exportRows: true,
  importRows: true,
  countRows: true,
  finishImport: true,
  startClosing: true,
  close: true,
};

/** The public methods of `store`, from its whole prototype chain (symbols and the constructor left out). */
export function methodsOf(store: object): string[] {
  const names = new Set<string>();
  for (
    let proto = Object.getPrototypeOf(store);
    proto !== null && proto !== Object.prototype;
    proto = Object.getPrototypeOf(proto)
  ) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name !== "constructor" && typeof proto[name] === "function") names.add(name);
    }
  }
  return [...names].sort();
}

/**
 * The methods of `store` and of the `Store` interface that no area of
 * `areas` covers, by name; empty when the contract covers them all.
 */
export function uncovered(store: object, areas: readonly ContractArea[] = AREAS): string[] {
  const covered = new Set<string>(areas.flatMap((area) => area.covers));
  const methods = new Set([...methodsOf(store), ...Object.keys(STORE_MEMBERS)]);
  return [...methods].filter((method) => !covered.has(method)).sort();
}

/**
 * Registers the whole contract against the store `open` makes, as
 * `Deno.test`s named `${name}: …`: every area's cases, each on a fresh
 * store, and the case that every method has a contract. With `part`, only
 * the areas of `AREA_PARTS[part]` (and the coverage case with part 0): a
 * test file per part then runs the whole contract.
 */
export function storeContract(
  name: string,
  open: () => Promise<OpenedStore>,
  part?: number,
): void {
  const areas = part === undefined ? AREAS : AREA_PARTS[part];
  if (areas === undefined) throw new RangeError(`storeContract: no part ${part} of the contract`);
  const test: ContractTest = (what, fn, options = {}) =>
    Deno.test(`${name}: ${what}`, async (t) => {
      await using opened = await open();
      const runsSql = opened.sql ?? true;
      if (options.sql !== undefined && options.sql !== runsSql) {
        await t.step({
          name: options.sql
            ? "not run: this case needs SQL, and this store runs none"
            : "not run: this case is for a store without SQL, and this store runs SQL",
          ignore: true,
          fn() {},
        });
        return;
      }
      if (options.concurrentTransactions && opened.concurrentTransactions === false) {
        await t.step({
          name:
            "not run: this case needs two transactions open at once, and this store has one writer",
          ignore: true,
          fn() {},
        });
        return;
      }
      await fn(opened.store, opened);
    });
  for (const area of areas) area.register(test);
  if (part !== undefined && part !== 0) return;
  test("every method of the store has a contract case", (store) => {
    assert.deepEqual(uncovered(store), [], "methods no area of tests/stores/contract/ covers");
    return Promise.resolve();
  });
}
