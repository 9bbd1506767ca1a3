/**
 * `--peers --store postgres`: pg-boss and Graphile Worker measured in the
 * same run on the same workloads as our PostgreSQL rows (single dispatch,
 * bulk dispatch, drains at concurrency 1, 8 and 32, pick-up), each row
 * compared with ours (its baseline), the drains with the target:
 * ours at least 1.5× theirs. Each peer runs in a fresh database per run.
 *
 * @module
 */
import type { Measurement } from "../measurement.ts";
import type { PickupMeasurement } from "../pickup.ts";
import type { PostgresSizes } from "../postgres_sizes.ts";
import { PEER_BULK_SIZE } from "./bullmq.ts";
import {
  graphileAddBulk,
  graphileAddSingle,
  graphileDrain,
  graphilePickup,
} from "./graphile_worker.ts";
import {
  bossDrain,
  bossInsertBulk,
  bossPickup,
  bossSendSingle,
  PG_BOSS_POLL_MS,
} from "./pg_boss.ts";

/** Concurrencies of the peers' drains, each compared with our in-process drain at the same. */
export const POSTGRES_PEER_CONCURRENCIES = [1, 8, 32] as const;
/** Our drains are to reach 1.5× the better peer's: each peer's at most 2/3 of ours. */
const DRAIN_SHARE = 1 / 1.5;
/**
 * pg-boss's drains per worker slot: its default worker waits its 2 s poll
 * after every fetch of one job, so a run of a few rounds shows its rate.
 */
const PG_BOSS_DRAIN_ROUNDS = 3;
/** Serial pick-ups per pg-boss run (each waits about half its 2 s poll). */
const PG_BOSS_PICKUP_JOBS = 6;
/** Serial pick-ups per Graphile Worker run. */
const GRAPHILE_PICKUP_JOBS = 100;

/** The peers' rows of both kinds. */
export interface PostgresPeers {
  /** Throughput rows, compared with ours. */
  readonly measurements: readonly Measurement[];
  /** Pick-up rows, compared with our LISTEN/NOTIFY pick-up. */
  readonly pickups: readonly PickupMeasurement[];
}

function fixed(jobs: number): Pick<Measurement, "fixedJobs" | "fixedWarmupJobs"> {
  return { fixedJobs: jobs, fixedWarmupJobs: Math.max(1, Math.round(jobs / 10)) };
}

function count(jobs: number): string {
  return jobs.toLocaleString("en-US");
}

/** The peers' measurements on the server at `url`, sized as ours are. */
export function postgresPeerMeasurements(url: string, sizes: PostgresSizes): PostgresPeers {
  const graphile: Measurement[] = [
    {
      ...fixed(sizes.commitJobs),
      id: "peer-graphile-dispatch",
      name: "Graphile Worker addJob",
      label: `peer: Graphile Worker addJob(), one at a time (${count(sizes.commitJobs)} jobs)`,
      baseline: "dispatch-single",
      run: (jobs) => graphileAddSingle(url, jobs),
    },
    {
      ...fixed(sizes.jobs),
      id: "peer-graphile-bulk",
      name: "Graphile Worker addJobs",
      label: `peer: Graphile Worker addJobs(), ${PEER_BULK_SIZE} per call (${
        count(sizes.jobs)
      } jobs)`,
      baseline: "dispatch-many",
      run: (jobs) => graphileAddBulk(url, jobs),
    },
    ...POSTGRES_PEER_CONCURRENCIES.map((concurrency): Measurement => ({
      ...fixed(sizes.jobs),
      id: `peer-graphile-drain-c${concurrency}`,
      name: `Graphile Worker drain c${concurrency}`,
      label:
        `peer: Graphile Worker run() drain of pre-queued no-op jobs, concurrency ${concurrency} (${
          count(sizes.jobs)
        } jobs)`,
      baseline: `drain-c${concurrency}`,
      targetAtMost: DRAIN_SHARE,
      run: (jobs) => graphileDrain(url, jobs, concurrency),
    })),
  ];
  const boss: Measurement[] = [
    {
      ...fixed(sizes.commitJobs),
      id: "peer-pgboss-dispatch",
      name: "pg-boss send",
      label: `peer: pg-boss send(), one at a time (${count(sizes.commitJobs)} jobs)`,
      baseline: "dispatch-single",
      run: (jobs) => bossSendSingle(url, jobs),
    },
    {
      ...fixed(sizes.jobs),
      id: "peer-pgboss-bulk",
      name: "pg-boss insert",
      label: `peer: pg-boss insert(), ${PEER_BULK_SIZE} per call (${count(sizes.jobs)} jobs)`,
      baseline: "dispatch-many",
      run: (jobs) => bossInsertBulk(url, jobs),
    },
    ...POSTGRES_PEER_CONCURRENCIES.map((concurrency): Measurement => {
      const jobs = PG_BOSS_DRAIN_ROUNDS * concurrency;
      return {
        ...fixed(jobs),
        id: `peer-pgboss-drain-c${concurrency}`,
        name: `pg-boss drain c${concurrency}`,
        label:
          `peer: pg-boss work() drain of pre-queued no-op jobs, localConcurrency ${concurrency}, ` +
          `its default poll (${PG_BOSS_POLL_MS / 1000} s after each fetch of 1 job) (${
            count(jobs)
          } jobs)`,
        baseline: `drain-c${concurrency}`,
        targetAtMost: DRAIN_SHARE,
        run: (jobs) => bossDrain(url, jobs, concurrency),
      };
    }),
  ];
  const pickups: PickupMeasurement[] = [
    {
      id: "peer-graphile-pickup",
      name: "Graphile Worker pick-up",
      label: `peer: Graphile Worker, idle runner in this process woken by its LISTEN/NOTIFY, ` +
        `jobs added by worker utils (${GRAPHILE_PICKUP_JOBS} jobs)`,
      baseline: "pickup-notify",
      fixedJobs: GRAPHILE_PICKUP_JOBS,
      fixedWarmupJobs: 10,
      run: (jobs) => graphilePickup(url, jobs),
    },
    {
      id: "peer-pgboss-pickup",
      name: "pg-boss pick-up",
      label:
        `peer: pg-boss, idle work() in this process polling every ${
          PG_BOSS_POLL_MS / 1000
        } s (its default, no LISTEN/NOTIFY), jobs sent by a second instance at random moments ` +
        `(${PG_BOSS_PICKUP_JOBS} jobs)`,
      baseline: "pickup-notify",
      fixedJobs: PG_BOSS_PICKUP_JOBS,
      fixedWarmupJobs: 2,
      run: (jobs) => bossPickup(url, jobs),
    },
  ];
  return { measurements: [...graphile, ...boss], pickups };
}
