/**
 * Dispatches a few of the examples' jobs to `QUEUE_DB` (default
 * `./.renox/queue.db`). `deno task work` (the CLI's `work` command on the
 * examples' jobs module, examples/jobs.ts) runs them, from this terminal
 * or another one; `deno task work --stop-when-empty` exits once they are done.
 *
 * @module
 */
import { Queue, readConfig } from "../mod.ts";
import { resizeImage, sendNewsletter } from "./jobs.ts";

await using queue = await Queue.open({
  ...readConfig().database,
  jobs: import.meta.resolve("./jobs.ts"),
});
const ids = await queue.dispatchMany(
  resizeImage,
  Array.from({ length: 10 }, (_, i) => ({ imageId: i + 1, width: 640 })),
);
const later = await queue.dispatch(sendNewsletter, { issue: "January" }, { delayMs: 3_000 });
console.log(`Dispatched ${ids.length} resize jobs and newsletter #${later} (due in 3 s)`);
console.log(await queue.counts());
