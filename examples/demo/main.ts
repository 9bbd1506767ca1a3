/**
 * `deno task demo`: a mixed workload on the embedded SQLite default (retries,
 * a failure, a delayed job, a batch with progress, a chain), worked to
 * completion with a live progress line, then a summary.
 *
 * @module
 */
import { Queue } from "../../mod.ts";
import {
  chargeCard,
  importProducts,
  orderStep,
  reportImport,
  resizeImage,
  sendNewsletter,
  syncInventory,
} from "./jobs.ts";

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

const lastPage = 8;
const pages = Array.from({ length: lastPage }, (_, i) => ({
  page: i + 1,
  findsMore: i + 1 === lastPage,
}));
const batchId = await queue.batch("import catalogue.csv")
  .pushMany(importProducts, pages)
  .then(reportImport, { outcome: "all imported" })
  .finally(reportImport, { outcome: "import over" })
  .dispatch();

await queue.chain()
  .then(orderStep, { orderId: 1042, step: "pack" })
  .then(orderStep, { orderId: 1042, step: "ship" })
  .then(orderStep, { orderId: 1042, step: "email" })
  .dispatch();

const started = performance.now();
const worker = queue.work({ concurrency: 4, pollMs: 50 });
const terminal = Deno.stdout.isTerminal();
let line = "";
for (;;) {
  const counts = Object.values(await queue.counts());
  const open = counts.reduce((sum, c) => sum + c.pending + c.delayed + c.reserved, 0);
  line = await progressLine(counts.flatMap((c) => c.running));
  if (open === 0) break;
  if (terminal) Deno.stdout.writeSync(new TextEncoder().encode(`\r${line}\x1b[K`));
  await new Promise((resolve) => setTimeout(resolve, 100));
}
await worker.stop();
console.log(`${terminal ? "\r" : ""}${line}${terminal ? "\x1b[K" : ""}`);

const seconds = ((performance.now() - started) / 1000).toFixed(1);
const settled = [...done.values()].reduce((a, b) => a + b, 0) + failed.length;
console.log(`\nAll ${settled} jobs settled in ${seconds} s.`);
console.log("Done:");
for (const [name, count] of done) console.log(`  ${name}: ${count}`);
console.log(`Retried (${retried.length}):`);
for (const line of retried) console.log(`  ${line}`);
console.log(`Failed for good (${failed.length}), kept in failed_jobs:`);
for (const job of await queue.failed()) console.log(`  ${job.name} #${job.id}: ${job.error}`);
const batch = (await queue.batchStatus(batchId))!;
console.log(
  `Batch "${batch.name}": ${batch.succeeded} of ${batch.total} pages imported ` +
    `(one added by the last page), then and finally callbacks ran: ${done.get(reportImport.name)}`,
);
console.log(
  `Chain pack → ship → email: ${done.get(orderStep.name)} of 3 links ran, ` +
    "each queued when the one before succeeded",
);

async function progressLine(running: { name: string; progress: number | null }[]) {
  const batch = (await queue.batchStatus(batchId))!;
  const width = 20;
  const filled = Math.round((batch.progress() / 100) * width);
  const pages = running.filter((job) => job.name === importProducts.name)
    .map((job) => `${Math.floor(job.progress ?? 0)}%`).join(" ");
  const settled = [...done.values()].reduce((a, b) => a + b, 0) + failed.length;
  return `${settled} settled · ${retried.length} retries · ${failed.length} failed · ` +
    `import [${"#".repeat(filled)}${".".repeat(width - filled)}] ` +
    `${batch.total - batch.pending}/${batch.total} pages${pages ? ` (running: ${pages})` : ""}`;
}
