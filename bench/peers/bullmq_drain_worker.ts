/**
 * A BullMQ drain worker process, the peer's side of the multi-process
 * drains: a separate `deno run` that makes a BullMQ `Worker` (not yet
 * running) on the queue, says it is ready, and on `go` (a line on stdin)
 * runs it until the queue is drained, then prints how many jobs it
 * completed and exits; the lines are those of `process_drain_worker.ts`.
 *
 * ```sh
 * deno run -A bench/peers/bullmq_drain_worker.ts redis://… QUEUE CONCURRENCY
 * ```
 *
 * @module
 */
import { Worker } from "bullmq";
import { readLines } from "../lines.ts";
import { bullConnection } from "./bullmq.ts";

/** Waits for `go`, drains `queue` at `concurrency`, reports. */
async function runBullDrainWorker(url: string, queue: string, concurrency: number): Promise<void> {
  let completed = 0;
  const worker = new Worker(queue, async () => {}, {
    connection: bullConnection(url),
    concurrency,
    autorun: false,
  });
  worker.on("completed", () => completed++);
  worker.on("failed", (_job: unknown, error: Error) => {
    console.error(`bullmq_drain_worker: ${error.message}`);
  });
  await worker.waitUntilReady();
  console.log("ready");
  for await (const line of readLines(Deno.stdin.readable)) {
    if (line !== "go") continue;
    const drained = new Promise<void>((resolve) => worker.once("drained", () => resolve()));
    const running = worker.run();
    await drained;
    await worker.close();
    await running;
    console.log(`done ${completed}`);
    break;
  }
}

if (import.meta.main) {
  const [url, queue, concurrency] = Deno.args;
  if (url === undefined || queue === undefined || !(Number(concurrency) >= 1)) {
    throw new Error("bullmq_drain_worker: usage: URL QUEUE CONCURRENCY");
  }
  await runBullDrainWorker(url, queue, Number(concurrency));
}
