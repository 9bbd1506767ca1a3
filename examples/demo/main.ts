/**
 * `deno task demo`: a mixed workload on the embedded SQLite default (retries,
 * a failure with an encrypted payload, a delayed job, a batch with progress,
 * a chain, a unique job, a debounced job, a rate-limited job, a schedule
 * firing every second), worked to
 * completion with a live progress line, then a summary; then a job's output
 * awaited with `dispatchAndWait`, and a running job cancelled.
 *
 * `deno task demo --serve` then keeps the queue open with a worker and serves
 * its dashboard on 127.0.0.1 (port `PORT`, default 8080, or any free one if
 * that is taken), printing its URL, until Ctrl-C. Without `--serve` the demo
 * ends on its own.
 *
 * @module
 */
import { generateAppKey, Queue } from "../../mod.ts";
import { dashboard } from "../../src/dashboard.ts";
import {
  callPartnerApi,
  chargeCard,
  everySecond,
  exportReport,
  heartbeat,
  importProducts,
  orderStep,
  quoteOrder,
  rebuildSearchIndex,
  reportImport,
  resizeImage,
  saveDraft,
  sendNewsletter,
  syncInventory,
} from "./jobs.ts";

const path = "./.renox/demo.db";
for (const suffix of ["", "-wal", "-shm"]) await Deno.remove(path + suffix).catch(() => {});

// A real app sets APP_KEY once (the CLI's key:generate prints one); the demo makes a throwaway key.
const appKey = Deno.env.get("APP_KEY") || generateAppKey();
await using queue = await Queue.open({ path, jobs: import.meta.resolve("./jobs.ts"), appKey });

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

const indexIds = new Set<number>();
for (let i = 0; i < 3; i++) indexIds.add(await queue.dispatch(rebuildSearchIndex, { siteId: 1 }));
const draftIds = new Set<number>();
for (const text of ["Dear", "Dear all,", "Dear all, the party is on Friday."]) {
  draftIds.add(await queue.dispatch(saveDraft, { docId: 9, text }));
}
const apiCalls = 10;
await queue.dispatchMany(callPartnerApi, Array.from({ length: apiCalls }, (_, call) => ({ call })));

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
  // Done once nothing is left and the schedule has fired at least once.
  if (open === 0 && (done.get(heartbeat.name) ?? 0) > 0) break;
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
for (const job of await queue.failed()) {
  console.log(`  ${job.name} #${job.id}: ${job.error}`);
  console.log(`    stored payload (encrypted): ${job.payload.slice(0, 40)}…`);
}
const batch = (await queue.batchStatus(batchId))!;
console.log(
  `Batch "${batch.name}": ${batch.succeeded} of ${batch.total} pages imported ` +
    `(one added by the last page), then and finally callbacks ran: ${done.get(reportImport.name)}`,
);
console.log(
  `Chain pack → ship → email: ${done.get(orderStep.name)} of 3 links ran, ` +
    "each queued when the one before succeeded",
);
console.log(
  `Unique: 3 dispatches of rebuild-search-index stored ${indexIds.size} job, ` +
    `which ran ${done.get(rebuildSearchIndex.name) ?? 0} time`,
);
console.log(
  `Debounced: 3 saves of draft 9 became ${draftIds.size} job, ` +
    `which ran ${done.get(saveDraft.name) ?? 0} time with the last text`,
);
console.log(
  `Rate limit: ${done.get(callPartnerApi.name) ?? 0} of ${apiCalls} partner API calls ran, ` +
    "at most 5 per half second",
);
const [schedule] = await queue.schedules();
console.log(
  `Schedule "${everySecond.name}": fired ${
    done.get(heartbeat.name) ?? 0
  } heartbeat jobs, one per ` +
    `second, the last for slot ${schedule?.lastSlot?.toISOString()} (job #${schedule?.lastJobId})`,
);

await jobControl();

if (Deno.args.includes("--serve")) await serveDashboard();

/** A result awaited from the worker, and a running job cancelled: its handler aborts at once. */
async function jobControl(): Promise<void> {
  const control = queue.work({ concurrency: 2, pollMs: 200 });
  const { totalCents } = await queue.dispatchAndWait(quoteOrder, {
    items: [{ cents: 1_999, qty: 2 }, { cents: 450, qty: 3 }],
  }, { timeoutMs: 30_000 });
  console.log(`Awaited result: quote-order returned totalCents ${totalCents}`);
  const exportId = await queue.dispatch(exportReport, { reportId: 7 });
  const startedExport = Promise.withResolvers<void>();
  const cancelled = Promise.withResolvers<number>();
  queue.addEventListener("job:start", ({ detail }) => {
    if (detail.id === exportId) startedExport.resolve();
  });
  queue.addEventListener("job:cancelled", ({ detail }) => {
    if (detail.id === exportId) cancelled.resolve(performance.now());
  });
  await startedExport.promise;
  const askedAt = performance.now();
  const outcome = await queue.cancel(exportId, { reason: "the user closed the page" });
  const stoppedAt = await cancelled.promise;
  const result = await queue.result(exportId);
  console.log(
    `Cancel: export-report #${exportId} was running ("${outcome}"), stopped ${
      Math.round(stoppedAt - askedAt)
    } ms later; its result: ${result?.state} (${result?.error})`,
  );
  await control.stop();
}

/** Serves the dashboard, with a worker to run what it retries, until SIGINT or SIGTERM. */
async function serveDashboard(): Promise<void> {
  const stop = Promise.withResolvers<void>();
  const onSignal = () => stop.resolve();
  const signals = ["SIGINT", "SIGTERM"] as const;
  for (const signal of signals) Deno.addSignalListener(signal, onSignal);
  const handler = dashboard(queue, { title: "@renox/queue demo" });
  const listen = (port: number) =>
    Deno.serve({ hostname: "127.0.0.1", port, onListen: () => {} }, handler);
  let server: Deno.HttpServer<Deno.NetAddr>;
  try {
    server = listen(Number(Deno.env.get("PORT") ?? "8080"));
  } catch (error) {
    if (!(error instanceof Deno.errors.AddrInUse)) throw error;
    server = listen(0);
  }
  const serving = queue.work({ concurrency: 2, pollMs: 200 });
  console.log(
    `\nDashboard: http://127.0.0.1:${server.addr.port}/ (a worker runs what you retry; Ctrl-C to stop)`,
  );
  await stop.promise;
  for (const signal of signals) Deno.removeSignalListener(signal, onSignal);
  await server.shutdown();
  await serving.stop();
}

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
