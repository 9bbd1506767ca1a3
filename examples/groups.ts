/**
 * Fair scheduling by group (docs/groups.md), run to its end in memory:
 * tenant "big" queues 200 jobs, then tenant "small" 5; with groups, small's
 * jobs run within the first turns instead of after all of big's. At most 2
 * jobs of one tenant run at once (`groupConcurrency: 2`).
 *
 * `deno run -A examples/groups.ts`
 *
 * @module
 */
import { z } from "zod";
import { defineJob, Queue } from "../mod.ts";
import { workUntilEmpty } from "../src/testing.ts";

const order: string[] = [];
let running = 0;
let mostAtOnce = 0;

const syncMailbox = defineJob({
  name: "sync-mailbox",
  schema: z.object({ tenant: z.string(), box: z.number() }),
  group: (p) => p.tenant,
  groupConcurrency: 2,
  async handle({ tenant }) {
    running++;
    mostAtOnce = Math.max(mostAtOnce, running);
    order.push(tenant);
    await new Promise((resolve) => setTimeout(resolve, 1));
    running--;
  },
});

await using queue = await Queue.open({ path: ":memory:", jobs: [syncMailbox] });
await queue.dispatchMany(
  syncMailbox,
  Array.from({ length: 200 }, (_, box) => ({ tenant: "big", box })),
);
await queue.dispatchMany(
  syncMailbox,
  Array.from({ length: 5 }, (_, box) => ({ tenant: "small", box })),
);
await workUntilEmpty(queue, { executor: "isolate", concurrency: 4 });
const lastSmall = order.lastIndexOf("small") + 1;
console.log(`small's 5 jobs were done by run ${lastSmall} of ${order.length}`);
console.log(`at most ${mostAtOnce} jobs ran at once (2 per tenant, 2 tenants)`);
