/**
 * The demo's jobs module: the examples' jobs, one whose payload is
 * encrypted (so this module needs `APP_KEY`, which the demo sets), and a
 * schedule that fires every second while the demo runs.
 *
 * @module
 */
import { defineJob, defineSchedule, PermanentError } from "../../mod.ts";
import { z } from "zod";

export * from "../jobs.ts";

/**
 * Always fails: the card is declined, so retrying cannot help after the second
 * try. Its payload is encrypted, so failed_jobs keeps only ciphertext.
 */
export const chargeCard = defineJob({
  name: "charge-card",
  schema: z.object({ orderId: z.number().int(), cents: z.number().int() }),
  encrypted: true,
  maxAttempts: 2,
  backoff: [200],
  jitter: 0,
  handle({ orderId }, ctx) {
    if (ctx.attempt === 1) throw new Error(`payment gateway timed out for order ${orderId}`);
    throw new PermanentError(`card declined for order ${orderId}`);
  },
});

/** Notes the slot it was fired for (`ctx.scheduled`). */
export const heartbeat = defineJob({
  name: "heartbeat",
  schema: z.object({ second: z.string() }),
  handle({ second }, ctx) {
    if (ctx.scheduled === null) throw new Error(`heartbeat ${second} was not fired by a schedule`);
  },
});

/** Every second, one heartbeat job per slot however many workers run; missed slots are skipped. */
export const everySecond = defineSchedule({
  name: "heartbeat-every-second",
  everyMs: 1_000,
  job: heartbeat,
  payload: (slot) => ({ second: slot.toISOString().slice(11, 19) }),
  missed: "skip",
});

/** Prices an order: its output (the total) is stored and awaited by the demo. */
export const quoteOrder = defineJob({
  name: "quote-order",
  schema: z.object({
    items: z.array(z.object({ cents: z.number().int(), qty: z.number().int() })),
  }),
  output: z.object({ totalCents: z.number().int() }),
  handle: ({ items }) => ({
    totalCents: items.reduce((sum, item) => sum + item.cents * item.qty, 0),
  }),
});

/** A long export that stops when its signal aborts: the demo cancels it while it runs. */
export const exportReport = defineJob({
  name: "export-report",
  schema: z.object({ reportId: z.number().int() }),
  timeoutMs: 120_000,
  async handle(_payload, ctx) {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, 60_000);
      ctx.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        reject(ctx.signal.reason);
      }, { once: true });
    });
  },
});
