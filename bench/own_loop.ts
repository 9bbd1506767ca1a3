/**
 * The other shape issue 27 asks to measure for the Web Worker executor: each
 * Web Worker runs its own claim-execute-settle loop on its own connection
 * (here: a queue opened in the Web Worker, drained with the isolate
 * executor), and the main thread only waits. It has none of the pool's
 * supervision (no hard timeouts, no crash rules for a terminated thread), so
 * it is the ceiling of that shape, not a way to run jobs.
 *
 * @module
 */
import { Queue } from "../mod.ts";
import { BENCH_JOBS_URL, noop } from "./jobs.ts";
import { measureRate } from "./measurement.ts";
import { assertPending } from "./queue_fixture.ts";
import { DRAIN_POLL_MS, payloads } from "./queue.ts";
import { withTempDatabase } from "./temp_database.ts";

/** What an own-loop Web Worker answers. */
type Answer =
  | { readonly type: "ready" }
  | { readonly type: "done"; readonly completed: number }
  | { readonly type: "failed"; readonly message: string };

/**
 * Pre-queues `jobs` no-op jobs, then times `loops` Web Workers that each open
 * the queue's database on their own connection and drain it with the isolate
 * executor, sharing `concurrency` between them; the time includes starting
 * them, as the pool's drain includes starting the pool.
 */
export function ownLoopDrain(jobs: number, concurrency: number, loops: number): Promise<number> {
  return withTempDatabase(async (path) => {
    await using queue = await Queue.open({ path, jobs: BENCH_JOBS_URL });
    await queue.dispatchMany(noop, payloads(jobs));
    let completed = 0;
    const workers: Worker[] = [];
    try {
      const rate = await measureRate(jobs, async () => {
        for (let i = 0; i < loops; i++) {
          workers.push(
            new Worker(new URL("./own_loop_worker.ts", import.meta.url), { type: "module" }),
          );
        }
        const shares = workers.map((_, i) =>
          Math.floor(concurrency / loops) + (i < concurrency % loops ? 1 : 0)
        );
        await Promise.all(
          workers.map((worker, i) =>
            answer(worker, { path, concurrency: shares[i]!, pollMs: DRAIN_POLL_MS }, "ready")
          ),
        );
        const done = await Promise.all(workers.map((worker) => answer(worker, "go", "done")));
        completed = done.reduce((sum, a) => sum + (a.type === "done" ? a.completed : 0), 0);
      });
      if (completed !== jobs) {
        throw new Error(
          `The own-loop drain of ${loops} Web Workers at concurrency ${concurrency} ran ${completed} of ${jobs} jobs`,
        );
      }
      await assertPending(queue, 0);
      return rate;
    } finally {
      for (const worker of workers) worker.terminate();
    }
  });
}

/** Posts `message` to `worker` and waits for its answer of `type`. */
function answer(worker: Worker, message: unknown, type: Answer["type"]): Promise<Answer> {
  return new Promise((resolve, reject) => {
    worker.onmessage = ({ data }: MessageEvent<Answer>) => {
      if (data.type === type) resolve(data);
      else if (data.type === "failed") {
        reject(new Error(`An own-loop Web Worker failed: ${data.message}`));
      }
    };
    worker.onerror = (event) => {
      event.preventDefault();
      reject(new Error(`An own-loop Web Worker failed: ${event.message}`));
    };
    worker.postMessage(message);
  });
}
