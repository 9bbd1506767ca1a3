/**
 * A Web Worker of the own-loop drain (`bench/own_loop.ts`): it opens the
 * queue on its own connection to the bench's database, says so, and on "go"
 * drains it with the isolate executor, then answers with how many jobs it
 * completed.
 *
 * @module
 */
/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />
import { Queue } from "../mod.ts";
import { BENCH_JOBS_URL } from "./jobs.ts";

/** What the own-loop drain sends first. */
interface Open {
  readonly path: string;
  readonly concurrency: number;
  readonly pollMs: number;
}

self.onmessage = async ({ data }: MessageEvent<Open>) => {
  const { path, concurrency, pollMs } = data;
  try {
    await using queue = await Queue.open({ path, jobs: BENCH_JOBS_URL });
    const go = new Promise((resolve) => self.onmessage = resolve);
    self.postMessage({ type: "ready" });
    await go;
    const worker = queue.work({
      executor: "isolate",
      concurrency,
      stopWhenEmpty: true,
      pollMs,
    });
    await worker.done;
    self.postMessage({ type: "done", completed: worker.stats.completed });
  } catch (error) {
    self.postMessage({
      type: "failed",
      message: error instanceof Error ? error.message : String(error),
    });
  }
};
