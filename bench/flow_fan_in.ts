/**
 * A flow's fan-in: flows of one root, {@linkcode FAN_OUT} children and one
 * join after every child, drained by one worker in this process (isolate
 * executor, concurrency 8); per flow, the time from the end of the last
 * child's handler to the start of the join's handler. The join is queued in
 * the transaction that settles that child, so what is measured is that
 * settle, the worker's next claim and the start.
 *
 * @module
 */
import { flowJoin, flowNode, flowTimes } from "./jobs.ts";
import { percentile } from "./percentile.ts";
import type { LatencySample, PickupMeasurement } from "./pickup.ts";
import { withQueue } from "./queue_fixture.ts";

/** Children of each flow's root, each a parent of the join. */
export const FAN_OUT = 1_000;
/** Flows per timed run, one after another. */
const FLOWS = 3;
/** A flow whose join has not started by then fails the run. */
const FLOW_TIMEOUT_MS = 120_000;

/** The fan-in measurement (its own baseline: there is no flow-less equivalent). */
export function flowFanInMeasurement(): PickupMeasurement {
  return {
    id: "flow-fan-in",
    name: "flow fan-in",
    label: `flow of 1 → ${FAN_OUT} → 1 no-op jobs: the last parent's handler ends → the ` +
      `join's handler starts, same process, isolate c8 (${FLOWS} flows per run)`,
    baseline: "flow-fan-in",
    fixedJobs: FLOWS,
    fixedWarmupJobs: 1,
    run: fanIns,
  };
}

/** Runs `flows` fan-out/fan-in flows one after another; the join's wait after the last parent. */
function fanIns(flows: number): Promise<LatencySample> {
  return withQueue(async (queue) => {
    const waits: number[] = [];
    const worker = queue.work({ executor: "isolate", concurrency: 8 });
    let joined = Promise.withResolvers<void>();
    worker.addEventListener("job:complete", ({ detail }) => {
      if (detail.name === flowJoin.name) {
        waits.push(flowTimes.joinStartMs - flowTimes.lastNodeEndMs);
        joined.resolve();
      }
    });
    try {
      for (let n = 0; n < flows; n++) {
        joined = Promise.withResolvers<void>();
        const flow = queue.flow(`fan-in-${n}`);
        const root = flow.add(flowNode, { n: 0 }, { key: "root" });
        const children = Array.from(
          { length: FAN_OUT },
          (_, child) => flow.add(flowNode, { n: child }, { key: `child-${child}`, after: [root] }),
        );
        flow.add(flowJoin, { n }, { key: "join", after: children });
        const flowId = await flow.dispatch();
        const timer = setTimeout(
          () => joined.reject(new Error(`the join of flow ${flowId} did not start`)),
          FLOW_TIMEOUT_MS,
        );
        await joined.promise.finally(() => clearTimeout(timer));
      }
    } finally {
      await worker.stop({ graceMs: 1_000 });
    }
    return {
      jobs: flows,
      p50Ms: percentile(waits, 50),
      p99Ms: percentile(waits, 99),
      maxMs: Math.max(...waits),
    };
  });
}
