/**
 * `deno task work`: a worker on the examples' jobs module until SIGINT or
 * SIGTERM. The first signal stops claiming and lets running jobs finish
 * (10 s grace); a second one stops at once. Feed it with
 * `deno run -A examples/dispatch.ts` from another terminal.
 *
 * @module
 */
import { Queue } from "../mod.ts";

const path = Deno.env.get("QUEUE_DB") ?? "./.renox/queue.db";
await using queue = await Queue.open({ path, jobs: import.meta.resolve("./demo/jobs.ts") });
const worker = queue.work({ concurrency: 4 });
console.log(`Working ${worker.options.queues.join(", ")} in ${path}; Ctrl-C stops`);

queue.addEventListener("job:complete", ({ detail }) => {
  console.log(`done    ${detail.name} #${detail.id} (${detail.durationMs.toFixed(0)} ms)`);
});
queue.addEventListener("job:retry", ({ detail }) => {
  console.log(
    `retry   ${detail.name} #${detail.id} in ${detail.delayMs} ms: ${detail.error?.message}`,
  );
});
queue.addEventListener("job:failed", ({ detail }) => {
  console.log(`failed  ${detail.name} #${detail.id}: ${detail.error.message}`);
});

let signals = 0;
const onSignal = () => {
  signals++;
  console.log(signals === 1 ? "Stopping: finishing running jobs" : "Stopping now");
  void worker.stop(signals === 1 ? {} : { graceMs: 0 });
};
Deno.addSignalListener("SIGINT", onSignal);
Deno.addSignalListener("SIGTERM", onSignal);
await worker.done;
Deno.removeSignalListener("SIGINT", onSignal);
Deno.removeSignalListener("SIGTERM", onSignal);
console.log(`Stopped: ${JSON.stringify(worker.stats)}`);
