/**
 * Dispatches a few of the examples' jobs to `QUEUE_DB` (default
 * `./.renox/queue.db`) for `deno task work` to run.
 *
 * @module
 */
import { Queue } from "../mod.ts";
import { resizeImage, sendNewsletter } from "./demo/jobs.ts";

const path = Deno.env.get("QUEUE_DB") ?? "./.renox/queue.db";
await using queue = await Queue.open({ path, jobs: import.meta.resolve("./demo/jobs.ts") });
const ids = await queue.dispatchMany(
  resizeImage,
  Array.from({ length: 10 }, (_, i) => ({ imageId: i + 1, width: 640 })),
);
const later = await queue.dispatch(sendNewsletter, { issue: "January" }, { delayMs: 3_000 });
console.log(`Dispatched ${ids.length} resize jobs and newsletter #${later} (due in 3 s)`);
console.log(await queue.counts());
