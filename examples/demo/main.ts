/**
 * `deno task demo`: a mixed workload on the embedded SQLite default, worked to
 * completion with a live progress line, then a summary.
 *
 * @module
 */
import { Queue } from "../../mod.ts";
import { chargeCard, resizeImage, sendNewsletter, syncInventory } from "./jobs.ts";

const path = "./.renox/demo.db";
for (const suffix of ["", "-wal", "-shm"]) await Deno.remove(path + suffix).catch(() => {});

await using queue = await Queue.open({ path, jobs: import.meta.resolve("./jobs.ts") });

const done = new Map<string, number>();
const retried: string[] = [];
const failed: string[] = [];
queue.addEventListener("job:complete", ({ detail }) => {
  done.set(detail.name, (done.get(detail.name) ?? 0) + 1);
});
queue.addEventListener("job:retry", ({ detail }) => {
  retried.push(`${detail.name} #${detail.id} attempt ${detail.attempt}: ${detail.error?.message}`);
});
queue.addEventListener("job:failed", ({ detail }) => {
  failed.push(
    `${detail.name} #${detail.id} after ${detail.attempt} attempts: ${detail.error.message}`,
  );
});

const images = Array.from({ length: 40 }, (_, i) => ({ imageId: i + 1, width: 320 + i * 8 }));
await queue.dispatchMany(resizeImage, images);
await queue.dispatch(syncInventory, { warehouse: "north" });
await queue.dispatch(chargeCard, { orderId: 1042, cents: 1999 });
await queue.dispatch(sendNewsletter, { issue: "December" }, { delayMs: 1_500 });
const total = images.length + 3;

const started = performance.now();
const worker = queue.work({ concurrency: 4, pollMs: 50 });
const finished = () => [...done.values()].reduce((a, b) => a + b, 0) + failed.length;
const terminal = Deno.stdout.isTerminal();
while (finished() < total) {
  if (terminal) Deno.stdout.writeSync(new TextEncoder().encode(`\r${progressLine()}`));
  await new Promise((resolve) => setTimeout(resolve, 100));
}
await worker.stop();
console.log(`${terminal ? "\r" : ""}${progressLine()}`);

const seconds = ((performance.now() - started) / 1000).toFixed(1);
console.log(`\nAll ${total} jobs settled in ${seconds} s.`);
console.log("Done:");
for (const [name, count] of done) console.log(`  ${name}: ${count}`);
console.log(`Retried (${retried.length}):`);
for (const line of retried) console.log(`  ${line}`);
console.log(`Failed for good (${failed.length}), kept in failed_jobs:`);
for (const job of await queue.failed()) console.log(`  ${job.name} #${job.id}: ${job.error}`);

function progressLine(): string {
  const width = 30;
  const filled = Math.round((finished() / total) * width);
  return `[${"#".repeat(filled)}${".".repeat(width - filled)}] ${finished()}/${total} settled · ` +
    `${retried.length} retries · ${failed.length} failed`;
}
