/**
 * A worker process of the soak: `soak_worker.ts <database file>`. Works the
 * queue until its stdin closes, printing a JSON line every second with its
 * resident memory, the space V8 holds for its main isolate's young
 * generation, its JS heap, its open file descriptors and what it has done.
 *
 * @module
 */
import { getHeapSpaceStatistics } from "node:v8";
import { Queue } from "../mod.ts";
import { SOAK_JOBS_URL } from "./soak_jobs.ts";

const [path] = Deno.args;
if (path === undefined) throw new TypeError("usage: soak_worker.ts <database file>");

/** Open file descriptors of this process (Linux), or -1 where they cannot be counted. */
function openFiles(): number {
  try {
    return [...Deno.readDirSync("/proc/self/fd")].length;
  } catch {
    return -1;
  }
}

/**
 * Bytes V8 holds for this isolate's young generation (new objects and new
 * large objects). V8 sizes it to the allocation rate, within a cap.
 */
function youngGeneration(): number {
  return getHeapSpaceStatistics()
    .filter(({ space_name }) =>
      space_name === "new_space" || space_name === "new_large_object_space"
    )
    .reduce((sum, space) => sum + space.space_size, 0);
}

const queue = await Queue.open({ path, jobs: SOAK_JOBS_URL });
const worker = queue.work({ concurrency: 8, pollMs: 200 });
const report = () =>
  console.log(JSON.stringify({
    type: "sample",
    t: Date.now(),
    rss: Deno.memoryUsage().rss,
    young: youngGeneration(),
    heap: Deno.memoryUsage().heapUsed,
    files: openFiles(),
    ...worker.stats,
  }));
report();
const timer = setInterval(report, 1_000);
for await (const _ of Deno.stdin.readable) {
  // the soak closes stdin to stop this process
}
clearInterval(timer);
await worker.stop();
report();
await queue.close();
