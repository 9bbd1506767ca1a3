/**
 * The PostgreSQL schema steps, in order, numbered as SQLite's are. Imported
 * statically so that a consumer of the published package migrates without
 * `--allow-read`.
 *
 * @module
 */
import type { Migration } from "../migration.ts";
import * as createJobs from "./0001_create_jobs.ts";
import * as batchesAndChains from "./0002_batches_and_chains.ts";
import * as jobKeysAndLocks from "./0003_job_keys_and_locks.ts";
import * as metricsAndWorkers from "./0004_metrics_and_workers.ts";
import * as whatJobsHold from "./0005_what_jobs_hold.ts";
import * as schedules from "./0006_schedules.ts";
import * as jobControl from "./0007_job_control.ts";
import * as observability from "./0008_observability.ts";
import * as jobsByDueTime from "./0011_jobs_by_due_time.ts";
import * as metricsByStore from "./0012_metrics_by_store.ts";
import * as claimOrderById from "./0013_claim_order_by_id.ts";
import * as claimedAhead from "./0014_claimed_ahead.ts";
import * as dispatchWritesLess from "./0015_dispatch_writes_less.ts";
import * as durableSteps from "./0016_durable_steps.ts";
import * as expiringJobs from "./0017_expiring_jobs.ts";
import * as rollingUpgrades from "./0018_rolling_upgrades.ts";
import * as jobGroups from "./0019_job_groups.ts";
import * as handlerBegun from "./0020_handler_begun.ts";
import * as flows from "./0021_flows.ts";
import * as queueMoves from "./0022_queue_moves.ts";
import * as groupHolds from "./0023_group_holds.ts";
import * as groupIds from "./0025_group_ids.ts";
import * as groupIdsFromListing from "./0026_group_ids_from_listing.ts";
import * as rateWindowLengths from "./0028_rate_window_lengths.ts";
import * as flowEnds from "./0029_flow_ends.ts";

/** Every step, oldest first. Append only: an applied step is never edited. */
export const migrations: readonly Migration[] = [
  createJobs,
  batchesAndChains,
  jobKeysAndLocks,
  metricsAndWorkers,
  whatJobsHold,
  schedules,
  jobControl,
  observability,
  jobsByDueTime,
  metricsByStore,
  claimOrderById,
  claimedAhead,
  dispatchWritesLess,
  durableSteps,
  expiringJobs,
  rollingUpgrades,
  jobGroups,
  handlerBegun,
  flows,
  queueMoves,
  groupHolds,
  groupIds,
  groupIdsFromListing,
  rateWindowLengths,
  flowEnds,
];

/**
 * The record of applied steps, created before the first step runs (step 18
 * adds its `kind` column). Whoever builds the schema from these steps
 * creates it first: the store, and the bench's ceiling on the store's schema.
 */
export const STEPS_RECORD =
  "CREATE TABLE IF NOT EXISTS queue_migrations (version integer PRIMARY KEY, applied_at bigint NOT NULL)";
