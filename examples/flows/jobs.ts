/**
 * The jobs of the flows example (examples/flows/main.ts): two fetches, a
 * report built from both of their outputs, and a mail of the report.
 *
 * @module
 */
import { z } from "zod";
import { defineJob } from "../../mod.ts";

const day = z.object({ day: z.string() });

/** The day's sales, in cents. */
export const fetchSales = defineJob({
  name: "fetch-sales",
  schema: day,
  output: z.number(),
  handle: () => 120_000,
});

/** The day's refunds, in cents. */
export const fetchRefunds = defineJob({
  name: "fetch-refunds",
  schema: day,
  output: z.number(),
  handle: () => 15_000,
});

/** The report line, from both fetches' outputs (`ctx.parents`, by key). */
export const buildReport = defineJob({
  name: "build-report",
  schema: day,
  output: z.string(),
  handle({ day }, ctx) {
    const sales = z.number().parse(ctx.parents["fetch-sales"]);
    const refunds = z.number().parse(ctx.parents["refunds"]);
    return `${day}: net ${(sales - refunds) / 100}`;
  },
});

/** Prints the report the node before built. */
export const mailReport = defineJob({
  name: "mail-report",
  schema: z.object({ to: z.string() }),
  handle({ to }, ctx) {
    console.log(`mail to ${to}: ${ctx.parents["build-report"]}`);
  },
});

/** Runs once if a node fails for good. */
export const alertOps = defineJob({
  name: "alert-ops",
  schema: day,
  handle({ day }) {
    console.error(`the report of ${day} failed`);
  },
});
