/**
 * Opening a queue: its options checked, the jobs module loaded, the app's
 * keys read, the store opened (migrated), and the schedules this process
 * defines synced into it.
 *
 * @internal
 * @module
 */
import { keepFinishedMsOf } from "./admin/job_control.ts";
import { checkedClock, type Clock } from "./clock.ts";
import { JobRows } from "./dispatch/job_rows.ts";
import type { AppKeys, PayloadCipher } from "./encryption.ts";
import {
  maxPayloadBytesOf,
  modeOf,
  openAppKeys,
  QUEUE_OPTIONS,
  type QueueMode,
  type QueueOptions,
} from "./queue_options.ts";
import { optionBag } from "./option_bags.ts";
import { JobRegistry } from "./registry.ts";
import { scheduleRows } from "./schedules/slot_jobs.ts";
import { appliesNoStep, openStore } from "./store_options.ts";
import type { Store } from "./stores/store.ts";

/** What an opened queue is made of. */
export interface QueueParts {
  /** Where its jobs are kept (an empty one in memory for an inline queue). */
  readonly store: Store;
  /** The job and schedule definitions. */
  readonly registry: JobRegistry;
  /** Source of stored times. */
  readonly clock: Clock;
  /** The app's keys; null without `APP_KEY`. */
  readonly appKeys: AppKeys | null;
  /** Seals and opens encrypted payloads; null without `APP_KEY`. */
  readonly cipher: PayloadCipher | null;
  /** Builds the rows its dispatches store. */
  readonly jobRows: JobRows;
  /** How long finished jobs are kept, in ms, for jobs that do not say. */
  readonly keepFinishedMs: number;
  /** Where its jobs run. */
  readonly mode: QueueMode;
}

/**
 * Opens the parts of a queue with `options`. Throws naming what was wrong
 * (an option, a job, a schedule, the keys) before anything is written; a
 * store it opened is closed again when syncing the schedules fails.
 */
export async function openQueueParts(given: QueueOptions): Promise<QueueParts> {
  const options = optionBag(given, "Queue.open", QUEUE_OPTIONS);
  if (options === undefined) {
    throw new TypeError("Queue.open: options are required: give at least jobs");
  }
  const maxPayloadBytes = maxPayloadBytesOf(options);
  const mode = modeOf(options);
  const keepFinishedMs = keepFinishedMsOf(options);
  const registry = await JobRegistry.load(options.jobs);
  const { appKeys, cipher } = await openAppKeys(options, registry.encryptedJobs());
  const clock = checkedClock(options.clock, "Queue.open: clock");
  const jobRows = new JobRows(registry, clock, maxPayloadBytes, cipher);
  const schedules = scheduleRows(registry, jobRows, clock.now());
  // Inline: nothing is stored; an empty store in memory answers the admin reads.
  const store = await openStore(mode === "inline" ? { path: ":memory:" } : options);
  try {
    // A store opened by the caller, or without migrating, may lack steps: refused here rather
    // than with a driver's "no such table" at the first call, or keys laid out by no layout.
    // With `migrate: false` openStore applies no step, so the database must already have them all.
    if (mode !== "inline" && (options.store !== undefined || appliesNoStep(options))) {
      await assertSchemaCurrent(store);
    }
    // A queue with no jobs (the CLI's admin commands) reads schedules; it does not define them.
    if (registry.names().length > 0 && mode !== "inline") {
      await store.syncSchedules(schedules, clock.now());
    }
  } catch (error) {
    if (options.store === undefined) await store.close();
    throw error;
  }
  return { store, registry, clock, appKeys, cipher, jobRows, keepFinishedMs, mode };
}

/**
 * Throws unless `store`'s database has every schema step (on Redis, key
 * layout) this code knows, naming the missing ones and how to apply them. A
 * database ahead of the code by expand steps passes (a rolling upgrade);
 * one ahead by a contract step is refused by the plan itself.
 */
async function assertSchemaCurrent(store: Store): Promise<void> {
  const { databaseStep, codeStep, steps } = await store.migrationPlan();
  if (steps.length === 0) return;
  const missing = steps.length === 1
    ? `step ${steps[0]!.version}`
    : `steps ${steps[0]!.version} to ${steps.at(-1)!.version}`;
  throw new Error(
    `Queue.open: the store's database lacks schema ${missing} of this code (it is at step ${databaseStep}, this code at ${codeStep}): ` +
      "apply them first: open the store without migrate: false (opening migrates), call store.migrate(), or run the CLI's migrate command (docs/upgrading.md)",
  );
}
