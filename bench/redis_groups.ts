/**
 * What `deno task bench --store redis` measures, by group: our rows on the
 * Redis store, each beside BullMQ on the same server and workload in the
 * same run, BullMQ's figure the baseline (so each ratio says how many times
 * BullMQ's ours is): dispatch one at a time (and beside it a bare round trip
 * and a minimal queue's insert, its ceilings), bulk dispatch, isolate drains
 * at concurrency 1, 8 and 32 in this process, the drain by
 * {@linkcode DRAIN_PROCESSES} worker processes at 32 each (and beside them a
 * minimal queue's take, one job and 50 jobs per call), and pick-up
 * latency; and the durable-step drains against our own drain at 32. `main.ts` imports this module only for `--store redis`.
 *
 * @module
 */
import type { Group } from "./groups.ts";
import type { Measurement } from "./measurement.ts";
import {
  IDLE_GAP_MS,
  IDLE_POLL_MS,
  type PickupMeasurement,
  pickupsFromProcess,
  WARMUP_ROUND_JOBS,
} from "./pickup.ts";
import { pickupWorkerCommand } from "./pickup_worker.ts";
import {
  bullAddBulk,
  bullAddSingle,
  bullConnection,
  bullDrain,
  bullPickup,
  bullProcessDrain,
  PEER_BULK_SIZE,
} from "./peers/bullmq.ts";
import { DRAIN_PROCESSES } from "./postgres_sizes.ts";
import { processDrain } from "./process_drain.ts";
import {
  dispatchMany,
  dispatchSingle,
  drain,
  DRAIN_CONCURRENCIES,
  type QueueFixture,
  stepMeasurements,
} from "./queue.ts";
// deno-lint-ignore no-import-prefix
import { createClient } from "npm:@redis/client@^6.4";
import { redactPassword } from "../src/stores/database_url.ts";
import type { RedisServer } from "./redis_environment.ts";
import { redisPickupHere } from "./redis_pickup_here.ts";
import { withRedisQueue } from "./redis_queue.ts";
import { CEILING_BATCH_SIZE } from "./ceiling.ts";
import { redisInsertCeilingRate, redisTakeCeilingRate } from "./redis_ceilings.ts";
import { rawRedisRoundTripRate } from "./redis_round_trip.ts";
import {
  MAX_REDIS_JOBS,
  MAX_REDIS_PROCESS_DRAIN_JOBS,
  REDIS_PICKUP_JOBS,
  REDIS_PROCESS_CONCURRENCY,
} from "./redis_sizes.ts";

/** Our rows are to reach 1.5× BullMQ's. */
const BULLMQ_TARGET = 1.5;

/** The Redis bench of one run. */
export interface RedisBench {
  /** The server, read before anything is measured (so an unreachable one fails at once). */
  readonly server: RedisServer;
  /** Throughput measurements by group, BullMQ's beside ours. */
  readonly byGroup: Readonly<Partial<Record<Group, readonly Measurement[]>>>;
  /** The pick-up latency measurements by group, BullMQ's the baseline. */
  readonly pickups: Readonly<Partial<Record<Group, readonly PickupMeasurement[]>>>;
}

function fixed(jobs: number): Pick<Measurement, "fixedJobs" | "fixedWarmupJobs"> {
  return { fixedJobs: jobs, fixedWarmupJobs: Math.max(1, Math.round(jobs / 10)) };
}

function count(jobs: number): string {
  return jobs.toLocaleString("en-US");
}

