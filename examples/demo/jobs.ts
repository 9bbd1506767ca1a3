/**
 * The examples' jobs module: every job the demo, the dispatch script and the
 * serving app dispatch, defined once and imported by URL by the queue, by each
 * Web Worker, and by `deno task work` (`--jobs ./examples/demo/jobs.ts`).
 *
 * @module
 */
import { defineJob, PermanentError } from "../../mod.ts";
import { z } from "zod";

/** A quick job: pretend to resize an image. */
export const resizeImage = defineJob({
  name: "resize-image",
  schema: z.object({ imageId: z.number().int(), width: z.number().int().positive() }),
  async handle({ width }, ctx) {
    await pause(10 + (width % 40), ctx.signal);
  },
});

/** Fails twice (a flaky upstream), then succeeds on its third attempt. */
export const syncInventory = defineJob({
  name: "sync-inventory",
  schema: z.object({ warehouse: z.string() }),
  maxAttempts: 5,
  backoff: [300],
  jitter: 0,
  handle({ warehouse }, ctx) {
    if (ctx.attempt < 3) throw new Error(`${warehouse} answered 503 (attempt ${ctx.attempt})`);
  },
});

/** Always fails: the card is declined, so retrying cannot help after the second try. */
export const chargeCard = defineJob({
  name: "charge-card",
  schema: z.object({ orderId: z.number().int(), cents: z.number().int() }),
  maxAttempts: 2,
  backoff: [200],
  jitter: 0,
  handle({ orderId }, ctx) {
    if (ctx.attempt === 1) throw new Error(`payment gateway timed out for order ${orderId}`);
    throw new PermanentError(`card declined for order ${orderId}`);
  },
});

/** Runs only after its delay. */
export const sendNewsletter = defineJob({
  name: "send-newsletter",
  schema: z.object({ issue: z.string() }),
  handle() {},
});

/** An order placed through the serving app (examples/serve/main.ts): pretend to pack and ship it. */
export const fulfilOrder = defineJob({
  name: "fulfil-order",
  schema: z.object({
    sku: z.string().min(1).max(64),
    quantity: z.number().int().positive().max(100),
    email: z.email(),
  }),
  async handle({ quantity }, ctx) {
    await pause(20 + quantity, ctx.signal);
  },
});

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });
}
