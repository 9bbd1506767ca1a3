/**
 * The demo's jobs module: the examples' jobs, and one whose payload is
 * encrypted (so this module needs `APP_KEY`, which the demo sets).
 *
 * @module
 */
import { defineJob, PermanentError } from "../../mod.ts";
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
