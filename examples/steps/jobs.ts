/**
 * The steps example's jobs module: an onboarding job that creates an
 * account in a durable step, sleeps a second without holding a slot, waits
 * for a survey answer sent with `queue.signal()`, and thanks the user in a
 * last step. Each time the handler starts it says so: it runs again from
 * the top after the sleep and after the wait, and the steps it already
 * recorded return their stored output without running again.
 *
 * @module
 */
import { defineJob } from "../../mod.ts";
import { z } from "zod";

/** The survey answer a signal carries. */
const answer = z.object({ score: z.number().int().min(0).max(10) });

/** Onboards one user: a step, a sleep, a wait for a signal, and a last step. */
export const onboard = defineJob({
  name: "onboard",
  schema: z.object({ userId: z.number().int(), name: z.string() }),
  output: z.object({ email: z.string(), score: z.number().nullable() }),
  async handle({ userId, name }, ctx) {
    console.log(`${name}: the handler starts (attempt ${ctx.attempt})`);
    const account = await ctx.step("create-account", () => {
      console.log(`${name}: create-account runs`);
      return { email: `user${userId}@example.com` };
    });
    await ctx.sleep("cool-off", 1_000);
    const reply = await ctx.waitFor("survey", { timeoutMs: 60_000, schema: answer });
    // A step that runs past timeoutMs ends the attempt; the next one resumes here.
    await ctx.step("thank", () => {
      console.log(`${name}: thank runs (score ${reply?.score ?? "none"})`);
      return `thanked ${account.email}`;
    }, { timeoutMs: 5_000 });
    return { email: account.email, score: reply?.score ?? null };
  },
});
