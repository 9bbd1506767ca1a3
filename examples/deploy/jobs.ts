/**
 * The jobs of the Deno Deploy-style example (main.ts): one job per order.
 * It writes one line per start to stdout, which is where a serverless host
 * keeps logs, with how long the order waited between its dispatch and the
 * start of its job.
 *
 * @module
 */
import { defineJob } from "../../mod.ts";
import { z } from "zod";

/** Pretends to pack and ship an order, and logs when it started. */
export const fulfilOrder = defineJob({
  name: "fulfil-order",
  schema: z.object({
    orderId: z.string().uuid(),
    sku: z.string().min(1).max(64),
    quantity: z.number().int().positive().max(100),
    /** When the order was placed (ms since the epoch): the log line shows the wait. */
    placedAt: z.number().int(),
  }),
  async handle({ orderId, sku, quantity, placedAt }, ctx) {
    const startedAt = Date.now();
    console.log(JSON.stringify({
      fulfilling: orderId,
      sku,
      quantity,
      attempt: ctx.attempt,
      waitedMs: startedAt - placedAt,
    }));
    // The packing and shipping: a few ms of I/O, cut short if the drain's time runs out.
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, 5);
      ctx.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        reject(ctx.signal.reason);
      }, { once: true });
    });
  },
});
