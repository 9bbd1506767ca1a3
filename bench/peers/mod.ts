/**
 * `--peers`: other queues measured in the same run on the same workloads,
 * each row compared with ours (its baseline), with the targets as
 * the share of ours a peer may reach at most. Deno KV queues and plainjob
 * always (built in; an npm package on `node:sqlite`); BullMQ when Redis
 * answers at 127.0.0.1:6379. Deno KV and BullMQ run a fixed number of jobs
 * per run: their rates do not depend on it, and some of them would take
 * minutes at `--jobs`. plainjob runs `--jobs` jobs, as ours: a SQLite queue
 * whose table holds as many rows as ours is the fair comparison.
 *
 * @module
 */
import type { Measurement } from "../measurement.ts";
import { bullAddBulk, bullAddSingle, bullDrain, PEER_BULK_SIZE, redisAnswers } from "./bullmq.ts";
import { DENO_KV_BULK_SIZE, denoKv } from "./deno_kv.ts";
import { plainjobAddMany, plainjobAddSingle, plainjobDrain } from "./plainjob.ts";

/** Jobs per run of each BullMQ measurement. */
export const BULLMQ_JOBS = 5_000;
/** Jobs per run of each Deno KV measurement. */
export const DENO_KV_JOBS = 2_000;
/** Our drains are to reach 1.5× BullMQ's: BullMQ's at most 2/3 of ours. */
const BULLMQ_DRAIN_SHARE = 1 / 1.5;
/** Every row of ours is to reach 10× Deno KV's. */
const DENO_KV_SHARE = 0.1;
/** Our `dispatch()` is to reach 1.5× plainjob's single add: plainjob's at most 2/3 of ours. */
const PLAINJOB_DISPATCH_SHARE = 1 / 1.5;
/** How plainjob runs here, for its labels. */
const ON_NODE_SQLITE = "on node:sqlite in better-sqlite3's shape";

/**
 * The peers' measurements; `onSkip` hears which peer cannot run and why.
 * Their baselines are our dispatch and drain rows, which then run too.
 */
export async function peerMeasurements(onSkip: (why: string) => void): Promise<Measurement[]> {
  const fixed = (jobs: number) => ({ fixedJobs: jobs, fixedWarmupJobs: Math.round(jobs / 10) });
  const kv: Measurement[] = [
    {
      ...fixed(DENO_KV_JOBS),
      id: "peer-kv-dispatch",
      name: "Deno KV enqueue",
      label: "peer: Deno KV kv.enqueue(), one at a time",
      baseline: "dispatch-single",
      targetAtMost: DENO_KV_SHARE,
      run: (jobs) => denoKv("dispatch", jobs),
    },
    {
      ...fixed(DENO_KV_JOBS),
      id: "peer-kv-bulk",
      name: "Deno KV bulk",
      label: `peer: Deno KV atomic enqueue, ${DENO_KV_BULK_SIZE} per commit (its most)`,
      baseline: "dispatch-many",
      targetAtMost: DENO_KV_SHARE,
      run: (jobs) => denoKv("bulk", jobs),
    },
    {
      ...fixed(DENO_KV_JOBS),
      id: "peer-kv-drain",
      name: "Deno KV drain",
      label: "peer: Deno KV kv.listenQueue() drain of pre-queued no-op jobs (its own concurrency)",
      baseline: "drain-c1",
      targetAtMost: DENO_KV_SHARE,
      run: (jobs) => denoKv("drain", jobs),
    },
  ];
  const plainjob: Measurement[] = [
    {
      id: "peer-plainjob-dispatch",
      name: "plainjob add",
      label: `peer: plainjob queue.add(), one at a time (${ON_NODE_SQLITE})`,
      baseline: "dispatch-single",
      alsoComparedWith: [
        "raw-insert-autocommit-minimal",
        "raw-insert-autocommit-minimal-no-checkpoint",
      ],
      targetAtMost: PLAINJOB_DISPATCH_SHARE,
      run: plainjobAddSingle,
    },
    {
      id: "peer-plainjob-bulk",
      name: "plainjob addMany",
      label: `peer: plainjob queue.addMany(), all jobs in one call (${ON_NODE_SQLITE})`,
      baseline: "dispatch-many",
      alsoComparedWith: ["raw-insert-one-transaction-minimal"],
      run: plainjobAddMany,
    },
    {
      id: "peer-plainjob-drain",
      name: "plainjob drain",
      label:
        `peer: plainjob worker drain of pre-queued no-op jobs, one job at a time (it has no concurrency setting; ${ON_NODE_SQLITE})`,
      baseline: "drain-c1",
      alsoComparedWith: ["raw-drain-unbatched"],
      run: plainjobDrain,
    },
  ];
  if (!await redisAnswers()) {
    onSkip("BullMQ: no Redis answers at 127.0.0.1:6379");
    return [...kv, ...plainjob];
  }
  const bull: Measurement[] = [
    {
      ...fixed(BULLMQ_JOBS),
      id: "peer-bullmq-dispatch",
      name: "BullMQ add",
      label: "peer: BullMQ queue.add(), one at a time",
      baseline: "dispatch-single",
      targetAtMost: 1,
      run: bullAddSingle,
    },
    {
      ...fixed(BULLMQ_JOBS),
      id: "peer-bullmq-bulk",
      name: "BullMQ addBulk",
      label: `peer: BullMQ queue.addBulk(), ${PEER_BULK_SIZE} per call`,
      baseline: "dispatch-many",
      targetAtMost: 1,
      run: bullAddBulk,
    },
    ...[1, 8, 32].map((concurrency): Measurement => ({
      ...fixed(BULLMQ_JOBS),
      id: `peer-bullmq-drain-c${concurrency}`,
      name: `BullMQ drain c${concurrency}`,
      label: `peer: BullMQ Worker drain of pre-queued no-op jobs, concurrency ${concurrency}`,
      baseline: `drain-c${concurrency}`,
      alsoComparedWith: [`drain-workers-c${concurrency}`],
      targetAtMost: BULLMQ_DRAIN_SHARE,
      run: (jobs) => bullDrain(jobs, concurrency),
    })),
  ];
  return [...kv, ...plainjob, ...bull];
}