/** The measurements on the server at `url`, sized by `--jobs`. */
export async function redisBench(url: string, jobs: number): Promise<RedisBench> {
  const server = await readRedisServer(url);
  const connection = bullConnection(url);
  const fixture: QueueFixture = (fn) => withRedisQueue(url, fn);
  const size = Math.min(jobs, MAX_REDIS_JOBS);
  const processJobs = Math.min(jobs, MAX_REDIS_PROCESS_DRAIN_JOBS);
  const pair = (
    ours: Omit<Measurement, "baseline" | "target" | "fixedJobs" | "fixedWarmupJobs">,
    bull: Omit<Measurement, "baseline" | "fixedJobs" | "fixedWarmupJobs">,
    jobs: number,
  ): Measurement[] => [
    { ...fixed(jobs), ...bull, baseline: bull.id },
    { ...fixed(jobs), ...ours, baseline: bull.id, target: BULLMQ_TARGET },
  ];
  const c = REDIS_PROCESS_CONCURRENCY;
  return {
    server,
    byGroup: {
      dispatch: [
        ...pair({
          id: "dispatch-single",
          name: "single dispatch",
          label: `queue.dispatch(), one at a time (sequential awaits) (${count(size)} jobs)`,
          run: (jobs) => dispatchSingle(jobs, fixture),
        }, {
          id: "bullmq-add",
          name: "BullMQ add",
          label: `BullMQ queue.add(), one at a time (${count(size)} jobs)`,
          run: (jobs) => bullAddSingle(jobs, connection),
        }, size),
        {
          ...fixed(size),
          id: "raw-redis-round-trip",
          name: "raw Redis round trip",
          label: `raw node-redis PING, one at a time (no queue; the round trip every awaited ` +
            `dispatch pays) (${count(size)} round trips)`,
          baseline: "bullmq-add",
          run: (jobs) => rawRedisRoundTripRate(url, jobs),
        },
        {
          ...fixed(size),
          id: "raw-redis-insert-ceiling",
          name: "raw Redis insert",
          label: `raw minimal queue: one function call per job (INCR, HSET, ZADD), one at a ` +
            `time (no queue; the ceiling of a one-call dispatch) (${count(size)} jobs)`,
          baseline: "bullmq-add",
          run: (jobs) => redisInsertCeilingRate(url, jobs, "bare"),
        },
        {
          ...fixed(size),
          id: "raw-redis-insert-ceiling-kept",
          name: "raw Redis insert, rules kept",
          label: `the same, keeping what our store keeps on every dispatch (the server's clock, ` +
            `the epoch check, the reply kept under the dispatch's token, the wake-up) ` +
            `(${count(size)} jobs)`,
          baseline: "bullmq-add",
          run: (jobs) => redisInsertCeilingRate(url, jobs, "kept"),
        },
        ...pair({
          id: "dispatch-many",
          name: "dispatchMany",
          label: `queue.dispatchMany(), all jobs in one call (${count(size)} jobs)`,
          run: (jobs) => dispatchMany(jobs, fixture),
        }, {
          id: "bullmq-add-bulk",
          name: "BullMQ addBulk",
          label: `BullMQ queue.addBulk(), ${PEER_BULK_SIZE} per call (${count(size)} jobs)`,
          run: (jobs) => bullAddBulk(jobs, connection),
        }, size),
      ],
      drain: [
        ...DRAIN_CONCURRENCIES.flatMap((concurrency) =>
          pair({
            id: `drain-c${concurrency}`,
            name: `isolate drain c${concurrency}`,
            label:
              `queue.work() drain of no-op jobs, isolate executor, concurrency ${concurrency}, ` +
              `1 worker in this process (${count(size)} jobs)`,
            run: (jobs) => drain(jobs, concurrency, "isolate", fixture),
          }, {
            id: `bullmq-drain-c${concurrency}`,
            name: `BullMQ drain c${concurrency}`,
            label: `BullMQ Worker drain of pre-added no-op jobs, concurrency ${concurrency}, in ` +
              `this process (${count(size)} jobs)`,
            run: (jobs) => bullDrain(jobs, concurrency, connection),
          }, size)
        ),
        {
          ...fixed(size),
          id: "raw-redis-take-ceiling-c1",
          name: "raw Redis take, 1 per call",
          label: `raw minimal queue: one awaited function call per job that deletes the job ` +
            `before it and pops the next (no queue; the ceiling of a drain at concurrency 1) ` +
            `(${count(size)} jobs)`,
          baseline: "bullmq-drain-c1",
          run: (jobs) => redisTakeCeilingRate(url, jobs, 1, "bare"),
        },
        {
          ...fixed(size),
          id: "raw-redis-take-ceiling-c1-kept",
          name: "raw Redis take, 1 per call, rules kept",
          label: `the same, keeping what our store keeps on every claim and settle (the ` +
            `server's clock, the epoch check, a lease and its token, the attempt counted, a ` +
            `settle fenced by the token that keeps the finished job) (${count(size)} jobs)`,
          baseline: "bullmq-drain-c1",
          run: (jobs) => redisTakeCeilingRate(url, jobs, 1, "kept"),
        },
        {
          ...fixed(size),
          id: "raw-redis-take-ceiling-batched",
          name: `raw Redis take, ${CEILING_BATCH_SIZE} per call`,
          label: `raw minimal queue: ${CEILING_BATCH_SIZE} jobs deleted and ` +
            `${CEILING_BATCH_SIZE} popped per awaited function call (no queue; the ceiling of a ` +
            `batched drain) (${count(size)} jobs)`,
          baseline: "bullmq-drain-c32",
          run: (jobs) => redisTakeCeilingRate(url, jobs, CEILING_BATCH_SIZE, "bare"),
        },
        {
          ...fixed(size),
          id: "raw-redis-take-ceiling-batched-kept",
          name: `raw Redis take, ${CEILING_BATCH_SIZE} per call, rules kept`,
          label: `the same ${CEILING_BATCH_SIZE} per call, keeping the rules of the take above ` +
            `(${count(size)} jobs)`,
          baseline: "bullmq-drain-c32",
          run: (jobs) => redisTakeCeilingRate(url, jobs, CEILING_BATCH_SIZE, "kept"),
        },
        ...pair({
          id: `drain-${DRAIN_PROCESSES}p-c${c}`,
          name: `${DRAIN_PROCESSES}-process drain c${c}`,
          label: `the same drain, ${DRAIN_PROCESSES} worker processes × concurrency ${c}, start ` +
            `to empty (${count(processJobs)} jobs)`,
          run: (jobs) => processDrain(url, jobs, DRAIN_PROCESSES, c),
        }, {
          id: `bullmq-drain-${DRAIN_PROCESSES}p-c${c}`,
          name: `BullMQ ${DRAIN_PROCESSES}-process drain c${c}`,
          label: `BullMQ: ${DRAIN_PROCESSES} worker processes × concurrency ${c}, start to ` +
            `drained (${count(processJobs)} jobs)`,
          run: (jobs) => bullProcessDrain(url, jobs, DRAIN_PROCESSES, c),
        }, processJobs),
      ],
      // Against our own drain at concurrency 32: BullMQ has no durable steps.
      steps: stepMeasurements(fixture, fixed(size)),
    },
    pickups: {
      pickup: [
        {
          id: "bullmq-pickup",
          name: "BullMQ pick-up",
          label: `BullMQ: idle Worker in this process (its blocking wait), jobs added by a ` +
            `Queue on its own connection (${count(REDIS_PICKUP_JOBS)} jobs)`,
          baseline: "bullmq-pickup",
          fixedJobs: REDIS_PICKUP_JOBS,
          fixedWarmupJobs: WARMUP_ROUND_JOBS,
          run: (jobs) => bullPickup(jobs, connection),
        },
        {
          id: "pickup-wake-here",
          name: "wake channel, this process",
          label: `idle worker in this process (isolate executor, a connection of its own), ` +
            `woken by the store's wake-up channel, jobs dispatched by a queue on another ` +
            `connection: timed as BullMQ's row (${count(REDIS_PICKUP_JOBS)} jobs)`,
          baseline: "bullmq-pickup",
          fixedJobs: REDIS_PICKUP_JOBS,
          fixedWarmupJobs: WARMUP_ROUND_JOBS,
          run: (jobs) => redisPickupHere(url, jobs),
        },
        {
          id: "pickup-wake",
          name: "wake channel",
          label: `other process (Web Worker executor), woken by the store's wake-up channel, ` +
            `pollMs ${count(IDLE_POLL_MS)} (${count(REDIS_PICKUP_JOBS)} jobs)`,
          baseline: "bullmq-pickup",
          fixedJobs: REDIS_PICKUP_JOBS,
          fixedWarmupJobs: WARMUP_ROUND_JOBS,
          run: (jobs) =>
            withRedisQueue(url, (queue, prefix) =>
              pickupsFromProcess(
                queue,
                pickupWorkerCommand({ db: url, schema: prefix, pollMs: IDLE_POLL_MS, watch: true }),
                { jobs, gapMs: () => IDLE_GAP_MS, pollOnlyMs: null },
              )),
        },
      ],
    },
  };
}

/** Reads the server's version and persistence; fails when the server cannot be reached. */
async function readRedisServer(url: string): Promise<RedisServer> {
  const client = createClient({ url });
  client.on("error", () => {});
  await client.connect();
  try {
    const info = await client.info("server");
    const settings = await client.configGet("append*");
    return {
      url: redactPassword(url),
      version: /redis_version:(\S+)/.exec(info)?.[1] ?? "unknown",
      persistence: `appendonly ${settings.appendonly ?? "?"}, appendfsync ${
        settings.appendfsync ?? "?"
      }`,
    };
  } finally {
    await client.close();
  }
}
