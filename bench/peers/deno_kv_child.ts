/**
 * One Deno KV queue run in a process of its own (Deno KV needs
 * `--unstable-kv`, which the bench process does not have): `dispatch`,
 * `bulk` or `drain` of N jobs on a fresh database file, printing
 * `{"rate":…,"handled":…}`.
 *
 * @module
 */
import { measureRate } from "../measurement.ts";

const [workload, jobsText, path] = Deno.args;
const jobs = Number(jobsText);
const BULK = 100;

// deno-lint-ignore no-explicit-any
const kv = await (Deno as any).openKv(path);

async function enqueueAll(): Promise<void> {
  for (let first = 0; first < jobs; first += BULK) {
    const atomic = kv.atomic();
    for (let n = first; n < Math.min(jobs, first + BULK); n++) atomic.enqueue({ n });
    const result = await atomic.commit();
    if (!result.ok) throw new Error("Deno KV: an atomic enqueue failed");
  }
}

let rate: number;
let handled = 0;
if (workload === "dispatch") {
  rate = await measureRate(jobs, async () => {
    for (let n = 0; n < jobs; n++) await kv.enqueue({ n });
  });
} else if (workload === "bulk") {
  rate = await measureRate(jobs, enqueueAll);
}
// Every workload ends with a drain, timed for "drain": each job handled, nothing left.
if (workload === "drain") await enqueueAll();
const seen = new Set<number>();
const all = Promise.withResolvers<void>();
const drained = measureRate(jobs, async () => {
  kv.listenQueue((message: { n: number }) => {
    handled++;
    seen.add(message.n);
    if (seen.size === jobs) all.resolve();
  });
  await all.promise;
});
const drainRate = await drained;
kv.close();
if (seen.size !== jobs) throw new Error(`Deno KV: ${seen.size} of ${jobs} jobs handled`);
console.log(JSON.stringify({ rate: workload === "drain" ? drainRate : rate!, handled }));
