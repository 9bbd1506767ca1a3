/**
 * The jobs of the Hono example (main.ts): one welcome mail per sign-up. It
 * writes one JSON line per start to stdout instead of sending mail.
 *
 * @module
 */
import { z } from "zod";
import { defineJob } from "../../mod.ts";

/** Pretends to send a welcome mail, and logs that it did. */
export const sendWelcome = defineJob({
  name: "send-welcome",
  schema: z.object({ email: z.email().max(254) }),
  handle({ email }, ctx) {
    console.log(JSON.stringify({ welcomed: email, job: ctx.id, attempt: ctx.attempt }));
  },
});
