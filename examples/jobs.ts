/**
 * The examples' jobs module: the jobs the dispatch script and the serving app
 * dispatch, and most of the demo's, defined once and imported by URL by the
 * queue, by each Web Worker, and by `deno task work` (`--jobs ./examples/jobs.ts`).
 *
 * @module
 */
import { defineJob, PermanentError, rateLimited } from "../mod.ts";
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

/**
 * One page of a catalogue import, run as part of a batch: it reports its
 * progress row by row, and the last page finds one more page and adds it to
 * its own batch.
 */
export const importProducts = defineJob({
  name: "import-products",
  schema: z.object({ page: z.number().int().positive(), findsMore: z.boolean() }),
  async handle({ page, findsMore }, ctx) {
    const rows = 5;
    for (let row = 1; row <= rows; row++) {
      await pause(40, ctx.signal);
      ctx.progress((row / rows) * 100);
    }
    if (findsMore) await ctx.addToBatch(importProducts, { page: page + 1, findsMore: false });
  },
});

/** A batch's callback: it learns its batch from `ctx.batchId`. */
export const reportImport = defineJob({
  name: "report-import",
  schema: z.object({ outcome: z.enum(["all imported", "import over"]) }),
  handle({ outcome }, ctx) {
    if (ctx.batchId === null) throw new PermanentError(`${outcome}: not run as a batch callback`);
  },
});

/** Unique per site: dispatching it again while one waits or runs stores nothing. */
export const rebuildSearchIndex = defineJob({
  name: "rebuild-search-index",
  schema: z.object({ siteId: z.number().int() }),
  uniqueForMs: 60_000,
  uniqueId: ({ siteId }) => String(siteId),
  async handle(_, ctx) {
    await pause(50, ctx.signal);
  },
});

/** Debounced per document: only the last of a burst of saves runs. */
export const saveDraft = defineJob({
  name: "save-draft",
  schema: z.object({ docId: z.number().int(), text: z.string() }),
  debounceMs: 300,
  uniqueId: ({ docId }) => String(docId),
  handle({ text }) {
    if (text !== "Dear all, the party is on Friday.") {
      throw new PermanentError(`ran with an outdated draft: ${JSON.stringify(text)}`);
    }
  },
});

/** A partner API that allows 5 calls per half second, across every worker process. */
export const callPartnerApi = defineJob({
  name: "call-partner-api",
  schema: z.object({ call: z.number().int() }),
  middleware: () => [rateLimited("partner-api", 5, 500)],
  handle() {},
});

/** One step of an order, run as a link of a chain: pack, then ship, then email. */
export const orderStep = defineJob({
  name: "order-step",
  schema: z.object({ orderId: z.number().int(), step: z.enum(["pack", "ship", "email"]) }),
  async handle(_, ctx) {
    await pause(30, ctx.signal);
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
