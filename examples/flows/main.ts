/**
 * A flow on the embedded SQLite default: two fetches run first, the report
 * waits for both and reads their outputs, the mail waits for the report
 * (examples/flows/jobs.ts). Prints each node's state at the end, and ends
 * on its own.
 *
 * ```sh
 * deno run -A examples/flows/main.ts
 * ```
 *
 * @module
 */
import { Queue } from "../../mod.ts";
import { alertOps, buildReport, fetchRefunds, fetchSales, mailReport } from "./jobs.ts";

const path = "./.renox/flows.db";
for (const suffix of ["", "-wal", "-shm"]) await Deno.remove(path + suffix).catch(() => {});

await using queue = await Queue.open({ path, jobs: import.meta.resolve("./jobs.ts") });
const day = "2026-12-01";
const flow = queue.flow("nightly-report");
const sales = flow.add(fetchSales, { day });
const refunds = flow.add(fetchRefunds, { day }, { key: "refunds" });
const report = flow.add(buildReport, { day }, { after: [sales, refunds] });
flow.add(mailReport, { to: "ops" }, { after: [report] });
flow.catch(alertOps, { day });
const flowId = await flow.dispatch();

await queue.work({ concurrency: 2, pollMs: 50, stopWhenEmpty: true }).done;

const status = await queue.flowStatus(flowId);
for (const node of status?.nodes ?? []) {
  console.log(`${node.key}: ${node.state} (after: ${node.parents.join(", ") || "none"})`);
}
console.log(`flow ${flowId}: ${status?.state}`);
if (status?.state !== "succeeded") Deno.exitCode = 1;
