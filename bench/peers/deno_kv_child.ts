/**
 * One Deno KV queue run in a process of its own (Deno KV needs
 * `--unstable-kv`, which the bench process does not have): `dispatch`,
 * `bulk` or `drain` of N jobs on a fresh database file, printing
 * `{"rate":…,"handled":…}`. Before a timed `bulk`, the same enqueues run
 * once untimed on a throwaway database beside it, so that the timed run
 * (a few commits) is not the process's first.
 *
 * @module
 */
import { measureRate } from "../measurement.ts";
import { DENO_KV_BULK_SIZE } from "./deno_kv.ts";

const [workload, jobsText, path] = Deno.args;
const jobs = Number(jobsText);

// deno-lint-ignore no-explicit-any
type Kv = any;

// deno-lint-ignore no-explicit-any
const openKv = (file: string): Promise<Kv> => (Deno as any).openKv(file);

const kv = await openKv(path!);

async function enqueueAll(into: Kv): Promise<void> {
  for (let first = 0; first < jobs; first += DENO_KV_BULK_SIZE) {
    const atomic = into.atomic();
    for (let n = first; n < Math.min(jobs, first + DENO_KV_BULK_SIZE); n++) atomic.enqueue({ n });
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
  const warmup = await openKv(`${path}-warmup`);
  await enqueueAll(warmup);
  warmup.close();
  rate = await measureRate(jobs, () => enqueueAll(kv));
}
// Every workload ends with a drain, timed for "drain": each job handled, nothing left.
if (workload === "drain") await enqueueAll(kv);
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
